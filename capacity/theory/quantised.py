"""T31-T33: what storing the state as int8 or int4 with scales costs, with and without error feedback
(``lacapacity.variants.quantise``; docs/theory.md, T31-T33).

Model. A group of m entries shares a scale Delta = M / Q, M the group's largest magnitude and Q = 2^(bits - 1) - 1
(127 int8, 7 int4); its largest entry is kept exactly, each other one is rounded to the grid Delta Z with an error
uniform on [-Delta/2, Delta/2] (variance Delta^2 / 12; stochastic rounding: Delta^2 / 6 on average). The state's
entries are taken N(0, sigma^2), independent, with the second moment the float32 recurrence gives them (random unit
keys and values; ``lacapacity.theory.precision``'s moments), so one rounding of a group's entry costs

    w(sigma) = (m - 1)/m * kappa_m sigma^2 / (12 Q^2),   kappa_m = E max_{i <= m} |z_i|^2 / E z^2, z ~ N(0, 1),

kappa_m by quadrature (1 at m = 1, 3.46 at m = 8, 5.71 at m = 32, 11.96 at m = 1024). The group size m: dv for
``/row``, d for ``/col``, d dv for a tensor scale, N for ``/gN``. A row, a column or a group of a row is an
isotropic vector (a sum of isotropic keys or values), so kappa_m holds for it exactly; the entries of a whole
tensor do not share one variance (its rows and columns differ) and a short memory's entries are heavy-tailed, so
for a tensor scale kappa is taken from the entries' own tails (``_kappa_tensor``: the standardised fourth and sixth
cumulants of sum_t alpha^(n - t) k_a v_b in a second-order Edgeworth tail; 1.09 times kappa_m at n = 30, d = 24,
dv = 16, 1.46 times at alpha = 0.9, d = dv = 64).

fp8 with scales (``bits="fp8"``: float8_e4m3fn numbers times a scale M / T, T = ``target``, 448 by default; 240
in SGLang's FP8 state pool). The group's largest entry is stored as T exactly; given M, the other m - 1 entries are
independent Gaussians below it, and each y = x T / M is rounded to the float8 grid, whose spacing is relative (2^-3
to 2^-4 of y), so per entry

    w_fp8(sigma) = (m - 1)/m E_M[ (M / T)^2 r(T sigma / M) ],

r(s) the mean squared rounding error of y ~ N(0, s^2) conditioned on |y| < T, every cell of the format below T
integrated exactly (as T14 does without the condition), the mean over 256 equally likely values of M. About 0.18
u^2 (1 - kappa_m / m) sigma^2 (u = 2^-4; twice that with stochastic rounding): a relative error goes with x^2, and
the m - 1 entries below the largest hold (m - kappa_m) sigma^2 of the group's m sigma^2. The target moves the grid
against the entries: T = 240 (1.875 2^7) puts the top entries in a binade whose spacing is 1/15 of them, T = 448
(1.75 2^8) 1/14, so amax / 240 costs 3% less than amax / 448 at m = 32 and under 1% at m = 1024. Assumed: the
entries Gaussian, independent; for rounding at every write each rounding independent of the last, as for int4
(T32): the scale moves with the group's largest entry at every write and shifts every entry against the grid.

>>> from lacapacity import theory
>>> round(theory.quantised_final_error(1024, 32, 32, bits=8, scope="row") / (1024 / 32), 7)   # against crosstalk
2.86e-05
>>> round(theory.quantised_rounding_variance(1.0, 32, "fp8") / (2**-8), 4)   # about 0.18 u^2 (1 - 5.71/32)
0.1473
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import torch

from lacapacity.errors import CapacityError, CapacityWarning
from lacapacity.theory._common import FloatArray, Floats, Numbers, _counts, _out
from lacapacity.theory.precision import _check_memory, _contraction, _moment

__all__ = [
    "scale_moment",
    "quantised_rounding_variance",
    "quantised_final_error",
    "quantised_step_error",
    "quantised_crossover",
]

SCOPES = ("tensor", "row", "col", "group", "cols")
FP8_TARGET = 448.0  # the largest float8_e4m3fn number: the default target of an fp8 scale


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


G4_MAX = 0.65  # the largest fourth cumulant of a tensor's entries where the Edgeworth tail is measured to hold


@functools.lru_cache(maxsize=4096)
def _kappa_edgeworth(m: int, g4: float, g6: float) -> float:
    """E max_{i <= m} x_i^2 for m independent symmetric x of unit variance whose standardised fourth and sixth
    cumulants are g4 and g6: P(|x| > t) from the second-order Edgeworth series,
    P(x > t) = Q(t) + phi(t) (g4/24 He3(t) + g6/720 He5(t) + g4^2/1152 He7(t))."""
    from scipy import integrate
    from scipy.special import erfc

    if g4 == 0.0 and g6 == 0.0:
        return _kappa(m)

    def tail(t: float) -> float:
        phi = math.exp(-t * t / 2.0) / math.sqrt(2.0 * math.pi)
        he3, he5 = t**3 - 3 * t, t**5 - 10 * t**3 + 15 * t
        he7 = t**7 - 21 * t**5 + 105 * t**3 - 105 * t
        return 0.5 * float(erfc(t / math.sqrt(2.0))) + phi * (g4 / 24 * he3 + g6 / 720 * he5 + g4 * g4 / 1152 * he7)

    def f(t: float) -> float:
        return 2.0 * t * (1.0 - min(1.0, max(0.0, 1.0 - 2.0 * tail(t))) ** m)

    top = math.sqrt(2.0 * math.log(max(m, 2))) + 12.0
    val, _ = integrate.quad(f, 0.0, top, limit=400, epsabs=1e-12, epsrel=1e-10)
    return float(val)


def _cumulants(memory: str, s: FloatArray, d: Floats, dv: Floats, alpha: float) -> tuple[FloatArray, FloatArray]:
    """g4, g6: the standardised fourth and sixth cumulants of an entry sum_t alpha^(s - t) k_a v_b of the additive
    or decaying state after s writes of uniform unit keys (R^d) and values (R^dv). One product k_a v_b (variance
    1 / (d dv)) has standardised moments 9 d dv / ((d + 2)(dv + 2)) (fourth) and 225 d^2 dv^2 / ((d + 2)(d + 4)(dv
    + 2)(dv + 4)) (sixth); a weighted sum of s independent ones has cumulants k_r sum w^r / (sum w^2)^(r / 2).
    The delta rules' entries are taken Gaussian (0, 0): their tails are not derived."""
    s = np.asarray(s, dtype=np.float64)
    if memory not in ("linear", "decay"):
        return np.zeros_like(s), np.zeros_like(s)
    m4 = 9.0 * d * dv / ((d + 2.0) * (dv + 2.0))
    m6 = 225.0 * d * d * dv * dv / ((d + 2.0) * (d + 4.0) * (dv + 2.0) * (dv + 4.0))
    k4, k6 = m4 - 3.0, m6 - 15.0 * m4 + 30.0
    a2 = 1.0 if memory == "linear" else float(alpha) ** 2
    if a2 == 1.0:
        return k4 / s, k6 / s**2

    def power_sum(p: int) -> FloatArray:  # sum_{t < s} (a2^p)^t
        got: FloatArray = (1.0 - a2 ** (p * s)) / (1.0 - a2**p)
        return got

    p1 = power_sum(1)
    return k4 * power_sum(2) / p1**2, k6 * power_sum(3) / p1**3


