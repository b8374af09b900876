"""Closed forms and bounds of docs/theory.md (T1-T13), as plain functions.

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

from capacity import _deprecated
from capacity.errors import CapacityError


def _scipy():
    """scipy's integrate, optimize and special, imported on first use (only T10 needs them: start-up stays light)."""
    from scipy import integrate, optimize, special

    return integrate, optimize, special


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
    "argmax_recall_refined",
    "argmax_capacity_refined",
    "decay_readout",
    "delta_rule_error",
    "capacity_random_keys",
    "capacity_tight_frame",
    "rank_bound_capacity",
    "delta_rule_capacity",
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


def rank_bound_capacity(eps, d):
    """Capacity under T8: no memory with a d x dv state and a linear read keeps error <= eps past n = d / (1 - eps)."""
    eps = np.asarray(eps, dtype=np.float64)
    (d,) = _counts(d=d)
    if np.any((eps < 0) | (eps >= 1)):
        raise CapacityError(f"eps must lie in [0, 1) for the rank-bound capacity, got {eps!r}")
    return _out(d / (1.0 - eps))


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

    This is the conservative bound. It treats the wrong scores as Gaussian and independent of
    the correct one; in truth a wrong score l and the correct score share the term v_i . v_l
    (it enters the correct score with weight G_il), the scores are bounded sphere coordinates,
    and all share the read's norm. Measured recall therefore runs above it (by up to about 0.1
    at d = dv = 32), and the measured 90% capacity above ``argmax_capacity`` by 5-58% for d, dv
    in 16..256 (most for small d, dv or dv < d). ``argmax_recall_refined`` models these effects
    and is the prediction.
    """
    integrate, optimize, special = _scipy()
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

    Grows much faster than d: roughly d dv / (2 ln n). Uses the Gaussian ``argmax_recall``, so
    this is a conservative bound (measured capacities lie above it); ``argmax_capacity_refined``
    is the prediction.
    """
    d, dv = _counts(d=d, dv=dv)
    tau_a = _numbers("tau", tau)
    if tau_a.ndim != 0 or not 0.0 < float(tau_a) < 1.0:
        raise CapacityError(f"tau must lie in (0, 1), got {tau!r}")
    return _out(_solve_capacity(argmax_recall, d, dv, float(tau_a)))


def _solve_capacity(recall, d, dv, tau, start=None, xtol=1e-10):
    """The real n with recall(n, d, dv) = tau, for each (d, dv) (recall decreasing in n).

    ``start(d, dv)``: a first guess to bracket from (default 2); ``xtol``: the tolerance on ln n.
    """
    integrate, optimize, special = _scipy()

    def one(dd, vv):
        f = lambda log_n: recall(np.exp(log_n), dd, vv) - tau
        if f(np.log(2.0)) < 0:
            return 1.0
        lo = np.log(2.0) if start is None else max(np.log(2.0), np.log(start(dd, vv)))
        step = np.log(4.0) if start is None else np.log(1.25)
        while f(lo) < 0:
            lo -= step
        hi = lo + step
        while f(hi) >= 0:
            lo, hi = hi, hi + step
        return float(np.exp(optimize.brentq(f, lo, hi, xtol=xtol)))

    return np.vectorize(one, otypes=[np.float64])(d, dv)


def _coordinate_nodes(m, count):
    """Gauss-Jacobi nodes and weights (summing to 1) for one coordinate x of a uniform unit vector in R^m.

    Its density is proportional to (1 - x^2)^((m - 3)/2) on [-1, 1], a Jacobi weight.
    """
    integrate, optimize, special = _scipy()
    a = (m - 3.0) / 2.0
    x, w = special.roots_jacobi(count, a, a)
    return x, w / w.sum()


def _coordinate_sf(x, m):
    """P(u > x) for one coordinate u of a uniform unit vector in R^m: (u + 1)/2 ~ Beta((m-1)/2, (m-1)/2)."""
    integrate, optimize, special = _scipy()
    a = (m - 1.0) / 2.0
    return special.betainc(a, a, (1.0 - np.clip(x, -1.0, 1.0)) / 2.0)


