"""T31-T33: what storing the state as int8 or int4 with scales costs, with and without error feedback
(``capacity.variants.quantise``; docs/theory.md, T31-T33).

Model. A group of m entries shares a scale Delta = M / Q, M the group's largest magnitude and Q = 2^(bits - 1) - 1
(127 int8, 7 int4); its largest entry is kept exactly, each other one is rounded to the grid Delta Z with an error
uniform on [-Delta/2, Delta/2] (variance Delta^2 / 12; stochastic rounding: Delta^2 / 6 on average). The state's
entries are taken N(0, sigma^2), independent, with the second moment the float32 recurrence gives them (random unit
keys and values; ``capacity.theory.precision``'s moments), so one rounding of a group's entry costs

    w(sigma) = (m - 1)/m * kappa_m sigma^2 / (12 Q^2),   kappa_m = E max_{i <= m} |z_i|^2 / E z^2, z ~ N(0, 1),

kappa_m by quadrature (1 at m = 1, 3.46 at m = 8, 5.71 at m = 32, 11.96 at m = 1024). The group size m: dv for
``/row``, d for ``/col``, d dv for a tensor scale, N for ``/gN``.

>>> from capacity import theory
>>> round(theory.quantised_final_error(1024, 32, 32, bits=8, scope="row") / (1024 / 32), 7)   # against crosstalk
2.86e-05
"""

from __future__ import annotations

import functools
import math

import numpy as np

from capacity.errors import CapacityError
from capacity.theory._common import FloatArray, Floats, Numbers, _counts, _out
from capacity.theory.precision import _check_memory, _contraction, _moment

__all__ = [
    "scale_moment",
    "quantised_rounding_variance",
    "quantised_final_error",
    "quantised_step_error",
    "quantised_crossover",
]

SCOPES = ("tensor", "row", "col", "group")


@functools.lru_cache(maxsize=256)
def _kappa(m: int) -> float:
    from scipy import integrate
    from scipy.special import erf

    if m == 1:
        return 1.0

    # E M^2 = int_0^inf 2x P(M > x) dx, P(M <= x) = erf(x / sqrt 2)^m
    def f(x: float) -> float:
        return float(2.0 * x * (1.0 - erf(x / math.sqrt(2.0)) ** m))

    top = math.sqrt(2.0 * math.log(max(m, 2))) + 12.0
    val, _ = integrate.quad(f, 0.0, top, limit=400, epsabs=1e-13, epsrel=1e-12)
    return float(val)


def scale_moment(group: Numbers) -> Floats:
    """kappa_m = E max_{i <= m} z_i^2 for m = ``group`` independent standard normal z: the mean squared largest
    magnitude of a group, in units of its entries' variance (1, 3.46, 5.71, 11.96 at m = 1, 8, 32, 1024)."""
    (m,) = _counts(group=group)
    if np.any(m != np.round(m)):
        raise CapacityError(f"group must be a whole number >= 1, got {group!r}")
    return _out(np.vectorize(lambda x: _kappa(int(x)))(m))


def _q(bits: int) -> int:
    if bits not in (8, 4):
        raise CapacityError(f"bits must be 8 or 4, got {bits!r}")
    return (1 << (int(bits) - 1)) - 1


def _group(scope: str, d: FloatArray, dv: FloatArray, group: Numbers | None) -> FloatArray:
    if scope not in SCOPES:
        raise CapacityError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if scope == "group":
        if group is None:
            raise CapacityError("scope 'group' needs group= (the entries that share a scale)")
        (g,) = _counts(group=group)
        return g * np.ones(np.broadcast(d, dv).shape)
    return {"tensor": d * dv, "row": dv * np.ones_like(d), "col": d * np.ones_like(dv)}[scope]


def _w(sigma2: Floats, m: Floats, bits: int, stochastic: bool) -> Floats:
    """One rounding's variance per entry of a group of m with entries N(0, sigma2)."""
    kappa = np.vectorize(lambda x: _kappa(int(x)))(m)
    got: Floats = (m - 1.0) / m * kappa * sigma2 / ((6.0 if stochastic else 12.0) * _q(bits) ** 2)
    return got


def quantised_rounding_variance(sigma: Numbers, group: Numbers, bits: int = 8, *, stochastic: bool = False) -> Floats:
    """T31: E (fl(x) - x)^2 per entry when ``group`` entries N(0, sigma^2) share a symmetric scale M / Q:
    (m - 1)/m kappa_m sigma^2 / (12 Q^2) (stochastic rounding: / 6). Holds while the grid is fine against the
    entries' spread (Q^2 >> kappa_m, so int4 too: its Delta is about sigma / 3 at m = 32)."""
    (m,) = _counts(group=group)
    s = np.asarray(sigma, dtype=np.float64)
    if np.any(~np.isfinite(s)) or np.any(s <= 0):
        raise CapacityError(f"sigma must be > 0 and finite, got {sigma!r}")
    return _out(_w(s * s, m, bits, stochastic))