def _kappa_tensor(memory: str, s: FloatArray, d: float, dv: float, alpha: float) -> FloatArray:
    """kappa for one scale over a whole d x dv tensor after s writes (``[S]`` over s): the Edgeworth value from
    the entries' cumulants, on rounded cumulants (4 significant digits) so that nearby steps share a quadrature."""
    g4, g6 = _cumulants(memory, s, d, dv, alpha)
    m = int(d * dv)

    def one(a: float, b: float) -> float:
        return _kappa_edgeworth(m, float(f"{a:.4g}"), float(f"{b:.4g}"))

    got: FloatArray = np.vectorize(one, otypes=[np.float64])(g4, g6)
    return got


def _warn_tails(memory: str, s: FloatArray, d: FloatArray, dv: FloatArray, alpha: float, what: str) -> None:
    g4 = np.asarray(_cumulants(memory, s, d, dv, alpha)[0])
    if np.any(g4 > G4_MAX):
        warnings.warn(
            f"{what}: a tensor scale over entries this heavy-tailed (fourth cumulant {float(np.max(g4)):.2g} > "
            f"{G4_MAX}: few writes, or decay below about 0.9) lies outside the range the form is measured in "
            "(docs/quantised-accuracy.md)",
            CapacityWarning,
            stacklevel=3,
        )