def _refined_one(n, d, dv):
    """``argmax_recall_refined`` for scalar n, d, dv (d, dv >= 2)."""
    integrate, optimize, special = _scipy()
    if n <= 1:
        return 1.0
    sig2 = (n - 1.0) / (d * dv)  # per-coordinate variance of the crosstalk N in R^dv
    z = np.linspace(-8.0, 8.0, 97)  # a = N . v_i = sigma z
    wz = np.exp(-0.5 * z * z)
    wz /= wz.sum()
    y, wy = special.roots_genlaguerre(12, (dv - 1.0) / 2.0 - 1.0)  # |N_perp|^2 = 2 sigma^2 y, y ~ Gamma((dv-1)/2)
    wy = wy / wy.sum()
    g, wg = _coordinate_nodes(d, 40)  # g = G_il = k_i . k_l
    a = np.sqrt(sig2) * z[:, None, None]  # [z, 1, 1]
    eta = a * a + 2.0 * sig2 * y[None, :, None]  # |N|^2, [z, y, 1]
    scale2 = np.maximum((1.0 - g) ** 2 + 2.0 * (1.0 - g) * a + eta - 1.0 / d, 1e-12)  # [z, y, g]
    tail = (_coordinate_sf((1.0 + a - g) / np.sqrt(scale2), dv) * wg).sum(-1)  # P(wrong score l wins), [z, y]
    p = np.exp((n - 1.0) * np.log1p(-np.minimum(tail, 1.0 - 1e-16)))
    return float(np.clip(((p * wy).sum(-1) * wz).sum(), 0.0, 1.0))


def argmax_recall_refined(n, d, dv):
    """T10 (refined): predicted argmax recall of the additive memory, random unit keys and values.

    The prediction to compare measurements with (``argmax_recall`` is the conservative bound).
    Read r_i = v_i + N with N = sum_{j != i} G_ij v_j; correct score 1 + a, a = N . v_i. For a
    wrong value l write g = G_il and N = N'' + g v_l. Then

        wrong score  = g + v_l . (v_i + N''),     correct score = 1 + a'' + g (v_i . v_l),

    so l wins iff  v_l . ((1 - g) v_i + N'') > 1 + a'' - g : the shared term v_i . v_l cancels
    partly (weight 1 - g). v_l is uniform and independent of (g, v_i, N''), so the left side is
    |(1 - g) v_i + N''| times one coordinate u of a uniform unit vector in R^dv (a bounded,
    Beta-distributed law, not a Gaussian), and g is one coordinate in R^d. The model takes N
    Gaussian with variance (n - 1)/(d dv) per coordinate, |N''|^2 = |N|^2 - 1/d, a'' = a, and
    the n - 1 wrong values independent given (a, |N|^2):

        P(correct) = E_{a, |N|^2} [ (1 - E_g P(u > (1 + a - g) / s_g))^(n - 1) ],
        s_g^2 = (1 - g)^2 + 2 (1 - g) a + |N|^2 - 1/d,

    integrated by quadrature (a on a grid, |N_perp|^2 by Gauss-Laguerre, g by Gauss-Jacobi).
    Regime: d, dv >= 2. Measured 90%-recall capacity / ``argmax_capacity_refined`` = 0.976-1.030
    for d, dv in 16..256, d = dv and d != dv (docs/theory-delta.md). Costs about 0.15 s a point.
    """
    n, d, dv = _counts(n=n, d=d, dv=dv)
    if np.any(d < 2) or np.any(dv < 2):
        raise CapacityError(f"d and dv must be >= 2 for the refined argmax prediction, got d={d!r}, dv={dv!r}")
    return _out(np.vectorize(_refined_one, otypes=[np.float64])(n, d, dv))


def argmax_capacity_refined(d, dv, tau=0.9):
    """T10 (refined): the real n at which ``argmax_recall_refined`` equals tau, for each (d, dv).

    The prediction of the measured tau-recall capacity of the additive memory with random unit
    keys and values (``argmax_capacity`` is the conservative Gaussian bound below it).
    """
    d, dv = _counts(d=d, dv=dv)
    tau = float(tau)
    if not 0.0 < tau < 1.0:
        raise CapacityError(f"tau must lie in (0, 1), got {tau!r}")
    if np.any(d < 2) or np.any(dv < 2):
        raise CapacityError(f"d and dv must be >= 2 for the refined argmax prediction, got d={d!r}, dv={dv!r}")
    return _out(
        _solve_capacity(argmax_recall_refined, d, dv, tau, start=lambda a, b: argmax_capacity(a, b, tau), xtol=1e-7)
    )


