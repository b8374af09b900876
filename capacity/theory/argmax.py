"""T10: retrieval by argmax, the Gaussian bound and the refined prediction; T30: listwise retrieval (recall@k)."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType

import numpy as np

from lacapacity.errors import CapacityError
from lacapacity.theory._common import FloatArray, Floats, Numbers, _counts, _numbers, _out, _scipy

__all__ = [
    "argmax_recall",
    "argmax_capacity",
    "argmax_recall_refined",
    "argmax_capacity_refined",
    "recall_at",
    "recall_at_refined",
    "recall_at_capacity_refined",
    "vocab_argmax_recall",
]


def _score_spreads(n: FloatArray, d: FloatArray, dv: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Standard deviations of the correct score and of each wrong score (Gaussian approximation)."""
    sigma_c = np.sqrt((n - 1.0) / (d * dv))
    sigma_w = np.sqrt(1.0 / dv + 1.0 / d + np.maximum(n - 2.0, 0.0) / (d * dv))
    return sigma_c, sigma_w


def argmax_recall(n: Numbers, d: Numbers, dv: Numbers) -> Floats:
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

    def integrand(z: float) -> FloatArray:
        log_cdf = special.log_ndtr((1.0 + sigma_c * z) / sigma_w)  # [points]
        got: FloatArray = np.exp(-0.5 * z * z + (n - 1.0) * log_cdf) / np.sqrt(2.0 * np.pi)
        return got

    value, _ = integrate.quad_vec(integrand, -12.0, 12.0, epsabs=1e-10, epsrel=1e-8)
    value = np.where(n <= 1, 1.0, np.clip(value, 0.0, 1.0))
    return _out(value.reshape(shape))


def argmax_capacity(d: Numbers, dv: Numbers, tau: Numbers = 0.9) -> Floats:
    """T10: the largest (real-valued) n whose predicted argmax recall is >= tau, for each (d, dv).

    Grows much faster than d: roughly d dv / (2 ln n). Uses the Gaussian ``argmax_recall``, so
    this is a conservative bound (measured capacities lie above it); ``argmax_capacity_refined``
    is the prediction.
    """
    d, dv = _counts(d=d, dv=dv)
    return _out(_solve_capacity(argmax_recall, d, dv, _tau(tau)))


def _tau(tau: Numbers) -> float:
    """The recall level of a capacity: one number in (0, 1)."""
    tau_a = _numbers("tau", tau)
    if tau_a.ndim != 0 or not 0.0 < float(tau_a) < 1.0:
        raise CapacityError(f"tau must lie in (0, 1), got {tau!r}")
    return float(tau_a)


def _refined_regime(d: FloatArray, dv: FloatArray, what: str) -> None:
    """Raise unless d, dv >= 2, where the refined predictions hold (``what``: the prediction, for the message)."""
    if np.any(d < 2) or np.any(dv < 2):
        raise CapacityError(f"d and dv must be >= 2 for the refined {what}, got d={d!r}, dv={dv!r}")


def _solve_capacity(
    recall: Callable[[float, float, float], Floats],
    d: FloatArray,
    dv: FloatArray,
    tau: float,
    start: Callable[[float, float], Floats] | None = None,
    xtol: float = 1e-10,
) -> FloatArray:
    """The real n with recall(n, d, dv) = tau, for each (d, dv) (recall decreasing in n).

    ``start(d, dv)``: a first guess to bracket from (default 2); ``xtol``: the tolerance on ln n.
    """
    integrate, optimize, special = _scipy()

    def one(dd: float, vv: float) -> float:
        def f(log_n: float) -> Floats:
            return recall(float(np.exp(log_n)), dd, vv) - tau

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

    got: FloatArray = np.vectorize(one, otypes=[np.float64])(d, dv)
    return got


def _coordinate_nodes(m: float, count: int) -> tuple[FloatArray, FloatArray]:
    """Gauss-Jacobi nodes and weights (summing to 1) for one coordinate x of a uniform unit vector in R^m.

    Its density is proportional to (1 - x^2)^((m - 3)/2) on [-1, 1], a Jacobi weight.
    """
    integrate, optimize, special = _scipy()
    a = (m - 3.0) / 2.0
    x, w = special.roots_jacobi(count, a, a)
    return x, w / w.sum()