def scale_moment(group: Numbers) -> Floats:
    """kappa_m = E max_{i <= m} z_i^2 for m = ``group`` independent standard normal z: the mean squared largest
    magnitude of a group, in units of its entries' variance (1, 3.46, 5.71, 11.96 at m = 1, 8, 32, 1024)."""
    (m,) = _counts(group=group)
    if np.any(m != np.round(m)):
        raise CapacityError(f"group must be a whole number >= 1, got {group!r}")
    return _out(np.vectorize(lambda x: _kappa(int(x)))(m))


def _q(bits: int | str) -> int:
    if bits not in (8, 4):
        raise CapacityError(f"bits must be 8 or 4 (or 'fp8'), got {bits!r}")
    return (1 << (int(bits) - 1)) - 1


def _is_fp8(bits: int | str, target: float | None) -> bool:
    """Whether ``bits`` names fp8 (checking ``target``, which only fp8 takes)."""
    if bits == "fp8":
        if target is not None:
            t = float(target)
            if not (0 < t <= FP8_TARGET) or float(torch.tensor(t).to(torch.float8_e4m3fn).float()) != t:
                raise CapacityError(
                    f"target must be a float8_e4m3fn number in (0, 448] (240, 448, ...), got {target!r}"
                )
        return True
    _q(bits)  # checked here: 8 or 4
    if target is not None:
        raise CapacityError(f"target is the fp8 scale's (bits='fp8'); int{bits} stores its largest entry as Q")
    return False


@functools.lru_cache(maxsize=1)
def _e4m3_numbers() -> FloatArray:
    """Every non-negative float8_e4m3fn number, sorted: subnormals k 2^-9 (k < 8), then (1 + j/8) 2^e, e = -6 .. 8, up
    to 448."""
    sub = np.arange(8, dtype=np.float64) * 2.0**-9
    normal = (2.0 ** np.arange(-6, 9, dtype=np.float64))[:, None] * (1.0 + np.arange(8) / 8.0)[None, :]
    v = np.concatenate([sub, normal.ravel()])
    got: FloatArray = v[v <= FP8_TARGET]
    return got


