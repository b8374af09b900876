"""Memories that learn at test time: Titans (momentum and weight decay on a linear memory) and TTT-MLP.

Row convention: keys k ``[B, t, d]``, values v ``[B, t, dv]``; each token is one step of gradient descent on the
regression loss l(W; k, v) = 1/2 ||f_W(k) - v||^2 of the memory's map f_W.

titans (Behrouz, Zhong and Mirrokni, "Titans: Learning to Memorize at Test Time", arXiv 2501.00663), a linear memory
f_M(k) = k M ``[d, dv]`` with momentum S (the paper's "surprise") and a forgetting gate:

    S_t = eta S_{t-1} - beta k_t^T (k_t M_{t-1} - v_t)        (momentum eta in [0, 1), step beta in (0, 2))
    M_t = alpha M_{t-1} + S_t                                  (alpha = 1 - the paper's forgetting rate, in (0, 1])

read q M. The state is M and S (2 d dv numbers). The loss here carries a 1/2 and Titans' does not
(l = ||k M - v||^2), so beta = 2 theta for the paper's learning rate theta. With eta = 0 and alpha = 1 it is the delta rule with step beta.
The paper's deep memory (an MLP), its data-dependent gates and the layer norm of fla's ``titans_linear`` are left
out: fla's reference learns the residual v - k through a layer norm, another memory (docs/fla.md).

ttt (Sun et al., "Learning to (Learn at Test Time): RNNs with Expressive Hidden States", arXiv 2407.04620), TTT-MLP
with mini-batches of one token: the state is a two-layer MLP f(x) = gelu(x W1) W2, W1 ``[d, h]``, W2 ``[h, dv]``,
h = ``expand`` d, and each write is one gradient step

    z = k W1,  a = gelu(z),  e = a W2 - v
    W2 <- W2 - (beta / h) a^T e,    W1 <- W1 - (beta / h) k^T ((e W2^T) (.) gelu'(z))

(both gradients at the weights before the step; the step is divided by the hidden width h = expand d, the toolkit's
choice: TTT's code divides its learning rate by the head dimension, which is d here). Read: gelu(q W1) W2, a nonlinear read (``linear_read = False``: T8 does not bind it). W1 starts
as a seeded gaussian matrix with unit-variance entries (the same for every batch item), W2 at zero. TTT's residual
connection and layer norm (which need dv = d) are left out. The state holds d h + h dv numbers.

>>> import torch
>>> from lacapacity import variants, keys
>>> K = keys.make("gaussian", n=12, d=8, seed=0); V = torch.randn(1, 12, 4)
>>> t, dl = variants.get("titans", alpha=1.0, beta=0.5, eta=0.0), variants.get("delta", beta=0.5)
>>> bool(torch.allclose(t.read(t.write(t.init_state(1, 8, 4), K, V), K), dl.read(dl.write(dl.init_state(1, 8, 4), K, V), K), atol=1e-5))
True
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from lacapacity.base import _random, _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.variants._memory import GATE, RATE, Memory, unit
from lacapacity.variants.declares import Declares


@dataclass
class TitansState:
    """``memory`` M float32 ``[B, d, dv]``, ``momentum`` S float32 ``[B, d, dv]``, ``tokens`` written so far."""

    memory: torch.Tensor
    momentum: torch.Tensor
    tokens: int


class Titans(Memory):
    """Titans' linear memory: momentum eta in [0, 1), step beta in (0, 2), keep gate alpha in (0, 1]."""

    name = "titans"
    backends: tuple[str, ...] = ("auto", "torch")

    @property
    def declares(self) -> Declares:
        """A learning state of two d x dv matrices (weights and momentum), read linearly (q M: T8 binds it); the delta
        rule (T12) with no momentum, no forgetting and beta = 1."""
        return Declares(
            linear_read=True,
            additive=False,
            delta_rule=self._delta_rule(),
            state="learning",
            differentiable=True,
            states=2,
        )

    def __init__(
        self, *, alpha: object = 0.99, beta: object = 0.5, eta: float = 0.5, normalize: bool = True, seed: int = 0
    ) -> None:
        self._setup(normalize=normalize, seed=seed, alpha=(alpha, GATE, False), beta=(beta, RATE, False))
        self.eta = _validate.in_range("titans: eta", eta, 0.0, 1.0, low_open=False, high_open=True)

    def _extra_params(self) -> dict[str, object]:
        return {"eta": self.eta}

    def _delta_rule(self) -> bool:
        """True with no momentum (eta = 0), no forgetting (alpha = 1) and beta = 1: the delta rule (T12 holds)."""
        return self.eta == 0.0 and self._constant("alpha", 1.0) and self._constant("beta", 1.0)

    def state_numel(self, d: int, dv: int) -> int:
        return 2 * int(d) * int(dv)

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> TitansState:
        M = super().init_state(batch, d, dv, device=device)
        M = M if isinstance(M, torch.Tensor) else M.matrix
        return TitansState(M, torch.zeros_like(M), 0)

    def _state(self, state: object) -> TitansState:
        return _validate.state("titans", state, TitansState)

    def write(self, state: TitansState, k: torch.Tensor, v: torch.Tensor) -> TitansState:
        """One momentum step per token. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns a new state."""
        st = self._state(state)
        k, v = self._inputs(st.memory, k, v)
        B, T, d = k.shape
        alpha = self._values("alpha", B, st.tokens, T, d, k.device)
        beta = self._values("beta", B, st.tokens, T, d, k.device)
        M, S = st.memory.clone(), st.momentum.clone()
        for t in range(T):
            kt = k[:, t]
            err = (kt[:, :, None] * M).sum(1) - v[:, t]  # k M - v: [B, dv]
            S = self.eta * S - beta[:, t, None, None] * (kt[:, :, None] * err[:, None, :])
            M = alpha[:, t, None, None] * M + S
        return TitansState(M, S, st.tokens + T)

    def read(self, state: TitansState, q: torch.Tensor) -> torch.Tensor:
        """q M. Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        st = self._state(state)
        return super().read(st.memory, q)


@dataclass
class TTTState:
    """The MLP's weights: ``w1`` float32 ``[B, d, h]``, ``w2`` float32 ``[B, h, dv]``; ``tokens`` written so far."""

    w1: torch.Tensor
    w2: torch.Tensor
    tokens: int