def _coordinate_sf(x: FloatArray, m: float) -> FloatArray:
    """P(u > x) for one coordinate u of a uniform unit vector in R^m: (u + 1)/2 ~ Beta((m-1)/2, (m-1)/2)."""
    integrate, optimize, special = _scipy()
    a = (m - 1.0) / 2.0
    got: FloatArray = special.betainc(a, a, (1.0 - np.clip(x, -1.0, 1.0)) / 2.0)
    return got


def _within(n: float, k: int, p: FloatArray, special: ModuleType) -> FloatArray:
    """P(fewer than k of n - 1 independent wrong values beat the correct one), each with probability p:
    the binomial CDF at k - 1, I_(1-p)(n - k, k) (real n; 1 when n - 1 < k)."""
    if n - 1.0 < k:
        return np.ones_like(p)
    if k == 1:
        return np.exp((n - 1.0) * np.log1p(-np.minimum(p, 1.0 - 1e-16)))
    got: FloatArray = special.betainc(n - k, k, np.clip(1.0 - p, 0.0, 1.0))
    return got


def _refined_one(n: float, d: float, dv: float, k: int = 1) -> float:
    """``argmax_recall_refined`` (k = 1) and ``recall_at_refined`` for scalar n, d, dv (d, dv >= 2)."""
    integrate, optimize, special = _scipy()
    if n <= k:
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
    p = _within(n, k, tail, special)
    return float(np.clip(((p * wy).sum(-1) * wz).sum(), 0.0, 1.0))


def argmax_recall_refined(n: Numbers, d: Numbers, dv: Numbers) -> Floats:
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
    _refined_regime(d, dv, "argmax prediction")
    return _out(np.vectorize(_refined_one, otypes=[np.float64])(n, d, dv))


def argmax_capacity_refined(d: Numbers, dv: Numbers, tau: float = 0.9) -> Floats:
    """T10 (refined): the real n at which ``argmax_recall_refined`` equals tau, for each (d, dv).

    The prediction of the measured tau-recall capacity of the additive memory with random unit
    keys and values (``argmax_capacity`` is the conservative Gaussian bound below it).
    """
    d, dv = _counts(d=d, dv=dv)
    tau = _tau(tau)
    _refined_regime(d, dv, "argmax prediction")
    return _out(
        _solve_capacity(argmax_recall_refined, d, dv, tau, start=lambda a, b: argmax_capacity(a, b, tau), xtol=1e-7)
    )


def _k(k: Numbers) -> int:
    kk = _numbers("k", k)
    if kk.ndim != 0 or not np.isfinite(kk) or kk < 1 or kk != np.round(kk):
        raise CapacityError(f"k must be a whole number >= 1, got {k!r}")
    return int(kk)


def recall_at(n: Numbers, d: Numbers, dv: Numbers, k: Numbers) -> Floats:
    """T30: predicted recall@k (the own value among the top k of the decode), Gaussian model as in T10.

    With the correct score N(1, s_c^2) and the n - 1 wrong scores N(0, s_w^2), independent given it (T10's model),
    read i is correct at k when fewer than k wrong scores beat the correct one:

        P = E_z [ I_(Phi((1 + s_c z)/s_w)) (n - k, k) ],   z ~ N(0, 1)

    (the binomial CDF at k - 1 as a regularised incomplete beta function, real n). k = 1 is ``argmax_recall``
    exactly. Conservative like it; ``recall_at_refined`` is the prediction.
    """
    integrate, optimize, special = _scipy()
    kk = _k(k)
    n, d, dv = _counts(n=n, d=d, dv=dv)
    shape = n.shape
    n, d, dv = (a.ravel() for a in (n, d, dv))
    sigma_c, sigma_w = _score_spreads(n, d, dv)

    def integrand(z: float) -> FloatArray:
        win = special.ndtr((1.0 + sigma_c * z) / sigma_w)  # P(a wrong score stays below), [points]
        inside = np.where(n - 1.0 < kk, 1.0, special.betainc(np.maximum(n - kk, 1e-300), kk, np.clip(win, 0.0, 1.0)))
        got: FloatArray = np.exp(-0.5 * z * z) * inside / np.sqrt(2.0 * np.pi)
        return got

    value, _ = integrate.quad_vec(integrand, -12.0, 12.0, epsabs=1e-10, epsrel=1e-8)
    value = np.where(n <= kk, 1.0, np.clip(value, 0.0, 1.0))
    return _out(value.reshape(shape))