def _truncated_rounding(spread: FloatArray, top: float, stochastic: bool) -> FloatArray:
    """E (fl(y) - y)^2 for y ~ N(0, spread^2) conditioned on |y| < ``top`` (a float8_e4m3fn number), rounded to
    float8_e4m3fn: every cell integrated exactly (round-to-nearest: (y - c)^2 over c's cell between midpoints;
    stochastic rounding: (y - lo)(hi - y) between neighbours). ``spread`` [S]."""
    from scipy.special import ndtr

    v = _e4m3_numbers()
    v = v[v <= top]
    sg = spread[:, None]

    def moments(a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """int over [a, b] of phi, y phi, y^2 phi for y ~ N(0, spread^2) (one sign)."""
        za, zb = a / sg, b / sg
        pa, pb = np.exp(-0.5 * za * za), np.exp(-0.5 * zb * zb)
        p0 = ndtr(zb) - ndtr(za)
        p1 = sg * (pa - pb) / math.sqrt(2.0 * math.pi)
        p2 = sg * sg * (p0 + (za * pa - zb * pb) / math.sqrt(2.0 * math.pi))
        return p0, p1, p2

    if stochastic:
        lo, hi = v[None, :-1], v[None, 1:]
        p0, p1, p2 = moments(lo, hi)
        total = (-(p2) + (lo + hi) * p1 - lo * hi * p0).sum(-1)
    else:
        mids = (v[1:] + v[:-1]) / 2.0
        a = np.concatenate([[0.0], mids])[None, :]
        b = np.concatenate([mids, [top]])[None, :]
        c = v[None, :]
        p0, p1, p2 = moments(a, b)
        total = (p2 - 2.0 * c * p1 + c * c * p0).sum(-1)
    mass = ndtr(top / spread) - 0.5
    got: FloatArray = total / mass
    return got


@functools.lru_cache(maxsize=256)
def _fp8_share(m: int, target: float, stochastic: bool) -> float:
    """w_fp8 / sigma^2 (the module's docstring): (m - 1)/m E_M[(M / T sigma)^2 E(rounding error^2 of y | |y| < T)],
    y ~ N(0, (T sigma / M)^2): given the largest magnitude M, the other m - 1 entries are independent Gaussians
    below it."""
    if m <= 1:
        return 0.0
    x = _max_quantiles(m)  # M / sigma, equally likely values
    spread = target / x  # the spread of y = x T / M
    return float((m - 1.0) / m * np.mean(_truncated_rounding(spread, target, stochastic) / spread**2))


def _group(scope: str, d: FloatArray, dv: FloatArray, group: Numbers | None) -> FloatArray:
    if scope not in SCOPES:
        raise CapacityError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if scope in ("group", "cols"):
        if group is None:
            raise CapacityError(
                f"scope {scope!r} needs group= (the entries, or for cols the columns, that share a scale)"
            )
        (g,) = _counts(group=group)
        return (g * d if scope == "cols" else g) * np.ones(np.broadcast(d, dv).shape)
    return {"tensor": d * dv, "row": dv * np.ones_like(d), "col": d * np.ones_like(dv)}[scope]


def _w(
    sigma2: Floats,
    m: Floats,
    bits: int | str,
    stochastic: bool,
    kappa: Floats | None = None,
    target: float | None = None,
) -> Floats:
    """One rounding's variance per entry of a group of m with entries N(0, sigma2) (``kappa``: the group's mean
    squared largest entry over sigma2 where it is not kappa_m; fp8: w_fp8, ``target`` T)."""
    if _is_fp8(bits, target):
        t = FP8_TARGET if target is None else float(target)
        share = np.vectorize(lambda x: _fp8_share(int(x), t, bool(stochastic)), otypes=[np.float64])(m)
        fp8: Floats = share * sigma2
        return fp8
    if kappa is None:
        kappa = np.vectorize(lambda x: _kappa(int(x)))(m)
    got: Floats = (m - 1.0) / m * kappa * sigma2 / ((6.0 if stochastic else 12.0) * _q(bits) ** 2)
    return got


def quantised_rounding_variance(
    sigma: Numbers, group: Numbers, bits: int | str = 8, *, stochastic: bool = False, target: float | None = None
) -> Floats:
    """T31: E (fl(x) - x)^2 per entry when ``group`` entries N(0, sigma^2) share a symmetric scale M / Q:
    (m - 1)/m kappa_m sigma^2 / (12 Q^2) (stochastic rounding: / 6). Holds while the grid is fine against the
    entries' spread (Q^2 >> kappa_m, so int4 too: its Delta is about sigma / 3 at m = 32). ``bits="fp8"``: the
    scale M / ``target`` (448 by default) and float8_e4m3fn numbers, w_fp8 of the module's docstring, about
    0.18 u^2 (1 - kappa_m / m) sigma^2 (u = 2^-4; 0.36 u^2 with stochastic rounding)."""
    (m,) = _counts(group=group)
    s = np.asarray(sigma, dtype=np.float64)
    if np.any(~np.isfinite(s)) or np.any(s <= 0):
        raise CapacityError(f"sigma must be > 0 and finite, got {sigma!r}")
    return _out(_w(s * s, m, bits, stochastic, target=target))


def quantised_final_error(
    n: Numbers,
    d: Numbers,
    dv: Numbers,
    bits: int | str = 8,
    scope: str = "row",
    *,
    group: Numbers | None = None,
    memory: str = "linear",
    alpha: float = 1.0,
    beta: float = 1.0,
    stochastic: bool = False,
    target: float | None = None,
) -> Floats:
    """T31: the mean squared deviation of a unit query's read after one rounding of the finished state (n float32
    writes of random unit keys and values) to ``bits`` with ``scope`` scales: dv w(sigma_n), sigma_n^2 = E ||S_n||^2
    / (d dv). For the linear memory at int8 per row, d = dv = 32: 2.86e-5 n / d, 2.9e-5 times the crosstalk.

    Per row, column or group kappa_m is exact (isotropic rows and columns). With one scale per tensor kappa comes
    from the entries' tails (the module's docstring), for the additive and decaying memories; measured within 2%
    (docs/quantised-accuracy.md, generated: d 16..128, dv 16..64, alpha 0.9..1, n 30..65536). A CapacityWarning
    where the entries' fourth cumulant exceeds ``G4_MAX`` (fewer than about 9 writes, or alpha below about 0.9);
    the delta rules' tensors are taken Gaussian (their accuracy in the same table).

    ``bits="fp8"`` (scale M / ``target``, 448 by default; scope ``cols`` with ``group=N``: a d x N tile of N
    columns): dv w_fp8(sigma_n), the module's docstring, with Gaussian entries (a tensor scale's tails barely enter:
    a relative error goes with x^2 whatever the tails). Its accuracy: docs/quantised-accuracy.md (generated)."""
    n, d, dv = _counts(n=n, d=d, dv=dv)
    m = _group(scope, d, dv, group)
    s2 = _moment(memory, n, d, alpha, beta) / (d * dv)
    kappa = None
    if _is_fp8(bits, target):
        _check_memory(memory, alpha, beta)
        return _out(dv * _w(s2, m, bits, stochastic, target=target))
    if scope == "tensor":
        _check_memory(memory, alpha, beta)
        _warn_tails(memory, n, d, dv, alpha, "quantised_final_error")
        kappa = np.vectorize(lambda a, b, c: float(_kappa_tensor(memory, np.float64(a), b, c, alpha)))(n, d, dv)
    return _out(dv * _w(s2, m, bits, stochastic, kappa))


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
    sig2: FloatArray, scale: FloatArray, d: int, dv: int, m: float, bits: int, stochastic: bool, tail: FloatArray
) -> FloatArray:
    """Per entry and step: the variance of rounding an increment delta = scale k_a v_b to the grid Delta = M / Q
    (the stored entry on the grid; M the group's largest magnitude, entries N(0, sig2)), over the distribution of
    M, times (m - 1)/m. Arrays over steps ``[S]``; Delta^2 / 12 (/ 6) while Delta is far below the increments.
    ``tail`` ``[S]``: the group's kappa over kappa_m (1 but for a tensor scale's heavy tails)."""
    from lacapacity.theory.precision import _increment_table, _interp

    log_rho, var, _, _, _ = _increment_table(int(d), int(dv), bool(stochastic))
    xq = _max_quantiles(int(m))
    out = np.empty(len(sig2))
    for lo in range(0, len(sig2), 4096):  # [steps, quantiles] blocks
        sl = slice(lo, lo + 4096)
        delta = np.sqrt(sig2[sl] * tail[sl])[:, None] * xq[None, :] / _q(bits)
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
    bits: int | str,
    memory: str,
    alpha: float,
    beta: float,
    stochastic: bool,
    feedback: bool,
    nodes: tuple[int, ...],
    target: float | None = None,
) -> FloatArray:
    """Deviations of a unit query's read after s = 1 .. n_max writes, the state rounded after every write. A
    tensor scale (m = d dv) takes kappa from the entries' tails, computed at ``nodes`` (the steps asked for) and
    64 steps spread geometrically, interpolated in log s between them."""
    a, b = _check_memory(memory, alpha, beta)
    c = float(_contraction(memory, d, alpha, beta))  # d is one number, and so is c
    N = d * dv
    s = np.arange(1, n_max + 1, dtype=np.float64)
    sig = np.asarray(_moment(memory, s, d, alpha, beta)) / N  # the float32 state's entry variance after s writes
    tail = np.ones(n_max)
    fp8 = bits == "fp8"
    if m == N and N > 1 and not fp8:
        at = np.unique(np.concatenate([np.round(np.geomspace(1, n_max, 64)), np.asarray(nodes, dtype=np.float64)]))
        tail = np.interp(np.log(s), np.log(at), _kappa_tensor(memory, at, d, dv, alpha) / _kappa(int(m)))
    A = np.asarray(_w(1.0, np.float64(m), bits, stochastic, target=target)) * tail  # w = A sigma^2, [S]
    out = np.empty(n_max)
    e = 0.0
    if not feedback:
        # e_s = c e_(s-1) + w_s: each rounding adds an error independent of the last. int8: the error of rounding
        # the write's increment to the grid of the stored state (T15's increment distribution). int4: uniform
        # over the grid (T31's w at the current spread): the scale moves at every write by a share of a step of
        # the order of the increment, and re-rounds every stored entry against a shifted grid. fp8: the same,
        # each rounding's relative error T14's (w_fp8)
        if bits == 4 or fp8:
            w = A * sig
        else:
            if memory in ("delta", "gated_delta"):  # increment b k_a (v - alpha k S)_b, E ||.||^2 = 1 + a^2 m/d
                scale = b * np.sqrt(1.0 + a * a * _moment(memory, s - 1, d, alpha, beta) / d)
            else:
                scale = np.ones_like(s)
            w = _grid_variance(sig, scale, d, dv, m, int(bits), stochastic, tail)
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
        prev_r = A[i] * sig[i]
        out[i] = dv * (e + prev_r)
    return out


