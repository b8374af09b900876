"""DeltaProduct (Siems et al. 2025): ``steps`` delta-rule (generalised Householder) updates per token, gated.

Per token t, the gate first (Gated DeltaProduct), then for j = 0 .. steps - 1 (row convention, state S ``[B, d, dv]``):

    S = alpha_t S
    S = (I - beta_tj k_tj^T k_tj) S + beta_tj k_tj^T v_t

so the token's transition is alpha_t times a product of ``steps`` Householder-like factors. ``alpha`` in (0, 1] (1.0:
no gate, DeltaProduct) is a constant or ``("uniform", low, high)`` drawn per token from ``seed``. The probe gives one
(k, v) per token, so the keys of the steps are derived from k, fixed and seeded:

    k_tj = k_t R_j      (L2-normalised with ``normalize``, the default)

with R_0 = I and, for j >= 1, R_j a d x d Haar-random orthogonal matrix drawn once from
``lacapacity.base._random.generator(seed, "variants/delta_product/<j>")`` (QR of a gaussian matrix
with the signs of R's diagonal fixed). Every step writes the same value v_t. With steps = 1 this
is exactly the delta rule (``delta``). beta in (0, 2) is a constant (every step) or
``("uniform", low, high)`` drawn per token and step from ``seed``.

The update is the delta rule over the interleaved sequence (k_t0, v_t), (k_t1, v_t), ..., so it
runs as ``kernels.update(mode="delta")`` on steps x T tokens (chunked and differentiable on the
torch backend); with a gate, as ``mode="gated_delta"`` with the gate alpha_t on step 0 and 1 on the
others. It is fla's gated delta product with num_householder = steps and log-gate log alpha.

>>> import torch
>>> from lacapacity import variants, keys
>>> K = keys.make("gaussian", n=20, d=8, seed=0); V = torch.randn(1, 20, 4)
>>> one, delta = variants.get("delta_product", steps=1), variants.get("delta")
>>> S1 = one.write(one.init_state(1, 8, 4), K, V); S2 = delta.write(delta.init_state(1, 8, 4), K, V)
>>> bool(torch.equal(S1, S2))
True
"""

from __future__ import annotations

from typing import cast

import torch

import lacapacity.kernels as kernels  # (not `from lacapacity import kernels`: mypy types that name Any? and rejects it)
from lacapacity.base import _random, _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.variants._memory import GATE, RATE, Memory
from lacapacity.variants._params import Param
from lacapacity.variants.recurrent import State


def rotations(steps: int, d: int, seed: int) -> torch.Tensor:
    """R_0 = I and seeded Haar orthogonal R_1 .. R_{steps-1}: float64 ``[steps, d, d]`` on the CPU."""
    out = [torch.eye(d, dtype=torch.float64)]
    for j in range(1, steps):
        g = _random.generator(seed, f"variants/delta_product/{j}")
        Q, R = torch.linalg.qr(_random.normal(d, d, generator=g))
        out.append(Q * torch.sign(torch.diagonal(R))[None, :])  # sign fix: Haar-distributed
    return torch.stack(out)


class DeltaProduct(Memory):
    """DeltaProduct with ``steps`` >= 1 delta updates per token; float32 state ``[B, d, dv]``."""

    name = "delta_product"

    def __init__(
        self,
        *,
        steps: int = 2,
        beta: object = 1.0,
        alpha: object = 1.0,
        normalize: bool = True,
        seed: int = 0,
        backend: str = "auto",
    ) -> None:
        self.steps = _validate.positive_int("delta_product: steps", steps)
        self._setup(
            normalize=normalize, seed=seed, backend=backend, beta=(beta, RATE, False), alpha=(alpha, GATE, False)
        )
        if self._params[
            "beta"
        ].drawn:  # one stream per step: step 0's is the parameter's own, step j's "variants/delta_product/step<j>/beta"
            spec = self._params["beta"].spec()
            self._step_params = [self._params["beta"]] + [
                Param(f"delta_product/step{j}", "beta", spec, per_channel=False, **RATE) for j in range(1, self.steps)
            ]
        self._rot: dict[tuple[int, str], torch.Tensor] = {}

    def _delta_rule(self) -> bool:
        """With one step it is the delta rule (T12), gated or not; with more the later steps move the read of k."""
        return self.steps == 1

    @property
    def gated(self) -> bool:
        """False when alpha is the constant 1 (DeltaProduct without a gate)."""
        return not self._constant("alpha", 1.0)

    def _extra_params(self) -> dict[str, object]:
        return {"steps": self.steps}

    def rotation_matrices(self, d: int, device: Device) -> torch.Tensor:
        """The R_j, float32 ``[steps, d, d]`` on ``device`` (drawn once per d)."""
        key = (d, str(device))
        if key not in self._rot:
            self._rot[key] = rotations(self.steps, d, self.seed).float().to(device)
        return self._rot[key]

    def _betas(self, B: int, start: int, T: int, device: Device) -> torch.Tensor:
        """beta per token and step, float32 ``[B, T, steps]``."""
        if not self._params["beta"].drawn:
            beta = cast(float, self._params["beta"].value)  # not drawn: a constant
            return torch.full((B, T, self.steps), beta, dtype=torch.float32, device=device)
        drawn = [
            cast(torch.Tensor, p.values(B, start, T, 1, self.seed, device)) for p in self._step_params
        ]  # drawn: [B, T] tensors
        return torch.stack(drawn, dim=-1)

    def write(self, state: State, k: torch.Tensor, v: torch.Tensor) -> State:
        """Write the tokens in order. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns the new state."""
        S, start = self._matrix(state)
        k, v = self._inputs(S, k, v, normalize=False)  # kernels.update normalises each step's key
        B, T, d = k.shape
        dv = v.shape[2]
        R = self.rotation_matrices(d, S.device)  # [steps, d, d]
        ks = torch.einsum("btd,sde->btse", k, R)  # [B, T, steps, d]: key of step j is k R_j
        if self.steps == 1:
            ks = k[:, :, None, :]  # R_0 = I exactly
        vs = v[:, :, None, :].expand(B, T, self.steps, dv)
        beta = self._betas(B, start, T, S.device)  # [B, T, steps]
        gate: dict[str, torch.Tensor] = {}
        if self.gated:  # alpha_t on step 0 of token t, 1 on its other steps
            alpha = torch.ones(B, T, self.steps, dtype=torch.float32, device=S.device)
            alpha[:, :, 0] = self._values("alpha", B, start, T, d, S.device)
            gate = {"alpha": alpha.reshape(B, T * self.steps)}
        try:
            S = kernels.update(
                S.clone(),
                ks.reshape(B, T * self.steps, d),
                vs.reshape(B, T * self.steps, dv),
                mode="gated_delta" if self.gated else "delta",
                beta=beta.reshape(B, T * self.steps),
                normalize=self.normalize,
                backend=self.backend,
                **gate,
            )
        except CapacityError as exc:
            raise CapacityError(f"{self.name}: {exc}") from None
        return self._wrap(S, start + T)