# ---------------------------------------------------------------- T11: decay


@_deprecated.params("theory.decay_readout", g="alpha")
def decay_readout(K, V, alpha):
    """T11: reads of every stored key after writing n pairs into S_t = alpha S_{t-1} + k_t^T v_t.

    r_i = sum_j alpha^(n-j) G_ij v_j (tokens numbered 1..n), so old tokens fade by the gate alpha per step
    (the ``decay`` variant's ``alpha``; the argument was ``g`` before, still accepted with a DeprecationWarning).
    Shapes: K ``[..., n, d]``, V ``[..., n, dv]``; returns ``[..., n, dv]``.
    """
    g = _numbers("alpha", alpha)
    if g.ndim != 0 or not np.isfinite(g):
        raise CapacityError(
            f"alpha must be one finite number (the gate, in (0, 1] for a decaying memory), got {alpha!r}"
        )
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


# ---------------------------------------------------------------- T12: the delta rule with random unit keys


def _delta_trajectory(n_max, d, beta):
    """Expected mean error after t = 1..n_max writes for each (d, beta); returns ``[n_max, U]``.

    ``d``, ``beta``: float arrays ``[U]``. Runs the exact second-moment recursion of
    ``delta_rule_error`` on the sums over stored pairs, O(n_max) steps for all U pairs at once.
    """
    b = beta
    m2, m4 = 1.0 / d, 3.0 / (d * (d + 2.0))  # E c^2, E c^4 for c = k_i . k_t (T7)
    kap = b * b * (m2 - m4) / (d - 1.0)
    alpha = 1.0 - 2.0 * b * m2 + b * b * m4 - kap  # A -> A
    gamma = -2.0 * b * (m2 - b * m4) - 2.0 * kap  # B -> A
    const = b * b * (m4 + m2) - kap
    shrink = 1.0 - b * (2.0 - b) / d  # F -> F
    F = np.zeros_like(d)  # E ||S_t||_F^2
    SA = np.zeros_like(d)  # sum over stored pairs of E ||e_i||^2
    SB = np.zeros_like(d)  # sum over stored pairs of E e_i . v_i
    out = np.empty((int(n_max), d.size))
    for t in range(1, int(n_max) + 1):
        old = t - 1.0  # pairs already stored, each updated by write t
        SA = alpha * SA + gamma * SB + old * (kap * F + const) + (1.0 - b) ** 2 * (F / d + 1.0)
        SB = (1.0 - b * m2) * SB - old * b * m2 - (1.0 - b)
        F = shrink * F + b * b
        out[t - 1] = SA / t
    return out


