"""Gated additive memories: decay (a scalar gate per token) and gla (a gate per feature channel).

    decay   S = a_t S + phi(k_t)^T v_t               (RetNet-style; T11 for a constant a)
    gla     S = Diag(alpha_t) S + phi(k_t)^T v_t     (gated linear attention)

Gates lie in (0, 1]: a constant, a per-channel vector (gla), or ``("uniform", low, high)`` drawn
per token from ``seed`` (see ``capacity.variants._params``).
"""

from __future__ import annotations

from capacity.variants.recurrent import Recurrent


class Decay(Recurrent):
    """S = a S + phi(k)^T v, read phi(q) S; a in (0, 1] (a = 1 is the linear memory).

    >>> from capacity import variants
    >>> variants.get("decay", a=("uniform", 0.9, 1.0), seed=3).params
    {'a': ['uniform', 0.9, 1.0], 'normalize': False, 'seed': 3}
    """

    name = "decay"
    mode = "decay"

    def __init__(
        self,
        *,
        a=0.95,
        normalize: bool = False,
        feature=None,
        normalize_read: bool = False,
        seed: int = 0,
        backend: str = "auto",
        **feature_params,
    ):
        self._setup(
            a=a,
            normalize=normalize,
            feature=feature,
            normalize_read=normalize_read,
            seed=seed,
            backend=backend,
            feature_params=feature_params,
        )


class GLA(Recurrent):
    """S = Diag(alpha) S + phi(k)^T v, read phi(q) S; alpha in (0, 1]^D, one gate per row of S."""

    name = "gla"
    mode = "gla"

    def __init__(
        self,
        *,
        alpha=0.95,
        normalize: bool = False,
        feature=None,
        normalize_read: bool = False,
        seed: int = 0,
        backend: str = "auto",
        **feature_params,
    ):
        self._setup(
            alpha=alpha,
            normalize=normalize,
            feature=feature,
            normalize_read=normalize_read,
            seed=seed,
            backend=backend,
            feature_params=feature_params,
        )
