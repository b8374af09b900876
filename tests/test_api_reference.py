"""The API reference (docs/scripts/api.py, pdoc): it covers the pinned public surface, every pinned name has a
docstring, every ```lacapacity.x``` reference in one exists, and the pages build."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest
from script_support import load_script
from test_public_surface import SURFACE

ROOT = Path(__file__).resolve().parents[1]
api = load_script(ROOT / "docs" / "scripts" / "api.py", "docs_api")


def test_the_reference_documents_the_pinned_modules():
    assert sorted(api.MODULES) == sorted(SURFACE)


def test_every_pinned_name_has_a_docstring_and_every_reference_resolves():
    assert api.problems() == []


def test_the_checker_sees_a_missing_docstring_and_a_broken_reference(tmp_path, monkeypatch):
    (tmp_path / "apidemo.py").write_text(
        '"""A module that cites `lacapacity.sweep.run` and ``lacapacity.sweep.nope``."""\n'
        '__all__ = ["f", "C", "K"]\nK = 3\n\ndef f():\n    pass\n\n'
        'class C:\n    """A class."""\n\n    def method(self):\n        """Cites `lacapacity.theory.rank_bound()`."""\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("apidemo", None)
    assert api.problems(["apidemo"]) == ["apidemo: `lacapacity.sweep.nope` does not exist", "apidemo.f: no docstring"]
    assert api.resolves("lacapacity.kernels") and api.resolves("lacapacity.sweep.Grid.to_json")
    assert not api.resolves("lacapacity.sweep.config.OPTIONAL_AXES") and not api.resolves("lacapacity.nosuch")


@pytest.mark.slow
def test_the_pages_build_with_every_pinned_name(tmp_path):
    """Each pinned name is a section of its module's page, or (a module, ``lacapacity.keys``) has a page of its own."""
    pages = api.build(tmp_path)
    by_module = {p.relative_to(tmp_path).with_suffix("").as_posix().replace("/", "."): p for p in pages}
    assert {*SURFACE, "index"} <= set(by_module), sorted(by_module)
    for module, names in SURFACE.items():
        html = by_module[module].read_text()
        ids = set(re.findall(r'<section id="([^"]+)"', html[html.index("<main") :]))  # not the navigation
        mod = importlib.import_module(module)
        own_page = {n for n in names if inspect.ismodule(getattr(mod, n)) and getattr(mod, n).__name__ in by_module}
        missing = [n for n in names if n not in ids and n not in own_page]
        assert not missing, f"{module}: {missing} not in its page"
