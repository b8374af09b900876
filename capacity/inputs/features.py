"""Feature maps phi for kernelized memories: write S = sum_i phi(k_i)^T v_i, read phi(q) S.

A feature map sends a key ``[..., d]`` to float32 features ``[..., D]`` with D = ``feature_dim(d)``.
The capacity onset is governed by D and by how orthogonal the features can be (docs/theory.md):
a positive map (elu1, performer) puts every feature in the positive orthant, so
phi(k_i) . phi(k_j) > 0 for every pair and interference starts before n = d.

=============  ====================  ======================================================
name           D = feature_dim(d)    phi(x)
=============  ====================  ======================================================
identity       d                     x
elu1           d                     elu(x) + 1 (strictly positive)
relu           d                     max(x, 0)
dpfp(nu)       2 d nu                DPFP (Schlag et al. 2021): r = [relu(x), relu(-x)],
                                     phi = [r * roll(r, 1), ..., r * roll(r, nu)]
taylor2        1 + d + d (d + 1)/2   [1, x, x_i^2 / sqrt(2), x_i x_j (i < j)]:
                                     phi(q) . phi(k) = 1 + q.k + (q.k)^2 / 2
performer(m)   m                     exp(w_r . x - |x|^2 / 2) / sqrt(m), w_r ~ N(0, I_d)
                                     (FAVOR+, positive random features; E phi(q).phi(k) = exp(q.k))
=============  ====================  ======================================================

>>> import torch
>>> from lacapacity import features
>>> phi = features.get("dpfp", nu=2)
>>> phi.feature_dim(16)
64
>>> tuple(phi(torch.randn(3, 5, 16)).shape)
(3, 5, 64)
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from lacapacity.base import _random, _validate
from lacapacity.base.registry import Registry
from lacapacity.errors import CapacityError, user_code
from lacapacity.kernels._batched import matmul

__all__ = ["FeatureMap", "get", "available", "display_name", "display_names", "PARAMS"]


class FeatureMap(abc.ABC):
    """A feature map: ``phi(x)`` for x ``[..., d]`` returns float32 ``[..., feature_dim(d)]``.

    ``positive_kernel`` is True when phi(x) . phi(y) >= 0 for all x, y (so that a normalised
    read, divided by phi(q) . sum_i phi(k_i), has a denominator that cannot change sign).
    ``params`` holds the map's own parameters; ``label`` is e.g. ``dpfp(nu=2)``. A plug-in map may set ``display``,
    the name figures give it (the built-ins' are on their registry entries).
    """

    name: str = ""
    positive_kernel: bool = False

    @property
    def params(self) -> dict[str, object]:
        """The map's own parameters, name -> value (none for a map without any)."""
        return {}

    @property
    def label(self) -> str:
        """``name(k=v, ...)`` from ``name`` and ``params``, or the name alone: ``dpfp(nu=2)``, ``relu``."""
        inner = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.name}({inner})" if inner else self.name

    @abc.abstractmethod
    def feature_dim(self, d: int) -> int:
        """The number of features D for keys of dimension d."""

    @abc.abstractmethod
    def map(self, x: torch.Tensor) -> torch.Tensor:
        """phi(x) for float32 x ``[..., d]``; returns ``[..., feature_dim(d)]``."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Shapes: x ``[..., d]`` -> float32 ``[..., feature_dim(d)]``."""
        _validate.tensor("feature map input", x, ndim=tuple(range(1, 8)))
        return self.map(x.float())

    def __repr__(self) -> str:
        return f"features.get({self.name!r}" + "".join(f", {k}={v!r}" for k, v in self.params.items()) + ")"


class _Elementwise(FeatureMap):
    """A map applied coordinate by coordinate: as many features as coordinates, D = d."""

    def feature_dim(self, d: int) -> int:
        return int(d)


