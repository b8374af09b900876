"""A Mamba2-style memory: a scalar decay and a write scale computed from each token's key.

    dt_t = softplus(phi(k_t) . w + bias)          bias = log(expm1(dt)), so a key orthogonal to w steps by dt
    S_t  = exp(-A dt_t) S_{t-1} + dt_t phi(k_t)^T v_t
    read r = phi(q) S

Mamba2's selective state space layer in the toolkit's row convention (its B_t is the key, C_t the query, x_t the
value; one head, no skip term D, no convolution). In Mamba2 dt is a learnt projection of the token; here the
projection w is drawn from ``seed``: a uniform random direction scaled to norm ``w_std`` sqrt(D), so that for unit
keys uniform on the sphere phi(k) . w has standard deviation ``w_std`` (0: every token steps by dt). ``A`` > 0 sets
how fast a step forgets. The write goes through ``kernels.update(mode="decay")`` with the gate exp(-A dt_t) and the
value dt_t v_t. T24 (``lacapacity.theory.forgetting_signal(..., "mamba2")``) gives its forgetting horizon.
"""

from __future__ import annotations

import math
import numbers
from typing import ClassVar

import torch

import lacapacity.kernels as kernels  # (not `from lacapacity import kernels`: mypy types that name Any? and rejects it)
from lacapacity.base import _random, _validate
from lacapacity.errors import CapacityError
from lacapacity.variants.declares import Family
from lacapacity.variants.recurrent import Recurrent, State, TokenState

_FLOOR = 1e-30  # exp(-A dt) below this (dt A > 69) is written as this: the kernels take gates in (0, 1]


def _positive(name: str, x: object, *, allow_zero: bool = False) -> float:
    if (
        isinstance(x, bool)
        or not isinstance(x, numbers.Real)
        or not math.isfinite(x)
        or x < 0
        or (x == 0 and not allow_zero)
    ):
        want = ">= 0" if allow_zero else "> 0"
        raise CapacityError(f"mamba2: {name} must be a finite number {want}, got {x!r}")
    return float(x)


class Mamba2(Recurrent):
    """S = exp(-A dt) S + dt phi(k)^T v with dt = softplus(phi(k) . w + bias), w seeded; float32 state ``[B, D, dv]``.

    >>> import torch
    >>> from lacapacity import variants, keys
    >>> mem = variants.get("mamba2", A=1.0, dt=0.05, w_std=0.0)   # w_std = 0: a fixed decay exp(-0.05)
    >>> K = keys.make("gaussian", n=3, d=8, seed=0); V = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(0))
    >>> S = mem.write(mem.init_state(1, 8, 4), K, V)
    >>> want = sum(0.05 * math.exp(-0.05 * (2 - t)) * K[0, t, :, None] * V[0, t] for t in range(3))
    >>> bool(torch.allclose(S[0], want, atol=1e-6))
    True
    """

    name = "mamba2"
    mode = "decay"
    _family: ClassVar[Family | None] = "selective"

    A: float = 1.0
    dt: float = 0.01
    w_std: float = 1.0

    # the fields this class declares, which __init__ passes (narrower than the base's **fields: hence the ignore)
    def _more(self, *, A: object, dt: object, w_std: object) -> None:  # type: ignore[override]
        self.A = _positive("A", A)
        self.dt = _positive("dt", dt)
        self.w_std = _positive("w_std", w_std, allow_zero=True)
        if self.dt > 700:
            raise CapacityError(
                f"mamba2: dt must be at most 700 (softplus^-1 of it is computed in float64), got {dt!r}"
            )
        self.bias = math.log(math.expm1(self.dt))  # softplus(bias) = dt
        self._w: dict[int, torch.Tensor] = {}

    @property
    def params(self) -> dict[str, object]:
        """The parameters; ``variants.get("mamba2", **self.params)`` rebuilds the variant."""
        return {"A": self.A, "dt": self.dt, "w_std": self.w_std, **super().params, "seed": self.seed}

    def projection(self, D: int) -> torch.Tensor:
        """The projection w, float64 ``[D]``: a seeded uniform direction of norm w_std sqrt(D)."""
        if D not in self._w:
            z = _random.normal(D, generator=_random.generator(self.seed, "variants/mamba2/w"))
            self._w[D] = z / z.norm() * (self.w_std * math.sqrt(D))
        return self._w[D]

    def steps(self, phi: torch.Tensor) -> torch.Tensor:
        """dt_t = softplus(phi(k_t) . w + bias) for features phi ``[B, T, D]`` (normalised first if ``normalize``): float32 ``[B, T]``."""
        x = phi.double()
        if self.normalize:
            x = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        w = self.projection(x.shape[-1]).to(x.device)
        return torch.nn.functional.softplus(x @ w + self.bias).float()

    def write(self, state: State, k: torch.Tensor, v: torch.Tensor) -> State:
        """Write the tokens in order. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns the state."""
        S, start = self._matrix(state)
        _validate.tensor("k", k, ndim=3, finite=False)
        _validate.tensor("v", v, ndim=3, finite=False)
        phi = self._features(k)  # [B, T, D]
        dt = self.steps(phi)  # [B, T]
        v = v.float()
        if self.normalize_read:
            v = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)  # the last column sums dt phi(k), decayed
        gate = torch.exp(-self.A * dt.double()).clamp_min(_FLOOR).float()  # [B, T] in (0, 1]
        try:
            S = kernels.update(
                S,
                phi.float(),
                dt[..., None] * v,
                mode="decay",
                alpha=gate,
                normalize=self.normalize,
                backend=self.backend,
            )
        except CapacityError as exc:
            raise CapacityError(f"{self.name}: {exc}") from None
        return TokenState(S, start + k.shape[1]) if self.drawn else S
