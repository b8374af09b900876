"""Closed forms and bounds of DESIGN section 3 (T1-T13), as plain functions.

Scalar functions of (n, d, dv) broadcast like numpy and return a float for scalar input,
an ndarray otherwise. Functions of key and value matrices accept numpy arrays or torch
tensors with any leading batch dimensions (``K: [..., n, d]``, ``V: [..., n, dv]``) and
return the same kind.

>>> from capacity import theory
>>> theory.frame_bound(n=128, d=64)          # T5: mean error of any n > d unit keys
1.0
>>> theory.random_keys_error(n=65, d=64)      # T7: expected error of random unit keys
1.0
>>> round(theory.welch_bound(n=3, d=2), 4)    # T6: three unit vectors in the plane
0.5
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import integrate, optimize, special

from capacity.errors import CapacityError

__all__ = [
    "two_pair_readout",
    "decomposition",
    "crosstalk_error",
    "frame_bound",
    "welch_bound",
    "random_keys_error",
    "random_coherence_moments",
    "rank_bound",
    "optimal_gain",
    "optimal_gain_error",
    "argmax_recall",
    "argmax_capacity",
    "decay_readout",
    "capacity_random_keys",
    "capacity_tight_frame",
    "bill",
    "break_even_n",
]


# ---------------------------------------------------------------- helpers


def _counts(**named):
    """Broadcast named counts to float arrays; raise unless every entry is finite and >= 1."""
    arrays = np.broadcast_arrays(*[_numbers(name, v) for name, v in named.items()])
    for (name, _), a in zip(named.items(), arrays):
        if not np.all(np.isfinite(a)) or np.any(a < 1):
            raise CapacityError(f"{name} must be >= 1 (finite), got {named[name]!r}")
    return arrays


def _numbers(name: str, x) -> np.ndarray:
    """``x`` (a number or an array of numbers) as a float64 array, or a CapacityError naming ``name``."""
    if isinstance(x, (bool, str, bytes, np.bool_)) or (isinstance(x, torch.Tensor) and x.device.type == "meta"):
        raise CapacityError(f"{name} must be a number or an array of numbers, got {x!r}")
    try:
        a = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    except (TypeError, ValueError, RuntimeError):
        raise CapacityError(f"{name} must be a number or an array of numbers, got {x!r}") from None
    if a.dtype == object:
        raise CapacityError(f"{name} must be a number or an array of numbers, got {x!r}")
    return a


def _matrix(name: str, x, min_ndim: int = 2):
    """Check that ``x`` is a real torch tensor or numpy array with at least ``min_ndim`` dimensions."""
    if isinstance(x, torch.Tensor):
        if x.device.type == "meta":
            raise CapacityError(f"{name} is a meta tensor; meta tensors carry no numbers")
        if x.is_complex() or x.dtype == torch.bool:
            raise CapacityError(f"{name} must hold real numbers, got {x.dtype}")
    else:
        x = _numbers(name, x)
    if x.ndim < min_ndim:
        want = "[..., n, d]" if min_ndim == 2 else "[..., d]"
        raise CapacityError(f"{name} must have at least {min_ndim} dimension(s) {want}, got shape {tuple(x.shape)}")
    return x


def _same_last(names: str, *xs) -> None:
    if len({x.shape[-1] for x in xs}) > 1:
        shapes = ", ".join(str(tuple(x.shape)) for x in xs)
        raise CapacityError(f"{names} must share their last dimension, got shapes {shapes}")


def _out(x):
    x = np.asarray(x, dtype=np.float64)
    return float(x) if x.ndim == 0 else x


def _mT(x):
    return x.transpose(-1, -2) if isinstance(x, torch.Tensor) else np.swapaxes(x, -1, -2)


def _gram(K):
    return K @ _mT(K)  # [..., n, n]


def _diag(G):
    return torch.diagonal(G, dim1=-2, dim2=-1) if isinstance(G, torch.Tensor) else np.diagonal(G, axis1=-2, axis2=-1)


# ---------------------------------------------------------------- T2-T4: exact reads of the additive state


def two_pair_readout(k1, k2, v1, v2):
    """T2: the read of k1 after writing (k1, v1) and (k2, v2) into S = k1^T v1 + k2^T v2.

    k1 S = ||k1||^2 v1 + (k1 . k2) v2, exactly, for any keys.
    Shapes: k1, k2 ``[..., d]``; v1, v2 ``[..., dv]``; returns ``[..., dv]``.
    """
    k1, k2, v1, v2 = (_matrix(nm, x, 1) for nm, x in (("k1", k1), ("k2", k2), ("v1", v1), ("v2", v2)))
    _same_last("k1 and k2", k1, k2)
    _same_last("v1 and v2", v1, v2)
    return (k1 * k1).sum(-1)[..., None] * v1 + (k1 * k2).sum(-1)[..., None] * v2


def decomposition(K, V):
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


def crosstalk_error(K):
    """T4: mean_i ||k_i S - v_i||^2 of the additive state for orthonormal values, from the keys alone.

    Equals (||G||_F^2 - 2 tr G + n) / n; for unit keys (||G||_F^2 - n) / n, the mean crosstalk energy.
    Shape: K ``[..., n, d]``; returns ``[...]``.
    """
    G = _gram(_matrix("K", K))
    n = G.shape[-1]
    return ((G**2).sum((-2, -1)) - 2 * _diag(G).sum(-1) + n) / n


# ---------------------------------------------------------------- T5-T9: bounds and expectations


def frame_bound(n, d):
    """T5: lower bound on the mean error of T4 for any n unit keys in R^d: max(n/d - 1, 0).

    Reached by unit-norm tight frames (n > d) and orthonormal keys (n <= d).
    """
    n, d = _counts(n=n, d=d)
    return _out(np.maximum(n / d - 1.0, 0.0))


def welch_bound(n, d):
    """T6: lower bound on max_{i != j} |k_i . k_j| for n unit keys in R^d: sqrt((n - d) / (d (n - 1))) for n > d, else 0."""
    n, d = _counts(n=n, d=d)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.sqrt(np.maximum(n - d, 0.0) / (d * np.maximum(n - 1.0, 1.0)))
    return _out(w)


def random_keys_error(n, d):
    """T7: expected mean error of T4 for n random unit keys (uniform on the sphere): (n - 1) / d."""
    n, d = _counts(n=n, d=d)
    return _out((n - 1.0) / d)


def random_coherence_moments(d):
    """T7: (E (k_i . k_j)^2, E (k_i . k_j)^4) = (1/d, 3/(d (d + 2))) for independent uniform unit keys."""
    (d,) = _counts(d=d)
    return _out(1.0 / d), _out(3.0 / (d * (d + 2.0)))


def rank_bound(n, d):
    """T8: min over all d x dv states of mean_i ||k_i S - v_i||^2 for orthonormal values and full-rank keys.

    (n - rank K) / n = max(1 - d/n, 0); any memory with a d x dv state and a linear read obeys it.
    """
    n, d = _counts(n=n, d=d)
    return _out(np.maximum(1.0 - d / n, 0.0))


def optimal_gain(n, d):
    """T9: the scalar read gain c minimising E mean_i ||c k_i S - v_i||^2 for random unit keys: d / (d + n - 1)."""
    n, d = _counts(n=n, d=d)
    return _out(d / (d + n - 1.0))


def optimal_gain_error(n, d):
    """T9: the mean error at the optimal gain for random unit keys: (n - 1) / (d + n - 1)."""
    n, d = _counts(n=n, d=d)
    return _out((n - 1.0) / (d + n - 1.0))


def capacity_random_keys(eps, d):
    """Capacity under T7: the largest n with expected error <= eps for random keys, n* = 1 + eps d."""
    eps = _numbers("eps", eps)
    if np.any(~np.isfinite(eps)) or np.any(eps < 0):
        raise CapacityError(f"eps must be a finite error bound >= 0, got {eps!r}")
    (d,) = _counts(d=d)
    return _out(1.0 + eps * d)


def capacity_tight_frame(eps, d):
    """Capacity under T5: the largest n with error <= eps for tight-frame keys, n* = d (1 + eps)."""
    eps = _numbers("eps", eps)
    if np.any(~np.isfinite(eps)) or np.any(eps < 0):
        raise CapacityError(f"eps must be a finite error bound >= 0, got {eps!r}")
    (d,) = _counts(d=d)
    return _out(d * (1.0 + eps))


# ---------------------------------------------------------------- T10: argmax retrieval


def _score_spreads(n, d, dv):
    """Standard deviations of the correct score and of each wrong score (Gaussian approximation)."""
    sigma_c = np.sqrt((n - 1.0) / (d * dv))
    sigma_w = np.sqrt(1.0 / dv + 1.0 / d + np.maximum(n - 2.0, 0.0) / (d * dv))
    return sigma_c, sigma_w


def argmax_recall(n, d, dv):
    """T10: predicted argmax recall for n random unit keys in R^d and random unit values in R^dv.

    The read r_i = v_i + sum_{j != i} G_ij v_j is decoded as argmax_l r_i . v_l over the n
    stored values. In the Gaussian approximation the correct score is N(1, s_c^2) with
    s_c^2 = (n - 1)/(d dv) and each of the n - 1 wrong scores is N(0, s_w^2) with
    s_w^2 = 1/dv + 1/d + (n - 2)/(d dv), independent given the read, so

        P(correct) = E_z [ Phi((1 + s_c z) / s_w)^(n - 1) ],  z ~ N(0, 1),

    integrated numerically (scipy). Crosstalk noise has power about (n - 1)/d but is spread
    over dv dimensions, which is why recall survives far past n = d.

    The approximation treats the wrong scores as independent; in truth the score vector
    V r_i spans only dv dimensions, which spreads the wrong scores more evenly and lowers their
    maximum. The prediction is therefore conservative: measured recall runs above it (by up
    to about 0.1 at d = dv = 32), and the measured 90% capacity above ``argmax_capacity`` by
    about 10-55% for d, dv in 16..64 (largest when dv is small; ``capacity check`` measures it).
    """
    n, d, dv = _counts(n=n, d=d, dv=dv)
    shape = n.shape
    n, d, dv = (a.ravel() for a in (n, d, dv))
    sigma_c, sigma_w = _score_spreads(n, d, dv)

    def integrand(z):
        log_cdf = special.log_ndtr((1.0 + sigma_c * z) / sigma_w)  # [points]
        return np.exp(-0.5 * z * z + (n - 1.0) * log_cdf) / np.sqrt(2.0 * np.pi)

    value, _ = integrate.quad_vec(integrand, -12.0, 12.0, epsabs=1e-10, epsrel=1e-8)
    value = np.where(n <= 1, 1.0, np.clip(value, 0.0, 1.0))
    return _out(value.reshape(shape))


def argmax_capacity(d, dv, tau=0.9):
    """T10: the largest (real-valued) n whose predicted argmax recall is >= tau, for each (d, dv).

    Grows much faster than d: roughly d dv / (2 ln n).
    """
    d, dv = _counts(d=d, dv=dv)
    tau_a = _numbers("tau", tau)
    if tau_a.ndim != 0 or not 0.0 < float(tau_a) < 1.0:
        raise CapacityError(f"tau must lie in (0, 1), got {tau!r}")
    tau = float(tau_a)

    def one(dd, vv):
        f = lambda log_n: argmax_recall(np.exp(log_n), dd, vv) - tau  # noqa: E731
        if f(np.log(2.0)) < 0:
            return 1.0
        hi = np.log(2.0)
        while f(hi) >= 0:
            hi += np.log(4.0)
        return float(np.exp(optimize.brentq(f, hi - np.log(4.0), hi, xtol=1e-10)))

    out = np.vectorize(one, otypes=[np.float64])(d, dv)
    return _out(out)


# ---------------------------------------------------------------- T11: decay


def decay_readout(K, V, g):
    """T11: reads of every stored key after writing n pairs into S_t = g S_{t-1} + k_t^T v_t.

    r_i = sum_j g^(n-j) G_ij v_j (tokens numbered 1..n), so old tokens fade by g per step.
    Shapes: K ``[..., n, d]``, V ``[..., n, dv]``; returns ``[..., n, dv]``.
    """
    g = _numbers("g", g)
    if g.ndim != 0 or not np.isfinite(g):
        raise CapacityError(f"g must be one finite number (the gate, in (0, 1] for a decaying memory), got {g!r}")
    g = float(g)
    K, V = _matrix("K", K), _matrix("V", V)
    if K.shape[-2] != V.shape[-2]:
        raise CapacityError(f"K [..., n, d] and V [..., n, dv] must share n, got {tuple(K.shape)}, {tuple(V.shape)}")
    n = K.shape[-2]
    if isinstance(K, torch.Tensor):
        w = g ** torch.arange(n - 1, -1, -1, dtype=K.dtype, device=K.device)  # [n]
    else:
        w = g ** np.arange(n - 1, -1, -1, dtype=np.float64)
    return _gram(K) @ (w[:, None] * V)


# ---------------------------------------------------------------- T13: the bill


def bill(n, d, dv=None):
    """T13: what each memory keeps and spends per head, as a dict of arrays over broadcast (n, d, dv).

    - ``softmax_cache``: n (d + dv) numbers (keys and values; 2 n d when dv = d);
    - ``linear_state``: d dv numbers, whatever n;
    - ``softmax_decode_flops``: 2 n (d + dv) per new token (scores, then the weighted sum; about 4 n d);
    - ``linear_decode_flops``: 4 d dv per new token (write k^T v, read q S).
    """
    dv = d if dv is None else dv
    n, d, dv = _counts(n=n, d=d, dv=dv)
    return {
        "softmax_cache": _out(n * (d + dv)),
        "linear_state": _out(d * dv + 0 * n),
        "softmax_decode_flops": _out(2.0 * n * (d + dv)),
        "linear_decode_flops": _out(4.0 * d * dv + 0 * n),
    }


def break_even_n(d, dv=None, *, measure="cache"):
    """T13: the n at which softmax's cost equals linear attention's.

    ``measure="cache"``: n (d + dv) = d dv, so n = d dv / (d + dv) (d/2 when dv = d).
    ``measure="flops"``: 2 n (d + dv) = 4 d dv, so n = 2 d dv / (d + dv) (d when dv = d).
    """
    dv = d if dv is None else dv
    d, dv = _counts(d=d, dv=dv)
    if measure == "cache":
        return _out(d * dv / (d + dv))
    if measure == "flops":
        return _out(2.0 * d * dv / (d + dv))
    raise CapacityError(f"measure must be 'cache' or 'flops', got {measure!r}")
