"""T20: the additive memory in H key heads and HV value heads (``lacapacity.variants.heads``), random keys.

With H key heads of d/H dimensions (each normalised on its own) and HV value heads of dv/HV, the state holds
d dv / min(H, HV) numbers and the expected mean error of random unit keys and values is (n - 1) min(H, HV) / d:
each head's key slice is a uniform unit vector in R^(d/H), so its crosstalk per pair is H/d, over value slices of
energy 1/HV; H/HV key heads that share a value head average their reads (errors uncorrelated), dividing it by H/HV.

>>> from lacapacity import theory
>>> theory.heads_random_keys_error(n=65, d=64, heads=4)          # (n - 1) H / d
4.0
>>> theory.heads_random_keys_error(n=65, d=64, heads=1, value_heads=4), theory.heads_state_numel(64, 64, 1, 4)
(1.0, 4096.0)
"""

from __future__ import annotations

import numpy as np

from lacapacity.errors import CapacityError
from lacapacity.theory._common import FloatArray, Floats, Numbers, _counts, _numbers, _out

__all__ = ["heads_random_keys_error", "heads_capacity", "heads_state_numel", "heads_effective_d"]


def _layout(heads: Numbers, value_heads: Numbers | None) -> FloatArray:
    H, HV = _counts(heads=heads, value_heads=heads if value_heads is None else value_heads)
    lo, hi = np.minimum(H, HV), np.maximum(H, HV)
    if np.any(np.mod(hi, lo) != 0):
        raise CapacityError(f"one of heads and value_heads must divide the other, got {heads!r} and {value_heads!r}")
    return lo


def heads_effective_d(d: Numbers, heads: Numbers, value_heads: Numbers | None = None) -> Floats:
    """T20: d / min(H, HV), the key dimension a single head would need for the same random-key error."""
    (d,) = _counts(d=d)
    return _out(d / _layout(heads, value_heads))


def heads_random_keys_error(n: Numbers, d: Numbers, heads: Numbers, value_heads: Numbers | None = None) -> Floats:
    """T20: expected mean error of the additive memory in H key and HV value heads, random unit keys and values:
    (n - 1) min(H, HV) / d (T7 with d / min(H, HV) for d). ``value_heads`` defaults to ``heads``."""
    n, d = _counts(n=n, d=d)
    return _out((n - 1.0) * _layout(heads, value_heads) / d)


def heads_capacity(eps: Numbers, d: Numbers, heads: Numbers, value_heads: Numbers | None = None) -> Floats:
    """T20: the largest n with expected error <= eps: 1 + eps d / min(H, HV)."""
    eps = _numbers("eps", eps)
    if np.any(~np.isfinite(eps)) or np.any(eps < 0):
        raise CapacityError(f"eps must be a finite error bound >= 0, got {eps!r}")
    (d,) = _counts(d=d)
    return _out(1.0 + eps * d / _layout(heads, value_heads))


def heads_state_numel(d: Numbers, dv: Numbers, heads: Numbers, value_heads: Numbers | None = None) -> Floats:
    """T20: numbers the layout keeps: max(H, HV) states of (d/H) x (dv/HV), i.e. d dv / min(H, HV)."""
    d, dv = _counts(d=d, dv=dv)
    return _out(d * dv / _layout(heads, value_heads))
