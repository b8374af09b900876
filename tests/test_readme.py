"""CI runs the README's own test command. (The README's Python examples run in tests/test_docs.py.)"""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    awk = "/<!-- test-command -->/{getline; getline; print; exit}"
    out = subprocess.run(["awk", awk, "README.md"], cwd=ROOT, capture_output=True, text=True, check=False)
    cmd = out.stdout.strip()
    assert cmd.startswith("python3 -m venv .venv") and "pytest" in cmd
    assert "test-command" in (ROOT / ".ci" / "run").read_text()
