"""Memories that solve a regression: Mesa's gated ridge regression and Atlas's Omega rule over the last c pairs.

Row convention: keys k ``[B, t, d]``, values v ``[B, t, dv]``, read o = q S for a ``[d, dv]`` (``[D, dv]``) map S.

mesa (von Oswald et al., the Mesa layer; fla ``mesa_net``), online ridge regression with forgetting:

    G_t = alpha_t G_{t-1} + beta_t k_t^T k_t,   C_t = alpha_t C_{t-1} + beta_t k_t^T v_t,   read q (G_n + lam I)^-1 C_n

solved exactly (float64, ``torch.linalg.solve``) at every read: fla's ``naive_mesa_net_exact``, whose Mesa layer
reaches it by conjugate gradient. The ridge lam is added at the read, so it does not fade with the gate. With
alpha = beta = 1 it is ``lsq`` (the same normal equations, K^T K + lam I, without forgetting). State: G ``[B, d, d]``
and C ``[B, d, dv]``, d d + d dv numbers, and a token counter (for per-token draws).

gka (Peng et al., Gated KalmaNet, arXiv 2511.21016), the same fading regression with an adaptive ridge and an
iterative solve:

    lam_t = eta |G_t|_F,   read q X,   X = (G_n + lam_n I)^-1 C_n by ``iterations`` steps of Chebyshev iteration

The ridge grows with the Gram matrix so that the condition number stays at most (1 + eta) / eta (the eigenvalues of
G + lam I lie in [lam, lam + |G|_F], the interval the iteration is given); ``iterations=None`` solves exactly (the
reference). The paper's regulariser is input-dependent through a learnt gate; here it is eta times the Frobenius
norm, the form that bounds the condition number as the paper's abstract describes. A floor of 1e-6 keeps an empty
memory's ridge positive.

omega (Behrouz et al., Atlas, arXiv 2505.23735: the Omega rule), one gradient step per token on the loss over the
last ``context`` = c pairs, with a feature map phi (Atlas's polynomial map: ``feature="taylor2"`` for degree 2):

    S_t = alpha_t S_{t-1} + beta_t sum_{i = t-c+1 .. t} phi(k_i)^T (v_i - phi(k_i) S_{t-1})

With c = 1 and alpha = 1 it is the delta rule (``delta``) on phi(k). The paper's per-pair weights gamma_i are 1 here.
State: S ``[B, D, dv]`` (D = feature_dim(d)) and the last c - 1 keys and values ``[B, c-1, d]``, ``[B, c-1, dv]``:
D dv + (c - 1)(d + dv) numbers, and a token counter.

Gates ``alpha`` lie in (0, 1], steps ``beta`` in (0, 2) (omega) or > 0 (mesa's write weight); each a number or
``("uniform", low, high)`` drawn per token from ``seed``. Both write token by token in plain torch, differentiable.
``tests/variants/test_solvers.py`` holds mesa to fla's reference and omega to a float64 loop.

>>> import torch
>>> from lacapacity import variants, keys
>>> K = keys.make("gaussian", n=12, d=8, seed=0); V = torch.randn(1, 12, 4)
>>> om, dl = variants.get("omega", context=1, beta=0.5), variants.get("delta", beta=0.5)
>>> bool(torch.allclose(om.write(om.init_state(1, 8, 4), K, V).matrix, dl.write(dl.init_state(1, 8, 4), K, V), atol=1e-6))
True
>>> variants.get("omega", context=4).state_numel(8, 4), variants.get("gka").state_numel(8, 4)
(68, 96)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.inputs import features
from lacapacity.variants._memory import GATE, POSITIVE, RATE, Memory, unit
from lacapacity.variants.lsq import LSQ, LsqState


@dataclass
class MesaState(LsqState):
    """``gram`` G float32 ``[B, d, d]`` (without the ridge), ``cross`` C float32 ``[B, d, dv]``, ``tokens`` written."""

    tokens: int = 0


class Mesa(LSQ):
    """Gated ridge regression solved exactly at each read: gate ``alpha`` in (0, 1], write weight ``beta`` > 0, ridge
    ``lam`` > 0; state G ``[B, d, d]`` and C ``[B, d, dv]``. The read is ``lsq``'s, q S with S the solution."""

    name = "mesa"
    backends: tuple[str, ...] = ("auto", "torch")

    def __init__(
        self,
        *,
        lam: float = 1e-3,
        alpha: object = 1.0,
        beta: object = 1.0,
        normalize: bool = False,
        seed: int = 0,
    ) -> None:
        self._setup(normalize=normalize, seed=seed, alpha=(alpha, GATE, False), beta=(beta, POSITIVE, False))
        self.lam = _validate.in_range(f"{self.name}: lam", lam, 0.0, math.inf, low_open=True, high_open=True)

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> MesaState:
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        return MesaState(torch.zeros(batch, d, d, device=dev), torch.zeros(batch, d, dv, device=dev), 0)

    def _state(self, state: object) -> MesaState:
        return _validate.state(self.name, state, MesaState)

    def write(self, state: LsqState, k: torch.Tensor, v: torch.Tensor) -> MesaState:
        """Fade and add the tokens' weighted k^T k and k^T v. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``."""
        st = self._state(state)
        k, v = self._inputs(st.cross, k, v)
        B, T, d = k.shape
        alpha = self._values("alpha", B, st.tokens, T, d, k.device)  # [B, T]
        beta = self._values("beta", B, st.tokens, T, d, k.device)
        G, C = st.gram, st.cross
        for t in range(T):
            kt = k[:, t]
            G = alpha[:, t, None, None] * G + beta[:, t, None, None] * (kt[:, :, None] * kt[:, None, :])
            C = alpha[:, t, None, None] * C + beta[:, t, None, None] * (kt[:, :, None] * v[:, t, None, :])
        return MesaState(G, C, st.tokens + T)

    def solution(self, state: LsqState) -> torch.Tensor:
        """S = (G + lam I)^-1 C, float32 ``[B, d, dv]`` (solved in float64)."""
        st = self._state(state)
        G = st.gram.double() + self.lam * torch.eye(st.gram.shape[1], dtype=torch.float64, device=st.gram.device)
        S: torch.Tensor = torch.linalg.solve(G, st.cross.double())  # (torch types solve Any)
        return S.float()


