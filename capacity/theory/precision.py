"""T14-T19: what storing the state in a low-precision dtype costs (docs/theory.md, T14-T19).

Model (derived in docs/theory.md). A format with p significand bits (the implicit one included) rounds x to a grid of
spacing q(x) = 2u 2^max(floor(log2 |x|), emin) (one unit in the last place, ulp), u = 2^-p the unit roundoff: half an
ulp of 1, so that round-to-nearest has |fl(x) - x| <= u |x|. Round-to-nearest leaves an error uniform on
[-q/2, q/2] when x is spread over many ulps (variance q^2/12); stochastic rounding one of variance q^2 f (1 - f),
f the position of x between its two neighbours (q^2/6 on average). The state's entries are taken Gaussian with the
second moment the float32 recurrence gives them (random unit keys and values), and the increment a write adds to an
entry, k_a v_b (the delta rule: b k_a (v - k S)_b), has the exact distribution of a product of coordinates of
uniform unit vectors. Every function below is exact in that model; where the model holds is stated with each.

>>> from lacapacity import theory
>>> theory.unit_roundoff("bfloat16") == 2**-8
True
>>> round(theory.final_rounding_error(n=1024, d=32, dv=32, dtype="bfloat16") / (2**-16 * 1024 / 32), 3)
0.181

Why one module of over 500 lines: T14-T19 share one rounding model (the unit roundoff, the entry moments, the
step and chunk trajectories); splitting them would split the model.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import TypeAlias

import numpy as np
import torch

from lacapacity.errors import CapacityError, CapacityWarning
from lacapacity.theory._common import FloatArray, Floats, Numbers, _counts, _numbers, _out

__all__ = [
    "unit_roundoff",
    "rounding_variance",
    "final_rounding_error",
    "step_rounding_error",
    "rounding_crossover",
    "stall_fraction",
    "retained_fraction",
    "stall_onset",
    "decay_rounding_floor",
    "delta_rounding_floor",
]

# name -> (p: significand bits with the implicit one, emin: log2 of the smallest normal number, largest finite number)
FORMATS = {
    "float32": (24, -126, 3.4028234663852886e38),
    "bfloat16": (8, -126, 3.3895313892515355e38),
    "float16": (11, -14, 65504.0),
    "float8_e4m3fn": (4, -6, 448.0),
    "float8_e5m2": (3, -14, 57344.0),
}
Dtype: TypeAlias = "str | torch.dtype"  # a format's name ("bfloat16") or the torch dtype
Trajectory: TypeAlias = "tuple[FloatArray, FloatArray, FloatArray]"  # (s grid, V_s, the stored spread)
MEMORIES = ("linear", "decay", "delta", "gated_delta")
_CELLS = 4096  # quantile cells of an increment's distribution


def _format(dtype: Dtype) -> tuple[int, int, float]:
    name = str(dtype).replace("torch.", "")
    if name not in FORMATS:
        raise CapacityError(f"unknown state dtype {dtype!r}; known: {', '.join(FORMATS)}")
    return FORMATS[name]


def unit_roundoff(dtype: Dtype) -> float:
    """u = 2^-p for a format with p significand bits: half an ulp of 1 (2^-8 bfloat16, 2^-11 float16, 2^-4
    float8_e4m3fn, 2^-3 float8_e5m2, 2^-24 float32); round-to-nearest has |fl(x) - x| <= u |x| for normal x."""
    return 2.0 ** -_format(dtype)[0]


def _binades(sigma: FloatArray, dtype: Dtype) -> tuple[FloatArray, FloatArray]:
    """Probabilities that |x|, x ~ N(0, sigma^2), lies in each binade, and the binades' ulps.

    Returns ``(P [..., E], q [E])``; the first bin holds everything below it (subnormals share the spacing of the
    lowest normal binade), the last everything above.
    """
    from scipy.special import erf

    p, emin, _ = _format(dtype)
    sigma = np.asarray(sigma, dtype=np.float64)
    lo = max(emin, int(math.floor(math.log2(max(float(sigma.min()), 1e-300)))) - 40)
    hi = max(lo + 1, int(math.ceil(math.log2(max(float(sigma.max()), 1e-300)))) + 8)  # one binade at least
    edges = 2.0 ** np.arange(lo + 1, hi + 1, dtype=np.float64)  # upper edges of the binades lo .. hi - 1
    cdf = erf(edges / (np.sqrt(2.0) * sigma[..., None]))  # P(|x| < edge)
    P = np.diff(np.concatenate([np.zeros_like(cdf[..., :1]), cdf, np.ones_like(cdf[..., :1])], axis=-1), axis=-1)
    P = P[..., :-1]
    P[..., -1] += 1.0 - cdf[..., -1]  # above the top edge: counted in the top binade (negligible mass)
    q = 2.0 ** (np.arange(lo, hi, dtype=np.float64) - p + 1)
    return P, q


def rounding_variance(sigma: Numbers, dtype: Dtype, *, stochastic: bool = False) -> Floats:
    """T14: E (fl(x) - x)^2 for x ~ N(0, sigma^2) rounded once to ``dtype``: about E q(x)^2 / 12 (round-to-nearest)
    or E q(x)^2 / 6 (stochastic rounding), q the ulp of x; about 0.18 u^2 sigma^2 (0.36 for stochastic rounding),
    the factor rippling by a few percent with log2 sigma. Computed exactly in the Gaussian model, every cell of the
    format integrated (the uniform-error value is 1.2% high in float8_e5m2, whose cells are a quarter binade wide;
    float32 keeps the uniform value). Holds while sigma stays in range."""
    s = _numbers("sigma", sigma)
    if np.any(~np.isfinite(s)) or np.any(s <= 0):
        raise CapacityError(f"sigma must be > 0 and finite, got {sigma!r}")
    flat = np.atleast_1d(s).ravel()
    if _format(dtype)[0] <= 11:  # every cell of the format integrated exactly (bfloat16, float16, float8)
        out = _cells_variance(flat, dtype, stochastic)
    else:  # float32: 2^23 numbers a binade; the uniform error in each cell is exact to far below 1e-6
        P, q = _binades(flat, dtype)
        out = (P * q**2).sum(-1) / (6.0 if stochastic else 12.0)
    return _out(out.reshape(s.shape))


def _cells_variance(sigma: FloatArray, dtype: Dtype, stochastic: bool) -> FloatArray:
    """E (fl(x) - x)^2 for x ~ N(0, sigma^2), integrated exactly over every rounding cell of the format: with
    only 4 (float8_e5m2) or 8 (float8_e4m3fn) numbers a binade the Gaussian density changes across a cell, and the
    uniform-error value q^2/12 is 1.2% high for float8_e5m2 (T14). The numbers from 2^lo to 2^hi are enumerated
    (below 2^lo, where at most 2^-40 of the mass lies, a uniform grid of the lowest spacing, as the subnormals
    have); round-to-nearest integrates (x - c)^2 over each number's cell between midpoints, stochastic rounding
    (x - lo)(hi - x) between neighbours."""
    from scipy.special import ndtr

    p, emin, _ = _format(dtype)
    lo = max(emin, int(math.floor(math.log2(max(float(sigma.min()), 1e-300)))) - 40)
    hi = max(lo + 1, int(math.ceil(math.log2(max(float(sigma.max()), 1e-300)))) + 8)
    per = 1 << (p - 1)
    frac = 1.0 + np.arange(per, dtype=np.float64) / per
    binades = (2.0 ** np.arange(lo, hi, dtype=np.float64))[:, None] * frac[None, :]
    below = np.arange(per, dtype=np.float64) * 2.0 ** (lo - p + 1)  # 0 and the uniform grid under 2^lo
    v = np.concatenate([below, binades.ravel(), [2.0**hi]])  # [V] every non-negative number, sorted
    sg = sigma[:, None]

    def moments(a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """P, int x phi, int x^2 phi over [a, b] for x ~ N(0, sigma^2), times 2 (both signs)."""
        za, zb = a / sg, b / sg
        pa = np.exp(-0.5 * za * za) / math.sqrt(2.0 * math.pi)
        zf = np.where(np.isinf(zb), 0.0, zb)  # the last cell reaches infinity, where phi and z phi vanish
        pb = np.where(np.isinf(zb), 0.0, np.exp(-0.5 * zf * zf) / math.sqrt(2.0 * math.pi))
        P = ndtr(zb) - ndtr(za)
        M1 = sg * (pa - pb)
        bpb = zf * pb
        M2 = sg * sg * (P + za * pa - bpb)
        return 2.0 * P, 2.0 * M1, 2.0 * M2

    if stochastic:
        a, b = v[None, :-1], v[None, 1:]
        P, M1, M2 = moments(a, b)
        got: FloatArray = (-M2 + (a + b) * M1 - a * b * P).sum(-1)
        return got
    mids = 0.5 * (v[1:] + v[:-1])
    a = np.concatenate([[0.0], mids])[None, :]
    b = np.concatenate([mids, [np.inf]])[None, :]
    c = v[None, :]
    P, M1, M2 = moments(a, b)
    got = (M2 - 2.0 * c * M1 + c * c * P).sum(-1)
    return got


def _check_memory(memory: str, alpha: float, beta: float) -> tuple[float, float]:
    if memory not in MEMORIES:
        raise CapacityError(f"memory must be one of {', '.join(MEMORIES)}, got {memory!r}")
    a = 1.0 if memory in ("linear", "delta") else float(alpha)
    b = float(beta) if memory in ("delta", "gated_delta") else 0.0
    if not 0.0 < a <= 1.0:
        raise CapacityError(f"alpha must lie in (0, 1], got {alpha!r}")
    if memory in ("delta", "gated_delta") and not 0.0 < b < 2.0:
        raise CapacityError(f"beta must lie in (0, 2), got {beta!r}")
    return a, b


def _contraction(memory: str, d: Floats, alpha: float, beta: float) -> Floats:
    """c: E ||E_t||^2 = c E ||E_{t-1}||^2 + (new rounding error) for a state error E (and the same for the state)."""
    a, b = _check_memory(memory, alpha, beta)
    return a * a * (1.0 - (2.0 * b - b * b) / d) if memory in ("delta", "gated_delta") else a * a


def _moment(memory: str, s: Floats, d: Floats, alpha: float, beta: float) -> Floats:
    """m_s = E ||S_s||_F^2 after s writes of random unit keys and values (m_s = c m_{s-1} + (b or 1)^2)."""
    a, b = _check_memory(memory, alpha, beta)
    c = _contraction(memory, d, alpha, beta)
    w = b * b if memory in ("delta", "gated_delta") else 1.0
    s = np.asarray(s, dtype=np.float64)
    return w * s if c == 1.0 else w * (1.0 - c**s) / (1.0 - c)


def _psi_integral(y: FloatArray, stochastic: bool) -> FloatArray:
    """Antiderivative (up to a constant: the table uses differences only) of the rounding error's normalised
    variance: psi(y) = (y - round(y))^2 (round-to-nearest) or f (1 - f), f = y - floor(y) (stochastic rounding), both
    periodic with period 1."""
    if stochastic:
        f = y - np.floor(y)
        return np.floor(y) / 6.0 + f * f / 2.0 - f**3 / 3.0
    t = y + 0.5
    f = t - np.floor(t) - 0.5  # in [-1/2, 1/2)
    return np.floor(t) / 12.0 + f**3 / 3.0


@functools.lru_cache(maxsize=64)
def _increment_table(d: int, dv: int, stochastic: bool) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]:
    """Statistics of z = |k_a v_b| (k, v uniform unit vectors in R^d, R^dv; E z^2 = 1/(d dv)) against a grid of
    spacings rho: (log rho, error variance of rounding z to the grid rho Z, P(z < rho/2), E[z rho round(z/rho)],
    E z^2). z is represented by 4096 equally likely quantile cells, each taken uniform between its ends, so that
    the variance is exact for any rho (its periodic integrand integrated in closed form over each cell)."""
    from scipy.special import betainc, betaincinv

    N = 512
    u = (np.arange(N) + 0.5) / N
    x = np.sqrt(betaincinv(0.5, (d - 1) / 2.0, u)) if d > 1 else np.ones(N)
    y = np.sqrt(betaincinv(0.5, (dv - 1) / 2.0, u)) if dv > 1 else np.ones(N)
    z = np.sort((x[:, None] * y[None, :]).ravel())  # N^2 equally likely values
    cells = z.reshape(_CELLS, -1)
    z2c = (cells**2).mean(1)
    lo, hi = cells[:, 0], cells[:, -1]
    lo = np.concatenate([[0.0], 0.5 * (hi[:-1] + lo[1:])])  # cells tile [0, max z]
    hi = np.concatenate([lo[1:], [hi[-1]]])
    scale = 1.0 / math.sqrt(d * dv)
    rho = scale * np.geomspace(1e-4, 1e4, 1201)
    a, b = lo[None, :] / rho[:, None], hi[None, :] / rho[:, None]  # [R, C]
    width = np.maximum(b - a, 1e-300)
    mean_psi = (_psi_integral(b, stochastic) - _psi_integral(a, stochastic)) / width
    narrow = (b - a) < 1e-9
    mean_psi = np.where(narrow, (_psi_integral(a + 1e-9, stochastic) - _psi_integral(a, stochastic)) / 1e-9, mean_psi)
    var = (rho[:, None] ** 2 * mean_psi).mean(1)
    # P(z < rho/2) = E_y P(|x| < rho / (2 |y|)), |x|^2 ~ Beta(1/2, (d - 1)/2): exact in x, 1024 quantiles of y
    # (the product's density diverges at 0, where quantile cells of z would miss mass);
    # E[z R(z)] = E z^2 + rho^2 E[t (round(t) - t)], t = z / rho
    yq = np.sqrt(betaincinv(0.5, (dv - 1) / 2.0, (np.arange(1024) + 0.5) / 1024)) if dv > 1 else np.ones(1)
    reach = np.minimum((rho[:, None] / (2.0 * yq[None, :])) ** 2, 1.0)  # [R, Y]
    lost = betainc(0.5, (d - 1) / 2.0, reach).mean(1) if d > 1 else (yq[None, :] < rho[:, None] / 2).mean(1)
    if stochastic:
        kept = np.full(len(rho), float(z2c.mean()))  # unbiased: E[z R(z)] = E z^2
    else:
        cross = np.where(narrow, _cross(a), (_cross_integral(b) - _cross_integral(a)) / width)
        kept = z2c.mean() + (rho[:, None] ** 2 * cross).mean(1)
    return np.log(rho), var, lost, kept, float(z2c.mean())


def _cross(y: FloatArray) -> FloatArray:
    return y * (np.round(y) - y)


def _cross_integral(y: FloatArray) -> FloatArray:
    """Antiderivative of y (round(y) - y): with k = round(y), t = y - k, it is -k/12 - k (t^2 - 1/4)/2 - t^3/3."""
    k = np.floor(y + 0.5)
    t = y - k
    return -k / 12.0 - k * (t * t - 0.25) / 2.0 - t**3 / 3.0


def _interp(log_rho: FloatArray, table: FloatArray, rho: FloatArray) -> FloatArray:
    return np.interp(np.log(np.clip(rho, np.exp(log_rho[0]), np.exp(log_rho[-1]))), log_rho, table)


def _step_stats(
    sigma: FloatArray, scale: FloatArray, d: int, dv: int, dtype: Dtype, stochastic: bool
) -> tuple[FloatArray, FloatArray]:
    """One step's rounding error, per entry: (variance, E[delta e]) for stored entries N(0, sigma^2) and increments
    delta = scale * z; e = fl(S + delta) - (S + delta). Arrays over steps ``[S]``."""
    log_rho, var, _, kept, z2 = _increment_table(int(d), int(dv), bool(stochastic))
    P, q = _binades(sigma, dtype)  # [S, E], [E]
    rho = q[None, :] / scale[:, None]
    v = _interp(log_rho, var, rho) * scale[:, None] ** 2  # [S, E]
    # spacings far below the table: uniform error q^2/12 (q^2/6); far above: round-to-nearest loses everything
    small = rho < np.exp(log_rho[0])
    v = np.where(small, q[None, :] ** 2 / (6.0 if stochastic else 12.0), v)
    if stochastic:  # unbiased: E[delta e] = 0
        cov = np.zeros(len(scale))
    else:  # E[delta e] = E[delta R(delta)] - E delta^2
        k = np.where(small, z2, _interp(log_rho, kept, rho))
        cov = (P * (k - z2)).sum(-1) * scale**2
    return (P * v).sum(-1), cov


def _grid(n_max: int) -> FloatArray:
    """Step counts the trajectory is evaluated at: every step to 512, then geometric (ratio 1.005) up to n_max."""
    exact = np.arange(1, min(n_max, 512) + 1, dtype=np.float64)
    if n_max <= 512:
        return exact
    geo = np.round(np.geomspace(512, n_max, int(math.log(n_max / 512) / math.log(1.005)) + 2))
    return np.unique(np.concatenate([exact, geo, [float(n_max)]]))


def _trajectory(
    memory: str, n_max: int, d: int, dv: int, dtype: Dtype, alpha: float, beta: float, stochastic: bool
) -> Trajectory:
    """(s grid, V_s): the per-entry variance of the accumulated rounding error after s step-rounded writes.

    The stored state's spread, which sets the ulps, is the float32 state's plus the error's and twice their
    covariance (negative for round-to-nearest, which loses part of each increment; zero for stochastic rounding).
    """
    a, b = _check_memory(memory, alpha, beta)
    c = _contraction(memory, d, alpha, beta)
    s = _grid(int(n_max))
    m = _moment(memory, s, d, alpha, beta) / (d * dv)  # float32 state's entry variance after s writes
    if memory in ("delta", "gated_delta"):  # increment b k_a (v - alpha k S)_b, E ||v - alpha k S||^2 = 1 + a^2 m/d
        scale = b * np.sqrt(1.0 + a * a * _moment(memory, s - 1, d, alpha, beta) / d)
    else:
        scale = np.ones_like(s)
    # fixed point: the ulps follow the stored spread, which follows the errors; a few passes converge
    spreads = np.array(m, dtype=np.float64)  # a copy (m: an array, s being one)
    for _ in range(12):
        w, cv = _step_stats(np.sqrt(np.maximum(spreads, 1e-300)), scale, d, dv, dtype, stochastic)
        V, C = _accumulate(s, w, c), _accumulate(s, cv, c)
        before_V = np.concatenate([[0.0], V[:-1]])
        before_C = np.concatenate([[0.0], C[:-1]])
        new = np.maximum(m + before_V + 2.0 * before_C, 1e-300)
        done = np.max(np.abs(new - spreads) / spreads) < 1e-6
        spreads = new
        if done:
            break
    return s, V, spreads


def _accumulate(s: FloatArray, w: FloatArray, c: Floats) -> FloatArray:
    """X_i = c^(s_i - s_(i-1)) X_(i-1) + (the gap's steps of w, each decayed by c): w per step, on the grid s."""
    out = np.empty_like(w)
    acc, prev_s, prev_w = 0.0, 0.0, None
    for i in range(len(s)):
        g = s[i] - prev_s
        wbar = w[i] if prev_w is None or g <= 1 else 0.5 * (w[i] + prev_w)
        geo = g if c == 1.0 else (1.0 - c**g) / (1.0 - c)
        acc = c**g * acc + wbar * geo
        out[i] = acc
        prev_s, prev_w = s[i], w[i]
    return out


def _memory_args(n: Numbers, d: Numbers, dv: Numbers) -> tuple[FloatArray, FloatArray, FloatArray]:
    nn, dd, vv = _counts(n=n, d=d, dv=dv)
    return nn, dd, vv


def final_rounding_error(
    n: Numbers,
    d: Numbers,
    dv: Numbers,
    dtype: Dtype,
    *,
    memory: str = "linear",
    alpha: float = 1.0,
    beta: float = 1.0,
    stochastic: bool = False,
) -> Floats:
    """T14: the mean squared deviation one rounding of the finished state to ``dtype`` adds to a read by a unit
    query, after n float32 writes of random unit keys and values: dv E (fl(S_ab) - S_ab)^2 = dv rounding_variance(
    sigma_n), sigma_n^2 = E ||S_n||_F^2 / (d dv) (n / (d dv) for the linear memory). About 0.18 u^2 n / d for the
    linear memory, against its crosstalk (n - 1)/d: a relative cost of 0.18 u^2, whatever n."""
    n, d, dv = _memory_args(n, d, dv)
    m = _moment(memory, n, d, alpha, beta)
    var = rounding_variance(np.sqrt(m / (d * dv)), dtype, stochastic=stochastic)
    return _out(dv * np.asarray(var))


def step_rounding_error(
    n: Numbers,
    d: Numbers,
    dv: Numbers,
    dtype: Dtype,
    *,
    memory: str = "linear",
    alpha: float = 1.0,
    beta: float = 1.0,
    stochastic: bool = False,
) -> Floats:
    """T15 (and T18, T19): the mean squared deviation of a unit query's read from the float32 read after n writes,
    the state rounded to ``dtype`` after every write: dv V_n, V_n = sum_s c^(n - s) w_s, with w_s the variance of
    step s's rounding error (the state's entries N(0, m_s/(d dv)), the increment's exact distribution) and c the
    contraction of the memory (1 linear, alpha^2 decay, alpha^2 (1 - (2 beta - beta^2)/d) the delta rules).
    Stochastic rounding: holds at every n. Round-to-nearest: holds until the stall (T17), u^2 n << 1 for the
    additive memories; there it is about 0.18 u^2 n^2 / (2 d)."""
    n, d, dv = _memory_args(n, d, dv)
    if np.unique(d).size > 1 or np.unique(dv).size > 1:
        return _out(
            np.vectorize(
                lambda nn, dd, vv: step_rounding_error(
                    nn, dd, vv, dtype, memory=memory, alpha=alpha, beta=beta, stochastic=stochastic
                )
            )(n, d, dv)
        )
    d0, dv0 = int(d.flat[0]), int(dv.flat[0])
    s, V, _ = _trajectory(memory, int(np.max(n)), d0, dv0, dtype, alpha, beta, stochastic)
    return _out(dv0 * np.interp(n, s, V))


def rounding_crossover(
    d: Numbers, dv: Numbers, dtype: Dtype, *, stochastic: bool = True, ratio: float = 1.0, n_max: float = 1e9
) -> Floats:
    """T16: the number of writes n at which the linear memory's step-rounding deviation (T15) reaches ``ratio``
    times its crosstalk (n - 1)/d (``ratio=1``: where it overtakes the crosstalk).

    Stochastic rounding: about 7/u^2 for d = dv in 16..64 (not 12/u^2); the measured crossing lies about 30% later
    (T15 overestimates the deviation there: at this n the measured deviation is 0.77-0.78 of the crosstalk in
    float8, docs/precision-accuracy.md). Round-to-nearest never
    overtakes the crosstalk (``inf``): past the stall its deviation is the lost part of the writes, which
    approaches the crosstalk from below; it reaches ``ratio`` = 1/64 near 0.20/u^2 (d = dv = 64). ``inf`` also when the crossing
    lies beyond ``n_max``.
    """
    (d, dv) = _counts(d=d, dv=dv)
    r = float(ratio)
    if not 0.0 < r <= 1.0:
        raise CapacityError(f"ratio must lie in (0, 1], got {ratio!r}")
    out = np.empty(d.shape)
    for idx in np.ndindex(d.shape):
        dd, vv = int(d[idx]), int(dv[idx])
        s, V, _ = _trajectory("linear", int(n_max), dd, vv, dtype, 1.0, 1.0, stochastic)
        rel = vv * V * dd / np.maximum(s - 1.0, 1e-300) / r  # deviation / (ratio * crosstalk)
        above = np.nonzero((rel >= 1.0) & (s > 1))[0]
        if above.size == 0:
            out[idx] = math.inf
            continue
        i = above[0]
        if i == 0 or s[i - 1] <= 1:
            out[idx] = s[i]
            continue
        x0, x1 = math.log(s[i - 1]), math.log(s[i])  # log rel is close to linear in log n between grid points
        y0, y1 = math.log(max(rel[i - 1], 1e-300)), math.log(rel[i])
        out[idx] = math.exp(x0 - y0 * (x1 - x0) / (y1 - y0)) if y1 != y0 else s[i]
    return _out(out)


def _stall_at(n: float, traj: Trajectory, d: int, dv: int, dtype: Dtype) -> tuple[float, float]:
    """(lost fraction, retained fraction) of the n-th write, the stored spread before it from ``traj``."""
    s, _, spreads = traj
    log_rho, _, lost, kept, z2 = _increment_table(d, dv, False)
    before = float(np.interp(max(n - 1.0, 1.0), s, spreads)) if n > 1 else 1e-300
    P, q = _binades(np.atleast_1d(math.sqrt(before)), dtype)
    return float((P[0] * _interp(log_rho, lost, q)).sum()), float((P[0] * _interp(log_rho, kept, q)).sum() / z2)


def _stall_stats(n: Numbers, d: Numbers, dv: Numbers, dtype: Dtype) -> tuple[FloatArray, FloatArray]:
    """(lost fraction, retained fraction) of the n-th write of random unit pairs into a round-to-nearest linear
    state, whose entries before it are taken N(0, spread): the stored state's spread from ``_trajectory``."""
    n, d, dv = _memory_args(n, d, dv)
    lost_all, kept_all = np.empty(n.shape), np.empty(n.shape)
    cache: dict[tuple[int, int], Trajectory] = {}
    for idx in np.ndindex(n.shape):
        dd, vv = int(d[idx]), int(dv[idx])
        if (dd, vv) not in cache:
            cache[(dd, vv)] = _trajectory("linear", int(np.max(n)), dd, vv, dtype, 1.0, 1.0, False)
        lost_all[idx], kept_all[idx] = _stall_at(float(n[idx]), cache[(dd, vv)], dd, vv, dtype)
    return lost_all, kept_all


def stall_fraction(n: Numbers, d: Numbers, dv: Numbers, dtype: Dtype) -> Floats:
    """T17: the fraction of the state's entries that the n-th write leaves unchanged under round-to-nearest:
    P(|k_a v_b| < q(S_ab)/2), S after n - 1 writes of random unit keys and values (entries N(0, (n - 1)/(d dv))).
    Measured 0.935-0.976 of it from u^2 n = 1/4 to 1 in every format (2026-12-03, docs/precision-accuracy.md).
    It depends on n through u^2 n (and weakly on d, dv). The stored entries are taken Gaussian with the spread
    of the stored (not the float32) state, which grows more slowly once writes are lost (``step_rounding_error``'s
    trajectory). Past u^2 n = 1 an estimate: 9.4% high at u^2 n = 4 (the issue-46 audit, 2026-12-06); a
    CapacityWarning past u^2 n = 4, where nothing is measured."""
    u2n = unit_roundoff(dtype) ** 2 * np.asarray(_numbers("n", n))
    if np.any(u2n > 4.0):
        warnings.warn(
            f"stall_fraction: u^2 n = {float(np.max(u2n)):.3g} lies past the measured range (u^2 n <= 4, where the "
            "form is up to about 10% high; docs/theory.md, T17)",
            CapacityWarning,
            stacklevel=2,
        )
    return _out(_stall_stats(n, d, dv, dtype)[0])


def retained_fraction(n: Numbers, d: Numbers, dv: Numbers, dtype: Dtype) -> Floats:
    """T17: the part of the n-th write's increment that a round-to-nearest state keeps, E[delta R(delta)] / E
    delta^2 with R(delta) = fl(S + delta) - S (delta = k_a v_b): 1 while the increments span many ulps, falling
    as u^2 n grows. Same assumptions as ``stall_fraction``."""
    return _out(_stall_stats(n, d, dv, dtype)[1])


def stall_onset(d: Numbers, dv: Numbers, dtype: Dtype, *, fraction: float = 0.5) -> Floats:
    """T17: the number of writes after which round-to-nearest leaves ``fraction`` of a write's entries unchanged
    (``stall_fraction`` = fraction), found by bisection in log n. About 0.7/u^2 at fraction 0.5 (0.76/u^2 at d = 16).
    The measured onset differs by 10-27% (2026-12-03, d = 16: 0.96/u^2 in bfloat16, 213 against 194 writes in
    float8_e4m3fn, 45 against 50 in float8_e5m2; docs/precision-accuracy.md), and 34% later in float8_e5m2 at d =
    40, dv = 24 (the issue-46 audit, 2026-12-06): stall_fraction is a few percent high near the onset, where the
    fraction rises slowly with n. The onset is a prediction good to about a third, the measured one later."""
    f = float(fraction)
    if not 0.0 < f < 1.0:
        raise CapacityError(f"fraction must lie in (0, 1), got {fraction!r}")
    (d, dv) = _counts(d=d, dv=dv)
    u = unit_roundoff(dtype)
    out = np.empty(d.shape)
    for idx in np.ndindex(d.shape):
        dd, vv = int(d[idx]), int(dv[idx])
        lo, hi = math.log(2.0), math.log(100.0 / u**2)  # the onset lies near 0.7/u^2
        traj = _trajectory("linear", int(math.exp(hi)) + 1, dd, vv, dtype, 1.0, 1.0, False)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if _stall_at(math.exp(mid), traj, dd, vv, dtype)[0] < f:
                lo = mid
            else:
                hi = mid
        out[idx] = math.exp(0.5 * (lo + hi))
    return _out(out)


def decay_rounding_floor(d: Numbers, dv: Numbers, dtype: Dtype, alpha: float, *, stochastic: bool = False) -> Floats:
    """T18: the limit as n grows of the decay memory's step-rounding deviation (T15 with c = alpha^2):
    dv w_inf / (1 - alpha^2), w_inf the rounding variance of the stationary state (entries N(0, 1/(d dv (1 -
    alpha^2)))). About 0.18 u^2 / (d (1 - alpha^2)^2): bounded, where the linear memory's grows like n^2.
    Holds while the increments span many ulps of the stationary state, sqrt(1 - alpha^2) >> 2u; otherwise
    round-to-nearest rounds the decay itself away ((1 - alpha) S is below half an ulp once 1 - alpha < u) and the
    state forgets less than float32's (float8_e4m3fn, alpha = 0.99: 16% more error at n = 256)."""
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise CapacityError(f"alpha must lie in (0, 1) for a floor, got {alpha!r}")
    (d, dv) = _counts(d=d, dv=dv)
    n = np.ceil(40.0 / (1.0 - a * a)) + 1
    return step_rounding_error(n, d, dv, dtype, memory="decay", alpha=a, stochastic=stochastic)


def delta_rounding_floor(
    d: Numbers, dv: Numbers, dtype: Dtype, *, beta: float = 1.0, alpha: float = 1.0, stochastic: bool = False
) -> Floats:
    """T19: the limit of the delta rule's step-rounding deviation: the write contracts the state error along each
    key, E ||E_t||^2 = alpha^2 (1 - (2 beta - beta^2)/d) E ||E_{t-1}||^2 + d dv w_t, so it is bounded at
    dv w_inf / (1 - c), about 0.18 u^2 d beta / ((2 - beta)(2 beta - beta^2)) at alpha = 1 (0.18 u^2 d at beta =
    1), whatever n. Holds for any u small enough that the increments span many ulps (no stall: the residual v - k S
    keeps the increments as large as the state's entries). Measured within 5% in bfloat16 (docs/precision-accuracy.md)
    and float8 for the delta rule at d = 16; in float8 at d = 64 0.88-0.98 of it; the gated delta rule in
    float8_e4m3fn is 11-15% above it at alpha = 0.95-0.98 (it holds at 0.995; the issue-46 audit, 2026-12-06): the
    decayed state's increments span about one ulp there (T18's limit). A CapacityWarning for float8 at alpha < 0.99."""
    _check_memory("gated_delta", alpha, beta)
    if str(dtype).startswith("float8") and float(alpha) < 0.99:
        warnings.warn(
            f"delta_rounding_floor: {dtype} at alpha = {float(alpha):g} lies outside the measured range (alpha >= "
            "0.99 in float8; at 0.95-0.98 the measured floor is 11-15% above the form; docs/theory.md, T19)",
            CapacityWarning,
            stacklevel=2,
        )
    (d, dv) = _counts(d=d, dv=dv)
    c = _contraction("gated_delta", float(np.max(d)), alpha, beta)
    n = np.ceil(40.0 / (1.0 - c)) + 1
    mem = "delta" if float(alpha) == 1.0 else "gated_delta"
    return step_rounding_error(n, d, dv, dtype, memory=mem, alpha=alpha, beta=beta, stochastic=stochastic)
