"""Memory variants behind one small protocol, and a registry to get them by name.

A variant is any object with

- ``name``: a short string;
- ``init_state(batch, d, dv, *, device=None)``: an empty state (for the matrix memories a
  float32 ``[batch, d, dv]`` tensor);
- ``write(state, k, v) -> state``: write the tokens k ``[batch, t, d]``, v ``[batch, t, dv]``
  in order (it may update ``state`` in place; use the returned state);
- ``read(state, q) -> r``: reads ``[batch, m, dv]`` for queries q ``[batch, m, d]``;
- ``state_numel(d, dv) -> int``: numbers kept per batch item.

Optional members, used where present:

- ``params``: a dict, recorded by the probe;
- ``feature_dim(d) -> int``: rows of the state for keys of dimension d (a feature map's D),
  recorded by the probe as the attr ``feature_dim`` (d when absent);
- ``numel(state) -> int``: numbers the given state keeps per batch item, for memories that
  grow (softmax); the probe then records it as a variable ``state_numel`` over n;
- ``additive``, ``delta_rule``: booleans that tell ``check_variant`` whether T2 (the two-pair
  closed form) and T12 (exact read-back of the last key with beta = 1) must hold.

Anything with the required methods works in ``capacity.probe.recall`` and ``check_variant``;
it need not be registered. ``from_fla`` wraps a flash-linear-attention style function.

Built-ins: linear, decay(a), gla(alpha), delta(beta), gated_delta(a, beta), kda(alpha, beta)
(through ``capacity.kernels.update``), softmax(beta), and lsq(lam), longhorn(beta),
delta_product(steps, beta), dplr(w, eta) (docs/memories.md). The recurrent ones take a feature map
(``feature="dpfp", nu=2``; see ``capacity.features``), gates and beta as a constant or drawn per
token (``a=("uniform", 0.9, 1.0), seed=1``; see ``capacity.variants._params``).

>>> from capacity import variants
>>> mem = variants.get("linear")
>>> S = mem.init_state(batch=1, d=4, dv=2)
>>> tuple(S.shape), mem.state_numel(4, 2)
((1, 4, 2), 8)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from capacity import _validate
from capacity.errors import CapacityError

__all__ = ["Variant", "get", "register", "available", "from_fla", "check_variant", "Report"]


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
    """The registered variant ``name`` built with ``params``; the error lists the known names.

    >>> get("gated_delta", a=0.9, beta=("uniform", 0.5, 1.0), seed=2).params
    {'a': 0.9, 'beta': ['uniform', 0.5, 1.0], 'normalize': True, 'seed': 2}
    """
    _validate.choice("variant", name, _REGISTRY)
    factory = _REGISTRY[name].factory
    try:
        inspect.signature(factory).bind(**params)
    except TypeError:
        sig = inspect.signature(factory)
        allowed = [p for p, spec in sig.parameters.items() if spec.kind is inspect.Parameter.KEYWORD_ONLY]
        unknown = sorted(set(params) - set(allowed))
        raise CapacityError(f"variant {name!r} got unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(allowed) or 'none'}") from None
    except ValueError:  # no signature to inspect (e.g. a builtin): let the factory check
        pass
    return factory(**params)


def _register_builtins() -> None:
    from capacity.variants.delta import KDA, Delta, GatedDelta
    from capacity.variants.delta_product import DeltaProduct
    from capacity.variants.dplr import DPLR
    from capacity.variants.gated import GLA, Decay
    from capacity.variants.linear import Linear
    from capacity.variants.longhorn import Longhorn
    from capacity.variants.lsq import LSQ
    from capacity.variants.softmax import Softmax

    register("linear", Linear, "additive memory S = S + k^T v, read q S (T1)")
    register("decay", Decay, "S = a S + k^T v, scalar gate a in (0, 1] (RetNet-style; T11)")
    register("gla", GLA, "S = Diag(alpha) S + k^T v, per-channel gate alpha in (0, 1]^d (gated linear attention)")
    register("delta", Delta, "delta rule S = (I - b k^T k) S + b k^T v, beta in (0, 2) (DeltaNet; T12)")
    register("gated_delta", GatedDelta, "S = a (I - b k^T k) S + b k^T v (Gated DeltaNet)")
    register("kda", KDA, "S = (I - b k^T k) Diag(alpha) S + b k^T v (Kimi Delta Attention)")
    register("lsq", LSQ, "online least squares S = (K^T K + lam I)^-1 K^T V, read q S (Mesa layer; meets T8)")
    register("longhorn", Longhorn, "S = (1 - e k*k) * S + e k^T v, e = beta / (1 + beta |k|^2), per row (Longhorn)")
    register("delta_product", DeltaProduct, "steps delta updates per token on rotated keys k R_j (DeltaProduct)")
    register("dplr", DPLR, "S = (Diag(w) + a^T b) S + eta k^T v, a = -k, b = eta k (DPLR, RWKV-7)")
    register("softmax", Softmax, "keeps every pair, reads softmax(beta q K^T) V (exact-retrieval baseline; T13)")


_register_builtins()

from capacity.variants.fla import from_fla  # noqa: E402  (needs the registry-free core above only)


def __getattr__(name: str):
    # check_variant runs the probe, which imports this package: load it on first use
    if name in ("check_variant", "Report"):
        from capacity.variants import conformance

        return getattr(conformance, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
