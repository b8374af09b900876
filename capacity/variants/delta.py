"""The delta rule (DeltaNet): S = (I - b k^T k) S + b k^T v = S + b k^T (v - k S), read o = q S."""

from __future__ import annotations

import torch

from capacity import _validate, kernels
from capacity.errors import CapacityError


class Delta:
    """Delta-rule memory with a float32 state ``[batch, d, dv]`` and a constant beta in (0, 2).

    Each write first reads what the state holds for k and corrects it towards v, so with unit
    keys and beta = 1 the last written key reads back exactly (T12). ``normalize=True`` (the
    default, as in DeltaNet) L2-normalises keys and queries; the rule is only stable for
    ||k||^2 beta < 2.
    """

    name = "delta"

    def __init__(self, *, beta: float = 1.0, normalize: bool = True):
        self.beta = _validate.in_range("delta: beta", beta, 0.0, 2.0, low_open=True, high_open=True)
        if not isinstance(normalize, bool):
            raise CapacityError(f"delta: normalize must be True or False, got {normalize!r}")
        self.normalize = normalize

    @property
    def params(self) -> dict:
        return {"beta": self.beta, "normalize": self.normalize}

    def init_state(self, batch: int, d: int, dv: int, *, device=None) -> torch.Tensor:
        batch = _validate.positive_int("batch", batch)
        d = _validate.positive_int("d", d)
        dv = _validate.positive_int("dv", dv)
        return torch.zeros(batch, d, dv, dtype=torch.float32, device=_validate.device(device))

    def write(self, state: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Tokens in order. Shapes: state [B, d, dv], k [B, t, d], v [B, t, dv]."""
        return kernels.update(state, k, v, mode="delta", beta=self.beta, normalize=self.normalize)

    def read(self, state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """q S. Shapes: state [B, d, dv], q [B, m, d] -> [B, m, dv]."""
        return kernels.read(state, q, normalize=self.normalize)

    def state_numel(self, d: int, dv: int) -> int:
        return int(d) * int(dv)

    def __repr__(self) -> str:
        return f"Delta(beta={self.beta:g}, normalize={self.normalize})"