def quantised_final_error(
    n: Numbers,
    d: Numbers,
    dv: Numbers,
    bits: int = 8,
    scope: str = "row",
    *,
    group: Numbers | None = None,
    memory: str = "linear",
    alpha: float = 1.0,
    beta: float = 1.0,
    stochastic: bool = False,
) -> Floats:
    """T31: the mean squared deviation of a unit query's read after one rounding of the finished state (n float32
    writes of random unit keys and values) to ``bits`` with ``scope`` scales: dv w(sigma_n), sigma_n^2 = E ||S_n||^2
    / (d dv). For the linear memory at int8 per row, d = dv = 32: 2.86e-5 n / d, 2.9e-5 times the crosstalk."""
    n, d, dv = _counts(n=n, d=d, dv=dv)
    m = _group(scope, d, dv, group)
    s2 = _moment(memory, n, d, alpha, beta) / (d * dv)
    return _out(dv * _w(s2, m, bits, stochastic))


_QUANTILES = 256  # equally likely values of a group's largest magnitude


@functools.lru_cache(maxsize=64)
def _max_quantiles(m: int) -> FloatArray:
    """256 equally likely values of max_{i <= m} |z_i|, z ~ N(0, 1), scaled so that their mean square is kappa_m."""
    from scipy.special import erfinv

    u = (np.arange(_QUANTILES) + 0.5) / _QUANTILES
    x = math.sqrt(2.0) * erfinv(u ** (1.0 / m))  # P(max <= x) = erf(x / sqrt 2)^m
    got: FloatArray = x * math.sqrt(_kappa(m) / float(np.mean(x * x)))
    return got


def _grid_variance(
    sig2: FloatArray, scale: FloatArray, d: int, dv: int, m: float, bits: int, stochastic: bool
) -> FloatArray:
    """Per entry and step: the variance of rounding an increment delta = scale k_a v_b to the grid Delta = M / Q
    (the stored entry on the grid; M the group's largest magnitude, entries N(0, sig2)), over the distribution of
    M, times (m - 1)/m. Arrays over steps ``[S]``; Delta^2 / 12 (/ 6) while Delta is far below the increments."""
    from capacity.theory.precision import _increment_table, _interp

    log_rho, var, _, _, _ = _increment_table(int(d), int(dv), bool(stochastic))
    xq = _max_quantiles(int(m))
    out = np.empty(len(sig2))
    for lo in range(0, len(sig2), 4096):  # [steps, quantiles] blocks
        sl = slice(lo, lo + 4096)
        delta = np.sqrt(sig2[sl])[:, None] * xq[None, :] / _q(bits)
        rho = delta / scale[sl, None]
        v = _interp(log_rho, var, rho) * scale[sl, None] ** 2
        v = np.where(rho < np.exp(log_rho[0]), delta**2 / (6.0 if stochastic else 12.0), v)
        out[sl] = v.mean(1)
    return (m - 1.0) / m * out


def _step(
    n_max: int,
    d: int,
    dv: int,
    m: float,
    bits: int,
    memory: str,
    alpha: float,
    beta: float,
    stochastic: bool,
    feedback: bool,
) -> FloatArray:
    """Deviations of a unit query's read after s = 1 .. n_max writes, the state rounded after every write."""
    a, b = _check_memory(memory, alpha, beta)
    c = float(_contraction(memory, d, alpha, beta))  # d is one number, and so is c
    N = d * dv
    s = np.arange(1, n_max + 1, dtype=np.float64)
    sig = np.asarray(_moment(memory, s, d, alpha, beta)) / N  # the float32 state's entry variance after s writes
    A = float(_w(1.0, np.float64(m), bits, stochastic))  # w = A sigma^2
    out = np.empty(n_max)
    e = 0.0
    if not feedback:
        # e_s = c e_(s-1) + w_s: each rounding adds the error of rounding the write's increment to the grid of the
        # stored state (T15's increment distribution), independent of the last
        if memory in ("delta", "gated_delta"):  # increment b k_a (v - alpha k S)_b, E ||v - alpha k S||^2 = 1 + a^2 m/d
            scale = b * np.sqrt(1.0 + a * a * _moment(memory, s - 1, d, alpha, beta) / d)
        else:
            scale = np.ones_like(s)
        w = _grid_variance(sig, scale, d, dv, m, bits, stochastic)
        for i in range(n_max):
            e = c * e + w[i]
            out[i] = dv * e
        return out
    # error feedback: r_s the residual (variance A sigma_s^2 per entry: the rounded value is off the grid), Z = Q + r;
    # E = Z - F obeys E_s = alpha (I - b k^T k) E_(s-1) + (I - alpha (I - b k^T k)) r_(s-1), the deviation Q - F = E - r
    g = (1.0 - a) ** 2 + (2.0 * (1.0 - a) * a * b + a * a * b * b) / d
    prev_r = 0.0
    for i in range(n_max):
        e = c * e + g * prev_r
        prev_r = A * sig[i]
        out[i] = dv * (e + prev_r)
    return out


