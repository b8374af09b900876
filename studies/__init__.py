"""The named studies: one short module each, defining ``STUDY`` (a ``capacity.sweep.Study``).

Plug-in packages add their own through the entry point group ``capacity.studies`` (name -> a Study).
``capacity list studies`` shows them; ``capacity run NAME`` runs one.

>>> from capacity import studies
>>> studies.get("capacity-vs-d").grid.d
(16, 32, 64, 128, 256)
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

from capacity.base import plugins
from capacity.errors import CapacityError

if TYPE_CHECKING:  # at run time the engine loads only when a plug-in is looked up (capacity list stays light)
    from capacity.sweep.config import Study

__all__ = ["available", "get"]


def _load() -> dict[str, Study]:
    found: dict[str, Study] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        study = getattr(importlib.import_module(f"{__name__}.{info.name}"), "STUDY", None)
        if study is not None:
            found[study.name] = study
    return found


def available() -> dict[str, str]:
    """Study name -> one-line description: the default study (capacity-vs-d) first, then the others, then plug-ins."""
    found = _load()
    order = sorted(found, key=lambda n: (n != "capacity-vs-d", n))
    out = {n: found[n].description for n in order}
    for name in plugins.entry_points("capacity.studies"):
        if name not in out:
            try:
                study = _plugin(name)
            except CapacityError as exc:  # one broken plug-in does not hide the others
                plugins.skip(exc)
                continue
            if study is not None:  # declared: not None (None: no installed package declares it)
                out[name] = "(plug-in) " + study.description
    return out


def _plugin(name: str) -> Study | None:
    """The study an installed package declares as ``name`` (entry point group ``capacity.studies``), or None."""
    from capacity.sweep.config import Study

    study = plugins.entry_point("capacity.studies", name)
    if study is not None and not isinstance(study, Study):
        value = plugins.entry_points("capacity.studies")[name]
        raise CapacityError(
            f"plug-in {name!r} (entry point capacity.studies: {name} = {value}) is a {type(study).__name__}, "
            "not a capacity.sweep.Study"
        )
    return study


def get(name: str) -> Study:
    """The named study's default configuration (built in, or declared by a plug-in package)."""
    if not isinstance(name, str):
        raise CapacityError(f"a study is named by a string, got {name!r}")
    found = _load()
    if name in found:
        return found[name]
    study = _plugin(name)
    if study is None:
        known = sorted(set(found) | set(plugins.entry_points("capacity.studies")))
        raise CapacityError(f"unknown study {name!r}; known: {', '.join(known)}")
    return study
