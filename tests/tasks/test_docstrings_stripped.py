"""Under ``python -OO`` (docstrings stripped, every ``__doc__`` None) what reads a docstring still works: the recall
task's closed forms took each description from its function's docstring and failed on None (found by the strict
type check: ``__doc__`` is ``str | None``), and ``lacapacity.plots.available`` took each figure's first line.

The docstrings are set to None in this process, as ``-OO`` leaves them: a fresh ``python -OO`` would compile torch
from source (no ``.opt-2.pyc`` files are installed), about 8 s for what these checks need of it.
"""

import inspect

import numpy as np

from lacapacity import plots, theory
from lacapacity.tasks.recall.task import RecallTask


def _strip(monkeypatch, functions):
    for fn in functions:
        monkeypatch.setattr(fn, "__doc__", None)


def test_recall_closed_forms_without_docstrings_equal_the_plain_ones_with_empty_descriptions(monkeypatch):
    n, d = np.array([[8], [32]]), np.array([[16, 64]])
    plain = RecallTask().theory(None, n, d, d)  # theory reads no study
    _strip(monkeypatch, [getattr(theory, name) for name in theory.__all__ if inspect.isfunction(getattr(theory, name))])
    stripped = RecallTask().theory(None, n, d, d)
    assert sorted(stripped) == sorted(plain)
    for name, (values, attrs) in plain.items():
        np.testing.assert_array_equal(stripped[name][0], values)  # the same numbers, bit for bit
        assert stripped[name][1]["description"] == "" and attrs["description"], name  # only the description is lost


def test_the_figures_listed_without_docstrings(monkeypatch):
    described = plots.available()
    _strip(monkeypatch, plots.FIGURES.values())
    assert plots.available() == dict.fromkeys(described, "")
