"""Every benchmark script imports against the current package (a renamed module breaks them silently otherwise)."""

import importlib.util
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_script_imports(path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines its functions; main() runs only as a script
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
