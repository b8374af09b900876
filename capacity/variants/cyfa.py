"""Cyclic Flow Attention (CyFA; Chen, Yang and Hu, arXiv 2609.36259): key and value slots indexed by relative time,
advanced by a clock before each write and read by a softmax over the slots.

Row convention: keys k ``[B, t, d]``, values v ``[B, t, dv]``, a read o ``[B, m, dv]`` for queries q ``[B, m, d]``.
In relative time the state is P slots of keys K ``[P, d]`` and of values V ``[P, dv]`` (P = ``slots``, odd); per
token, a transport by the clock step delta_t, a forget gate alpha_t and a write to the age-zero slot:

    K_t = alpha_t Sh(delta_t) K_{t-1} + beta_t e_0 k_t^T,     V_t = alpha_t Sh(delta_t) V_{t-1} + beta_t e_0 v_t^T
    o   = (R V_n)^T softmax(scale R K_n q)

where Sh(delta)[r, s] = D(r - s - delta) is the band-limited cyclic shift by delta slots, D(x) = sin(pi x) /
(P sin(pi x / P)) the normalised Dirichlet kernel of period P (D(0) = 1, and D = 0 at every other whole number), and
R ``[P, P]`` the readout that mixes slots before the softmax (``readout``: None is the identity; CyFA learns it).
With a whole clock step the shift moves every pair by exactly delta slots, and slot r holds the pairs of age r mod P:
with delta = 1, alpha = 1 and n = P writes the read is sliding-window attention over the last P pairs exactly; for
n < P the P - n empty slots add exp(0) to the softmax's normaliser; for n > P older pairs add onto the slot of their
age mod P (weighted alpha^age). A fractional step (CyFA's learnt delta in (0, 1)) writes pairs between slots,
and reading them back interpolates with the Dirichlet kernel: the history is blurred.

The state is kept as fla's ``naive_recurrent_cyfa`` keeps it, in absolute-clock coordinates: the Fourier coefficients
of the slots turned back by the clock lambda_t = sum of the steps, so that the transition is the scalar gate alone:

    hk = alpha_t hk + beta_t k_t a(lambda_t)^T,   hv = alpha_t hv + beta_t a(lambda_t) v_t^T,   a(lambda) = U(-lambda) b

with b = Phi^T e_0 and Phi ``[P, P]`` the real orthonormal Fourier basis of period P (a constant column, then a cosine
and a sine column for each frequency p = 1 .. (P - 1) / 2), U(lambda) turning frequency p's pair by 2 pi p lambda / P;
the read is o = softmax(scale R Phi U(lambda_n) hk^T q)^T R Phi U(lambda_n) hv. fla stores P + 1 columns (``num_slots``
even, one column always zero); this memory keeps the P that hold numbers.

Parameters: ``slots`` P (odd, 63), ``alpha`` in (0, 1] (1.0), ``beta`` > 0 (1.0) and ``delta`` > 0 (1.0), each a number or
``("uniform", low, high)`` drawn per token from ``seed``; ``readout`` (None or a P x P nested list); ``scale`` > 0 (None:
sqrt(d), which with unit keys is fla's RMS-normalised q and k at its default d^-1/2); ``normalize`` (True) L2-normalises
keys and queries. State hk ``[B, d, P]`` and hv ``[B, P, dv]`` float32, P (d + dv) numbers (as many as ``swa`` with a
window of P), and the clock lambda float64 ``[B]`` (bookkeeping: never rounded, not counted). The write is
vectorised over the tokens in plain torch, differentiable. ``tests/variants/test_cyfa.py`` holds it to fla's
``naive_recurrent_cyfa`` and to a float64 loop in relative time written from the Dirichlet kernel's closed form.

>>> import torch
>>> from lacapacity import variants, keys
>>> mem = variants.get("cyfa", slots=7, scale=50.0)
>>> K = keys.make("gaussian", n=7, d=16, seed=0); V = torch.randn(1, 7, 4)
>>> st = mem.write(mem.init_state(1, 16, 4), K, V)
>>> win = variants.get("swa", window=7, scale=50.0)
>>> bool(torch.allclose(mem.read(st, K), win.read(win.write(win.init_state(1, 16, 4), K, V), K), atol=1e-5))
True
>>> mem.state_numel(16, 4)
140
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.variants._memory import GATE, POSITIVE, unit
from lacapacity.variants._params import Param
from lacapacity.variants.declares import Declares


@dataclass
class CyFAState:
    """``keys`` hk float32 ``[B, d, P]``, ``values`` hv float32 ``[B, P, dv]``, ``clock`` lambda float64 ``[B]``
    (bookkeeping), ``tokens`` the count written (the per-token draws' position)."""

    keys: torch.Tensor
    values: torch.Tensor
    clock: torch.Tensor  # bookkeeping (CyFA declares it): never rounded, not counted
    tokens: int = 0


def _pairs(P: int) -> torch.Tensor:
    """The frequency p of each of the P columns: 0, then 1, 1, 2, 2, ... (a cosine and a sine column each)."""
    return torch.cat(
        [torch.zeros(1, dtype=torch.float64), torch.arange(1, (P + 1) // 2, dtype=torch.float64).repeat_interleave(2)]
    )


def basis(P: int) -> torch.Tensor:
    """Phi float64 ``[P, P]``: row r is the orthonormal Fourier basis of period P at position r; column 0 is
    P^-1/2, columns 2p - 1 and 2p are sqrt(2 / P) cos(2 pi p r / P) and sqrt(2 / P) sin(2 pi p r / P)."""
    r = torch.arange(P, dtype=torch.float64)[:, None]
    p = _pairs(P)[None, :]
    angle = 2 * math.pi * r * p / P
    is_sin = torch.arange(P) % 2 == 0  # columns 2, 4, ... (column 0 is the constant)
    is_sin[0] = False
    c = torch.where(p == 0, P**-0.5, (2.0 / P) ** 0.5)
    return c * torch.where(is_sin[None, :], torch.sin(angle), torch.cos(angle))


class CyFA:
    """Cyclic Flow Attention: P relative-time key and value slots, transported by a clock, read by a softmax over the
    slots; state hk ``[B, d, P]``, hv ``[B, P, dv]`` (P (d + dv) numbers) and a float64 clock."""

    name = "cyfa"
    # a softmax read (T8 does not bind it), neither additive nor a delta rule; the clock is bookkeeping
    declares = Declares(
        linear_read=False, additive=False, delta_rule=False, differentiable=True, bookkeeping=("clock",)
    )

    def __init__(
        self,
        *,
        slots: int = 63,
        alpha: object = 1.0,
        beta: object = 1.0,
        delta: object = 1.0,
        readout: object = None,
        scale: float | None = None,
        normalize: bool = True,
        seed: int = 0,
    ) -> None:
        self.slots = _validate.positive_int(f"{self.name}: slots", slots)
        if self.slots % 2 == 0:
            raise CapacityError(
                f"{self.name}: slots must be odd (a constant and a cosine-sine pair per frequency; fla's num_slots is "
                f"slots + 1), got {slots!r}"
            )
        if scale is not None:
            scale = _validate.in_range(f"{self.name}: scale", scale, 0.0, math.inf, low_open=True, high_open=True)
        if not isinstance(normalize, bool):
            raise CapacityError(f"{self.name}: normalize must be True or False, got {normalize!r}")
        self.scale, self.normalize = scale, normalize
        self.seed = _validate.positive_int(f"{self.name}: seed", seed, minimum=0)
        self._params = {
            "alpha": Param(self.name, "alpha", alpha, per_channel=False, **GATE),
            "beta": Param(self.name, "beta", beta, per_channel=False, **POSITIVE),
            "delta": Param(self.name, "delta", delta, per_channel=False, **POSITIVE),
        }
        self.readout = self._readout(readout)

    def _readout(self, readout: object) -> torch.Tensor | None:
        if readout is None:
            return None
        try:
            R = torch.as_tensor(readout, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            raise CapacityError(
                f"{self.name}: readout must be None or a P x P nested list of numbers, got {readout!r}"
            ) from None
        if R.shape != (self.slots, self.slots) or not bool(torch.isfinite(R).all()):
            raise CapacityError(
                f"{self.name}: readout must be a finite {self.slots} x {self.slots} matrix (slots x slots), "
                f"got shape {list(R.shape)}"
            )
        return R

    @property
    def params(self) -> dict[str, object]:
        """The parameters; ``variants.get("cyfa", **self.params)`` rebuilds the memory."""
        out: dict[str, object] = {"slots": self.slots, **{k: p.spec() for k, p in self._params.items()}}
        out.update(
            readout=None if self.readout is None else self.readout.tolist(), scale=self.scale, normalize=self.normalize
        )
        if any(p.drawn for p in self._params.values()):
            out["seed"] = self.seed
        return out

    def __repr__(self) -> str:
        return f"variants.get({self.name!r}" + "".join(f", {k}={v!r}" for k, v in self.params.items()) + ")"

    def state_numel(self, d: int, dv: int) -> int:
        """P (d + dv): the key and value slots (the clock is bookkeeping)."""
        return self.slots * (int(d) + int(dv))

    def table(self) -> torch.Tensor:
        """R Phi float64 ``[P, P]``: the slot positions' readout of the Fourier coefficients (fla's readout table)."""
        Phi = basis(self.slots)
        return Phi if self.readout is None else self.readout @ Phi

    # ------------------------------------------------------------------ the protocol

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> CyFAState:
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        P = self.slots
        return CyFAState(
            torch.zeros(batch, d, P, device=dev),
            torch.zeros(batch, P, dv, device=dev),
            torch.zeros(batch, dtype=torch.float64, device=dev),
        )

    def _state(self, state: object) -> CyFAState:
        return _validate.state(self.name, state, CyFAState)

    def _draw(self, pname: str, B: int, start: int, T: int, device: Device) -> torch.Tensor:
        x = self._params[pname].values(B, start, T, 1, self.seed, device)
        return torch.full((B, T), x, dtype=torch.float64, device=device) if isinstance(x, float) else x.double()

    def _turn(self, x: torch.Tensor, clock: torch.Tensor, sign: float) -> torch.Tensor:
        """U(sign lambda) applied to the Fourier coefficients x ``[B, m, P]`` (clock ``[B]``, float64): each
        frequency p's (cos, sin) pair turned by sign 2 pi p lambda / P. float32 ``[B, m, P]``."""
        P = self.slots
        p = _pairs(P)[1::2].to(x.device)  # [(P - 1) / 2]
        phase = 2 * math.pi * torch.remainder(clock[:, None] * p, P) / P  # [B, F], reduced in slot units
        c, s = torch.cos(phase).float()[:, None, :], (sign * torch.sin(phase)).float()[:, None, :]
        a, b = x[..., 1::2], x[..., 2::2]
        out = x.clone()
        out[..., 1::2] = c * a - s * b
        out[..., 2::2] = s * a + c * b
        return out

    def atoms(self, clock: torch.Tensor) -> torch.Tensor:
        """a(lambda) = U(-lambda) Phi^T e_0, the written slot vector at each clock: ``[B, T]`` float64 ->
        float32 ``[B, T, P]`` (the constant P^-1/2, then sqrt(2 / P) (cos, -sin) of 2 pi p lambda / P)."""
        P = self.slots
        B, T = clock.shape
        b = basis(P)[0].float().to(clock.device).expand(B * T, 1, P)
        return self._turn(b, clock.reshape(-1), -1.0).reshape(B, T, P)

    def write(self, state: CyFAState, k: torch.Tensor, v: torch.Tensor) -> CyFAState:
        """Advance the clock, fade and write each token in order. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``."""
        st = self._state(state)
        B, d, P = st.keys.shape
        dv = st.values.shape[2]
        held = f"state keys [B, d, P] = {list(st.keys.shape)}, values [B, P, dv] = {list(st.values.shape)}"
        k, v = _validate.pairs(self.name, k, v, batch=B, d=d, dv=dv, held=held, state=st.keys)
        T = k.shape[1]
        if T == 0:
            return st
        dev = st.keys.device
        k = unit(k.float()) if self.normalize else k.float()
        alpha = self._draw("alpha", B, st.tokens, T, dev)
        beta = self._draw("beta", B, st.tokens, T, dev)
        clock = st.clock[:, None] + torch.cumsum(self._draw("delta", B, st.tokens, T, dev), dim=1)  # [B, T]
        logs = torch.cumsum(torch.log(alpha), dim=1)  # [B, T]
        fade = torch.exp(logs[:, -1:] - logs)  # prod of the gates after token t: [B, T]
        w = (beta * fade).float()[..., None] * self.atoms(clock)  # [B, T, P]
        total = torch.exp(logs[:, -1]).float()[:, None, None]
        hk = total * st.keys + torch.einsum("btd,btp->bdp", k, w)
        hv = total * st.values + torch.einsum("btp,bte->bpe", w, v.float())
        return CyFAState(hk, hv, clock[:, -1].clone(), st.tokens + T)

    def read(self, state: CyFAState, q: torch.Tensor) -> torch.Tensor:
        """softmax over the slots at the state's clock. Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        st = self._state(state)
        B, d, P = st.keys.shape
        held = f"state's keys [B, d, P] = {list(st.keys.shape)}"
        q = _validate.queries(self.name, q, batch=B, d=d, held=held, state=st.keys)
        q = unit(q.float()) if self.normalize else q.float()
        scale = math.sqrt(d) if self.scale is None else self.scale
        table = self.table().float().to(q.device)  # [P, P]
        raw = scale * (q @ st.keys)  # [B, m, P]
        probs = torch.softmax(self._turn(raw, st.clock, 1.0) @ table.T, dim=-1)  # over the slot positions
        weights = self._turn(probs @ table, st.clock, -1.0)  # [B, m, P]
        return weights @ st.values