def chebyshev(A: torch.Tensor, b: torch.Tensor, low: torch.Tensor, high: torch.Tensor, steps: int) -> torch.Tensor:
    """x ~ A^-1 b by ``steps`` steps of Chebyshev iteration from x = 0, for symmetric A with eigenvalues in
    [low, high]. Shapes: A ``[B, d, d]``, b ``[B, d, dv]``, low and high ``[B]`` (float64 throughout) -> ``[B, d, dv]``.
    The A-norm error after k steps is at most 2 ((sqrt(kappa) - 1) / (sqrt(kappa) + 1))^k times the first,
    kappa = high / low."""
    centre, half = ((high + low) / 2)[:, None, None], ((high - low) / 2)[:, None, None]
    x, r = torch.zeros_like(b), b.clone()
    p, a = torch.zeros_like(b), torch.zeros_like(centre)
    for i in range(steps):
        if i == 0:
            p, a = r.clone(), 1.0 / centre
        else:
            w = 0.5 * (half * a) ** 2 if i == 1 else (half * a / 2) ** 2
            a = 1.0 / (centre - w / a)
            p = r + w * p
        x = x + a * p
        r = b - A @ x
    return x


class GKA(Mesa):
    """Gated KalmaNet: Mesa's faded G and C, read through the ridge lam = eta |G|_F by ``iterations`` Chebyshev
    steps (None: the exact solve); state G ``[B, d, d]`` and C ``[B, d, dv]``."""

    name = "gka"
    _FLOOR = 1e-6

    def __init__(
        self,
        *,
        eta: float = 0.05,
        iterations: int | None = 30,
        alpha: object = 1.0,
        beta: object = 1.0,
        normalize: bool = False,
        seed: int = 0,
    ) -> None:
        super().__init__(lam=self._FLOOR, alpha=alpha, beta=beta, normalize=normalize, seed=seed)
        self.eta = _validate.in_range("gka: eta", eta, 0.0, math.inf, low_open=True, high_open=True)
        self.iterations = None if iterations is None else _validate.positive_int("gka: iterations", iterations)

    def _extra_params(self) -> dict[str, object]:
        return {"eta": self.eta, "iterations": self.iterations}

    def ridge(self, state: LsqState) -> torch.Tensor:
        """lam = max(eta |G|_F, 1e-6) per batch item: float64 ``[B]``."""
        G = self._state(state).gram.double()
        norm: torch.Tensor = torch.linalg.matrix_norm(G)  # (torch types matrix_norm Any)
        return (self.eta * norm).clamp_min(self._FLOOR)

    def solution(self, state: LsqState) -> torch.Tensor:
        """X = (G + lam I)^-1 C by Chebyshev iteration (exactly with ``iterations=None``): float32 ``[B, d, dv]``."""
        st = self._state(state)
        G, lam = st.gram.double(), self.ridge(st)
        A = G + lam[:, None, None] * torch.eye(G.shape[1], dtype=torch.float64, device=G.device)
        if self.iterations is None:
            X: torch.Tensor = torch.linalg.solve(A, st.cross.double())  # (torch types solve Any)
        else:
            X = chebyshev(A, st.cross.double(), lam, lam + torch.linalg.matrix_norm(G), self.iterations)
        return X.float()


@dataclass
class OmegaState:
    """``matrix`` S float32 ``[B, D, dv]``; the last c - 1 ``keys`` float32 ``[B, c-1, d]`` (normalised if the memory
    normalises) and ``values`` ``[B, c-1, dv]``, oldest first; ``tokens`` written."""

    matrix: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    tokens: int


