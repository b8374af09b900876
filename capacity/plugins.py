"""Plug-ins: things named by an import path (``module:attr``) or declared by an installed package's entry points.

A package declares variants, key families, feature maps or studies in its ``pyproject.toml``::

    [project.entry-points."capacity.variants"]
    longhorn = "mypkg.memories:Longhorn"

and ``capacity`` finds them by name (``variants.get("longhorn")``, ``--set variant=longhorn``) without the user
importing anything. Worker processes find them the same way, so nothing depends on the user's script.

>>> load_path("capacity.theory:frame_bound")(n=128, d=64)
1.0
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib import metadata

from capacity.errors import CapacityError

__all__ = ["GROUPS", "load_path", "entry_points", "entry_point", "import_modules"]

GROUPS = ("capacity.variants", "capacity.keys", "capacity.features", "capacity.studies")


def load_path(path: str):
    """The object at ``module:attr`` (``attr`` may be dotted); a one-line CapacityError when it is not there."""
    module, sep, attr = str(path).partition(":")
    if not sep or not module or not attr:
        raise CapacityError(f"an import path is written module:attr, e.g. mypkg.memories:Longhorn; got {path!r}")
    try:
        obj = importlib.import_module(module)
    except ImportError as exc:
        raise CapacityError(
            f"cannot import {module!r} for {path!r} ({exc}); is it on PYTHONPATH or installed?"
        ) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CapacityError(f"module {module!r} has no attribute {attr!r} (from {path!r})") from None
    return obj


@cache
def entry_points(group: str) -> dict[str, str]:
    """The entry points of ``group`` that installed packages declare: name -> ``module:attr``."""
    return {ep.name: ep.value for ep in metadata.entry_points(group=group)}


def entry_point(group: str, name: str):
    """The object declared as ``name`` in ``group``, or None when no installed package declares it."""
    value = entry_points(group).get(name)
    return None if value is None else load_path(value)


def import_modules(modules) -> None:
    """Import the named modules (``--import``), for plug-ins that register themselves on import."""
    for module in modules or ():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise CapacityError(
                f"--import {module}: cannot import it ({exc}); is it on PYTHONPATH or installed?"
            ) from None
