"""The doc examples as a fresh interpreter runs them.

tests/test_docs.py runs every Python example of the README and docs/*.md inside the test process, with fresh globals
but the modules that earlier tests imported. There, ``lacapacity.X`` works for any submodule X already imported
(importing a submodule sets it as an attribute of the package), while in a reader's fresh interpreter, after
``import lacapacity``, only the names the package loads on first use (``lacapacity.__getattr__``) exist: any other
``lacapacity.X`` raises AttributeError. This file checks each ``lacapacity.X`` an example uses in a fresh interpreter,
and runs probe.md's first example (which uses ``lacapacity.metrics``) there whole.
"""

import json
import re
import subprocess
import sys

import pytest
from test_docs import EXAMPLES, ROOT, _blocks, _rel

ATTR = re.compile(r"(?<![\w.])lacapacity\.(\w+)")


def _used(code: str) -> set[str]:
    """The attributes an example takes from the package after ``import lacapacity`` (none without that import)."""
    if not re.search(r"^import lacapacity\s*$", code, re.MULTILINE):
        return set()
    return set(ATTR.findall(code))


def _fresh(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)


def _missing_in_a_fresh_interpreter(names: set[str]) -> dict[str, str]:
    script = (
        "import json, lacapacity\nout = {}\n"
        f"for name in {sorted(names)!r}:\n"
        "    try:\n        getattr(lacapacity, name)\n"
        "    except Exception as exc:\n        out[name] = f'{type(exc).__name__}: {exc}'\n"
        "print(json.dumps(out))\n"
    )
    done = _fresh(script)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_every_package_attribute_an_example_uses_exists_after_import_capacity():
    used = {}
    for page, line, code, reason, _ in EXAMPLES:
        if reason is None:
            for name in _used(code):
                used.setdefault(name, []).append(f"{_rel(page)}:{line}")
    assert "metrics" in used and "probe" in used, sorted(used)
    missing = _missing_in_a_fresh_interpreter(set(used))
    assert not missing, {name: (why, used[name]) for name, why in missing.items()}


def test_the_check_catches_a_submodule_the_package_does_not_load_by_name(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nimport lacapacity\n\nlacapacity.heads.split\nlacapacity.metrics.capacity\n```\n")
    ((_, code, _, _),) = list(_blocks(page))
    assert _used(code) == {"heads", "metrics"}
    missing = _missing_in_a_fresh_interpreter(_used(code))
    assert set(missing) == {"heads"} and "AttributeError" in missing["heads"]


@pytest.mark.slow
def test_probe_page_first_example_runs_in_a_fresh_interpreter():
    page = ROOT / "docs" / "probe.md"
    code = next(code for _, code, reason, _ in _blocks(page) if reason is None and "metrics.capacity" in code)
    small = code.replace("n=512", "n=64").replace("[32, 64, 128, 256, 512]", "[32, 64]")
    done = _fresh(small)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip().splitlines()) >= 2
