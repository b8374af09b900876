"""The named studies: one short module each, defining ``STUDY`` (a ``lacapacity.sweep.Study``).

Plug-in packages add their own through the entry point group ``lacapacity.studies`` (name -> a Study).
``capacity list studies`` shows them; ``capacity run NAME`` runs one.

>>> from lacapacity import studies
>>> studies.get("capacity-vs-d").grid.d
(16, 32, 64, 128, 256)
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

from lacapacity.base import plugins
from lacapacity.base.registry import Registry
from lacapacity.errors import CapacityError

if TYPE_CHECKING:  # at run time the engine loads only when a plug-in is looked up (capacity list stays light)
    from lacapacity.sweep.config import Study

__all__ = ["available", "get"]


def _accept(name: str, found: object) -> Study:
    from lacapacity.sweep.config import Study

    if not isinstance(found, Study):
        value = plugins.entry_points("lacapacity.studies")[name]
        raise CapacityError(
            f"plug-in {name!r} (entry point lacapacity.studies: {name} = {value}) is a {type(found).__name__}, "
            "not a lacapacity.sweep.Study"
        )
    return found


_REGISTRY: Registry[Study] = Registry("lacapacity.studies", "study", path=None, accept=_accept)


def _registry() -> Registry[Study]:
    """The registry, filled on first use with every module here that defines ``STUDY``: the default study
    (capacity-vs-d) first, then the others by name."""
    if not _REGISTRY.own():
        found: dict[str, Study] = {}
        for info in pkgutil.iter_modules(__path__):
            study = getattr(importlib.import_module(f"{__name__}.{info.name}"), "STUDY", None)
            if study is not None:
                found[study.name] = study
        for name in sorted(found, key=lambda n: (n != "capacity-vs-d", n)):
            _REGISTRY.add(name, found[name])
    return _REGISTRY


def available() -> dict[str, str]:
    """Study name -> one-line description: the default study (capacity-vs-d) first, then the others, then plug-ins."""
    reg = _registry()
    own = reg.own()
    return {n: ("" if n in own else "(plug-in) ") + study.description for n, study in reg.loaded().items()}


def get(name: str) -> Study:
    """The named study's default configuration (built in, or declared by a plug-in package)."""
    if not isinstance(name, str):
        raise CapacityError(f"a study is named by a string, got {name!r}")
    return _registry().get(name)
