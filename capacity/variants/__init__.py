"""Memory variants behind one small protocol, and a registry to get them by name.

A variant is any object with

- ``name``: a short string;
- ``init_state(batch, d, dv, *, device=None)``: an empty state (for the matrix memories a
  float32 ``[batch, d, dv]`` tensor);
- ``write(state, k, v) -> state``: write the tokens k ``[batch, t, d]``, v ``[batch, t, dv]``
  in order (it may update ``state`` in place; use the returned state);
- ``read(state, q) -> r``: reads ``[batch, m, dv]`` for queries q ``[batch, m, d]``;
- ``state_numel(d, dv) -> int``: numbers kept per batch item.

Optional: ``declares``, a ``Declares`` saying what the memory is (linear read, closed-form family, additive,
delta rule, growing or learning state, differentiable, how many d x dv states, key dimensions), and the members
``params``, ``label``, ``feature_dim(d)``, ``numel(state)`` (a growing state), ``state_bytes`` and ``display``.
``capacity/variants/declares.py`` lists each with its default and who reads it, and is the one module that reads
them: a memory that declares nothing keeps working with the defaults.

Anything with the required methods works in ``lacapacity.probe.recall`` and ``lacapacity.check_variant``;
it need not be registered. ``from_fla`` wraps a flash-linear-attention style function.

Built-ins: linear, decay(alpha), gla(alpha), delta(beta), gated_delta(alpha, beta), kda(alpha, beta),
mamba2(A, dt, w_std) (through ``lacapacity.kernels.update``), mamba3(A, dt, w_std, lam, omega), softmax(scale), and lsq(lam), longhorn(beta),
delta_product(steps, beta, alpha), dplr(w, eta), and those of 2025-2026: gdn2(alpha, beta, gamma), comba(alpha, beta, mu),
gated_oja(alpha, beta), precond_gated_delta and precond_kda(alpha, beta, alpha_atk, beta_atk, x, center, eps),
titans(alpha, beta, eta), ttt(expand, beta), log_linear(base, alpha, beta, lam), and the windows swa(window, scale) and
hybrid(window, state, holds, combine), mom(memories, top, memory, shared), and the solvers
mesa(lam, alpha, beta), gka(eta, iterations, alpha, beta) and omega(context, alpha, beta, feature), lattice(beta), and
cyfa(slots, alpha, beta, delta, readout, scale) (docs/memories.md). The recurrent ones take a feature map
(``feature="dpfp", nu=2``; see ``lacapacity.features``), gates and beta as a constant or drawn per
token (``alpha=("uniform", 0.9, 1.0), seed=1``; see ``lacapacity.variants._params``). Every gate is
``alpha``, beta is always a delta rule's step, softmax's inverse temperature is ``scale`` (docs/naming.md).

>>> from lacapacity import variants
>>> mem = variants.get("linear")
>>> S = mem.init_state(batch=1, d=4, dv=2)
>>> tuple(S.shape), mem.state_numel(4, 2)
((1, 4, 2), 8)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, cast, runtime_checkable

import numpy as np
import torch

from lacapacity.base import labels, plugins
from lacapacity.base._types import Device
from lacapacity.base.registry import Registry
from lacapacity.errors import CapacityError, user_code
from lacapacity.variants import declares
from lacapacity.variants.declares import Declares

__all__ = [
    "Variant",
    "Declares",
    "get",
    "resolve",
    "build",
    "label",
    "params",
    "is_variant",
    "register",
    "available",
    "display_name",
    "display_names",
    "from_fla",
]


@runtime_checkable
class Variant(Protocol):
    """What the probe needs from a memory; see the module docstring for shapes."""

    @property
    def name(self) -> str:  # a class attribute or an instance's: read only
        """The memory's name, as figures and labels show it (``delta``)."""
        ...

    # the state is the memory's own (a tensor, a dataclass of tensors, ...): Any, whatever each memory makes it
    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> Any:
        """The empty state of ``batch`` memories with d-dimensional keys and dv-dimensional values."""
        ...

    def write(self, state: Any, k: torch.Tensor, v: torch.Tensor) -> Any:
        """The state after writing the pairs in order: keys ``k`` [B, t, d], values ``v`` [B, t, dv]."""
        ...

    def read(self, state: Any, q: torch.Tensor) -> torch.Tensor:
        """What the state returns for the queries ``q`` [B, m, d]: [B, m, dv]."""
        ...

    def state_numel(self, d: int, dv: int) -> int:
        """The number of values the state holds (``d * dv`` for a linear-attention state)."""
        ...


