"""Plug-ins: things named by an import path (``module:attr``) or declared by an installed package's entry points.

A package declares variants, key families, feature maps or studies in its ``pyproject.toml``::

    [project.entry-points."lacapacity.variants"]
    longhorn = "mypkg.memories:Longhorn"

and ``capacity`` finds them by name (``variants.get("longhorn")``, ``--set variant=longhorn``) without the user
importing anything. Worker processes find them the same way, so nothing depends on the user's script.

Importing a plug-in runs its code: a module that is missing is a CapacityError saying so; one that raises at import
(a SyntaxError, an ImportError of its own dependency, anything else) is a one-line ``UserCodeError`` naming the
module and the exception (``lacapacity.errors.user_code``); an entry point's errors also name the entry point.

>>> load_path("lacapacity.theory:frame_bound")(n=128, d=64)
1.0
"""

from __future__ import annotations

import importlib
import os
import re
import types
import warnings
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from typing import Any

from lacapacity.errors import CapacityError, CapacityWarning, UserCodeError, user_code

GROUPS = ("lacapacity.variants", "lacapacity.keys", "lacapacity.features", "lacapacity.studies", "lacapacity.tasks")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def import_module(module: str, what: str) -> types.ModuleType:
    """Import ``module`` (named for messages by ``what``); one line for a bad name, a missing module or an error of
    the module's own code at import."""
    if not isinstance(module, str) or not _MODULE.match(module):
        if isinstance(module, str) and ("/" in module or "\\" in module or module.endswith(".py")):
            folder, stem = os.path.split(re.sub(r"\.py$", "", module))
            raise CapacityError(
                f"{what}: a module name is needed, not a file path: put {folder or '.'!r} on PYTHONPATH and name the "
                f"module {stem!r}"
            )
        raise CapacityError(f"{what}: {module!r} is not a module name (dotted identifiers, e.g. mypkg.memories)")
    with user_code(f"module {module!r}", "at import"):
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
                raise CapacityError(
                    f"{what}: cannot import {module!r} ({exc}); is it on PYTHONPATH or installed?"
                ) from None
            raise  # the module itself imports something missing: an error of its own code


def load_path(path: str) -> Any:  # whatever the module holds there: the caller checks it
    """The object at ``module:attr`` (``attr`` may be dotted); a one-line CapacityError when it is not there."""
    module, sep, attr = str(path).partition(":")
    if not sep or not module or not attr:
        raise CapacityError(f"an import path is written module:attr, e.g. mypkg.memories:Longhorn; got {path!r}")
    obj = import_module(module, f"import path {path!r}")
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CapacityError(f"module {module!r} has no attribute {attr!r} (from {path!r})") from None
    return obj


@cache
def _installed() -> Any:  # importlib.metadata's EntryPoints (SelectableGroups under Python 3.10)
    """Every entry point of the installed packages, read once (``capacity list`` asks for five groups)."""
    return metadata.entry_points()


@cache
def entry_points(group: str) -> dict[str, str]:
    """The entry points of ``group`` that installed packages declare: name -> ``module:attr``."""
    return {ep.name: ep.value for ep in _installed().select(group=group)}


def entry_point(group: str, name: str) -> Any:  # as load_path (None: not declared)
    """The object declared as ``name`` in ``group``, or None when no installed package declares it; a plug-in that
    cannot be loaded is a one-line CapacityError naming the entry point."""
    value = entry_points(group).get(name)
    if value is None:
        return None
    try:
        return load_path(value)
    except CapacityError as exc:
        raise _within(exc, f"plug-in {name!r} (entry point {group}: {name} = {value}): ") from exc.__cause__


def _within(exc: CapacityError, prefix: str) -> CapacityError:
    """``exc`` with ``prefix`` before its message (a UserCodeError keeps its traceback text)."""
    if isinstance(exc, UserCodeError):
        return UserCodeError(prefix + str(exc), exc.details)
    return CapacityError(prefix + str(exc))


def import_modules(modules: Iterable[str] | None) -> None:
    """Import the named modules (``--import``), for plug-ins that register themselves on import."""
    for module in modules or ():
        import_module(module, f"--import {module}")


def skip(exc: CapacityError) -> None:
    """Warn (one line, ``CapacityWarning``) that a plug-in which cannot be loaded is left out of a listing; using
    it by name is the error itself."""
    warnings.warn(f"{exc}; it is left out", CapacityWarning, stacklevel=3)
