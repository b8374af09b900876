"""Submodules of a package imported on first use: the body of a package's module-level ``__getattr__``."""

from __future__ import annotations

import importlib
import types


def submodule(package: str, name: str) -> types.ModuleType:
    """``package.name`` imported now (``lacapacity.inputs.keys`` after ``import lacapacity``); AttributeError when the
    package has no such submodule, the import's own error when the submodule exists and fails to import."""
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{package}.{name}":
            raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