@dataclass(frozen=True)
class _Entry:
    factory: Callable[..., Variant]
    description: str
    display: str  # the name figures give it


# the built-ins (registration order: the order of figure legends) and the session's (``register``); plug-ins are
# factories declared by entry point (group lacapacity.variants); import paths are resolved by ``resolve``
_REGISTRY: Registry[Any] = Registry("lacapacity.variants", "variant", path="module:Class")  # own: _Entry


def register(name: str, factory: Callable[..., Variant], description: str, *, display: str | None = None) -> None:
    """Make ``get(name, **params)`` call ``factory(**params)``; re-registering a name replaces it.

    ``display``: the name figures give it (default: the factory's own ``display`` attribute, else ``name``).
    """
    if not name or not isinstance(name, str):
        raise CapacityError(f"a variant name must be a non-empty string, got {name!r}")
    if display is not None and (not isinstance(display, str) or not display):
        raise CapacityError(f"a variant's display name must be a non-empty string, got {display!r}")
    _REGISTRY.add(name, _Entry(factory, description, display or declares.display(factory) or name))


def available() -> dict[str, str]:
    """The variants known by name: built in, registered, or declared by a plug-in package (entry point
    group ``lacapacity.variants``): name -> one-line description."""
    out = {name: entry.description for name, entry in sorted(_REGISTRY.own().items())}
    return out | {name: f"(plug-in {value})" for name, value in _REGISTRY.declared().items()}


def display_name(name: str) -> str:
    """How figures name the variant ``name`` (a registered name, a plug-in's, or an import path ``module:Class``).

    The registry entry's ``display``; for a plug-in, its class's ``display`` attribute; else the name (for an
    import path, the class name).

    >>> display_name("delta"), display_name("lsq"), display_name("mymem:Longhorn")
    ('DeltaNet (delta)', 'lsq', 'Longhorn')
    """
    if name in _REGISTRY:
        own: _Entry = _REGISTRY.own()[name]
        return own.display
    try:
        found = plugins.load_path(name) if labels.is_path(name) else _REGISTRY.find(name)
    except CapacityError:  # not importable here: figures still draw, under its name
        found = None
    return declares.display(found) or name.rpartition(":")[2]


def display_names() -> dict[str, str]:
    """Every registered variant -> its display name, in registration order (the built-ins first): the order of
    figure legends. Plug-ins declared by entry points are not loaded for this; legends put them after."""
    return {name: entry.display for name, entry in _REGISTRY.own().items()}


def _factory(name: str) -> object:
    """The factory registered (or declared by an installed package's entry point) as ``name``."""
    found = _REGISTRY.get(name)
    return found.factory if name in _REGISTRY else found


def _build(factory: object, what: str, params: dict[str, object]) -> Variant:
    """Call ``factory(**params)``; unknown parameters and a result that is no variant are one-line errors."""
    if is_variant(factory):
        if params:
            raise CapacityError(f"variant {what!r} is an object, not a class or factory: it takes no parameters")
        return factory
    if not callable(factory):
        raise CapacityError(f"{what!r} is neither a variant nor a class or factory that builds one")
    try:
        inspect.signature(factory).bind(**params)
    except TypeError:
        sig = inspect.signature(factory)
        allowed = [
            p for p, spec in sig.parameters.items() if spec.kind in (spec.KEYWORD_ONLY, spec.POSITIONAL_OR_KEYWORD)
        ]
        unknown = sorted(set(params) - set(allowed))
        missing = [
            p
            for p, spec in sig.parameters.items()
            if spec.default is spec.empty
            and spec.kind in (spec.KEYWORD_ONLY, spec.POSITIONAL_OR_KEYWORD)
            and p not in params
        ]
        if unknown:
            raise CapacityError(
                f"variant {what!r} got unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(allowed) or 'none'}"
            ) from None
        raise CapacityError(f"variant {what!r} needs parameter(s) {', '.join(missing)}") from None
    except ValueError:  # no signature to inspect (e.g. a builtin): let the factory check
        pass
    where = "in __init__()" if isinstance(factory, type) else f"in {getattr(factory, '__name__', 'its factory')}()"
    with user_code(f"memory {what!r}", where):
        variant = factory(**params)
    if not is_variant(variant):
        raise CapacityError(
            f"{what!r} built a {type(variant).__name__}, which is not a variant (needs init_state, write, read, state_numel)"
        )
    return variant


