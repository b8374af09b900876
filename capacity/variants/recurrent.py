"""The shared machinery of the matrix memories: feature map, gates and beta, normalised read, state.

Every recurrent built-in (linear, decay, gla, delta, gated_delta, kda) is a ``Recurrent``
that differs only in its ``kernels.update`` mode and parameters. Its state:

- a float32 tensor ``[B, D, dv]`` (D = ``feature_dim(d)``: d without a feature map);
- with ``normalize_read=True``, ``[B, D, dv + 1]``: the last column accumulates
  z = sum_i phi(k_i) (decayed and gated like the rest), written as the value 1;
- when a gate or beta is drawn per token, a ``TokenState`` (the tensor above plus the count
  of tokens written), so that token t always gets the same draw however the writes are chunked.

Read: r = phi(q) S, or with ``normalize_read`` r = phi(q) S / (phi(q) . z).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from dataclasses import fields as _fields
from typing import Any, ClassVar, TypeAlias

import torch

import lacapacity.kernels as kernels  # (not `from lacapacity import kernels`: mypy types that name Any? and rejects it)
from lacapacity.base import _random, _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.inputs import features
from lacapacity.inputs.features import FeatureMap
from lacapacity.variants._params import Interval, Param
from lacapacity.variants.declares import Declares, Family

GATE: Interval = {"low": 0.0, "high": 1.0, "high_open": False}  # alpha in (0, 1]
BETA: Interval = {"low": 0.0, "high": 2.0, "high_open": True}  # beta in (0, 2)
_TINY = 1e-30  # floor of the normaliser phi(q) . z, which is >= 0 for the positive maps


@dataclass
class TokenState:
    """State of a variant with per-token draws: ``matrix`` float32 ``[B, D, dv]`` and ``tokens`` written so far."""

    matrix: torch.Tensor
    tokens: int


State: TypeAlias = "torch.Tensor | TokenState"  # what init_state and write give: a TokenState when drawing per token


def state_matrix(name: str, drawn: bool, state: object) -> tuple[torch.Tensor, int]:
    """The float32 ``[B, D, dv]`` matrix of a state and the number of tokens written before it.

    ``drawn``: the variant draws a gate or beta per token, so its state is a ``TokenState``.
    """
    if drawn:
        if not isinstance(state, TokenState):
            raise CapacityError(
                f"{name}: draws per token, so its state is a TokenState from init_state(), got {type(state).__name__}"
            )
        return state.matrix, state.tokens
    if not isinstance(state, torch.Tensor):
        raise CapacityError(f"{name}: the state must be the tensor from init_state(), got {type(state).__name__}")
    return state, 0


_DELTA_MODES = ("delta", "gated_delta", "kda")  # the writes that correct towards v (T12 holds with beta = 1)
_CORE = ("normalize", "feature", "normalize_read", "seed", "backend", "alpha", "beta")  # what _setup takes


@dataclass(init=False, eq=False, repr=False)
class Recurrent:
    """A matrix memory written through ``kernels.update(mode=...)``; see the module docstring.

    Each parameter is declared once, as a field: a subclass sets ``name``, ``mode``, ``_family`` and
    ``gate_per_channel`` and declares its gate ``alpha`` and step ``beta`` fields (with their defaults) and, where it
    differs, the default of ``normalize``. The constructor, its signature, ``params`` and the label follow from the
    fields; any other keyword goes to the feature map (``feature="dpfp", nu=2``).
    """

    name: ClassVar[str] = ""
    mode: ClassVar[str] = ""
    _family: ClassVar[Family | None] = None  # the closed-form family of the rule (declares.FAMILIES), None: none
    _bookkeeping: ClassVar[tuple[str, ...]] = ()  # the state's fields that are counters, not numbers (Declares)
    gate_per_channel: ClassVar[bool] = False  # the gate alpha: one per feature row of the state (gla, kda)

    normalize: bool = False
    feature: FeatureMap | None = None  # given as a name of lacapacity.features or a FeatureMap; kept as the map
    normalize_read: bool = False
    seed: int = 0
    backend: str = "auto"

    def __init_subclass__(cls, **kwargs: Any) -> None:  # Any: whatever a further base class takes
        super().__init_subclass__(**kwargs)
        dataclass(init=False, eq=False, repr=False)(cls)  # the subclass's own fields join the base's
        fields = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default) for f in _fields(cls)]
        extra = inspect.Parameter("feature_params", inspect.Parameter.VAR_KEYWORD)
        cls.__signature__ = inspect.Signature(fields + [extra])  # type: ignore[attr-defined]  # read by inspect.signature

    def __init__(self, **params: Any) -> None:  # Any: a user's parameters, checked by _setup and _more
        declared = {f.name: f.default for f in _fields(type(self))}
        values = {**declared, **{k: params.pop(k) for k in list(params) if k in declared}}
        core = {k: values.pop(k) for k in list(values) if k in _CORE}
        self._setup(**core, feature_params=params)
        self._more(**values)

    def _more(self, **fields: Any) -> None:  # Any: a subclass's own fields as the user gave them
        """Check and keep a subclass's own fields besides the shared ones (none here)."""

    def _setup(
        self,
        *,
        normalize: bool,
        feature: str | FeatureMap | None,
        normalize_read: bool,
        seed: int,
        backend: str,
        feature_params: dict[str, object],
        alpha: object = None,
        beta: object = None,
    ) -> None:
        """Check the declared parameters, build the feature map and the gate and step parameters."""
        for flag, value in (("normalize", normalize), ("normalize_read", normalize_read)):
            if not isinstance(value, bool):
                raise CapacityError(f"{self.name}: {flag} must be True or False, got {value!r}")
        if backend not in ("auto", "torch", "triton"):
            raise CapacityError(f"{self.name}: unknown backend {backend!r}; known: auto, torch, triton")
        self.seed = _random.check_seed(f"{self.name}: seed", seed)
        self.normalize, self.normalize_read, self.backend = normalize, normalize_read, backend
        if feature is None:
            if feature_params:
                allowed = ", ".join(p for p in inspect.signature(type(self)).parameters if p != "feature_params")
                raise CapacityError(
                    f"variant {self.name!r} got unknown parameter(s) {', '.join(sorted(feature_params))}; allowed: {allowed} (and a feature map's own parameters with feature=...)"
                )
            self.feature = None
        else:
            fp = dict(feature_params)
            if isinstance(feature, str) and "seed" in features.PARAMS.get(feature, ()):
                fp.setdefault("seed", self.seed)  # one seed drives every draw of the variant
            try:
                self.feature = features.get(feature, **fp)
            except CapacityError as exc:
                raise CapacityError(f"{self.name}: {exc}") from None
        if normalize_read and self.mode in _DELTA_MODES:
            raise CapacityError(
                f"{self.name}: normalize_read applies to the additive and gated memories (linear, decay, gla), not to a delta rule, whose write already corrects the read"
            )
        if normalize_read and (self.feature is None or not self.feature.positive_kernel):
            have = "no feature map" if self.feature is None else f"feature={self.feature.name!r}"
            raise CapacityError(
                f"{self.name}: normalize_read divides by phi(q) . z, which needs a feature map with positive inner products (elu1, relu, dpfp, taylor2, performer); got {have}"
            )
        self._params: dict[str, Param] = {}
        for pname, spec, kind in (("alpha", alpha, GATE), ("beta", beta, BETA)):
            if spec is not None:
                per_channel = pname == "alpha" and self.gate_per_channel
                # a scalar gate draws from the stream of its old name "a": the same draws as before the rename
                stream = "a" if pname == "alpha" and not per_channel else pname
                self._params[pname] = Param(self.name, pname, spec, per_channel=per_channel, stream=stream, **kind)
        map_seed = self.feature.params.get("seed") if self.feature is not None else None
        if map_seed is not None and map_seed != self.seed:  # a FeatureMap built with its own seed
            if self.drawn:
                raise CapacityError(
                    f"{self.name}: the {self.feature.name} map has seed {map_seed} but the variant's seed is {self.seed}; one seed drives every draw of a variant: pass seed={map_seed}"  # type: ignore[union-attr]  # a seed only with a map
                )
            # the variant draws nothing else, so its seed is the map's: an int, or the CPU torch.Generator a Performer
            # was built with (which draws take as well)
            self.seed = map_seed  # type: ignore[assignment]

    # ------------------------------------------------------------------ description

    @property
    def drawn(self) -> bool:
        """True when some gate or beta is drawn per token (the state is then a TokenState)."""
        return any(p.drawn for p in self._params.values())

    @property
    def declares(self) -> Declares:
        """Additive (T2) when the write is S += k^T v and the read q S exactly; a linear read (T8, with D for d)
        unless normalize_read divides it; a delta rule (T12) for the writes that correct towards v; differentiable
        but on the Triton backend."""
        plain = self.feature is None or self.feature.name == "identity"
        return Declares(
            linear_read=not self.normalize_read,
            form=self._family,
            additive=self.mode == "linear" and not self.normalize_read and plain,
            delta_rule=self.mode in _DELTA_MODES,
            differentiable=self.backend != "triton",
            bookkeeping=self._bookkeeping,
        )

    @property
    def params(self) -> dict[str, object]:
        """Every parameter that can change the numbers; ``variants.get(self.name, **self.params)`` rebuilds the variant.

        (``seed`` appears when something is drawn from it, ``normalize_read`` and the map's parameters with a map.)
        """
        out: dict[str, object] = {p: self._params[p].spec() for p in ("alpha", "beta") if p in self._params}
        out["normalize"] = self.normalize
        if self.feature is not None:
            out["feature"] = self.feature.name
            out.update({k: v for k, v in self.feature.params.items() if k != "seed"})
            out["normalize_read"] = self.normalize_read
        if self.drawn or (self.feature is not None and "seed" in self.feature.params):
            out["seed"] = self.seed
        out["backend"] = self.backend
        return out

    def feature_dim(self, d: int) -> int:
        """D, the number of rows of the state for keys of dimension d."""
        return int(d) if self.feature is None else int(self.feature.feature_dim(d))

    def state_numel(self, d: int, dv: int) -> int:
        return self.feature_dim(d) * (int(dv) + int(self.normalize_read))

    def __repr__(self) -> str:
        return f"variants.get({self.name!r}" + "".join(f", {k}={v!r}" for k, v in self.params.items()) + ")"

    # ------------------------------------------------------------------ the protocol

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> State:
        """An empty float32 state ``[batch, D, dv]`` (``[batch, D, dv + 1]`` with normalize_read), in a TokenState
        when something is drawn per token."""
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        shape = (batch, self.feature_dim(d), dv + int(self.normalize_read))
        _validate.check_alloc(f"{self.name}: init_state", shape, torch.float32, dev)
        try:
            S = torch.zeros(shape, dtype=torch.float32, device=dev)
        except Exception as exc:
            if _validate.is_alloc_failure(exc):
                raise _validate.alloc_error(f"{self.name}: init_state", shape, torch.float32, dev, exc) from None
            raise
        return TokenState(S, 0) if self.drawn else S

    def _matrix(self, state: object) -> tuple[torch.Tensor, int]:
        return state_matrix(self.name, self.drawn, state)

    def _features(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.feature is None else self.feature(x)  # [B, t, d] -> [B, t, D]

    def write(self, state: State, k: torch.Tensor, v: torch.Tensor) -> State:
        """Write the tokens in order. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns the state."""
        S, start = self._matrix(state)
        _validate.tensor("k", k, ndim=3, finite=False)
        _validate.tensor("v", v, ndim=3, finite=False)
        B, T = k.shape[:2]
        phi = self._features(k)  # [B, T, D]
        if self.feature is not None:
            v = v.float()  # features are float32; kernels.update wants one dtype
        if self.normalize_read:
            v = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)  # [B, T, dv + 1]: the last column sums phi(k)
        D = S.shape[1]
        args: dict[str, float | torch.Tensor] = {}
        if "alpha" in self._params:
            args["alpha"] = self._params["alpha"].values(B, start, T, D, self.seed, S.device)
        if "beta" in self._params:
            args["beta"] = self._params["beta"].values(B, start, T, D, self.seed, S.device)
        try:
            S = kernels.update(S, phi, v, mode=self.mode, normalize=self.normalize, backend=self.backend, **args)
        except CapacityError as exc:
            raise CapacityError(f"{self.name}: {exc}") from None
        return TokenState(S, start + T) if self.drawn else S

    def read(self, state: State, q: torch.Tensor) -> torch.Tensor:
        """phi(q) S (divided by phi(q) . z with normalize_read). Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        S, _ = self._matrix(state)
        _validate.tensor("q", q, ndim=3, finite=False)
        try:
            r: torch.Tensor = kernels.read(S, self._features(q), normalize=self.normalize)  # [B, m, dv (+1)]
        except CapacityError as exc:
            raise CapacityError(f"{self.name}: {exc}") from None
        if self.normalize_read:
            r = r[..., :-1] / r[..., -1:].clamp_min(_TINY)
        return r
