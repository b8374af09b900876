"""Gated additive memories: decay (a scalar gate per token) and gla (a gate per feature channel).

    decay   S = alpha_t S + phi(k_t)^T v_t           (RetNet-style; T11 for a constant alpha)
    gla     S = Diag(alpha_t) S + phi(k_t)^T v_t     (gated linear attention)

Gates ``alpha`` lie in (0, 1]: a constant, a per-channel vector (gla), or ``("uniform", low, high)`` drawn per token
from ``seed`` (see ``lacapacity.variants._params``). The other parameters are those of ``Recurrent``.
"""

from __future__ import annotations

from lacapacity.variants.recurrent import Recurrent


class Decay(Recurrent):
    """S = alpha S + phi(k)^T v, read phi(q) S; one gate alpha in (0, 1] per token (alpha = 1 is the linear memory).

    >>> from lacapacity import variants
    >>> variants.get("decay", alpha=("uniform", 0.9, 1.0), seed=3).params
    {'alpha': ['uniform', 0.9, 1.0], 'normalize': False, 'seed': 3, 'backend': 'auto'}
    """

    name = "decay"
    mode = "decay"
    _family = "decay"
    alpha: object = 0.95


class GLA(Recurrent):
    """S = Diag(alpha) S + phi(k)^T v, read phi(q) S; alpha in (0, 1]^D, one gate per row of S."""

    name = "gla"
    mode = "gla"
    gate_per_channel = True
    alpha: object = 0.95