def get(name: str, **params: object) -> Variant:
    """The variant registered (or declared by a plug-in package) as ``name``, built with ``params``.

    >>> get("gated_delta", alpha=0.9, beta=("uniform", 0.5, 1.0), seed=2).params
    {'alpha': 0.9, 'beta': ['uniform', 0.5, 1.0], 'normalize': True, 'seed': 2, 'backend': 'auto'}
    """
    if not isinstance(name, str):
        raise CapacityError(f"a variant name is a string, got {name!r}")
    return _build(_factory(name), name, params)


def is_variant(obj: object) -> TypeGuard[Variant]:
    """True for an object with the protocol's methods (a built variant, not a class)."""
    return not isinstance(obj, type) and all(
        callable(getattr(obj, m, None)) for m in ("init_state", "write", "read", "state_numel")
    )


def resolve(spec: str | dict[str, object] | Variant, **params: object) -> Variant:
    """A variant from anything that names one: a variant object, a label ``name(k=v)``, or ``module:attr(k=v)``.

    ``module:attr`` is a class or factory (called with the parameters) or a variant object. Registered names and
    the entry points of installed plug-in packages (group ``lacapacity.variants``) are found by name.

    >>> resolve("delta(beta=0.5)").params["beta"]
    0.5
    >>> resolve("lacapacity.variants.linear:Linear(normalize=true)").params
    {'normalize': True, 'backend': 'auto'}
    """
    if is_variant(spec):
        if params:
            raise CapacityError(f"variant {label(spec)!r} is already built; it takes no parameters")
        return spec
    if isinstance(spec, dict):  # as a results file's JSON names it: {"name": ..., "params": {...}}
        given_params = spec.get("params") or {}
        if not isinstance(given_params, dict):
            raise CapacityError(f"a variant's params are a dict of name -> value, got {given_params!r}")
        spec = labels.format(str(spec.get("name")), given_params)
    name, given = labels.parse(spec)
    clash = sorted(set(given) & set(params))
    if clash:
        raise CapacityError(f"variant {spec!r} sets {', '.join(clash)} twice")
    given.update(params)
    if labels.is_path(name):
        return _build(plugins.load_path(name), name, given)
    return get(name, **given)


def params(variant: object) -> dict[str, object]:
    """Every parameter of a memory: its ``params`` where it has them, else its constructor's arguments read back from
    the attributes of the same names (what a class that stores its arguments holds).

    >>> params(get("delta", beta=0.5))
    {'beta': 0.5, 'normalize': True, 'backend': 'auto'}
    """
    given = declares.params(variant)
    return given if given is not None else declares.arguments(variant)


def _defaults(cls: type) -> dict[str, object]:
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return {}
    return {p: spec.default for p, spec in sig.parameters.items() if spec.default is not spec.empty}


def _same(a: object, b: object) -> bool:
    try:
        return bool(a == b) and type(a) is type(b) or (isinstance(a, float) and isinstance(b, int) and a == b)
    except Exception:  # tensors, arrays: never taken for a default
        return False


