"""T29: retrieval through the exponential kernel with random unit keys: the plain kernel read and softmax.

n independent uniform unit keys in R^d, independent unit values with E v_j . v_l = 0; read of stored key i at
scale beta (the argument ``scale``, as in ``variants.get("softmax", scale=...)``). With s_j = k_i . k_j (j != i), independent, each distributed as one coordinate of a uniform unit vector
(``lacapacity.theory.sphere_moment``), write X_j = exp(beta (s_j - 1)), the weight of pair j relative to the pair's own:

- exponential kernel, r_i = sum_j exp(beta (k_i . k_j - 1)) v_j (the kernel divided by its value at s = 1):
  mean error (n - 1) E X^2 = (n - 1) e^(-2 beta) M_d(2 beta), exactly, with the moment generating function
  M_d(a) = E e^(a s) = Gamma(d/2) (2/a)^(d/2 - 1) I_(d/2 - 1)(a);
- softmax, r_i = sum_j p_ij v_j with p_ij = e^(beta s_ij) / sum_l e^(beta s_il): with Z = sum_{j != i} X_j and
  Q = sum_{j != i} X_j^2, error = E[(Z^2 + Q) / (1 + Z)^2] and weight on the correct value E p_ii = E[1 / (1 + Z)],
  computed exactly through 1/(1 + Z)^2 = int_0^inf t e^(-t (1 + Z)) dt, which factorises over the pairs.

>>> from lacapacity import theory
>>> round(theory.softmax_weight(n=64, d=64, scale=8.0), 4)
0.9665
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from lacapacity.errors import CapacityError
from lacapacity.theory._common import FloatArray, Floats, Numbers, _counts, _numbers, _out, _scipy

__all__ = ["exp_kernel_error", "softmax_error", "softmax_weight"]


def _scale(scale: Numbers) -> FloatArray:
    b = _numbers("scale", scale)
    if not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise CapacityError(f"scale (the inverse temperature) must be > 0 and finite, got {scale!r}")
    return b


def exp_kernel_error(n: Numbers, d: Numbers, scale: Numbers) -> Floats:
    """T29: mean error of the exponential-kernel read r_i = sum_j exp(beta (k_i . k_j - 1)) v_j, random unit keys.

    (n - 1) e^(-2 beta) M_d(2 beta), exactly (see the module docstring; evaluated with scipy's scaled Bessel function).
    The Gaussian approximation s ~ N(0, 1/d) gives M_d(a) ~ exp(a^2 / (2 d)), i.e. (n - 1) exp(2 beta^2 / d - 2 beta),
    whose minimum at beta = d/2 is an artefact: s <= 1, and the exact error decreases with beta for every beta.
    The approximation overstates M_d(2 beta) by about exp(4 beta^4 / d^3): within 3% for beta <= 0.29 d^(3/4)
    (docs/theory.md, T29).
    """
    n, d = _counts(n=n, d=d)
    b = _scale(scale)
    n, d, b = np.broadcast_arrays(n, d, b)
    if np.any(d < 2) or np.any(d != np.round(d)):
        raise CapacityError(f"d must be a whole number >= 2, got {d!r}")
    moment = np.vectorize(lambda dd, bb: _log_tilted_mean(int(dd), 2.0 * float(bb)), otypes=[np.float64])(d, b)
    return _out((n - 1.0) * np.exp(moment))


@functools.lru_cache(maxsize=64)
def _sphere_nodes(d: int) -> tuple[FloatArray, FloatArray]:
    """Nodes y = 1 - s in (0, 2) and log weights of one coordinate s of a uniform unit vector in R^d.

    y = 2 / (1 + e^-t) on an even grid of t in [-75, 75]: the density of y, y^a (2 - y)^a / (2^(2a+1) B(a+1, a+1))
    with a = (d - 3)/2, times dy/dt = y (2 - y)/2 is smooth and decays like e^(-(a + 1)|t|) at both ends, so the
    trapezoid rule converges fast in t; this holds for a = -1/2 (d = 2) too, where the density has a
    square-root singularity at both ends (log E e^(-A y) within 2e-11 of adaptive quadrature, d = 2..1024).
    """
    integrate, optimize, special = _scipy()
    a = (d - 3.0) / 2.0
    t = np.linspace(-75.0, 75.0, 3001)
    log_y = math.log(2.0) - np.logaddexp(0.0, -t)
    log_w = (a + 1.0) * (log_y + math.log(2.0) - np.logaddexp(0.0, t))  # density x dy/dt, up to a constant
    log_w -= special.logsumexp(log_w)  # (the end nodes' weights are below e^-37 of the largest)
    return np.exp(log_y), log_w


def _log_tilted_mean(d: int, a: float) -> float:
    """log E exp(a (s - 1)) = log(e^-a M_d(a)), by quadrature over the sphere coordinate (stable for any d, a)."""
    integrate, optimize, special = _scipy()
    y, log_w = _sphere_nodes(d)
    return float(special.logsumexp(log_w - a * y))


@functools.lru_cache(maxsize=256)
def _laplace_parts(d: int, beta: float) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """t nodes and weights and, at each t, L = E e^(-t X), B1 = E[X e^(-t X)], B2 = E[X^2 e^(-t X)], 1 - L."""
    y, log_w = _sphere_nodes(d)
    w = np.exp(log_w)
    x = np.exp(-beta * y)  # X = exp(beta (s - 1)) in (e^(-2 beta), 1)
    v = np.linspace(math.log(1e-12), math.log(60.0), 1201)
    t = np.exp(v)
    wt = t * (v[1] - v[0])
    wt[[0, -1]] *= 0.5
    tx = t[:, None] * x[None, :]  # [T, Y]
    e = np.exp(-tx)
    one_minus_l = (-np.expm1(-tx)) @ w
    B1 = (e * x) @ w
    B2 = (e * x * x) @ w
    return t, wt, one_minus_l, B1, B2


def _per_point(fn: Callable[[float, int, float], float], n: Numbers, d: Numbers, scale: Numbers) -> Floats:
    n, d = _counts(n=n, d=d)
    b = _scale(scale)
    n, d, b = np.broadcast_arrays(n, d, b)
    if np.any(d < 2) or np.any(d != np.round(d)):
        raise CapacityError(f"d must be a whole number >= 2, got {d!r}")
    return _out(np.vectorize(lambda nn, dd, bb: fn(nn, int(dd), float(bb)), otypes=[np.float64])(n, d, b))


def _error_one(n: float, d: int, beta: float) -> float:
    if n <= 1:
        return 0.0
    t, wt, one_minus_l, B1, B2 = _laplace_parts(d, beta)
    log_l = np.log1p(-np.minimum(one_minus_l, 1.0 - 1e-16))
    core = 2.0 * (n - 1.0) * B2 * np.exp((n - 2.0) * log_l)
    if n > 2:
        core = core + (n - 1.0) * (n - 2.0) * B1 * B1 * np.exp((n - 3.0) * log_l)
    return float((wt * t * np.exp(-t) * core).sum())


def _weight_one(n: float, d: int, beta: float) -> float:
    if n <= 1:
        return 1.0
    t, wt, one_minus_l, B1, B2 = _laplace_parts(d, beta)
    log_l = np.log1p(-np.minimum(one_minus_l, 1.0 - 1e-16))
    return float((wt * np.exp(-t + (n - 1.0) * log_l)).sum())


def softmax_error(n: Numbers, d: Numbers, scale: Numbers) -> Floats:
    """T29: mean error of softmax attention over n random unit keys at scale beta, read at the stored keys.

    E[(Z^2 + Q) / (1 + Z)^2] with Z = sum_{j != i} e^(beta (s_j - 1)), Q = sum_{j != i} e^(2 beta (s_j - 1)),
    computed exactly for independent uniform unit keys (one integral over t of one-dimensional integrals over s;
    see the module docstring) and independent unit values with E v_j . v_l = 0 (the ``gaussian`` value family).
    While Z << 1 it is about 2 (n - 1) e^(-2 beta) M_d(2 beta) + (n - 1)(n - 2) (e^(-beta) M_d(beta))^2; for
    n >> M_d(2 beta) / M_d(beta)^2, Z concentrates and the error tends to the plug-in value
    ((n - 1)^2 mu1^2 + (n - 1) mu2) / (1 + (n - 1) mu1)^2, mu_k = e^(-k beta) M_d(k beta).
    """
    return _per_point(_error_one, n, d, scale)


def softmax_weight(n: Numbers, d: Numbers, scale: Numbers) -> Floats:
    """T29: the mean softmax weight on the correct value, E p_ii = E[1 / (1 + Z)], random unit keys (exact).

    The probe's ``signal`` measures it: E signal = E p_ii for values with E v_j . v_i = 0.
    """
    return _per_point(_weight_one, n, d, scale)
