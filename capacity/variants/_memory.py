"""Shared plumbing of the memories lsq, longhorn, delta_product and dplr: flags, parameters, state and checks.

Each of them keeps a float32 matrix state ``[B, d, dv]`` (lsq keeps two tensors, see its module)
written token by token in order. When a parameter is drawn per token (``("uniform", low, high)``,
see ``lacapacity.variants._params``) the state is a ``TokenState``, the matrix plus the count of
tokens written, so that token t always gets the same draw however the writes are chunked.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, cast

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.variants._params import Interval, Param
from lacapacity.variants.declares import Declares
from lacapacity.variants.recurrent import State, TokenState, state_matrix

GATE: Interval = {"low": 0.0, "high": 1.0, "high_open": False}  # w, eta in (0, 1]
RATE: Interval = {"low": 0.0, "high": 2.0, "high_open": True}  # delta-rule beta in (0, 2)
POSITIVE: Interval = {"low": 0.0, "high": math.inf, "high_open": True}  # beta > 0 (longhorn)


def unit(x: torch.Tensor) -> torch.Tensor:
    """Rows of x scaled to unit L2 norm (zero rows stay zero). Shape kept: ``[B, t, d]``."""
    out: torch.Tensor = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)  # (torch types tensor / tensor Any)
    return out


class Memory:
    """Base of the four memories; subclasses set ``name`` and call ``_setup`` from ``__init__``."""

    name = ""
    backends: tuple[str, ...] = ("auto", "torch", "triton")
    _states: ClassVar[int] = 1  # d x dv matrices in the state (declares.Declares.states)

    def _setup(
        self, *, normalize: bool, seed: int, backend: str = "torch", **params: tuple[object, Interval, bool]
    ) -> None:
        """``params``: name -> (spec, interval dict as in ``_params.Param``, per_channel)."""
        if not isinstance(normalize, bool):
            raise CapacityError(f"{self.name}: normalize must be True or False, got {normalize!r}")
        if backend not in self.backends:
            raise CapacityError(f"{self.name}: unknown backend {backend!r}; known: {', '.join(self.backends)}")
        self.normalize, self.backend = normalize, backend
        self.seed = _validate.positive_int(f"{self.name}: seed", seed, minimum=0)
        self._params: dict[str, Param] = {}
        for pname, (spec, interval, per_channel) in params.items():
            self._params[pname] = Param(self.name, pname, spec, per_channel=per_channel, **interval)

    # ------------------------------------------------------------------ description

    @property
    def declares(self) -> Declares:
        """Not additive (T2 holds for none of them); a linear read, q S for one d x dv matrix S (lsq: S = A^-1 B), so
        the rank bound T8 binds it; a delta rule (T12) where ``_delta_rule`` says so; differentiable but on the Triton
        backend."""
        return Declares(
            linear_read=True,
            additive=False,
            delta_rule=self._delta_rule(),
            differentiable=self.backend != "triton",
            states=self._states,
        )

    def _delta_rule(self) -> bool:
        """Whether the last written unit key reads its value back exactly (T12) at these parameters."""
        return False

    @property
    def drawn(self) -> bool:
        """True when some parameter is drawn per token (the state is then a TokenState)."""
        return any(p.drawn for p in self._params.values())

    def _constant(self, pname: str, value: float) -> bool:
        p = self._params[pname]
        return p.kind == "constant" and cast(float, p.value) == value  # a constant's value is a float

    def _extra_params(self) -> dict[str, object]:
        return {}

    @property
    def params(self) -> dict[str, object]:
        """The parameters; ``variants.get(self.name, **self.params)`` rebuilds the memory."""
        out: dict[str, object] = {p: spec.spec() for p, spec in self._params.items()}
        out.update(self._extra_params())
        out["normalize"] = self.normalize
        if self.drawn:
            out["seed"] = self.seed
        return out

    def state_numel(self, d: int, dv: int) -> int:
        return int(d) * int(dv)

    def __repr__(self) -> str:
        return f"variants.get({self.name!r}" + "".join(f", {k}={v!r}" for k, v in self.params.items()) + ")"

    # ------------------------------------------------------------------ state and inputs

    # Any (as in the Variant protocol): here a matrix State; lsq, log_linear, titans, ttt and precond keep their own
    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> Any:
        """An empty float32 state ``[batch, d, dv]``, in a TokenState when a parameter is drawn per token."""
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        S = torch.zeros(batch, d, dv, dtype=torch.float32, device=dev)
        return TokenState(S, 0) if self.drawn else S

    def _matrix(self, state: object) -> tuple[torch.Tensor, int]:
        """The float32 ``[B, d, dv]`` matrix of a state and the number of tokens written before."""
        return state_matrix(self.name, self.drawn, state)

    def _wrap(self, S: torch.Tensor, tokens: int) -> State:
        return TokenState(S, tokens) if self.drawn else S

    def _inputs(
        self, S: torch.Tensor, k: torch.Tensor, v: torch.Tensor, normalize: bool | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Checked float32 keys ``[B, t, d]`` and values ``[B, t, dv]``.

        Keys get unit rows if ``normalize`` (default: ``self.normalize``).
        """
        B, d, dv = S.shape
        k, v = _validate.pairs(
            self.name, k, v, batch=B, d=d, dv=dv, held=f"state [B, d, dv] = {list(S.shape)}", state=S
        )
        k = k.float()
        normalize = self.normalize if normalize is None else normalize
        return (unit(k) if normalize else k), v.float()

    def _values(self, pname: str, B: int, start: int, T: int, D: int, device: Device) -> torch.Tensor:
        """Parameter ``pname`` for tokens start .. start + T - 1 as float32 ``[B, T]`` (``[B, T, D]`` per channel)."""
        p = self._params[pname]
        x = p.values(B, start, T, D, self.seed, device)
        if isinstance(x, float):
            shape = (B, T, D) if p.per_channel else (B, T)
            return torch.full(shape, x, dtype=torch.float32, device=device)
        if p.kind == "vector":
            return x.float().expand(B, T, D)
        return x.float()

    def read(self, state: Any, q: torch.Tensor) -> torch.Tensor:  # Any: as init_state's
        """q S (q L2-normalised first with ``normalize``). Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        S, _ = self._matrix(state)
        return self._read_matrix(S, q)

    def _read_matrix(self, S: torch.Tensor, q: object) -> torch.Tensor:
        """q S for a float32 matrix S ``[B, d, dv]`` (q checked against it, unit rows with ``normalize``)."""
        held = f"state [B, d, dv] = {list(S.shape)}"
        q = _validate.queries(self.name, q, batch=S.shape[0], d=S.shape[1], held=held, state=S).float()
        return (unit(q) if self.normalize else q) @ S