def _shown(value: object) -> object:
    """A parameter value as a label writes it: numbers, strings, booleans and lists as they are, others by name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_shown(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _shown(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor) and value.numel() <= 8:
        return value.tolist()
    if isinstance(value, (np.ndarray, np.generic)) and value.size <= 8:
        return value.tolist()
    name = getattr(value, "__qualname__", None) or getattr(value, "name", None) or type(value).__name__
    return f"{getattr(value, '__module__', None) or type(value).__module__}.{name}" if callable(value) else str(name)


def _registered_name(variant: object) -> str | None:
    """The name a memory's class is registered (or declared by an entry point) under: its own ``name`` if that one
    builds its class, else the first name that does; None for a class no name builds."""
    cls, own = type(variant), declares.name(variant)
    names = [n for n, e in _REGISTRY.own().items() if e.factory is cls]
    path = f"{cls.__module__}:{cls.__qualname__}"
    declared = _REGISTRY.declared()
    names += [n for n, value in declared.items() if value == path]
    if not names:  # an entry point may name a re-export of the class (mypkg:Mem for mypkg.memories:Mem)
        for n, value in declared.items():
            try:
                if plugins.load_path(value) is cls:
                    names.append(n)
            except Exception:  # a broken plug-in is refused where it is used, not here
                continue
    return own if own in names else (names[0] if names else None)


def build(variant: labels.Spec, feature: labels.Spec | None = None) -> Variant:
    """The memory a sweep's spec names (``lacapacity.sweep.Spec``: a registered name or import path with parameters,
    or the object itself), with the feature map ``feature`` (a spec too, or None) handed to it."""
    if variant.obj is not None:
        if feature is not None:
            raise CapacityError(
                f"variant {variant.label!r} is an object; feature maps go to registered variants (feature={feature.label!r})"
            )
        return cast(Variant, variant.obj)  # the sweep puts only variant objects there (is_variant)
    kwargs = variant.kwargs
    if feature is not None:
        clash = sorted(set(kwargs) & (set(feature.kwargs) | {"feature"}))
        if clash:
            raise CapacityError(
                f"variant {variant.label!r} and feature map {feature.label!r} both set {', '.join(clash)}"
            )
        kwargs = {**kwargs, "feature": feature.name, **feature.kwargs}
    return resolve(variant.name, **kwargs)


def label(variant: object) -> str:
    """The one label of a memory, whether it came as an object, a name or an import path: ``name(params)`` for a
    registered class, ``module:Class(params)`` otherwise (a memory's own ``label`` string wins), showing every
    parameter that differs from the constructor's default, whatever its value.

    ``resolve(label(v))`` builds the same memory where the class takes its parameters as keyword arguments.

    >>> label(get("delta", beta=0.5)), label(get("delta", normalize=False)), label(get("linear"))
    ('delta(beta=0.5)', 'delta(normalize=false)', 'linear')
    """
    own = declares.label(variant)
    if own is not None:
        return own
    cls = type(variant)
    base = _registered_name(variant) or f"{cls.__module__}:{cls.__qualname__}"
    defaults = _defaults(cls)
    shown = {k: _shown(v) for k, v in params(variant).items() if not (k in defaults and _same(v, defaults[k]))}
    return labels.format(base, shown)


def _register_builtins() -> None:
    from lacapacity.variants.cyfa import CyFA
    from lacapacity.variants.delta import KDA, Delta, GatedDelta
    from lacapacity.variants.delta_product import DeltaProduct
    from lacapacity.variants.dplr import DPLR
    from lacapacity.variants.gated import GLA, Decay
    from lacapacity.variants.gated_2026 import GDN2, Comba, GatedOja, PrecondGatedDelta, PrecondKDA
    from lacapacity.variants.lattice import Lattice
    from lacapacity.variants.learners import TTT, Titans
    from lacapacity.variants.linear import Linear
    from lacapacity.variants.log_linear import LogLinear
    from lacapacity.variants.longhorn import Longhorn
    from lacapacity.variants.lsq import LSQ
    from lacapacity.variants.mamba2 import Mamba2
    from lacapacity.variants.mamba3 import Mamba3
    from lacapacity.variants.mixture import MixtureOfMemories
    from lacapacity.variants.softmax import Softmax
    from lacapacity.variants.solvers import GKA, Mesa, Omega
    from lacapacity.variants.window import Hybrid, SlidingWindow

    # registration order is the order of figure legends (and of their colours)
    register("linear", Linear, "additive memory S = S + k^T v, read q S (T1)", display="linear attention (additive)")
    register(
        "decay", Decay, "S = alpha S + k^T v, scalar gate alpha in (0, 1] (RetNet-style; T11)", display="decay (RetNet)"
    )
    register(
        "gla",
        GLA,
        "S = Diag(alpha) S + k^T v, per-channel gate alpha in (0, 1]^d (gated linear attention)",
        display="GLA (gated linear attention)",
    )
    register(
        "delta",
        Delta,
        "delta rule S = (I - b k^T k) S + b k^T v, beta in (0, 2) (DeltaNet; T12)",
        display="DeltaNet (delta)",
    )
    register(
        "gated_delta",
        GatedDelta,
        "S = alpha (I - b k^T k) S + b k^T v, scalar gate alpha (Gated DeltaNet)",
        display="Gated DeltaNet",
    )
    register(
        "kda",
        KDA,
        "S = (I - b k^T k) Diag(alpha) S + b k^T v (Kimi Delta Attention)",
        display="KDA (Kimi Delta Attention)",
    )
    register(
        "mamba2",
        Mamba2,
        "S = exp(-A dt) S + dt k^T v, dt = softplus(k . w + bias), w seeded (Mamba2-style selective decay; T24)",
        display="Mamba2 (selective decay)",
    )
    register("lsq", LSQ, "online least squares S = (K^T K + lam I)^-1 K^T V, read q S (Mesa layer; meets T8)")
    register("longhorn", Longhorn, "S = (1 - e k*k) * S + e k^T v, e = beta / (1 + beta |k|^2), per row (Longhorn)")
    register(
        "delta_product",
        DeltaProduct,
        "a gate alpha, then steps delta updates per token on rotated keys k R_j ((Gated) DeltaProduct)",
    )
    register("dplr", DPLR, "S = (Diag(w) + a^T b) S + eta k^T v, a = -k, b = eta k (DPLR, RWKV-7)")
    register(
        "gdn2",
        GDN2,
        "S = (I - k^T (b*k)) Diag(alpha) S + k^T (gamma*v): channel gates on decay, erase and write (GDN-2)",
        display="GDN-2 (gated DeltaNet 2)",
    )
    register("comba", Comba, "S = alpha S + beta k^T (v - mu k S), feedback key p = mu k (Comba)", display="Comba")
    register(
        "gated_oja",
        GatedOja,
        "S = S Diag(alpha) + beta (k - v S^T)^T v: the erase runs along the value (gated Oja rule)",
        display="gated Oja rule",
    )
    register(
        "precond_gated_delta",
        PrecondGatedDelta,
        "gated delta rule writing the key preconditioned per channel by its squared-key accumulator",
        display="preconditioned Gated DeltaNet",
    )
    register(
        "precond_kda",
        PrecondKDA,
        "KDA writing the key preconditioned per channel by its squared-key accumulator",
        display="preconditioned KDA",
    )
    register(
        "titans",
        Titans,
        "M = alpha M + S, S = eta S - beta k^T (k M - v): momentum and weight decay on a linear memory (Titans)",
        display="Titans (momentum memory)",
    )
    register(
        "ttt",
        TTT,
        "two-layer MLP state, one gradient step on 1/2 |f(k) - v|^2 per write, read gelu(q W1) W2 (TTT-MLP)",
        display="TTT-MLP",
    )
    register(
        "log_linear",
        LogLinear,
        "Fenwick-tree levels over linear or gated delta memories, read sum lam_l q S_l; grows with log2 n",
        display="log-linear attention",
    )
    register(
        "softmax",
        Softmax,
        "keeps every pair, reads softmax(scale q K^T) V (exact-retrieval baseline; T13)",
        display="softmax attention (KV cache)",
    )
    register(
        "swa",
        SlidingWindow,
        "softmax attention over the last w pairs; cache min(n, w) (d + dv) (sliding-window attention)",
        display="sliding-window attention",
    )
    register(
        "hybrid",
        Hybrid,
        "a sliding window plus a fixed memory holding the evicted pairs (or all), read summed or normalised (Based)",
        display="window + state hybrid",
    )
    register(
        "mamba3",
        Mamba3,
        "Mamba2's decay with the exponential-trapezoidal write (lam) and keys and queries turned by the elapsed time",
        display="Mamba-3 (SISO)",
    )
    register(
        "mom",
        MixtureOfMemories,
        "M memories, each token written to its top-k by a seeded router, read mixed by the query's weights (MoM)",
        display="mixture of memories (MoM)",
    )
    register(
        "mesa",
        Mesa,
        "G = alpha G + beta k^T k, C = alpha C + beta k^T v, read q (G + lam I)^-1 C, solved exactly (Mesa layer)",
        display="Mesa (gated ridge regression)",
    )
    register(
        "gka",
        GKA,
        "Mesa's faded regression read through the ridge eta |G|_F, solved by Chebyshev iteration (Gated KalmaNet)",
        display="Gated KalmaNet",
    )
    register(
        "omega",
        Omega,
        "S = alpha S + beta sum over the last c pairs phi(k)^T (v - phi(k) S); c = 1: the delta rule (Atlas)",
        display="Omega rule (Atlas)",
    )
    register(
        "lattice",
        Lattice,
        "s_i += beta k_i (v - proj_{s_i} v): each slot written only with the part of v orthogonal to it (Lattice)",
        display="Lattice (orthogonal update)",
    )
    register(
        "cyfa",
        CyFA,
        "P relative-time key and value slots moved by a clock (Dirichlet-kernel shift), read by a softmax over the slots (CyFA)",
        display="CyFA (cyclic flow attention)",
    )


_register_builtins()
BUILT_IN = frozenset(_REGISTRY.own())  # the names registered by the package itself (anything else is a plug-in's)

from lacapacity.variants.fla import from_fla  # noqa: E402  (needs the registry-free core above only)
