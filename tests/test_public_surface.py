"""The public surface, pinned: a change to what users import fails here first (add it to CHANGELOG.md and to
tests/public_surface.json).

tests/public_surface.json lists each public module's ``__all__`` as it stands (the pin is data: one reviewed file,
the only listing outside the modules); a name added, removed or renamed is an API change, made on purpose or not at
all. Engine internals (plan, store, jobs, provenance, assembly) stay out of it, and no other module sets ``__all__``.
"""

import importlib
import json
import pkgutil
from pathlib import Path

import pytest

SURFACE: dict[str, list[str]] = json.loads((Path(__file__).parent / "public_surface.json").read_text())


@pytest.mark.parametrize("module", sorted(SURFACE))
def test_the_public_surface_is_pinned(module):
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(SURFACE[module]), f"{module}.__all__ changed"
    assert len(set(mod.__all__)) == len(mod.__all__), f"{module}.__all__ lists a name twice"
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert not missing, f"{module}.__all__ names what it does not have: {missing}"


def _theory_topics() -> list[str]:
    from lacapacity import theory

    return [f"lacapacity.theory.{m.name}" for m in pkgutil.iter_modules(theory.__path__) if not m.name.startswith("_")]


def test_no_module_exports_beyond_the_pinned_surface():
    """``__all__`` is the pinned surface and no wider: a module outside SURFACE that sets ``__all__`` exports names
    nobody pinned (theory's topic modules aside: their lists are theory's, listed once there)."""
    from test_doctests import MODULES, SKIP

    exporting = [m for m in [*MODULES, *SKIP] if hasattr(importlib.import_module(m), "__all__")]
    assert sorted(set(exporting) - set(SURFACE) - set(_theory_topics())) == []


def test_theory_lists_each_name_once_from_its_topic_modules():
    """theory's names are its topic modules' __all__, not a second hand-written list."""
    from lacapacity import theory

    listed = [name for m in _theory_topics() for name in importlib.import_module(m).__all__]
    assert sorted(listed) == sorted(theory.__all__)


def test_the_public_names_of_capacity_point_into_the_layers():
    import lacapacity

    for name in ("keys", "values", "probe", "metrics", "variants", "theory", "sweep"):
        module = getattr(lacapacity, name)
        assert module.__name__.startswith("lacapacity."), name
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        lacapacity.nope  # noqa: B018
