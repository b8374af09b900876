"""Gated delta rules of 2025-2026 with channel gates, a feedback key, a value-side erase or a preconditioned key.

Row convention: keys k ``[B, t, d]``, values v ``[B, t, dv]``, state S ``[B, d, dv]``, a write adds k^T v, the read
is o = q S. (.) is the elementwise product; Diag(a) S scales row i of S by a_i, S Diag(g) scales column j by g_j.

    gdn2         S = (I - k^T (b (.) k)) Diag(alpha) S + k^T (gamma (.) v)       (GDN-2, arXiv 2605.22791)
    comba        S = alpha S;  S = S + beta k^T (v - (mu k) S)                  (Comba, arXiv 2506.02475)
    gated_oja    S = S Diag(alpha);  S = S + beta (k - v S^T)^T v              (the gated Oja rule)
    precond_gated_delta, precond_kda
                 A = alpha_atk A + beta_atk k (.) k              (a per-key-channel accumulator, [B, d])
                 m = x^(-s),  s = r / (1 + |r|),  r = log(A + eps) - center
                 S = Diag(alpha) S;  S = S + beta (k (.) m)^T (v - k S)         (arXiv 2604.21100)

- ``gdn2``: ``alpha`` decays each key channel, ``beta`` erases along the channel-gated key b (.) k (b in (0, 2)^d),
  ``gamma`` gates the written value per value channel (gamma in (0, 1]^dv). With beta and gamma one scalar it is
  ``kda``; with a scalar alpha as well, ``gated_delta``.
- ``comba``: the erase reads the state along a feedback key p = mu k (Comba's p = k sigmoid(b), a per-head mu in
  (0, 1]), a scalar-plus-low-rank transition alpha (I - beta k^T p). With mu = 1 it is ``gated_delta``. Comba's output
  correction (o = (q - d k_t) S, which needs the current token's key) is not part of a memory read.
- ``gated_oja``: the erase runs along the value: the state is corrected so that the value v reads back the key
  (v S^T -> k), a delta rule on S^T; ``alpha`` gates each value channel. The last key does not read back (T12 is n/a).
- ``precond_gated_delta`` (scalar gate) and ``precond_kda`` (per-key-channel gate): the delta rule's written key is
  preconditioned channel by channel by m in (1/x, x), from an accumulator A of the squared keys (fla's "ATK"); the
  erase still reads k S. The state is S and A (d dv + d numbers).

Gates (``alpha``, ``alpha_atk``) lie in (0, 1], steps ``beta`` in (0, 2), ``gamma`` in (0, 1], ``mu`` in (0, 1],
``beta_atk`` > 0; each is a number, ``("uniform", low, high)`` drawn per token (and channel) from ``seed``, or for a
per-channel one a sequence of one value per channel. ``normalize=True`` (the default) L2-normalises keys and queries.
The writes run token by token in plain torch (float32); ``tests/variants/test_memories_2026.py`` holds them to fla-core
0.6.0's plain-torch references (``naive_recurrent_gdn2``, ``naive_recurrent_comba``,
``naive_recurrent_precond_gated_delta_rule``, ``naive_recurrent_precond_kda``) and the gated Oja rule, which fla
ships as Triton kernels only, to a recurrence written in the test.

>>> import torch
>>> from lacapacity import variants, keys
>>> K = keys.make("gaussian", n=20, d=8, seed=0); V = torch.randn(1, 20, 4)
>>> a, b = variants.get("gdn2", alpha=0.9, beta=0.7, gamma=0.7), variants.get("gated_delta", alpha=0.9, beta=0.7)
>>> bool(torch.allclose(a.write(a.init_state(1, 8, 4), K, V), b.write(b.init_state(1, 8, 4), K, V), atol=1e-5))
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.variants._memory import GATE, POSITIVE, RATE, Memory
from lacapacity.variants.recurrent import State


class _Gated(Memory):
    """A token-by-token plain-torch write on a ``[B, d, dv]`` matrix (a TokenState when a parameter is drawn)."""

    backends: tuple[str, ...] = ("auto", "torch")

    def _step(
        self, S: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: dict[str, torch.Tensor], t: int
    ) -> torch.Tensor:
        """One token: S [B, d, dv], k [B, d], v [B, dv]; p: the parameters' draws for the write's tokens."""
        raise NotImplementedError

    def _draws(self, B: int, start: int, T: int, d: int, dv: int, device: Device) -> dict[str, torch.Tensor]:
        """Each parameter for tokens start .. start + T - 1: float32 ``[B, T]``, or ``[B, T, d]`` (``dv``) per channel."""
        return {}

    def write(self, state: State, k: torch.Tensor, v: torch.Tensor) -> State:
        """Write the tokens in order. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns the new state."""
        S, start = self._matrix(state)
        k, v = self._inputs(S, k, v)
        B, T, d = k.shape
        p = self._draws(B, start, T, d, v.shape[2], S.device)
        S = S.clone()
        for t in range(T):
            S = self._step(S, k[:, t], v[:, t], p, t)
        return self._wrap(S, start + T)


def _kS(k: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """k S for rows k [B, d] and S [B, d, dv] -> [B, dv], summed elementwise (each item alone, whatever the batch)."""
    return (k[:, :, None] * S).sum(1)


class GDN2(_Gated):
    """GDN-2: alpha in (0, 1]^d decays key channels, beta in (0, 2)^d gates the erase key, gamma in (0, 1]^dv the
    written value; float32 state ``[B, d, dv]``."""

    name = "gdn2"

    def __init__(
        self,
        *,
        alpha: object = 0.95,
        beta: object = 1.0,
        gamma: object = 1.0,
        normalize: bool = True,
        seed: int = 0,
        backend: str = "auto",
    ) -> None:
        self._setup(
            normalize=normalize,
            seed=seed,
            backend=backend,
            alpha=(alpha, GATE, True),
            beta=(beta, RATE, True),
            gamma=(gamma, GATE, True),
        )

    def _delta_rule(self) -> bool:
        """True when beta = gamma = 1 for every channel: the last unit key then reads back exactly (T12)."""
        return self._constant("beta", 1.0) and self._constant("gamma", 1.0)

    def _draws(self, B: int, start: int, T: int, d: int, dv: int, device: Device) -> dict[str, torch.Tensor]:
        return {
            "alpha": self._values("alpha", B, start, T, d, device),
            "beta": self._values("beta", B, start, T, d, device),
            "gamma": self._values("gamma", B, start, T, dv, device),
        }

    def _step(
        self, S: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: dict[str, torch.Tensor], t: int
    ) -> torch.Tensor:
        S = p["alpha"][:, t, :, None] * S
        erase = _kS(p["beta"][:, t] * k, S)  # (b (.) k) S: [B, dv]
        return S + k[:, :, None] * (p["gamma"][:, t] * v - erase)[:, None, :]


class Comba(_Gated):
    """Comba: S = alpha S + beta k^T (v - mu k S); alpha in (0, 1], beta in (0, 2), mu in (0, 1]; state ``[B, d, dv]``."""

    name = "comba"

    def __init__(
        self,
        *,
        alpha: object = 0.95,
        beta: object = 1.0,
        mu: object = 0.5,
        normalize: bool = True,
        seed: int = 0,
        backend: str = "auto",
    ) -> None:
        self._setup(
            normalize=normalize,
            seed=seed,
            backend=backend,
            alpha=(alpha, GATE, False),
            beta=(beta, RATE, False),
            mu=(mu, GATE, False),
        )

    def _delta_rule(self) -> bool:
        """True for mu = 1 and beta = 1: the gated delta rule with beta = 1 (T12 holds)."""
        return self._constant("mu", 1.0) and self._constant("beta", 1.0)

    def _draws(self, B: int, start: int, T: int, d: int, dv: int, device: Device) -> dict[str, torch.Tensor]:
        return {p: self._values(p, B, start, T, d, device) for p in ("alpha", "beta", "mu")}

    def _step(
        self, S: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: dict[str, torch.Tensor], t: int
    ) -> torch.Tensor:
        S = p["alpha"][:, t, None, None] * S
        err = p["beta"][:, t, None] * (v - _kS(p["mu"][:, t, None] * k, S))  # beta (v - p S): [B, dv]
        return S + k[:, :, None] * err[:, None, :]


class GatedOja(_Gated):
    """The gated Oja rule: S = S Diag(alpha) + beta (k - v S^T)^T v, alpha in (0, 1]^dv, beta in (0, 2)."""

    name = "gated_oja"
    # not a delta rule (T12): the erase runs along the value: v reads back k, not k reads back v

    def __init__(
        self, *, alpha: object = 0.95, beta: object = 1.0, normalize: bool = True, seed: int = 0, backend: str = "auto"
    ) -> None:
        self._setup(
            normalize=normalize, seed=seed, backend=backend, alpha=(alpha, GATE, True), beta=(beta, RATE, False)
        )

    def _draws(self, B: int, start: int, T: int, d: int, dv: int, device: Device) -> dict[str, torch.Tensor]:
        return {
            "alpha": self._values("alpha", B, start, T, dv, device),
            "beta": self._values("beta", B, start, T, d, device),
        }

    def _step(
        self, S: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: dict[str, torch.Tensor], t: int
    ) -> torch.Tensor:
        S = S * p["alpha"][:, t, None, :]
        back = (S * v[:, None, :]).sum(2)  # v S^T: [B, d]
        return S + (p["beta"][:, t, None] * (k - back))[:, :, None] * v[:, None, :]


@dataclass
class PrecondState:
    """``matrix`` S float32 ``[B, d, dv]``, ``accum`` A float32 ``[B, d]`` (squared keys, gated), ``tokens`` written."""

    matrix: torch.Tensor
    accum: torch.Tensor
    tokens: int


class _Precond(Memory):
    """The preconditioned gated delta rule; ``gate_per_channel`` picks KDA's per-key-channel gate."""

    gate_per_channel = False
    # not a delta rule (T12): the written key k (.) m is not k: the last key reads back only where k . (k (.) m) = 1
    backends: tuple[str, ...] = ("auto", "torch")

    def __init__(
        self,
        *,
        alpha: object = 0.95,
        beta: object = 1.0,
        alpha_atk: object = 0.95,
        beta_atk: object = 1.0,
        x: float = 1.5,
        center: float = -0.2,
        eps: float = 1e-6,
        normalize: bool = True,
        seed: int = 0,
        backend: str = "auto",
    ) -> None:
        self._setup(
            normalize=normalize,
            seed=seed,
            backend=backend,
            alpha=(alpha, GATE, self.gate_per_channel),
            beta=(beta, RATE, False),
            alpha_atk=(alpha_atk, GATE, False),
            beta_atk=(beta_atk, POSITIVE, False),
        )
        self.x = _validate.in_range(f"{self.name}: x", x, 1.0, math.inf, low_open=False, high_open=True)
        if isinstance(center, bool) or not isinstance(center, (int, float)) or not math.isfinite(center):
            raise CapacityError(f"{self.name}: center must be a finite number (fla's log_atk_scale), got {center!r}")
        self.center = float(center)
        self.eps = _validate.in_range(f"{self.name}: eps", eps, 0.0, math.inf, low_open=True, high_open=True)

    def _extra_params(self) -> dict[str, object]:
        return {"x": self.x, "center": self.center, "eps": self.eps}

    def state_numel(self, d: int, dv: int) -> int:
        return int(d) * int(dv) + int(d)

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> PrecondState:
        S = super().init_state(batch, d, dv, device=device)
        S = S.matrix if not isinstance(S, torch.Tensor) else S
        return PrecondState(S, torch.zeros(S.shape[0], S.shape[1], dtype=torch.float32, device=S.device), 0)

    def _state(self, state: object) -> PrecondState:
        return _validate.state(self.name, state, PrecondState)

    def write(self, state: PrecondState, k: torch.Tensor, v: torch.Tensor) -> PrecondState:
        """Write the tokens in order. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns a new state."""
        st = self._state(state)
        k, v = self._inputs(st.matrix, k, v)
        B, T, d = k.shape
        dev = k.device
        alpha, beta = self._values("alpha", B, st.tokens, T, d, dev), self._values("beta", B, st.tokens, T, d, dev)
        ga, ba = self._values("alpha_atk", B, st.tokens, T, d, dev), self._values("beta_atk", B, st.tokens, T, d, dev)
        if not self.gate_per_channel:
            alpha = alpha[..., None].expand(B, T, d)
        S, A = st.matrix.clone(), st.accum.clone()
        logx = math.log(self.x)
        for t in range(T):
            kt = k[:, t]
            A = ga[:, t, None] * A + ba[:, t, None] * kt * kt
            r = torch.log(A + self.eps) - self.center
            m = torch.exp(-logx * (r / (1.0 + r.abs())))  # in (1/x, x)
            S = alpha[:, t, :, None] * S
            err = beta[:, t, None] * (v[:, t] - _kS(kt, S))
            S = S + (kt * m)[:, :, None] * err[:, None, :]
        return PrecondState(S, A, st.tokens + T)

    def read(self, state: PrecondState, q: torch.Tensor) -> torch.Tensor:
        """q S. Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        return self._read_matrix(self._state(state).matrix, q)


class PrecondGatedDelta(_Precond):
    """The preconditioned gated delta rule: one gate alpha in (0, 1] per token; state S ``[B, d, dv]`` and A ``[B, d]``."""

    name = "precond_gated_delta"


class PrecondKDA(_Precond):
    """Preconditioned KDA: a gate alpha in (0, 1]^d per key channel; state S ``[B, d, dv]`` and A ``[B, d]``."""

    name = "precond_kda"
    gate_per_channel = True