class Identity(_Elementwise):
    name = "identity"

    def map(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Elu1(_Elementwise):
    name = "elu1"
    positive_kernel = True

    def map(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x) + 1.0


class Relu(_Elementwise):
    name = "relu"
    positive_kernel = True

    def map(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x)


class Dpfp(FeatureMap):
    """Deterministic parameter-free projection (Schlag, Irie and Schmidhuber 2021), 2 d nu features."""

    name = "dpfp"
    positive_kernel = True

    def __init__(self, nu: int = 1) -> None:
        self.nu = _validate.positive_int("dpfp: nu", nu)

    @property
    def params(self) -> dict[str, object]:
        return {"nu": self.nu}

    def feature_dim(self, d: int) -> int:
        return 2 * int(d) * self.nu

    def map(self, x: torch.Tensor) -> torch.Tensor:
        r = torch.cat([F.relu(x), F.relu(-x)], dim=-1)  # [..., 2d]
        if self.nu > r.shape[-1] - 1:
            raise CapacityError(
                f"dpfp: nu must be at most 2 d - 1 = {r.shape[-1] - 1} for d = {x.shape[-1]}, got {self.nu}"
            )
        return torch.cat([r * torch.roll(r, shifts=j, dims=-1) for j in range(1, self.nu + 1)], dim=-1)  # [..., 2 d nu]


class Taylor2(FeatureMap):
    """Second-order Taylor features of exp(q.k): phi(q) . phi(k) = 1 + q.k + (q.k)^2 / 2 exactly."""

    name = "taylor2"
    positive_kernel = True  # 1 + s + s^2/2 >= 1/2 for every real s

    def feature_dim(self, d: int) -> int:
        d = int(d)
        return 1 + d + d * (d + 1) // 2

    def map(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1]
        i, j = torch.triu_indices(d, d, device=x.device)  # pairs i <= j, row-major
        scale = torch.where(i == j, 1.0 / math.sqrt(2.0), 1.0).to(x.dtype)  # x_i^2/sqrt(2); x_i x_j for i < j
        quad = x[..., i] * x[..., j] * scale  # [..., d (d + 1)/2]
        return torch.cat([torch.ones_like(x[..., :1]), x, quad], dim=-1)


class Performer(FeatureMap):
    """FAVOR+ positive random features (Choromanski et al. 2021): E phi(q) . phi(k) = exp(q . k).

    phi(x) = exp(w_r . x - |x|^2 / 2) / sqrt(m) for r = 1..m. The projections w_r are drawn
    once per d from ``seed``; with ``orthogonal=True`` (the default, the "+" of FAVOR+) they come
    in blocks of d mutually orthogonal rows, each with the norm of an independent N(0, I_d) draw.
    """

    name = "performer"
    positive_kernel = True

    def __init__(self, m: int = 256, seed: int = 0, orthogonal: bool = True) -> None:
        self.m = _validate.positive_int("performer: m", m)
        # the projections for d = 1 are the least any use allocates (float64 [m, d], three copies at the peak)
        _validate.check_alloc(f"performer (m = {self.m}): projections", (self.m, 1), torch.float64, "cpu", copies=3)
        _random.generator(seed, "features/performer")  # validates the seed now, not at the first call
        self.seed = seed
        if not isinstance(orthogonal, bool):
            raise CapacityError(f"performer: orthogonal must be True or False, got {orthogonal!r}")
        self.orthogonal = orthogonal
        self._cache: dict[int, torch.Tensor] = {}

    @property
    def params(self) -> dict[str, object]:
        return {"m": self.m, "seed": self.seed, "orthogonal": self.orthogonal}

    def feature_dim(self, d: int) -> int:
        return self.m

    def projection(self, d: int) -> torch.Tensor:
        """The random projections W, float32 ``[m, d]`` on the CPU (the same for a given seed and d)."""
        if d not in self._cache:
            # float64 draws [m, d] (twice over, blocks and their concatenation), before any is made
            _validate.check_alloc(f"performer (m = {self.m}): projections", (self.m, d), torch.float64, "cpu", copies=3)
            g = _random.generator(self.seed, f"features/performer/{d}")
            if not self.orthogonal:
                w = torch.randn(self.m, d, generator=g, dtype=torch.float64)
            else:
                blocks = []
                for _ in range(math.ceil(self.m / d)):
                    q, r = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
                    q = q * torch.sign(torch.diagonal(r))  # Haar-random orthogonal
                    norms = torch.randn(d, d, generator=g, dtype=torch.float64).norm(dim=-1, keepdim=True)  # chi_d
                    blocks.append(q.T * norms)  # rows orthogonal, each with a Gaussian vector's norm
                w = torch.cat(blocks)[: self.m]
            self._cache[d] = w.float()
        return self._cache[d]

    def map(self, x: torch.Tensor) -> torch.Tensor:
        _validate.check_alloc(
            f"performer (m = {self.m}): features", (*x.shape[:-1], self.m), torch.float32, x.device, copies=3
        )
        w = self.projection(x.shape[-1]).to(x.device)  # [m, d]
        if x.ndim >= 3:  # [..., t, d]: one product per leading item (kernels._batched), the same bits in any batch
            proj = matmul(x.reshape(-1, *x.shape[-2:]), w.T).reshape(*x.shape[:-1], -1)
        else:
            proj = x @ w.T
        logits = proj - 0.5 * (x * x).sum(-1, keepdim=True)  # [..., m]
        return torch.exp(logits) / math.sqrt(self.m)


@dataclass(frozen=True)
class _Entry:
    factory: Callable[..., FeatureMap]
    params: tuple[str, ...]
    description: str
    display: str  # the name figures give it


# the registry's order is the order of figure legends (and of their colours); plug-ins: entry point group
# lacapacity.features, or module:Class (a FeatureMap class or instance)
_MAPS: Registry[Any] = Registry(
    "lacapacity.features", "feature map", path="module:Class"
)  # own: _Entry; plug-ins: FeatureMap classes or instances
for _name, _entry in {
    "identity": _Entry(Identity, (), "phi(x) = x, D = d (the plain linear memory)", "identity"),
    "elu1": _Entry(Elu1, (), "phi(x) = elu(x) + 1, D = d; strictly positive, so every pair interferes", "elu + 1"),
    "relu": _Entry(Relu, (), "phi(x) = max(x, 0), D = d; nonnegative", "ReLU"),
    "dpfp": _Entry(Dpfp, ("nu",), "DPFP(nu) (Schlag et al. 2021), D = 2 d nu; nonnegative, sparse", "DPFP"),
    "taylor2": _Entry(
        Taylor2,
        (),
        "2nd-order Taylor map of exp(q.k), D = 1 + d + d(d+1)/2; phi(q).phi(k) = 1 + q.k + (q.k)^2/2",
        "Taylor (2nd order)",
    ),
    "performer": _Entry(
        Performer,
        ("m", "seed", "orthogonal"),
        "FAVOR+ positive random features (m, seed), D = m; E phi(q).phi(k) = exp(q.k)",
        "Performer (random positive)",
    ),
}.items():
    _MAPS.add(_name, _entry)
PARAMS = {name: e.params for name, e in _MAPS.own().items()}  # each map's own parameter names


def available() -> dict[str, str]:
    """The feature maps: name -> one-line description (plug-ins of entry point group ``lacapacity.features`` too)."""
    out = {name: e.description for name, e in _MAPS.own().items()}
    return out | {name: f"(plug-in {value})" for name, value in _MAPS.declared().items()}


def display_name(name: str) -> str:
    """How figures name the feature map ``name``: its registry entry's ``display``; for a plug-in (entry point or
    ``module:Class``), its class's ``display`` attribute, else its name (an import path: the class name).

    >>> display_name("elu1"), display_name("dpfp")
    ('elu + 1', 'DPFP')
    """
    if name in _MAPS:
        own: _Entry = _MAPS.own()[name]
        return own.display
    try:
        found = _MAPS.find(name)
    except CapacityError:  # not importable here: figures still draw, under its name
        found = None
    shown = getattr(found, "display", None)
    return shown if isinstance(shown, str) and shown else name.rpartition(":")[2]


def display_names() -> dict[str, str]:
    """Every built-in feature map -> its display name, in the registry's order (the order of figure legends;
    plug-ins, not loaded for this, come after)."""
    return {name: e.display for name, e in _MAPS.own().items()}


def get(name: str | FeatureMap, **params: object) -> FeatureMap:
    """The feature map ``name`` with its parameters; a FeatureMap instance is returned as is.

    >>> get("taylor2").feature_dim(64)
    2145
    """
    if isinstance(name, FeatureMap):
        if params:
            raise CapacityError(
                f"feature map {name.label} is already built; it takes no parameters ({', '.join(params)})"
            )
        return name
    if not isinstance(name, str):
        raise CapacityError(
            f"a feature map is a name ({', '.join(_MAPS.own())}) or a lacapacity.features.FeatureMap, got {name!r}"
        )
    if name not in _MAPS:  # a plug-in: an import path module:attr, or an entry point of group lacapacity.features
        found = _MAPS.get(name)
        with user_code(f"feature map {name!r}", "when built"):
            built = found(**params) if callable(found) and not isinstance(found, FeatureMap) else found
        if not isinstance(built, FeatureMap):
            raise CapacityError(
                f"feature map {name!r} must build a lacapacity.features.FeatureMap, got {type(built).__name__}"
            )
        return built
    entry: _Entry = _MAPS.own()[name]
    unknown = sorted(set(params) - set(entry.params))
    if unknown:
        allowed = ", ".join(entry.params) if entry.params else "none"
        raise CapacityError(f"feature map {name!r} got unknown parameter(s) {', '.join(unknown)}; allowed: {allowed}")
    return entry.factory(**params)