def quantised_step_error(
    n: Numbers,
    d: Numbers,
    dv: Numbers,
    bits: int | str = 8,
    scope: str = "row",
    *,
    group: Numbers | None = None,
    feedback: bool = False,
    memory: str = "linear",
    alpha: float = 1.0,
    beta: float = 1.0,
    stochastic: bool = False,
    target: float | None = None,
) -> Floats:
    """T32: the mean squared deviation of a unit query's read from the float32 read after n writes, the state
    quantised after every write.

    Without feedback, int8: each write's increment (T15's exact distribution: scale k_a v_b, the delta rules' scale
    b sqrt(1 + alpha^2 m_(s-1)/d)) is rounded to the grid Delta = M / Q of the stored state, M distributed as the
    largest of the group's m entries N(0, sigma_s^2); (m - 1)/m of the entries take that error (the largest is
    kept), independent from write to write, and the errors add up contracted by the memory (c: 1 linear, alpha^2
    decay, alpha^2 (1 - (2 beta - beta^2)/d) the delta rules): e_s = c e_(s-1) + w_s. While the increments span many
    grid steps w_s = T31's w and the linear memory's deviation is A n (n + 1) / (2 d) (A = w / sigma^2); as the grid
    grows past the increments it falls below that (0.98, 0.96, 0.92 of it at n = 64, 256, 1024 for int8 per row, d
    = 32, as measured). Measured within 1% for int8 per row (2026-12-03: linear, decay, delta; round-to-nearest and
    stochastic), 0.97-1.04 per tensor (docs/quantised-accuracy.md).

    Without feedback, int4: the increments fall below the grid within a few writes, but the scale moves at every
    write and re-rounds every stored entry against a shifted grid, so each rounding's error is taken uniform over
    the cell (T31's w at the current spread, T33's model): e_s = c e_(s-1) + w_s. Accuracy (docs/quantised-
    accuracy.md, an independent simulation, d 16..128, dv 16..64, up to T33's crossover n*): stochastic rounding
    0.93-1.00 of the form; round-to-nearest 0.84-0.91 up to half of n*, rising to 1.05-1.10 at n* (it stalls, as in T17); decay
    alpha = 0.99 round-to-nearest 0.88-0.92 to n = 100, 1.17 at 400. A CapacityWarning for the additive memory
    in int4 without feedback past n*. A tensor scale takes kappa from the entries' tails at every step (T31).

    With error feedback (``feedback=True``) the residual r, the last rounding's error, is added back before the next
    rounding, so Z = Q + r follows the float32 recurrence up to the memory's own use of Q: E = Z - F obeys E_s =
    alpha (I - beta k^T k) E_(s-1) + (I - alpha (I - beta k^T k)) r_(s-1), and the read deviation is that of E - r:
    bounded, dv w (1 + g / (1 - c)) with g = (1 - alpha)^2 + (2 (1 - alpha) alpha beta + alpha^2 beta^2) / d. The
    rounded value is off the grid, so w is T31's. For the linear memory E = 0: the deviation is one rounding of the
    float32 state, T31, at every n.

    fp8 (``bits="fp8"``, scale M / ``target``): each rounding adds w_fp8 at the current spread (the module's
    docstring), independent from write to write, e_s = c e_(s-1) + w_s; with feedback as above. Its range: the
    state holds at most 1/u^2 = 256 writes' worth of increments (E ||S||^2 over an increment's: n for the additive
    memory, 1/(1 - alpha^2) at most with decay, 50 at 0.99). Measured there (docs/quantised-accuracy.md, d 16..128,
    dv 32..64, decay 0.9..1; docs/precision.md's figure, d = dv = 32, decay 0.9..0.995): round-to-nearest
    0.96-1.05 of the form with a 32-column tile and 0.88-0.98 with a scale per row or column, stochastic rounding
    0.86-0.98 (both lower as the state holds more writes: the increments approach the ulp, and a rounding's error
    shrinks with its distance to the grid), feedback 1.00. Past the range the increments fall below the ulp: stochastic rounding
    0.86 of the form at 500 writes held, and round-to-nearest stalls while the moving scale drags the stalled
    entries (19 times the form with a 32-column tile at decay 0.999): a CapacityWarning there.
    """
    n, d, dv = _counts(n=n, d=d, dv=dv)
    m = _group(scope, d, dv, group)
    _check_memory(memory, alpha, beta)
    fp8 = _is_fp8(bits, target)
    if scope == "tensor" and not fp8:
        _warn_tails(memory, n, d, dv, alpha, "quantised_step_error")
    if bits == 4 and not feedback and memory == "linear":
        past = n > np.asarray(quantised_crossover(d, dv, 4, scope, group=group, stochastic=stochastic))
        if np.any(past):
            warnings.warn(
                "quantised_step_error: int4 without feedback past T33's crossover (the deviation above the "
                "crosstalk) lies outside the range the form is measured in (docs/quantised-accuracy.md)",
                CapacityWarning,
                stacklevel=2,
            )
    if fp8 and not feedback:
        _warn_fp8_stall(memory, n, d, alpha, beta, bool(stochastic))
    out = np.empty(n.shape)
    cache: dict[tuple[int, int, float], FloatArray] = {}
    n_max = int(np.max(n))
    nodes = tuple(sorted({int(round(float(x))) for x in n.flat}))
    for idx in np.ndindex(n.shape):
        key = (int(d[idx]), int(dv[idx]), float(m[idx]))
        if key not in cache:
            cache[key] = _step(n_max, *key, bits, memory, alpha, beta, bool(stochastic), bool(feedback), nodes, target)
        out[idx] = cache[key][int(round(float(n[idx]))) - 1]
    if bits == 4 and not feedback and memory != "linear":
        # the stored state's own spread then carries the rounding error and the scale grows with it: measured 1.2-3.8
        # times the form at alpha = 0.99-0.995 (docs/precision.md, "Rounding against decay")
        share = out / dv / (np.asarray(_moment(memory, n, d, alpha, beta)) / (d * dv))
        if np.any(share > 0.25):
            warnings.warn(
                "quantised_step_error: int4 without feedback where the rounding error reaches a quarter of the "
                "state's own spread lies outside the range the form holds in (measured 1.2-3.8 times the form at "
                "decay 0.99-0.995; docs/precision.md)",
                CapacityWarning,
                stacklevel=2,
            )
    return _out(out)