def recall_at_refined(n: Numbers, d: Numbers, dv: Numbers, k: Numbers) -> Floats:
    """T30 (refined): predicted recall@k of the additive memory, random unit keys and values.

    ``argmax_recall_refined``'s model with its n - 1 wrong values independent given the read's crosstalk: the own
    value is in the top k when fewer than k of them win, E[I_(1 - q)(n - k, k)] with q the refined probability
    that one wrong value wins. k = 1 is ``argmax_recall_refined``. Regime: d, dv >= 2.
    """
    kk = _k(k)
    n, d, dv = _counts(n=n, d=d, dv=dv)
    _refined_regime(d, dv, "prediction")
    return _out(np.vectorize(lambda a, b, c: _refined_one(a, b, c, kk), otypes=[np.float64])(n, d, dv))


def recall_at_capacity_refined(d: Numbers, dv: Numbers, k: Numbers, tau: float = 0.9) -> Floats:
    """T30 (refined): the real n at which ``recall_at_refined`` equals tau, for each (d, dv)."""
    kk = _k(k)
    d, dv = _counts(d=d, dv=dv)
    tau = _tau(tau)
    _refined_regime(d, dv, "prediction")
    return _out(
        _solve_capacity(
            lambda n, a, b: _refined_one(n, a, b, kk) if n > kk else 1.0,
            d,
            dv,
            tau,
            start=lambda a, b: argmax_capacity(a, b, tau),
            xtol=1e-7,
        )
    )


def vocab_argmax_recall(n: Numbers, d: Numbers, dv: Numbers, vocab: Numbers) -> Floats:
    """T10 over a vocabulary: predicted MQAR accuracy of the additive memory (random keys and values, no overwrites),
    what the mqar task stores as ``accuracy_pred`` and its figure draws.

    ``lacapacity.theory.argmax_recall`` decodes over the n stored values; here the decode runs over all ``vocab``
    values. The read r = v_i + sum_{j != i} G_ij v_j scores N(1, s_c^2) on its own value, N(0, s_w^2) on each of
    the n - 1 other stored values (s_c, s_w as in T10) and N(0, s_u^2), s_u^2 = (1 + (n - 1)/d)/dv, on each of
    the vocab - n values never stored; treating the wrong scores as independent,

        P(correct) = E_z [ Phi((1 + s_c z)/s_w)^(n - 1) Phi((1 + s_c z)/s_u)^(vocab - n) ],   z ~ N(0, 1).

    Equals ``argmax_recall(n, d, dv)`` at vocab = n; conservative like it (measured accuracy runs above).
    """
    integrate, _, special = _scipy()

    n, d, dv, vocab = (np.asarray(x, dtype=np.float64) for x in np.broadcast_arrays(n, d, dv, vocab))
    for name, a in (("n", n), ("d", d), ("dv", dv), ("vocab", vocab)):
        if not np.all(np.isfinite(a)) or np.any(a < 1):
            raise CapacityError(f"{name} must be >= 1 (finite), got {a!r}")
    if np.any(vocab < n):
        raise CapacityError("vocab must be >= n (the stored values are part of the vocabulary)")
    shape = n.shape
    n, d, dv, vocab = (a.ravel() for a in (n, d, dv, vocab))
    s_c = np.sqrt((n - 1.0) / (d * dv))
    s_w = np.sqrt(1.0 / dv + 1.0 / d + np.maximum(n - 2.0, 0.0) / (d * dv))
    s_u = np.sqrt((1.0 + (n - 1.0) / d) / dv)

    def integrand(z: float) -> FloatArray:
        mean = 1.0 + s_c * z
        log_p = (n - 1.0) * special.log_ndtr(mean / s_w) + (vocab - n) * special.log_ndtr(mean / s_u)
        density: FloatArray = np.exp(-0.5 * z * z + log_p) / math.sqrt(2.0 * math.pi)  # scipy is untyped
        return density

    value, _ = integrate.quad_vec(integrand, -12.0, 12.0, epsabs=1e-10, epsrel=1e-8)
    value = np.clip(value, 0.0, 1.0).reshape(shape)
    return float(value) if value.ndim == 0 else value
