"""T2-T9: exact reads of the additive state, the frame, Welch and rank bounds, random keys, the best gain."""

from __future__ import annotations

from typing import overload

import numpy as np
import numpy.typing as npt
import torch

from lacapacity.errors import CapacityError
from lacapacity.theory._common import (
    Array,
    FloatArray,
    Floats,
    Numbers,
    _counts,
    _diag,
    _gram,
    _matrix,
    _numbers,
    _out,
    _same_last,
)

__all__ = [
    "two_pair_readout",
    "decomposition",
    "crosstalk_error",
    "crosstalk_from_coherence",
    "crosstalk_from_effective_rank",
    "frame_bound",
    "welch_bound",
    "tight_frame_coherence",
    "random_keys_error",
    "random_coherence_moments",
    "rank_bound",
    "optimal_gain",
    "optimal_gain_error",
    "capacity_random_keys",
    "capacity_tight_frame",
    "rank_bound_capacity",
]

# ---------------------------------------------------------------- T2-T4: exact reads of the additive state


@overload
def two_pair_readout(k1: torch.Tensor, k2: torch.Tensor, v1: torch.Tensor, v2: torch.Tensor) -> torch.Tensor: ...
@overload
def two_pair_readout(k1: npt.ArrayLike, k2: npt.ArrayLike, v1: npt.ArrayLike, v2: npt.ArrayLike) -> FloatArray: ...
def two_pair_readout(k1: Numbers, k2: Numbers, v1: Numbers, v2: Numbers) -> Array:
    """T2: the read of k1 after writing (k1, v1) and (k2, v2) into S = k1^T v1 + k2^T v2.

    k1 S = ||k1||^2 v1 + (k1 . k2) v2, exactly, for any keys.
    Shapes: k1, k2 ``[..., d]``; v1, v2 ``[..., dv]``; returns ``[..., dv]``.
    """
    k1, k2, v1, v2 = (_matrix(nm, x, 1) for nm, x in (("k1", k1), ("k2", k2), ("v1", v1), ("v2", v2)))
    _same_last("k1 and k2", k1, k2)
    _same_last("v1 and v2", v1, v2)
    return (k1 * k1).sum(-1)[..., None] * v1 + (k1 * k2).sum(-1)[..., None] * v2


