"""The additive (linear attention) memory: S = S + phi(k)^T v, read o = phi(q) S (phi = identity by default)."""

from __future__ import annotations

from lacapacity.variants.recurrent import Recurrent


class Linear(Recurrent):
    """Additive memory with a float32 state ``[batch, D, dv]`` (D = d without a feature map).

    ``normalize=True`` L2-normalises keys (their features) on write and queries on read, as most
    linear-attention layers do; the default writes the keys as given, so that T2's ||k_1||^2
    shows. ``feature`` is a name of ``lacapacity.features`` (its parameters, e.g. ``nu=2``, go
    alongside) or a FeatureMap; ``normalize_read=True`` divides the read by phi(q) . sum_i phi(k_i)
    (positive feature maps only). ``seed`` seeds the performer map's projections.

    >>> from lacapacity import variants
    >>> variants.get("linear", feature="dpfp", nu=2).state_numel(d=16, dv=8)
    512
    """

    name = "linear"
    mode = "linear"
    _family = "additive"
