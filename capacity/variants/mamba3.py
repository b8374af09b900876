"""A Mamba-3 (SISO) memory: Mamba2's selective decay with the exponential-trapezoidal update and rotated B and C.

Mamba-3 (Lahoti et al., arXiv 2603.15569) in the toolkit's row convention (B_t the key, C_t the query, x_t the value;
one head, no skip term D, no convolution), with Mamba2's step dt_t = softplus(phi(k_t) . w + bias) and gate
alpha_t = exp(-A dt_t) (``lacapacity.variants.mamba2``):

    S_t = alpha_t S_{t-1} + (1 - lam) dt_t alpha_t kr_{t-1}^T v_{t-1} + lam dt_t kr_t^T v_t
    read r = qr S_n

The exponential-Euler rule of Mamba2 writes the current token only (lam = 1: this memory is then ``mamba2``); the
trapezoidal rule (lam = 1/2, the default) averages the input at the two ends of the step, so each write also adds
the previous token under the current step. Mamba-3 learns lam per token; here it is one number in [0, 1].

Rotation (Mamba-3's complex-valued state, as a data-dependent RoPE on B and C): the channels are paired (2i, 2i + 1;
a last odd channel is not rotated), and pair i, read as a complex number, is multiplied by e^(-i omega_i tau), where
tau = sum_{s <= t} dt_s is the time elapsed (the clock) and omega_i = ``omega`` 10000^(-i / P) over the P pairs
(RoPE's spectrum). The written key kr_t is phi(k_t) turned by the clock after token t, the query qr by the clock of
the read, so a read sees pair s turned by e^(i omega (tau_n - tau_s)), the time elapsed since it was written: Mamba-3's
complex transition exp(dt (-A + i omega)) applied to a complex state. In Mamba-3 the angles are projections of the token; here they are the fixed omega_i
integrated over the data-dependent steps dt. ``omega = 0`` turns the rotation off.

The state: S float32 ``[B, D, dv]``, the previous written key kr_{t-1} ``[B, D]`` and value ``[B, dv]`` that the
next trapezoidal step needs (absent, zero numbers, with lam = 1), and the clock tau float64 ``[B]`` declared bookkeeping
(like a token counter: never rounded, not counted). State numbers D dv (+ D + dv with lam < 1). The write runs token
by token in plain torch (float32); ``tests/variants/test_mamba3.py`` holds it to a float64 complex recurrence.

>>> import torch
>>> from lacapacity import variants, keys
>>> K = keys.make("gaussian", n=12, d=8, seed=0); V = torch.randn(1, 12, 4)
>>> m3, m2 = variants.get("mamba3", lam=1.0, omega=0.0), variants.get("mamba2")
>>> bool(torch.allclose(m3.write(m3.init_state(1, 8, 4), K, V).matrix, m2.write(m2.init_state(1, 8, 4), K, V), atol=1e-7))
True
>>> variants.get("mamba3").state_numel(8, 4), m3.state_numel(8, 4)
(44, 32)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.variants._memory import unit
from lacapacity.variants.mamba2 import _FLOOR, Mamba2


@dataclass
class Mamba3State:
    """``matrix`` S float32 ``[B, D, dv]``; ``key`` the previous written key float32 ``[B, D]`` and ``value``
    ``[B, dv]`` (``[B, 0]`` each with lam = 1); ``clock`` tau = sum of the steps, float64 ``[B]`` (bookkeeping)."""

    matrix: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    clock: torch.Tensor  # bookkeeping (Mamba3 declares it): never rounded, not counted


def rotate(x: torch.Tensor, angle: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """Turn each channel pair (2i, 2i + 1) of x by the angle phi_i = omega_i angle (a last odd channel stays).

    Shapes: x ``[B, T, D]``, angle ``[B, T]`` (float64), omega ``[D // 2]`` (float64) -> float32 ``[B, T, D]``.
    The pair (a, b) becomes (a cos - b sin, a sin + b cos), the complex product (a + ib) e^(i phi).
    """
    P = omega.shape[0]
    phi = angle[..., None] * omega  # [B, T, P]
    c, s = torch.cos(phi).float(), torch.sin(phi).float()
    a, b = x[..., 0 : 2 * P : 2], x[..., 1 : 2 * P : 2]
    out = x.clone()
    out[..., 0 : 2 * P : 2] = a * c - b * s
    out[..., 1 : 2 * P : 2] = a * s + b * c
    return out


class Mamba3(Mamba2):
    """Mamba-3 SISO: exponential-trapezoidal write (``lam`` in [0, 1]) on Mamba2's selective decay, keys and queries
    turned by the elapsed time (``omega`` >= 0); state S ``[B, D, dv]`` (+ the previous key and value)."""

    name = "mamba3"
    mode = "decay"
    _bookkeeping = ("clock",)  # Mamba3State.clock: a clock, not stored numbers
    _family = None  # not Mamba2's: the trapezoidal write and the turned keys leave T24 (a linear read: q R(tau_n) S)

    lam: float = 0.5
    omega: float = 1.0

    def _more(self, *, A: object, dt: object, w_std: object, lam: object, omega: object) -> None:  # type: ignore[override]
        super()._more(A=A, dt=dt, w_std=w_std)
        if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not 0.0 <= lam <= 1.0:
            raise CapacityError(f"mamba3: lam must be a number in [0, 1] (1: Mamba2's Euler rule), got {lam!r}")
        if isinstance(omega, bool) or not isinstance(omega, (int, float)) or not 0.0 <= omega < math.inf:
            raise CapacityError(f"mamba3: omega must be a finite number >= 0 (0: no rotation), got {omega!r}")
        if self.normalize_read:
            raise CapacityError("mamba3: normalize_read is not supported (the rotation turns the normaliser's keys)")
        self.lam, self.omega = float(lam), float(omega)

    @property
    def params(self) -> dict[str, object]:
        return {**super().params, "lam": self.lam, "omega": self.omega}

    def frequencies(self, D: int) -> torch.Tensor:
        """omega_i = omega 10000^(-i / P) for the P = D // 2 channel pairs: float64 ``[P]``."""
        P = D // 2
        return self.omega * 10000.0 ** (-torch.arange(P, dtype=torch.float64) / max(P, 1))

    def _extra(self, D: int, dv: int) -> tuple[int, int]:
        return (D, dv) if self.lam < 1.0 else (0, 0)

    def state_numel(self, d: int, dv: int) -> int:
        D = self.feature.feature_dim(int(d)) if self.feature is not None else int(d)
        eD, edv = self._extra(D, int(dv))
        return D * int(dv) + eD + edv

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> Mamba3State:  # type: ignore[override]
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        D = self.feature.feature_dim(d) if self.feature is not None else d
        eD, edv = self._extra(D, dv)
        return Mamba3State(
            torch.zeros(batch, D, dv, device=dev),
            torch.zeros(batch, eD, device=dev),
            torch.zeros(batch, edv, device=dev),
            torch.zeros(batch, dtype=torch.float64, device=dev),
        )

    def _state(self, state: object) -> Mamba3State:
        return _validate.state("mamba3", state, Mamba3State)

    def write(self, state: Mamba3State, k: torch.Tensor, v: torch.Tensor) -> Mamba3State:  # type: ignore[override]
        """Write the tokens in order. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns a new state."""
        st = self._state(state)
        _validate.tensor("k", k, ndim=3, finite=False)
        _validate.tensor("v", v, ndim=3, finite=False)
        S = st.matrix
        B, D, dv = S.shape
        if k.shape[0] != B or v.shape[0] != B or v.shape[2] != dv or k.shape[1] != v.shape[1]:
            raise CapacityError(
                f"mamba3: shapes do not match: state [B, D, dv] = {list(S.shape)}, k {list(k.shape)}, v {list(v.shape)}"
            )
        _validate.same_device(state=S, k=k, v=v)
        T = k.shape[1]
        if T == 0:
            return st
        phi = self._features(k)  # [B, T, D]
        if phi.shape[2] != D:
            raise CapacityError(f"mamba3: the keys give {phi.shape[2]} features, the state has D = {D}")
        if self.normalize:
            phi = unit(phi.float())
        dt = self.steps(phi)  # [B, T] float32 (normalises again: a no-op on unit rows)
        clock = st.clock[:, None] + torch.cumsum(dt.double(), dim=1)  # tau after each token: [B, T]
        kr = rotate(phi.float(), -clock, self.frequencies(D).to(phi.device))  # turned back by the clock  # [B, T, D]
        gate = torch.exp(-self.A * dt.double()).clamp_min(_FLOOR).float()  # [B, T]
        v = v.float()
        S = S.clone()
        prev_k, prev_v = st.key, st.value  # zeros before the first write: no previous term
        for t in range(T):
            g, step = gate[:, t, None, None], dt[:, t, None, None]
            S = g * S + (self.lam * step) * (kr[:, t, :, None] * v[:, t, None, :])
            if self.lam < 1.0:
                pk = kr[:, t - 1] if t > 0 else prev_k
                pv = v[:, t - 1] if t > 0 else prev_v
                S = S + ((1.0 - self.lam) * step * g) * (pk[:, :, None] * pv[:, None, :])
        if self.lam < 1.0:
            prev_k, prev_v = kr[:, -1].clone(), v[:, -1].clone()
        return Mamba3State(S, prev_k, prev_v, clock[:, -1].clone())

    def read(self, state: Mamba3State, q: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """qr S, qr the query's features turned by the clock. Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        st = self._state(state)
        B = st.matrix.shape[0]
        q = _validate.queries("mamba3", q, batch=B, d=None, held=f"state's B = {B}", state=st.matrix)
        phi = self._features(q).float()
        if phi.shape[2] != st.matrix.shape[1]:
            raise CapacityError(f"mamba3: q gives {phi.shape[2]} features, the state has D = {st.matrix.shape[1]}")
        if self.normalize:
            phi = unit(phi)
        angle = st.clock[:, None].expand(phi.shape[0], phi.shape[1])
        qr = rotate(phi, -angle, self.frequencies(phi.shape[2]).to(phi.device))
        return qr @ st.matrix