def quantised_step_error(
    n: Numbers,
    d: Numbers,
    dv: Numbers,
    bits: int = 8,
    scope: str = "row",
    *,
    group: Numbers | None = None,
    feedback: bool = False,
    memory: str = "linear",
    alpha: float = 1.0,
    beta: float = 1.0,
    stochastic: bool = False,
) -> Floats:
    """T32: the mean squared deviation of a unit query's read from the float32 read after n writes, the state
    quantised after every write.

    Without feedback each write's increment (T15's exact distribution: scale k_a v_b, the delta rules' scale b
    sqrt(1 + alpha^2 m_(s-1)/d)) is rounded to the grid Delta = M / Q of the stored state, M distributed as the
    largest of the group's m entries N(0, sigma_s^2); (m - 1)/m of the entries take that error (the largest is
    kept), independent from write to write, and the errors add up contracted by the memory (c: 1 linear, alpha^2
    decay, alpha^2 (1 - (2 beta - beta^2)/d) the delta rules): e_s = c e_(s-1) + w_s. While the increments span many
    grid steps w_s = T31's w and the linear memory's deviation is A n (n + 1) / (2 d) (A = w / sigma^2); as the grid
    grows past the increments it falls below that (0.98, 0.96, 0.92 of it at n = 64, 256, 1024 for int8 per row, d
    = 32, as measured). Measured within 1% for int8 (2026-12-03: linear, decay, delta; round-to-nearest and
    stochastic). For int4 the increments fall below the grid within a few writes; there the scale's change at every
    write shifts the stored entries against the grid and the errors stay near uniform: T33's uniform model holds
    better (this form is 30% low for int4 per row, stochastic rounding, at n = 104).

    With error feedback (``feedback=True``) the residual r, the last rounding's error, is added back before the next
    rounding, so Z = Q + r follows the float32 recurrence up to the memory's own use of Q: E = Z - F obeys E_s =
    alpha (I - beta k^T k) E_(s-1) + (I - alpha (I - beta k^T k)) r_(s-1), and the read deviation is that of E - r:
    bounded, dv w (1 + g / (1 - c)) with g = (1 - alpha)^2 + (2 (1 - alpha) alpha beta + alpha^2 beta^2) / d. The
    rounded value is off the grid, so w is T31's. For the linear memory E = 0: the deviation is one rounding of the
    float32 state, T31, at every n.
    """
    n, d, dv = _counts(n=n, d=d, dv=dv)
    m = _group(scope, d, dv, group)
    out = np.empty(n.shape)
    cache: dict[tuple[int, int, float], FloatArray] = {}
    n_max = int(np.max(n))
    for idx in np.ndindex(n.shape):
        key = (int(d[idx]), int(dv[idx]), float(m[idx]))
        if key not in cache:
            cache[key] = _step(n_max, *key, bits, memory, alpha, beta, bool(stochastic), bool(feedback))
        out[idx] = cache[key][int(round(float(n[idx]))) - 1]
    return _out(out)


def quantised_crossover(
    d: Numbers,
    dv: Numbers,
    bits: int = 8,
    scope: str = "row",
    *,
    group: Numbers | None = None,
    stochastic: bool = False,
    ratio: float = 1.0,
) -> Floats:
    """T33: the number of writes at which the linear memory's deviation without feedback reaches ``ratio`` times
    its crosstalk (n - 1)/d, each rounding's error taken uniform over the grid (T31's w at the float32 spread):
    A n (n + 1) / (2 d) = r (n - 1)/d, the larger root of A n^2 + (A - 2 r) n + 2 r = 0, about 2 r / A = 24 r Q^2 /
    ((m - 1)/m kappa_m) (12 for stochastic rounding). Per row at d = dv = 32: int4 at 211 writes (104 stochastic),
    int8 at 70,000 (35,000 stochastic).

    The crossing comes where the increments are below the grid (their rms is Q / sqrt(24 kappa_m n) grid steps
    there). The scale then moves with the group's largest entry at every write and shifts the stored entries
    against the grid, so the errors are closer to uniform than T32's on-grid model says: measured (2026-12-03, d =
    32, per row) the int4 deviation at n* is 0.98 of the crosstalk with stochastic rounding and 1.07 with
    round-to-nearest. For int8 the crossing is an estimate far past the measured range. ``inf`` where the deviation
    never reaches the ratio (A >= 2 r (3 - 2 sqrt 2))."""
    (d, dv) = _counts(d=d, dv=dv)
    r = float(ratio)
    if not 0.0 < r <= 1.0:
        raise CapacityError(f"ratio must lie in (0, 1], got {ratio!r}")
    m = _group(scope, d, dv, group)
    A = _w(1.0, m * np.ones(d.shape), bits, bool(stochastic))
    b = 2.0 * r - A
    disc = b * b - 8.0 * r * A
    with np.errstate(invalid="ignore", divide="ignore"):
        root = np.where((disc >= 0) & (b > 0), (b + np.sqrt(np.maximum(disc, 0.0))) / (2.0 * A), np.inf)
    return _out(root)
