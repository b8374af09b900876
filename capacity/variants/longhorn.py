"""Longhorn: the closed-form online-regression step with a diagonal (per-channel) forgetting.

Per token (row convention, state S ``[B, d, dv]``, (.) the elementwise product):

    eps_t = beta_t / (1 + beta_t ||k_t||^2)
    S_t   = (1 - eps_t k_t (.) k_t) (.) S_{t-1} + eps_t k_t^T v_t

so row i of S is scaled by 1 - eps_t k_ti^2, which lies in [1 / (1 + beta ||k||^2), 1]. This is
a per-channel gated additive update, computed by ``kernels.update(mode="gla")`` with the gate
alpha_t = 1 - eps_t k_t (.) k_t (in (0, 1]) and the written key eps_t k_t. ``beta`` > 0 (default
1.0) is a constant or ``("uniform", low, high)`` drawn per token from ``seed``. ``normalize=True``
(the default) L2-normalises keys and queries first. Read q S.

>>> import torch
>>> from lacapacity import variants, keys
>>> mem = variants.get("longhorn", beta=3.0)
>>> K = keys.make("gaussian", n=8, d=16, seed=0); V = torch.randn(1, 8, 4)
>>> tuple(mem.write(mem.init_state(1, 16, 4), K, V).shape)
(1, 16, 4)
"""

from __future__ import annotations

import torch

import lacapacity.kernels as kernels  # (not `from lacapacity import kernels`: mypy types that name Any? and rejects it)
from lacapacity.errors import CapacityError
from lacapacity.variants._memory import POSITIVE, Memory
from lacapacity.variants.recurrent import State


def gate_and_key(k: torch.Tensor, beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The gla gate 1 - eps k (.) k ``[B, T, d]`` and written key eps k ``[B, T, d]`` for keys k, beta ``[B, T]``.

    The gate is formed as (1 + beta (||k||^2 - k_i^2)) / (1 + beta ||k||^2): positive and <= 1 in
    floating point too.
    """
    sq = k * k  # [B, T, d]
    total = sq.sum(-1, keepdim=True)  # ||k||^2: [B, T, 1]
    b = beta[..., None]
    denom = 1.0 + b * total
    gate = (1.0 + b * (total - sq).clamp_min(0.0)) / denom
    return gate.clamp(max=1.0), (b / denom) * k


class Longhorn(Memory):
    """Longhorn with beta > 0, float32 state ``[B, d, dv]`` (a TokenState when beta is drawn)."""

    name = "longhorn"

    def __init__(self, *, beta: object = 1.0, normalize: bool = True, seed: int = 0, backend: str = "auto") -> None:
        self._setup(normalize=normalize, seed=seed, backend=backend, beta=(beta, POSITIVE, False))

    def write(self, state: State, k: torch.Tensor, v: torch.Tensor) -> State:
        """Write the tokens in order. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns the new state."""
        S, start = self._matrix(state)
        k, v = self._inputs(S, k, v)
        B, T, d = k.shape
        beta = self._values("beta", B, start, T, d, S.device)  # [B, T]
        gate, key = gate_and_key(k, beta)
        try:
            S = kernels.update(S.clone(), key, v, mode="gla", alpha=gate, normalize=False, backend=self.backend)
        except CapacityError as exc:
            raise CapacityError(f"{self.name}: {exc}") from None
        return self._wrap(S, start + T)
