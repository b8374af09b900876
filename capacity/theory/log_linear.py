"""T34: log-linear attention's error with random keys, level by level (T7 and T11 over its Fenwick buckets).

Log-linear attention (``lacapacity.variants.log_linear``) splits the n pairs written so far as a Fenwick tree splits
the prefix [0, n): one bucket of 2^j consecutive pairs for every set bit j of n, the oldest pairs in the largest
bucket, and reads the buckets (levels l = j + 1) with fixed weights lam_l. Over linear attention with a constant
gate alpha, pair i (level l(i), age a_i = n - 1 - i: writes since it was stored) is read back as

    r_i = w_i v_i + sum_(c != i) w_c (k_i . k_c) v_c,     w_c = lam_l(c) alpha^(a_c),

and for independent uniform unit keys (E (k_i . k_c)^2 = 1/d) and unit values independent of them, with zero-mean
cross terms, its expected squared error is

    e_i = (1 - w_i)^2 + (W - w_i^2) / d,     W = sum_c w_c^2.

With every lam and alpha equal to 1 it is T7's (n - 1)/d for every pair; with lam = 1, T11's decayed crosstalk.

>>> from lacapacity import theory
>>> round(theory.log_linear_error(13, 16, lam=1.0), 6) == round(12 / 16, 6)   # T7
True
>>> {level: round(e, 4) for level, e in theory.log_linear_level_error(13, 16, lam=0.5).items()}
{4: 0.8506, 3: 0.6445, 1: 0.0234}
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

from lacapacity.base import _validate
from lacapacity.errors import CapacityError
from lacapacity.theory._common import FloatArray

__all__ = ["log_linear_error", "log_linear_level_error"]


def level_weights(lam: float | Sequence[float], count: int) -> list[float]:
    """lam_1 .. lam_count for ``lam`` a number r (lam_l = r^(l-1)) or a sequence (its last entry repeated)."""
    if isinstance(lam, numbers.Real) and not isinstance(lam, bool):
        return [float(lam) ** j for j in range(count)]
    try:
        weights = [float(x) for x in lam]  # type: ignore[union-attr]  # a non-number that is not a sequence: below
    except (TypeError, ValueError):
        raise CapacityError(f"lam must be a number or a non-empty sequence of per-level weights, got {lam!r}") from None
    if not weights:
        raise CapacityError("lam must be a number or a non-empty sequence of per-level weights, got an empty one")
    return [weights[min(j, len(weights) - 1)] for j in range(count)]


def buckets(n: int) -> list[tuple[int, int, int]]:
    """The Fenwick buckets of n pairs, oldest first: (level l = j + 1, first pair, 2^j pairs) for each set bit j."""
    out, start = [], 0
    for j in reversed(range(n.bit_length())):
        if n >> j & 1:
            out.append((j + 1, start, 1 << j))
            start += 1 << j
    return out


def _pair_errors(
    n: int, d: int, lam: float | Sequence[float], alpha: float
) -> tuple[FloatArray, list[tuple[int, int, int]]]:
    """e_i for the n pairs, float64 ``[n]``, and the buckets that hold them."""
    n = _validate.positive_int("n", n)
    d = _validate.positive_int("d", d)
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0.0 < float(alpha) <= 1.0:
        raise CapacityError(f"alpha must be a number in (0, 1] (a constant gate), got {alpha!r}")
    lam_l = level_weights(lam, n.bit_length())
    held = buckets(n)
    w = np.empty(n)
    for level, start, size in held:
        w[start : start + size] = lam_l[level - 1]
    w *= float(alpha) ** np.arange(n - 1, -1, -1, dtype=np.float64)  # alpha^(age): the last pair has age 0
    total = float(np.sum(w * w))
    return (1.0 - w) ** 2 + (total - w * w) / d, held


def log_linear_error(n: int, d: int, lam: float | Sequence[float] = 0.5, alpha: float = 1.0) -> float:
    """T34: the expected mean read error over the n stored pairs of log-linear attention over linear attention with
    a constant gate ``alpha``, per-level weights ``lam`` (a number r: lam_l = r^(l-1); or a sequence, its last entry
    repeated), random unit keys in d dimensions and unit values: the mean of e_i (see the module)."""
    e, _ = _pair_errors(n, d, lam, alpha)
    return float(e.mean())


def log_linear_level_error(n: int, d: int, lam: float | Sequence[float] = 0.5, alpha: float = 1.0) -> dict[int, float]:
    """T34 level by level: {level l: the expected mean error of the pairs of level l's bucket} after n writes (the
    levels of the set bits of n; level l holds 2^(l-1) pairs). Same settings as ``log_linear_error``."""
    e, held = _pair_errors(n, d, lam, alpha)
    return {level: float(e[start : start + size].mean()) for level, start, size in held}
