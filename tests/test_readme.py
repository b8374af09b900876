"""The README's Python examples run as written, and CI runs the README's own test command."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# A block preceded by <!-- no-test: reason --> needs something CI does not install.
BLOCKS = [m.group(2) for m in re.finditer(r"(<!-- no-test:[^>]*-->\s*)?```python\n(.*?)```", README, re.S) if not m.group(1)]


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code):
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})


def test_ci_runs_the_readme_test_command():
    cmd = subprocess.run(["awk", "/<!-- test-command -->/{getline; getline; print; exit}", "README.md"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert cmd.startswith("python3 -m venv .venv") and "pytest" in cmd
    assert "test-command" in (ROOT / ".ci" / "run").read_text()