@overload
def decomposition(K: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...
@overload
def decomposition(K: npt.ArrayLike, V: npt.ArrayLike) -> tuple[FloatArray, FloatArray]: ...
def decomposition(K: Numbers, V: Numbers) -> tuple[Array, Array]:
    """T3: split the read of every stored key, r_i = k_i K^T V, into signal and leak.

    Returns ``(signal, leak)``, both ``[..., n, dv]``: signal_i = G_ii v_i and
    leak_i = sum_{j != i} G_ij v_j with G = K K^T, so that signal + leak = K K^T V (T1).
    """
    K, V = _matrix("K", K), _matrix("V", V)
    if K.shape[-2] != V.shape[-2]:
        raise CapacityError(f"K [..., n, d] and V [..., n, dv] must share n, got {tuple(K.shape)}, {tuple(V.shape)}")
    G = _gram(K)  # [..., n, n]
    g_ii = _diag(G)  # [..., n]
    signal = g_ii[..., None] * V
    return signal, G @ V - signal


@overload
def crosstalk_error(K: torch.Tensor) -> torch.Tensor: ...
@overload
def crosstalk_error(K: npt.ArrayLike) -> FloatArray: ...
def crosstalk_error(K: Numbers) -> Array:
    """T4: mean_i ||k_i S - v_i||^2 of the additive state for orthonormal values, from the keys alone.

    Equals (||G||_F^2 - 2 tr G + n) / n; for unit keys (||G||_F^2 - n) / n, the mean crosstalk energy.
    Shape: K ``[..., n, d]``; returns ``[...]``.
    """
    G = _gram(_matrix("K", K))
    n = G.shape[-1]
    return ((G**2).sum((-2, -1)) - 2 * _diag(G).sum(-1) + n) / n


def crosstalk_from_coherence(n: Numbers, mean_sq_coherence: Numbers) -> Floats:
    """T4 for n unit keys from their mean squared coherence mu^2 = mean_{i != j} (k_i . k_j)^2: (n - 1) mu^2.

    The same number as ``crosstalk_error`` (||G||_F^2 = n + n (n - 1) mu^2 for unit keys), from the statistic
    ``lacapacity.keys.describe`` stores; broadcasts ``n`` against ``mean_sq_coherence``.
    """
    (n,) = _counts(n=n)
    mu2 = _numbers("mean_sq_coherence", mean_sq_coherence)
    if np.any(mu2 < 0):
        raise CapacityError(f"mean_sq_coherence must be >= 0, got {mean_sq_coherence!r}")
    return _out((n - 1.0) * mu2)


def crosstalk_from_effective_rank(n: Numbers, effective_rank: Numbers) -> Floats:
    """T4 for n unit keys from their effective rank r = n^2 / ||G||_F^2 (``lacapacity.keys.describe``): n / r - 1.

    The same number as ``crosstalk_error`` for unit keys; broadcasts ``n`` against ``effective_rank``.
    """
    (n,) = _counts(n=n)
    r = _numbers("effective_rank", effective_rank)
    if not np.all(r > 0):
        raise CapacityError(f"effective_rank must be > 0, got {effective_rank!r}")
    return _out(n / r - 1.0)


# ---------------------------------------------------------------- T5-T9: bounds and expectations


def frame_bound(n: Numbers, d: Numbers) -> Floats:
    """T5: lower bound on the mean error of T4 for any n unit keys in R^d: max(n/d - 1, 0).

    Reached by unit-norm tight frames (n > d) and orthonormal keys (n <= d).
    """
    n, d = _counts(n=n, d=d)
    return _out(np.maximum(n / d - 1.0, 0.0))


def welch_bound(n: Numbers, d: Numbers) -> Floats:
    """T6: lower bound on max_{i != j} |k_i . k_j| for n unit keys in R^d: sqrt((n - d) / (d (n - 1))) for n > d, else 0."""
    n, d = _counts(n=n, d=d)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.sqrt(np.maximum(n - d, 0.0) / (d * np.maximum(n - 1.0, 1.0)))
    return _out(w)


def tight_frame_coherence(n: Numbers, d: Numbers) -> Floats:
    """T5, as a coherence: the mean squared coherence mean_{i != j} (k_i . k_j)^2 of n unit keys in R^d is at least
    max(n/d - 1, 0) / (n - 1), with equality for unit-norm tight frames (n > d) and orthonormal keys (n <= d)."""
    n, d = _counts(n=n, d=d)
    return _out(np.maximum(n / d - 1.0, 0.0) / np.maximum(n - 1.0, 1.0))


def random_keys_error(n: Numbers, d: Numbers) -> Floats:
    """T7: expected mean error of T4 for n random unit keys (uniform on the sphere): (n - 1) / d."""
    n, d = _counts(n=n, d=d)
    return _out((n - 1.0) / d)


def random_coherence_moments(d: Numbers) -> tuple[Floats, Floats]:
    """T7: (E (k_i . k_j)^2, E (k_i . k_j)^4) = (1/d, 3/(d (d + 2))) for independent uniform unit keys."""
    (d,) = _counts(d=d)
    return _out(1.0 / d), _out(3.0 / (d * (d + 2.0)))


def rank_bound(n: Numbers, d: Numbers) -> Floats:
    """T8: min over all d x dv states of mean_i ||k_i S - v_i||^2 for orthonormal values and full-rank keys.

    (n - rank K) / n = max(1 - d/n, 0); any memory with a d x dv state and a linear read obeys it.
    """
    n, d = _counts(n=n, d=d)
    return _out(np.maximum(1.0 - d / n, 0.0))


def optimal_gain(n: Numbers, d: Numbers) -> Floats:
    """T9: the scalar read gain c minimising E mean_i ||c k_i S - v_i||^2 for random unit keys: d / (d + n - 1)."""
    n, d = _counts(n=n, d=d)
    return _out(d / (d + n - 1.0))


def optimal_gain_error(n: Numbers, d: Numbers) -> Floats:
    """T9: the mean error at the optimal gain for random unit keys: (n - 1) / (d + n - 1)."""
    n, d = _counts(n=n, d=d)
    return _out((n - 1.0) / (d + n - 1.0))


def capacity_random_keys(eps: Numbers, d: Numbers) -> Floats:
    """Capacity under T7: the largest n with expected error <= eps for random keys, n* = 1 + eps d."""
    eps = _numbers("eps", eps)
    if np.any(~np.isfinite(eps)) or np.any(eps < 0):
        raise CapacityError(f"eps must be a finite error bound >= 0, got {eps!r}")
    (d,) = _counts(d=d)
    return _out(1.0 + eps * d)


def rank_bound_capacity(eps: Numbers, d: Numbers) -> Floats:
    """Capacity under T8: no memory with a d x dv state and a linear read keeps error <= eps past n = d / (1 - eps)."""
    eps = _numbers("eps", eps)
    (d,) = _counts(d=d)
    if np.any(~np.isfinite(eps)) or np.any((eps < 0) | (eps >= 1)):
        raise CapacityError(f"eps must lie in [0, 1) for the rank-bound capacity, got {eps!r}")
    return _out(d / (1.0 - eps))


def capacity_tight_frame(eps: Numbers, d: Numbers) -> Floats:
    """Capacity under T5: the largest n with error <= eps for tight-frame keys, n* = d (1 + eps)."""
    eps = _numbers("eps", eps)
    if np.any(~np.isfinite(eps)) or np.any(eps < 0):
        raise CapacityError(f"eps must be a finite error bound >= 0, got {eps!r}")
    (d,) = _counts(d=d)
    return _out(d * (1.0 + eps))
