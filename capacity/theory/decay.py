"""T11: the decaying memory's reads."""

from __future__ import annotations

from typing import overload

import numpy as np
import numpy.typing as npt
import torch

from lacapacity.errors import CapacityError
from lacapacity.theory._common import Array, FloatArray, Numbers, _gram, _matrix, _numbers

__all__ = ["decay_readout"]


@overload
def decay_readout(K: torch.Tensor, V: torch.Tensor, alpha: Numbers) -> torch.Tensor: ...
@overload
def decay_readout(K: npt.ArrayLike, V: npt.ArrayLike, alpha: Numbers) -> FloatArray: ...
def decay_readout(K: Numbers, V: Numbers, alpha: Numbers) -> Array:
    """T11: reads of every stored key after writing n pairs into S_t = alpha S_{t-1} + k_t^T v_t.

    r_i = sum_j alpha^(n-j) G_ij v_j (tokens numbered 1..n), so old tokens fade by the gate alpha per step
    (the ``decay`` variant's ``alpha``).
    Shapes: K ``[..., n, d]``, V ``[..., n, dv]``; returns ``[..., n, dv]``.
    """
    g = _numbers("alpha", alpha)
    if g.ndim != 0 or not np.isfinite(g):
        raise CapacityError(
            f"alpha must be one finite number (the gate, in (0, 1] for a decaying memory), got {alpha!r}"
        )
    gate = float(g)
    K, V = _matrix("K", K), _matrix("V", V)
    if K.shape[-2] != V.shape[-2]:
        raise CapacityError(f"K [..., n, d] and V [..., n, dv] must share n, got {tuple(K.shape)}, {tuple(V.shape)}")
    n = K.shape[-2]
    w: torch.Tensor | np.ndarray  # the weights alpha^(n-j), [n], on K's side
    if isinstance(K, torch.Tensor):
        w = gate ** torch.arange(n - 1, -1, -1, dtype=K.dtype, device=K.device)  # [n]
    else:
        w = gate ** np.arange(n - 1, -1, -1, dtype=np.float64)
    return _gram(K) @ (w[:, None] * V)
