"""Every benchmark script imports against the current package (a renamed module breaks them silently otherwise)."""

import sys
from pathlib import Path

import pytest
from script_support import load_script

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_script_imports(path):
    before = list(sys.path)
    module = load_script(path, f"bench_{path.stem}")  # defines its functions; main() runs only as a script
    # a script that puts its folder on sys.path when imported shadows packages for the rest of the process
    # (benchmarks/kernels.py hid the kernels package transformers looks for)
    assert sys.path == before, "the script changed sys.path"
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
