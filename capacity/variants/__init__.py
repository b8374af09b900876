"""Memory variants behind one small protocol, and a registry to get them by name.

A variant is any object with

- ``name``: a short string;
- ``init_state(batch, d, dv, *, device=None)``: an empty state (for the matrix memories a
  float32 ``[batch, d, dv]`` tensor);
- ``write(state, k, v) -> state``: write the tokens k ``[batch, t, d]``, v ``[batch, t, dv]``
  in order (it may update ``state`` in place; use the returned state);
- ``read(state, q) -> r``: reads ``[batch, m, dv]`` for queries q ``[batch, m, d]``;
- ``state_numel(d, dv) -> int``: numbers kept per batch item.

Objects that also have a ``params`` dict get it recorded by the probe. Anything with these
methods works in ``capacity.probe.recall``; it need not be registered.

>>> from capacity import variants
>>> mem = variants.get("linear")
>>> S = mem.init_state(batch=1, d=4, dv=2)
>>> tuple(S.shape), mem.state_numel(4, 2)
((1, 4, 2), 8)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from capacity import _validate
from capacity.errors import CapacityError

__all__ = ["Variant", "get", "register", "available"]


@runtime_checkable
class Variant(Protocol):
    """What the probe needs from a memory; see the module docstring for shapes."""

    name: str

    def init_state(self, batch: int, d: int, dv: int, *, device=None): ...

    def write(self, state, k: torch.Tensor, v: torch.Tensor): ...

    def read(self, state, q: torch.Tensor) -> torch.Tensor: ...

    def state_numel(self, d: int, dv: int) -> int: ...


@dataclass(frozen=True)
class _Entry:
    factory: Callable[..., Variant]
    description: str


_REGISTRY: dict[str, _Entry] = {}


def register(name: str, factory: Callable[..., Variant], description: str) -> None:
    """Make ``get(name, **params)`` call ``factory(**params)``; re-registering a name replaces it."""
    if not name or not isinstance(name, str):
        raise CapacityError(f"a variant name must be a non-empty string, got {name!r}")
    _REGISTRY[name] = _Entry(factory, description)


def available() -> dict[str, str]:
    """The registered variants: name -> one-line description."""
    return {name: entry.description for name, entry in sorted(_REGISTRY.items())}


def get(name: str, **params) -> Variant:
    """The registered variant ``name`` built with ``params``; the error lists the known names."""
    _validate.choice("variant", name, _REGISTRY)
    return _REGISTRY[name].factory(**params)


def _register_builtins() -> None:
    from capacity.variants.delta import Delta
    from capacity.variants.linear import Linear

    register("linear", Linear, "additive memory S = S + k^T v, read q S (DESIGN T1)")
    register("delta", Delta, "delta rule S = (I - b k^T k) S + b k^T v, beta in (0, 2) (DeltaNet; T12)")


_register_builtins()
