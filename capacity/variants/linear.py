"""The additive (linear attention) memory: S = S + k^T v, read o = q S."""

from __future__ import annotations

import torch

from capacity import _validate, kernels
from capacity.errors import CapacityError


class Linear:
    """Additive memory with a float32 state ``[batch, d, dv]``.

    ``normalize=True`` L2-normalises keys on write and queries on read (as most linear-attention
    layers do); the default writes the keys as given, so that T2's ||k_1||^2 shows.
    """

    name = "linear"

    def __init__(self, *, normalize: bool = False):
        if not isinstance(normalize, bool):
            raise CapacityError(f"linear: normalize must be True or False, got {normalize!r}")
        self.normalize = normalize

    @property
    def params(self) -> dict:
        return {"normalize": self.normalize}

    def init_state(self, batch: int, d: int, dv: int, *, device=None) -> torch.Tensor:
        batch = _validate.positive_int("batch", batch)
        d = _validate.positive_int("d", d)
        dv = _validate.positive_int("dv", dv)
        return torch.zeros(batch, d, dv, dtype=torch.float32, device=_validate.device(device))

    def write(self, state: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """S += sum_t k_t^T v_t. Shapes: state [B, d, dv], k [B, t, d], v [B, t, dv]."""
        return kernels.update(state, k, v, mode="linear", normalize=self.normalize)

    def read(self, state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """q S. Shapes: state [B, d, dv], q [B, m, d] -> [B, m, dv]."""
        return kernels.read(state, q, normalize=self.normalize)

    def state_numel(self, d: int, dv: int) -> int:
        return int(d) * int(dv)

    def __repr__(self) -> str:
        return f"Linear(normalize={self.normalize})"
