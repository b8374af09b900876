"""A package's submodules, imported on first use: ``__getattr__ = submodules(__name__)`` in its ``__init__``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType


def submodules(package: str) -> Callable[[str], ModuleType]:
    """The module ``__getattr__`` of ``package`` that imports ``package.name`` when ``name`` is first read
    (``lacapacity.inputs.keys`` after ``import lacapacity``); a name that is no submodule is an AttributeError, a
    submodule that fails to import raises its own error."""

    def __getattr__(name: str) -> ModuleType:
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
