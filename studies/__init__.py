"""The named studies: one short module each, defining ``STUDY`` (a ``capacity.sweep.Study``).

``capacity list studies`` shows them; ``capacity run NAME`` runs one.
"""

from __future__ import annotations

import importlib
import pkgutil

from capacity import _validate

__all__ = ["available", "get"]


def _load() -> dict:
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        study = getattr(importlib.import_module(f"{__name__}.{info.name}"), "STUDY", None)
        if study is not None:
            found[study.name] = study
    return found


def available() -> dict[str, str]:
    """Study name -> one-line description, the default study (capacity-vs-d) first."""
    found = _load()
    order = sorted(found, key=lambda n: (n != "capacity-vs-d", n))
    return {n: found[n].description for n in order}


def get(name: str):
    """The study's default configuration."""
    found = _load()
    _validate.choice("study", name, found)
    return found[name]