_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu(z: torch.Tensor) -> torch.Tensor:
    return 0.5 * z * (1.0 + torch.erf(z * _SQRT1_2))


def _gelu_grad(z: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1.0 + torch.erf(z * _SQRT1_2)) + z * _INV_SQRT_2PI * torch.exp(-0.5 * z * z)


class TTT(Memory):
    """TTT-MLP with one gradient step per token: hidden width ``expand`` d, step ``beta`` / h, beta in (0, 2)."""

    name = "ttt"
    backends: tuple[str, ...] = ("auto", "torch")

    @property
    def declares(self) -> Declares:
        """A learning state (an MLP's weights W1 [d, expand d], W2 [expand d, dv]: 2 expand d x dv matrices at dv =
        d), read through gelu(q W1) W2, a nonlinear read: T8's rank bound does not bind it; no delta rule (T12)."""
        return Declares(
            linear_read=False,
            additive=False,
            delta_rule=False,
            state="learning",
            differentiable=True,
            states=2 * self.expand,
        )

    def __init__(self, *, expand: int = 4, beta: object = 1.0, normalize: bool = True, seed: int = 0) -> None:
        if isinstance(expand, bool) or not isinstance(expand, numbers.Integral) or expand < 1:
            raise CapacityError(f"ttt: expand must be a whole number >= 1 (hidden width expand * d), got {expand!r}")
        self.expand: int = int(expand)
        self._setup(normalize=normalize, seed=seed, beta=(beta, RATE, False))
        self.seed = _random.check_seed("ttt: seed", seed)

    @property
    def params(self) -> dict[str, object]:
        out = super().params
        out.update({"expand": self.expand, "seed": self.seed})  # W1 is drawn from the seed
        return out

    def state_numel(self, d: int, dv: int) -> int:
        h = self.expand * int(d)
        return int(d) * h + h * int(dv)

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> TTTState:
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        h = self.expand * d
        g = _random.generator(self.seed, "variants/ttt/w1")
        w1 = torch.randn(d, h, generator=g, dtype=torch.float64).float().to(dev)
        return TTTState(w1.expand(batch, d, h).clone(), torch.zeros(batch, h, dv, dtype=torch.float32, device=dev), 0)

    def _state(self, state: object) -> TTTState:
        return _validate.state("ttt", state, TTTState)

    def write(self, state: TTTState, k: torch.Tensor, v: torch.Tensor) -> TTTState:
        """One gradient step per token. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns a new state."""
        st = self._state(state)
        _validate.tensor("k", k, ndim=3, finite=False)
        B, d, h = st.w1.shape
        if (
            k.shape[0] != B
            or k.shape[2] != d
            or v.shape[0] != B
            or v.shape[2] != st.w2.shape[2]
            or k.shape[1] != v.shape[1]
        ):
            raise CapacityError(
                f"ttt: shapes do not match: W1 [B, d, h] = {list(st.w1.shape)}, W2 [B, h, dv] = {list(st.w2.shape)}, "
                f"k [B, t, d] = {list(k.shape)}, v [B, t, dv] = {list(v.shape)}"
            )
        k, v = self._inputs(st.w2.new_zeros(B, d, st.w2.shape[2]), k, v)
        T = k.shape[1]
        beta = self._values("beta", B, st.tokens, T, d, k.device) / h
        w1, w2 = st.w1.clone(), st.w2.clone()
        for t in range(T):
            kt = k[:, t]
            z = (kt[:, :, None] * w1).sum(1)  # [B, h]
            a = _gelu(z)
            e = (a[:, :, None] * w2).sum(1) - v[:, t]  # [B, dv]
            dz = (w2 * e[:, None, :]).sum(2) * _gelu_grad(z)  # [B, h]
            lr = beta[:, t, None, None]
            w2 = w2 - lr * (a[:, :, None] * e[:, None, :])
            w1 = w1 - lr * (kt[:, :, None] * dz[:, None, :])
        return TTTState(w1, w2, st.tokens + T)

    def read(self, state: TTTState, q: torch.Tensor) -> torch.Tensor:
        """gelu(q W1) W2. Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        st = self._state(state)
        _validate.tensor("q", q, ndim=3, finite=False)
        if q.shape[0] != st.w1.shape[0] or q.shape[2] != st.w1.shape[1]:
            raise CapacityError(f"ttt: q [B, m, d] = {list(q.shape)} does not match W1 [B, d, h] = {list(st.w1.shape)}")
        _validate.same_device(state=st.w1, q=q)
        q = q.float()
        q = unit(q) if self.normalize else q
        return _gelu(q @ st.w1) @ st.w2
