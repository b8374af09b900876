"""Lattice (Karami, Pascanu and Mirrokni, arXiv 2504.05646): each memory slot is written only with the part of the
value orthogonal to it.

Row convention: keys k ``[B, t, d]``, values v ``[B, t, dv]``, state S ``[B, d, dv]`` whose d rows s_i are the slots
(a key is the token's code over the slots), read o = q S. Per token, every slot moves by its code times the part of
the value orthogonal to the slot:

    s_i <- s_i + beta k_i (v - (v . s_i / |s_i|^2) s_i)      (an empty slot, s_i = 0, takes beta k_i v)
         = (1 - beta k_i (v . s_i) / |s_i|^2) s_i + beta k_i v

so the update is a state- and input-dependent gate on each slot plus an additive write, the form the paper derives
from one Riemannian gradient step; a value already along a slot leaves that slot unchanged. This is the rule as the
paper's abstract and the issue state it; the paper's slot normalisation, its learnt encoder and its chunked
approximation are not modelled. ``beta`` in (0, 2) (1.0) is a number or ``("uniform", low, high)`` drawn per token
from ``seed``; ``normalize=True`` (the default) L2-normalises keys and queries. State d dv numbers; written token by
token in plain torch (float32). ``tests/variants/test_lattice.py`` holds it to a float64 loop.

>>> import torch
>>> from lacapacity import variants
>>> mem = variants.get("lattice", normalize=False)
>>> S = mem.init_state(1, 2, 2)
>>> S = mem.write(S, torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[3.0, 0.0]]]))   # slot 0 empty: takes v
>>> S = mem.write(S, torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[5.0, 2.0]]]))   # only (0, 2) is new to slot 0
>>> S[0, 0].tolist()
[3.0, 2.0]
"""

from __future__ import annotations

import torch

from lacapacity.base._types import Device
from lacapacity.variants._memory import RATE
from lacapacity.variants.gated_2026 import _Gated


class Lattice(_Gated):
    """Lattice's orthogonal update: s_i += beta k_i (v - proj_{s_i} v), beta in (0, 2); state ``[B, d, dv]``."""

    name = "lattice"
    # not a delta rule (T12): a write does not correct the read of k towards v

    def __init__(self, *, beta: object = 1.0, normalize: bool = True, seed: int = 0, backend: str = "auto") -> None:
        self._setup(normalize=normalize, seed=seed, backend=backend, beta=(beta, RATE, False))

    def _draws(self, B: int, start: int, T: int, d: int, dv: int, device: Device) -> dict[str, torch.Tensor]:
        return {"beta": self._values("beta", B, start, T, d, device)}

    def _step(
        self, S: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: dict[str, torch.Tensor], t: int
    ) -> torch.Tensor:
        norm2 = (S * S).sum(-1)  # |s_i|^2: [B, d]
        along = (S * v[:, None, :]).sum(-1) / torch.where(norm2 > 0, norm2, 1.0)  # (v . s_i) / |s_i|^2, 0 if empty
        orth = v[:, None, :] - along[:, :, None] * S  # [B, d, dv]
        return S + (p["beta"][:, t, None] * k)[:, :, None] * orth
