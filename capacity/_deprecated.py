"""Old spellings of public names, kept for one release as deprecated aliases (docs/naming.md).

Every alias warns ``DeprecationWarning("<where>: '<old>' is deprecated, use '<new>'")`` and then behaves exactly like
the new name; giving the old and the new spelling together is a one-line CapacityError.

>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     renamed({"a": 0.9}, "a", "alpha", "decay")
{'alpha': 0.9}
>>> str(caught[0].message)
"decay: 'a' is deprecated, use 'alpha'"
"""

from __future__ import annotations

import functools
import inspect
import warnings

from capacity.errors import CapacityError

__all__ = ["renamed", "rename_all", "warn", "params", "positional_out", "aliases_of", "module_attr"]


def warn(where: str, old: str, new: str, *, stacklevel: int = 2) -> None:
    """Emit the one deprecation message for ``old`` (used at ``where``), replaced by ``new``.

    ``stacklevel`` as for ``warnings.warn`` called where ``warn`` is called (2: the caller's caller).
    """
    warnings.warn(f"{where}: '{old}' is deprecated, use '{new}'", DeprecationWarning, stacklevel=stacklevel + 1)


def renamed(kwargs: dict, old: str, new: str, where: str, *, stacklevel: int = 2) -> dict:
    """Move ``kwargs[old]`` to ``kwargs[new]`` (in place, and returned) with a DeprecationWarning.

    Both spellings given is a CapacityError; without ``old`` nothing happens.
    """
    if old in kwargs:
        if new in kwargs:
            raise CapacityError(f"{where}: got both '{old}' and '{new}'; '{old}' is the deprecated name of '{new}'")
        warn(where, old, new, stacklevel=stacklevel + 1)
        kwargs[new] = kwargs.pop(old)
    return kwargs


def rename_all(kwargs: dict, aliases: dict[str, str], where: str, *, stacklevel: int = 2) -> dict:
    """``renamed`` for every ``{old: new}`` in ``aliases``; returns a new dict (``kwargs`` is left as it was)."""
    out = dict(kwargs)
    for old, new in aliases.items():
        renamed(out, old, new, where, stacklevel=stacklevel + 1)
    return out


def aliases_of(obj) -> dict[str, str]:
    """The ``{old: new}`` keyword aliases declared with ``params`` on ``obj`` (a function, or a class's __init__)."""
    found = getattr(obj, "__renamed__", None)
    if found is None and isinstance(obj, type):
        found = getattr(obj.__init__, "__renamed__", None)
    return dict(found or {})


def params(where: str, **aliases: str):
    """Decorator: the function also takes the deprecated keyword ``old`` for each ``old="new"``.

    The signature (``inspect.signature``) shows the new names only. A new name already given positionally counts as
    given. ``where`` names the function in the message (``"keys.make"``, ``"decay"``).
    """

    def wrap(fn):
        sig = inspect.signature(fn)
        order = [p for p, s in sig.parameters.items() if s.kind in (s.POSITIONAL_ONLY, s.POSITIONAL_OR_KEYWORD)]

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for old, new in aliases.items():
                if old in kwargs and new in order and order.index(new) < len(args):
                    raise CapacityError(
                        f"{where}: got both '{old}' and '{new}'; '{old}' is the deprecated name of '{new}'"
                    )
                renamed(kwargs, old, new, where, stacklevel=2)
            return fn(*args, **kwargs)

        wrapper.__renamed__ = dict(aliases)
        return wrapper

    return wrap


def positional_out(where: str, positional: int):
    """Decorator: the output folder, now the keyword ``out``, may still come positionally (after ``positional``
    arguments) or as ``out_dir=``, each with a DeprecationWarning."""

    def wrap(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            renamed(kwargs, "out_dir", "out", where, stacklevel=2)
            if len(args) > positional:
                if "out" in kwargs or len(args) > positional + 1:
                    raise CapacityError(
                        f"{where}: takes {positional} positional argument(s) and the output folder as out=..., "
                        f"got {len(args)} positional"
                    )
                warn(where, "out_dir (positional)", "out=", stacklevel=2)
                args, kwargs = args[:positional], {**kwargs, "out": args[positional]}
            return fn(*args, **kwargs)

        wrapper.__renamed__ = {"out_dir": "out"}
        return wrapper

    return wrap


def module_attr(module: str, name: str, table: dict):
    """For a module ``__getattr__``: the deprecated attribute ``name`` from ``table`` ({old: (new, value_fn)}), with a
    warning; any other name is an AttributeError."""
    if name in table:
        new, value = table[name]
        warn(module, name, new, stacklevel=3)
        return value()
    raise AttributeError(f"module {module!r} has no attribute {name!r}")