def delta_rule_error(n, d, beta=1.0, dv=None):
    """T12: expected mean error mean_i ||k_i S_n - v_i||^2 of the delta rule after n writes (exact, recursion).

    S_t = (I - b k_t^T k_t) S_{t-1} + b k_t^T v_t with i.i.d. unit keys uniform on the sphere in R^d
    (d >= 2) and i.i.d. values with E v = 0, ||v|| = 1 (``values.make("gaussian", ...)``); b in (0, 2).
    This is the probe's ``mse`` of ``variants.get("delta", beta=b)`` in expectation. It does not
    depend on dv (``dv`` is accepted and checked only).

    Derivation (docs/theory-delta.md). Let e_i = k_i S - v_i, c = k_i . k_t, m2 = E c^2 = 1/d,
    m4 = E c^4 = 3/(d (d + 2)), kappa = b^2 (m2 - m4)/(d - 1). Write t updates every stored pair,

        e_i <- (1 - b c^2) e_i - b c^2 v_i - b c (k_perp S - v_t),     k_perp = k_t - c k_i,

    and the new key k_t is independent of everything before, so the second moments
    F = E||S||_F^2, A_i = E||e_i||^2, B_i = E e_i . v_i follow a closed linear recursion:

        F <- (1 - b (2 - b)/d) F + b^2                                    (F -> b d / (2 - b))
        B_i <- (1 - b/d) B_i - b/d                     (so 1 + B_i = b (1 - b/d)^(age), the signal)
        A_i <- (1 - 2 b m2 + b^2 m4) A_i - 2 b (m2 - b m4) B_i + b^2 (m2 + m4)
               + kappa (F - 1 - 2 B_i - A_i)

    starting, when pair t is written, from A_t = (1 - b)^2 (1 + F/d), B_t = -(1 - b). The
    result is mean_i A_i, computed on the sums over pairs in O(n) steps. Nothing is approximated:
    it is the exact expectation for every n >= 1 and d >= 2 (n = 1 gives (1 - b)^2).
    ``n`` must hold whole numbers; n, d, beta (and dv) broadcast; a float for scalar input.

    >>> round(delta_rule_error(1, 64, beta=0.5), 6)
    0.25
    >>> delta_rule_error([16, 64, 256], 64).round(3).tolist()
    [0.135, 0.598, 1.496]
    """
    n, d = _counts(n=n, d=d)
    if np.any(n != np.round(n)):
        raise CapacityError(f"n must hold whole numbers of pairs (>= 1), got {n!r}")
    if np.any(d < 2):
        raise CapacityError(f"d must be >= 2 for random unit keys, got {d!r}")
    b = np.asarray(beta, dtype=np.float64)
    if not np.all(np.isfinite(b)) or np.any(b <= 0) or np.any(b >= 2):
        raise CapacityError(f"beta must lie in (0, 2) (the delta rule is stable there), got {beta!r}")
    if dv is not None:
        _counts(dv=dv)
    parts = [n, d, b] if dv is None else [n, d, b, np.asarray(dv, dtype=np.float64)]
    n, d, b = np.broadcast_arrays(*parts)[:3]
    pairs, index = np.unique(np.stack([d.ravel(), b.ravel()], axis=1), axis=0, return_inverse=True)
    traj = _delta_trajectory(n.max(), pairs[:, 0], pairs[:, 1])  # [n_max, U]
    value = traj[n.ravel().astype(np.int64) - 1, index.ravel()]
    return _out(value.reshape(n.shape))


def delta_rule_capacity(eps, d, beta=1.0):
    """Capacity under the delta rule's exact mean error: the largest n with ``delta_rule_error(n, d, beta) <= eps``.

    Whole numbers for each broadcast (eps, d, beta); 0 when even one pair misses (eps < (1 - b)^2); inf when the
    error never exceeds eps (it tends to 2 / (2 - b) as n grows, so for eps >= 2 / (2 - b)). d must be whole.

    >>> delta_rule_capacity(0.5, 64)
    53.0
    """
    eps = _numbers("eps", eps)
    (d,) = _counts(d=d)
    b = _numbers("beta", beta)
    if np.any(d < 2) or np.any(d != np.round(d)):
        raise CapacityError(f"d must be a whole number >= 2, got {d!r}")
    if not np.all(np.isfinite(b)) or np.any(b <= 0) or np.any(b >= 2):
        raise CapacityError(f"beta must lie in (0, 2), got {beta!r}")
    eps, d, b = np.broadcast_arrays(eps, d, b)
    pairs, index = np.unique(np.stack([d.ravel(), b.ravel()], axis=1), axis=0, return_inverse=True)
    traj = _delta_trajectory(int(64 * pairs[:, 0].max()), pairs[:, 0], pairs[:, 1])  # [n_max, U], one recursion for all
    out = np.empty(eps.size)
    for i, (e, u) in enumerate(zip(eps.ravel(), index.ravel())):
        over = np.nonzero(traj[: int(64 * pairs[u, 0]), u] > e)[0]  # the first n whose error exceeds eps, minus 1
        out[i] = float(over[0]) if over.size and e < 2.0 / (2.0 - pairs[u, 1]) else np.inf
    out = out.reshape(eps.shape)
    return _out(out)


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
