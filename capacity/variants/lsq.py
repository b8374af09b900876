"""Online least squares (the Mesa layer's memory): after n writes S = (K^T K + lam I)^-1 K^T V, read q S.

Recursive least squares with ridge ``lam`` > 0 solves, after every write, the regression of the
values on the keys written so far:

    S_n = argmin_S  sum_{i <= n} ||k_i S - v_i||^2 + lam ||S||_F^2 = (K^T K + lam I)^-1 K^T V

Token by token this is the RLS recurrence (``lsq`` of tests/memory_oracles.py, the tests' oracle)

    P_t = P_{t-1} - P_{t-1} k_t^T k_t P_{t-1} / (1 + k_t P_{t-1} k_t^T),   P_0 = I / lam
    S_t = S_{t-1} + P_t k_t^T (v_t - k_t S_{t-1})

which is a delta rule with a matrix step size P_t. The state kept here is the stable exact
form: A = lam I + K^T K float32 ``[B, d, d]`` and Bm = K^T V float32 ``[B, d, dv]``; a write
adds the chunk's Gram and cross terms k^T k and k^T v (no loop over tokens), a read solves
A X = Bm (in float64) and returns q X. State size d d + d dv. Differentiable through
``torch.linalg.solve``. With orthonormal values, full-rank keys and n > d its mean read error
tends to T8 = 1 - d/n as lam -> 0 (``lacapacity.theory.rank_bound``): it attains the bound of
every linear read from a d x dv state.

>>> import torch
>>> from lacapacity import variants, keys, values, theory
>>> mem = variants.get("lsq", lam=1e-6)
>>> K = keys.make("gaussian", n=48, d=16, seed=0); V = values.make("orthonormal", 48, 48, seed=0)
>>> S = mem.write(mem.init_state(1, 16, 48), K, V)
>>> err = float(((mem.read(S, K) - V) ** 2).sum(-1).mean())
>>> abs(err - float(theory.rank_bound(48, 16))) < 1e-4
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.variants._memory import Memory, unit


@dataclass
class LsqState:
    """``gram`` A = lam I + K^T K float32 ``[B, d, d]``; ``cross`` Bm = K^T V float32 ``[B, d, dv]``."""

    gram: torch.Tensor
    cross: torch.Tensor


class LSQ(Memory):
    """Online least squares with ridge ``lam`` > 0 (default 1e-3); ``normalize=True`` L2-normalises keys and queries."""

    name = "lsq"
    _states = 2  # A [d, d] and Bm [d, dv]; the last key reads back exactly only when n <= d and lam -> 0 (no T12)

    def __init__(self, *, lam: float = 1e-3, normalize: bool = False) -> None:
        self._setup(normalize=normalize, seed=0)
        self.lam = _validate.in_range("lsq: lam", lam, 0.0, math.inf, low_open=True, high_open=True)

    def _extra_params(self) -> dict[str, object]:
        return {"lam": self.lam}

    def state_numel(self, d: int, dv: int) -> int:
        return int(d) * int(d) + int(d) * int(dv)

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> LsqState:
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        gram = self.lam * torch.eye(d, dtype=torch.float32, device=dev).expand(batch, d, d).clone()
        return LsqState(gram, torch.zeros(batch, d, dv, dtype=torch.float32, device=dev))

    def _state(self, state: object) -> LsqState:
        return _validate.state(self.name, state, LsqState)

    def write(self, state: LsqState, k: torch.Tensor, v: torch.Tensor) -> LsqState:
        """Add the chunk's K^T K and K^T V. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns a new state."""
        st = self._state(state)
        k, v = self._inputs(st.cross, k, v)
        kt = k.transpose(1, 2)  # [B, d, t]
        return LsqState(st.gram + kt @ k, st.cross + kt @ v)

    def solution(self, state: LsqState) -> torch.Tensor:
        """S = A^-1 Bm = (K^T K + lam I)^-1 K^T V, float32 ``[B, d, dv]`` (solved in float64)."""
        st = self._state(state)
        S: torch.Tensor = torch.linalg.solve(st.gram.double(), st.cross.double())  # (torch types solve Any)
        return S.float()

    def read(self, state: LsqState, q: torch.Tensor) -> torch.Tensor:
        """q S with S the ridge solution. Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        st = self._state(state)
        B, d = st.cross.shape[:2]
        q = _validate.queries(self.name, q, batch=B, d=d, held=f"state's d = {d} and B = {B}", state=st.cross).float()
        return (unit(q) if self.normalize else q) @ self.solution(st)