class Omega(Memory):
    """Atlas's Omega rule: one gradient step per token on the last ``context`` pairs' loss, gate ``alpha``, step
    ``beta``, an optional feature map ``feature`` (its parameters alongside); state S ``[B, D, dv]`` + c - 1 pairs."""

    name = "omega"
    backends: tuple[str, ...] = ("auto", "torch")

    def __init__(
        self,
        *,
        context: int = 4,
        alpha: object = 1.0,
        beta: object = 0.5,
        feature: str | None = None,
        normalize: bool = True,
        seed: int = 0,
        **feature_params: object,
    ) -> None:
        self.context = _validate.positive_int("omega: context", context)
        self._setup(normalize=normalize, seed=seed, alpha=(alpha, GATE, False), beta=(beta, RATE, False))
        if feature is None and feature_params:
            raise CapacityError(
                f"variant 'omega' got unknown parameter(s) {', '.join(sorted(feature_params))}; allowed: context, "
                "alpha, beta, feature, normalize, seed (and a feature map's own parameters with feature=...)"
            )
        try:
            self.feature = None if feature is None else features.get(feature, **feature_params)
        except CapacityError as exc:
            raise CapacityError(f"omega: {exc}") from None

    def _extra_params(self) -> dict[str, object]:
        out: dict[str, object] = {"context": self.context}
        if self.feature is not None:
            out["feature"] = self.feature.name
            out.update(self.feature.params)
        return out

    def _delta_rule(self) -> bool:
        """True for c = 1, alpha = 1, beta = 1 and no feature map: the delta rule (T12 holds)."""
        return (
            self.context == 1 and self.feature is None and self._constant("alpha", 1.0) and self._constant("beta", 1.0)
        )

    def feature_dim(self, d: int) -> int:
        return int(d) if self.feature is None else self.feature.feature_dim(int(d))

    def state_numel(self, d: int, dv: int) -> int:
        return self.feature_dim(d) * int(dv) + (self.context - 1) * (int(d) + int(dv))

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> OmegaState:
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        c = self.context - 1
        return OmegaState(
            torch.zeros(batch, self.feature_dim(d), dv, device=dev),
            torch.zeros(batch, c, d, device=dev),
            torch.zeros(batch, c, dv, device=dev),
            0,
        )

    def _state(self, state: object) -> OmegaState:
        return _validate.state("omega", state, OmegaState)

    def _phi(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.feature is None else self.feature(x)

    def write(self, state: OmegaState, k: torch.Tensor, v: torch.Tensor) -> OmegaState:
        """One step per token on the last c pairs. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns a new state."""
        st = self._state(state)
        _validate.tensor("k", k, ndim=3, finite=False)
        B, D, dv = st.matrix.shape
        d = st.keys.shape[2]
        if k.shape[0] != B or k.shape[2] != d:
            raise CapacityError(f"omega: k [B, t, d] = {list(k.shape)} does not match the state's B = {B}, d = {d}")
        k, v = self._inputs(torch.empty(B, d, dv, device=st.matrix.device), k, v)
        T = k.shape[1]
        alpha = self._values("alpha", B, st.tokens, T, d, k.device)  # [B, T]
        beta = self._values("beta", B, st.tokens, T, d, k.device)
        n0 = min(st.tokens, self.context - 1)  # pairs of the buffer written so far (the rest are empty)
        K = torch.cat([st.keys[:, st.keys.shape[1] - n0 :], k], dim=1)  # [B, n0 + T, d]
        V = torch.cat([st.values[:, st.values.shape[1] - n0 :], v], dim=1)
        P = self._phi(K)  # [B, n0 + T, D]
        S = st.matrix
        for t in range(T):
            lo, hi = max(0, n0 + t - self.context + 1), n0 + t + 1
            p, vv = P[:, lo:hi], V[:, lo:hi]  # [B, c', D], [B, c', dv]
            err = vv - p @ S  # [B, c', dv]
            S = alpha[:, t, None, None] * S + beta[:, t, None, None] * (p.transpose(1, 2) @ err)
        c = self.context - 1
        keep_k, keep_v = K[:, K.shape[1] - min(c, K.shape[1]) :], V[:, V.shape[1] - min(c, V.shape[1]) :]
        pad = c - keep_k.shape[1]  # fewer than c - 1 pairs written so far: zeros in front (never read)
        keep_k = torch.cat([torch.zeros(B, pad, d, device=k.device), keep_k], dim=1)
        keep_v = torch.cat([torch.zeros(B, pad, dv, device=k.device), keep_v], dim=1)
        return OmegaState(S, keep_k, keep_v, st.tokens + T)

    def read(self, state: OmegaState, q: torch.Tensor) -> torch.Tensor:
        """phi(q) S. Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        st = self._state(state)
        B, d = st.keys.shape[0], st.keys.shape[2]
        q = _validate.queries("omega", q, batch=B, d=d, held=f"state's B = {B}, d = {d}", state=st.matrix).float()
        return self._phi(unit(q) if self.normalize else q) @ st.matrix