FP8_HELD_MAX = 256.0  # u^2 times the writes a state holds, u = 2^-4: past 1 the increments fall below the ulp


def _warn_fp8_stall(memory: str, n: FloatArray, d: FloatArray, alpha: float, beta: float, stochastic: bool) -> None:
    """Warn where the state holds more than 1 / u^2 = 256 writes' worth of increments (E ||S_n||^2 over one
    increment's E ||.||^2), the range past which fp8 rounding at every write leaves the uniform model."""
    a, b = _check_memory(memory, alpha, beta)
    m = np.asarray(_moment(memory, n, d, alpha, beta), dtype=np.float64)
    if memory in ("delta", "gated_delta"):
        inc = b * b * (1.0 + a * a * np.asarray(_moment(memory, n - 1, d, alpha, beta)) / d)
    else:
        inc = np.ones_like(m)
    held = m / inc
    if np.any(held > FP8_HELD_MAX):
        how = (
            "stochastic rounding: the form overestimates, measured 0.86 of it at 500 writes held"
            if stochastic
            else "round-to-nearest stalls and the moving scale drags the stalled entries: measured 19 times the form at "
            "500 writes held"
        )
        warnings.warn(
            f"quantised_step_error: fp8 at every write without feedback where the state holds {float(np.max(held)):.0f} "
            f"writes (more than 1/u^2 = 256: increments below the ulp) lies outside the range the form holds in ({how}; "
            "docs/quantised-accuracy.md)",
            CapacityWarning,
            stacklevel=3,
        )


def quantised_crossover(
    d: Numbers,
    dv: Numbers,
    bits: int | str = 8,
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
    round-to-nearest. Below ratio 1 the crossing comes later than the form says: at ratios 1/4 and 1/2 the
    measured deviation at n* is 0.91-0.94 of r times the crosstalk with stochastic rounding (per row and per
    column, d 32..64) and 0.84-0.88 with round-to-nearest (docs/quantised-accuracy.md). For int8 the crossing is
    an estimate far past the measured range. ``inf`` where the deviation
    never reaches the ratio (A >= 2 r (3 - 2 sqrt 2))."""
    if bits == "fp8":
        raise CapacityError(
            "quantised_crossover: fp8 would cross the crosstalk at about 2 / w_fp8 (thousands of writes), past the "
            "256 writes held where its step form holds (quantised_step_error warns there): not given"
        )
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
