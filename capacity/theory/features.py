"""T25-T28: mean error of the linear memory through each built-in feature map, with random unit keys.

The memory writes S = sum_i f_i^T v_i and reads f_q S, where f = phi(k) / |phi(k)| (the feature-maps study writes
L2-normalised features, ``linear(normalize=true)``), or f = phi(k) itself (``normalize=False`` where a function
takes it). With independent unit values whose cross products have mean 0 (the ``gaussian`` value family), the
error of read i given the keys is (f_i . f_i - 1)^2 + sum_{j != i} (f_i . f_j)^2 exactly, so

    mean error = (n - 1) rho2,        rho2 = E (f . f')^2 = E cos^2(phi(k), phi(k'))

for normalised features, k and k' two independent uniform unit keys. Because k and k' are independent,
rho2 = ||C||_F^2 with C = E[f f^T], the expected outer product of ONE normalised feature vector: the crosstalk is
the frame potential of C. Each function below computes rho2 for one map family (docs/theory.md, T25-T28).

>>> from lacapacity import theory
>>> round(theory.polynomial_kernel_error(33, 16, [0, 1]), 6)   # identity: T7, (n - 1)/d
2.0
>>> round(theory.polynomial_kernel_error(2, 16, [1, 1, 0.5]), 4)  # Taylor map: 1/(2.5^2) (1 + 2/d + ...)
0.1804
>>> round(theory.feature_crosstalk("relu", 64), 4)   # -> 1/pi^2 = 0.1013 as d grows
0.1122
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from lacapacity.errors import CapacityError, CapacityWarning
from lacapacity.theory._common import FloatArray, Floats, Numbers, _counts, _numbers, _out, _scipy

__all__ = [
    "sphere_moment",
    "polynomial_kernel_error",
    "relu_feature_error",
    "elu1_feature_error",
    "dpfp_error",
    "performer_error",
    "feature_crosstalk",
    "feature_map_error",
]


def sphere_moment(d: Numbers, p: int) -> Floats:
    """E s^p for one coordinate s of a uniform unit vector in R^d (= the dot product of two independent ones).

    Odd p: 0; even p = 2q: (2q - 1)!! / (d (d + 2) ... (d + 2q - 2)). Broadcasts over d.

    >>> sphere_moment(16, 2), round(sphere_moment(16, 4), 8)   # 1/d and 3/(d(d+2)): T7's moments
    (0.0625, 0.01041667)
    """
    (d,) = _counts(d=d)
    p = int(p)
    if p < 0:
        raise CapacityError(f"p must be a whole number >= 0, got {p}")
    if p % 2:
        return _out(np.zeros_like(d))
    out = np.ones_like(d)
    for i in range(p // 2):
        out = out * (2 * i + 1) / (d + 2 * i)
    return _out(out)


def _coefficients(coefficients: Sequence[float] | Numbers) -> FloatArray:
    c = _numbers("coefficients", coefficients)
    if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)):
        raise CapacityError(
            f"coefficients must be a non-empty list of finite numbers c_0, c_1, ... (kappa(s) = sum_p c_p s^p), got {coefficients!r}"
        )
    return c


def polynomial_kernel_error(
    n: Numbers, d: Numbers, coefficients: Sequence[float] | Numbers, normalize: bool = True
) -> Floats:
    """T25: mean error of the linear memory whose features have the dot-product kernel kappa(s) = sum_p c_p s^p.

    phi(q) . phi(k) = kappa(q . k) (identity: [0, 1]; the ``taylor2`` map: [1, 1, 1/2]; the monomial kernel x^p:
    c_p = 1). Unit keys give |phi(k)|^2 = kappa(1), and with s the dot product of two random unit keys
    (``sphere_moment``), exactly

        normalize=True  (features L2-normalised, the read phi(q) S / kappa(1)):  (n - 1) E[kappa(s)^2] / kappa(1)^2
        normalize=False (the plain read phi(q) S):                (kappa(1) - 1)^2 + (n - 1) E[kappa(s)^2]

    E[kappa(s)^2] = sum_{p, q} c_p c_q E s^(p+q). For kappa(s) = s^p the two agree:
    (n - 1) (2p - 1)!! / prod_{i<p} (d + 2i). Assumes independent uniform unit keys and independent unit values
    with E v_j . v_l = 0 (j != l); no normalisation of the read by phi(q) . sum_i phi(k_i) (``softmax_error``
    is that read for the exponential kernel).
    """
    n, d = _counts(n=n, d=d)
    c = _coefficients(coefficients)
    if not isinstance(normalize, bool):
        raise CapacityError(f"normalize must be True or False, got {normalize!r}")
    k1 = float(c.sum())
    if normalize and k1 <= 0:
        raise CapacityError(f"normalised features need kappa(1) = sum(coefficients) > 0, got {k1}")
    second = np.zeros_like(d)
    for p, cp in enumerate(c):
        for q, cq in enumerate(c):
            if cp and cq and (p + q) % 2 == 0:
                second = second + cp * cq * np.asarray(sphere_moment(d, p + q))
    if normalize:
        return _out((n - 1.0) * second / k1**2)
    return _out((k1 - 1.0) ** 2 + (n - 1.0) * second)


# ---------------------------------------------------------------- coordinatewise maps (relu, elu1)


@functools.lru_cache(maxsize=1)
def _normal_nodes() -> tuple[FloatArray, FloatArray]:
    """Nodes and weights of E f(g), g ~ N(0, 1), for functions smooth on each half-line (kinks at 0 allowed)."""
    integrate, optimize, special = _scipy()
    t, w = special.roots_legendre(160)
    x = np.concatenate([(t - 1.0) * 6.0, (t + 1.0) * 6.0])  # [-12, 0] and [0, 12]
    wx = np.concatenate([w, w]) * 6.0 * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return x, wx


@functools.lru_cache(maxsize=64)
def _coordinatewise_crosstalk(name: str, d: int) -> float:
    """rho2 = E cos^2(phi(k), phi(k')) for phi acting on each coordinate, coordinates N(0, 1/d) (see the callers).

    For exchangeable coordinates rho2 = d I2^2 + d (d - 1) I1^2 with I2 = E[phi_1^2 / |phi|^2] and
    I1 = E[phi_1 phi_2 / |phi|^2]; with 1/|phi|^2 = int_0^inf exp(-s |phi|^2) ds both are one integral over s of
    products of one-coordinate moments m_k(s) = E[phi(x)^k exp(-s phi(x)^2)]:
    I2 = int m_2 m_0^(d-1) ds, I1 = int m_1^2 m_0^(d-2) ds.
    """
    g, wg = _normal_nodes()
    if name == "relu":
        x, phi = g, np.maximum(g, 0.0)  # homogeneous: the scale of x does not matter
    else:
        x = g / math.sqrt(d)
        phi = np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))
    scale = float((wg * phi * phi).sum())  # E phi^2: s in units of 1 / E phi^2
    u = np.linspace(-18.0, 12.0, 1501)
    s = np.exp(u) / (d * scale)  # [S]
    ds = s * (u[1] - u[0])  # trapezoid weights in u (the integrand vanishes at both ends)
    ds[[0, -1]] *= 0.5
    e = np.exp(-s[:, None] * (phi * phi)[None, :])  # [S, X]
    m0 = e @ wg
    m1 = (e * phi) @ wg
    m2 = (e * phi * phi) @ wg
    i2 = float((m2 * m0 ** (d - 1) * ds).sum())
    i1 = float((m1 * m1 * m0 ** (d - 2) * ds).sum()) if d >= 2 else 0.0
    return d * i2 * i2 + d * (d - 1) * i1 * i1


def _crosstalk_over_d(name: str, d: Numbers) -> FloatArray:
    (dd,) = _counts(d=d)
    if np.any(dd != np.round(dd)):
        raise CapacityError(f"d must be a whole number, got {dd!r}")
    got: FloatArray = np.vectorize(lambda x: _coordinatewise_crosstalk(name, int(x)), otypes=[np.float64])(dd)
    return got


def relu_feature_error(n: Numbers, d: Numbers) -> Floats:
    """T26: mean error of the linear memory through ReLU features, L2-normalised, random unit keys: (n - 1) rho2.

    ReLU is homogeneous, so cos(relu(k), relu(k')) depends on the directions only and Gaussian keys give the sphere's
    answer exactly: rho2 = d I2^2 + d (d - 1) I1^2 with one-dimensional integrals (``_coordinatewise_crosstalk``).
    rho2 = 0.1452 (d = 16), 0.1122 (d = 64), tending to 1/pi^2 = 0.1013: every pair of features overlaps
    (the positive orthant), so the error grows like n / 10 instead of n / d.
    """
    n, _ = _counts(n=n, d=d)
    return _out((n - 1.0) * _crosstalk_over_d("relu", d))


def elu1_feature_error(n: Numbers, d: Numbers) -> Floats:
    """T26: mean error of the linear memory through elu + 1 features, L2-normalised, random unit keys: (n - 1) rho2.

    phi(x) = elu(x) + 1 is close to 1 + x for the small coordinates of a unit key, so every feature vector lies near
    the all-ones direction and rho2 = 1 - O(1/d): 0.911 at d = 16, 0.973 at d = 64. Computed with the key's
    coordinates taken independent N(0, 1/d) (elu + 1 is not homogeneous, so the sphere's coordinates are replaced
    by Gaussian ones); against uniform unit keys this is 0.12% high at d = 16, 0.02% at d = 32, 0.004% at d = 64
    (docs/theory.md, T26). Below d = 16 the bias grows (0.55% at d = 8, 2.0% at d = 4; measured 2026-12-06 on
    400,000 pairs of uniform unit keys): a CapacityWarning says so.
    """
    n, d_ = _counts(n=n, d=d)
    if np.any(d_ < 16):
        warnings.warn(
            "elu1_feature_error: d below 16 lies outside the documented range; the Gaussian-coordinate form is "
            "0.55% high at d = 8 and 2.0% at d = 4 (docs/theory.md, T26)",
            CapacityWarning,
            stacklevel=2,
        )
    return _out((n - 1.0) * _crosstalk_over_d("elu1", d))


# ---------------------------------------------------------------- DPFP


def _half_normal_moments(kmax: int) -> FloatArray:
    """E[g^k; g > 0] for k = 0..kmax, g ~ N(0, 1): E[max(g, 0)^k] for k >= 1 (P(g > 0) = 1/2 at k = 0)."""
    k = np.arange(kmax + 1, dtype=np.float64)
    return 2.0 ** (k / 2.0 - 1.0) * np.exp([math.lgamma((x + 1.0) / 2.0) for x in k]) / math.sqrt(math.pi)


@functools.lru_cache(maxsize=64)
def _dpfp_moments(d: int, nu: int) -> tuple[float, float]:
    """(sum_{f,f'} E[phi_f phi_f']^2, (sum_f E phi_f^2)^2) for DPFP(nu) of a Gaussian key g ~ N(0, I_d).

    r = [relu(g), relu(-g)] (2d entries; entry a is coordinate a mod d with sign + for a < d, - after),
    phi_(j,a) = r_a r_(a-j mod 2d). A product of r entries has expectation prod over coordinates of
    E[relu(g)^k] (k entries of one sign) or 0 when a coordinate enters with both signs. A coordinate enters with one
    sign at most twice (r_a and r_(a-j) share a coordinate only for j = d, with opposite signs), so k <= 2.
    """
    D = 2 * d * nu
    a = np.tile(np.arange(2 * d), nu)  # feature f = (j, a), j-major as in lacapacity.features
    b = (a - np.repeat(np.arange(1, nu + 1), 2 * d)) % (2 * d)

    def coord(idx: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return idx % d

    def sign(idx: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return np.where(idx < d, 1, -1)

    h = _half_normal_moments(2)

    def moment(idxs: list[npt.NDArray[np.int64]]) -> FloatArray:
        """``idxs``: index arrays (broadcast), the r entries multiplied."""
        cs = [coord(i) for i in idxs]
        ss = [sign(i) for i in idxs]
        out = np.ones(np.broadcast(*idxs).shape)
        for t in range(len(idxs)):
            first = np.ones_like(out, dtype=bool)
            for u in range(t):
                first &= cs[u] != cs[t]
            pos = sum((cs[u] == cs[t]) & (ss[u] > 0) for u in range(len(idxs)))
            neg = sum((cs[u] == cs[t]) & (ss[u] < 0) for u in range(len(idxs)))
            factor = np.where((pos > 0) & (neg > 0), 0.0, h[np.maximum(pos, neg)])
            out = out * np.where(first, factor, 1.0)
        return out

    norm2 = float(moment([a, b, a, b]).sum())  # sum_f E phi_f^2
    cross = 0.0
    step = max(1, (1 << 22) // D)
    for s0 in range(0, D, step):
        sl = slice(s0, s0 + step)
        m = moment([a[sl, None], b[sl, None], a[None, :], b[None, :]])  # [blk, D]
        cross += float((m * m).sum())
    return cross, norm2 * norm2


def dpfp_error(n: Numbers, d: Numbers, nu: int = 1) -> Floats:
    """T27: mean error of the linear memory through DPFP(nu) features, random unit keys: (n - 1) rho2.

    rho2 = sum_{f,f'} E[phi_f phi_f']^2 / (E |phi|^2)^2, from the exact moments of DPFP's sparse products (a
    feature r_a r_(a-j) is nonzero only where both coordinates have the signs it selects; the moments are
    half-normal moments, exact over the sphere because phi is homogeneous of degree 2). This is the exact crosstalk
    of features scaled by the constant 1 / sqrt(E |phi|^2); for features L2-normalised one by one (the study) it
    is the ratio-of-means approximation: measured against simulation (nu = 2) it is 4% high at d = 16 and within
    1% for d >= 32.
    """
    n, _ = _counts(n=n, d=d)
    (dd,) = _counts(d=d)
    nu = int(nu)
    if nu < 1 or np.any(nu > 2 * dd - 1):
        raise CapacityError(f"dpfp: nu must lie in [1, 2 d - 1], got nu = {nu} for d = {d!r}")

    def one(x: float) -> float:
        cross, norm = _dpfp_moments(int(x), nu)
        return cross / norm

    return _out((n - 1.0) * np.vectorize(one, otypes=[np.float64])(dd))


# ---------------------------------------------------------------- Performer


@functools.lru_cache(maxsize=64)
def _performer_crosstalk(d: int, m: int) -> float:
    """E cos^2(phi(k), phi(k')) for Performer features with m independent N(0, I_d) projections, averaged over them.

    Given s = k . k', the projections' values on k and k' are pairs (al_r, be_r), independent across r, standard
    normal with correlation s; cos^2 = N^2 / (D1 D2) with N = sum_r e^(al_r + be_r), D1 = sum_r e^(2 al_r),
    D2 = sum_r e^(2 be_r). With 1/(D1 D2) = int int exp(-a D1 - b D2) da db,

        E[N^2 exp(-a D1 - b D2)] = m A2 P^(m - 1) + m (m - 1) A1^2 P^(m - 2),

    P = E exp(-a e^(2 al) - b e^(2 be)), A_k = E[e^(k (al + be)) exp(-a e^(2 al) - b e^(2 be))]: two-dimensional
    Gaussian integrals (Gauss-Hermite), then a, b on a log grid and s by Gauss-Jacobi on its sphere density.
    """
    integrate, optimize, special = _scipy()
    ja = (d - 3.0) / 2.0
    s_nodes, s_w = special.roots_jacobi(12, ja, ja)
    s_w = s_w / s_w.sum()
    z, wz = special.roots_hermitenorm(32)
    wz = wz / wz.sum()
    t = np.linspace(-14.0, 6.0, 48)  # converged to 1e-6 relative (doubling any grid)
    grid = np.exp(t) / (m * math.e**2)  # a, b in units of 1 / E D1
    wgrid = grid * (t[1] - t[0])
    wgrid[[0, -1]] *= 0.5
    W = wz[:, None] * wz[None, :]
    total = 0.0
    for s, ws in zip(s_nodes, s_w):
        al = np.broadcast_to(z[:, None], (z.size, z.size))
        be = s * z[:, None] + math.sqrt(max(1.0 - s * s, 0.0)) * z[None, :]
        ea, eb, x = np.exp(2.0 * al), np.exp(2.0 * be), np.exp(al + be)
        e = np.exp(-grid[:, None, None, None] * ea - grid[None, :, None, None] * eb)  # [a, b, z1, z2]
        P = (e * W).sum((-1, -2))
        A1 = (e * (x * W)).sum((-1, -2))
        A2 = (e * (x * x * W)).sum((-1, -2))
        F = m * A2 * P ** (m - 1) + m * (m - 1.0) * A1 * A1 * P ** (m - 2)
        total += ws * float((F * wgrid[:, None] * wgrid[None, :]).sum())
    return total


def performer_error(n: Numbers, d: Numbers, m: int = 256) -> Floats:
    """T28: mean error of the linear memory through Performer (FAVOR+) features, L2-normalised, random unit keys.

    (n - 1) rho2, rho2 = E cos^2(phi(k), phi(k')) averaged over keys AND over the draw of m independent Gaussian
    projections (``orthogonal=False``). As m grows, rho2 tends to the exponential kernel's crosstalk
    E e^(2 (s - 1)) = e^-2 M_d(2) (``exp_kernel_error`` at beta = 1); the random features add a variance term of
    order 1/m (0.022 at d = 16, m = 256, over 0.153). Computed exactly (``_performer_crosstalk``). Orthogonal projections (``orthogonal=True``, the map's default) measure 2-3% lower at m = 256; one fixed
    draw of the projections scatters about 3% (d = 16) around this average. About 0.5 s per (d, m).
    """
    n, _ = _counts(n=n, d=d)
    (dd,) = _counts(d=d)
    m = int(m)
    if m < 2:
        raise CapacityError(f"performer: m must be >= 2, got {m}")
    return _out((n - 1.0) * np.vectorize(lambda x: _performer_crosstalk(int(x), m), otypes=[np.float64])(dd))


# ---------------------------------------------------------------- dispatch


# the built-in maps with a closed form -> the parameters the closed form reads (performer's seed and orthogonal do not
# change it: T28 averages over the projections)
_READS = {"identity": (), "taylor2": (), "relu": (), "elu1": (), "dpfp": ("nu",), "performer": ("m",)}
_IGNORED = {"performer": ("seed", "orthogonal")}


def _map(feature: Any, params: dict[str, object]) -> tuple[str, dict[str, Any]]:
    """(name, the parameters its closed form reads) of a map given by name and parameters, or of a feature map
    object (``lacapacity.features``: its ``name`` and its ``nu`` or ``m``), read without importing the maps."""
    if isinstance(feature, str):
        name, label, given = feature, feature, dict(params)
    elif isinstance(getattr(feature, "name", None), str) and not params:
        name, label = feature.name, str(getattr(feature, "label", feature.name))
        given = {p: getattr(feature, p) for p in _READS.get(name, ())}
    else:
        raise CapacityError(f"feature must be a built-in feature map name or FeatureMap, got {feature!r}")
    if name not in _READS:
        raise CapacityError(f"no closed form is known for the feature map {label!r} (built-ins: T25-T28)")
    unknown = sorted(set(given) - set(_READS[name]) - set(_IGNORED.get(name, ())))
    if unknown:
        allowed = ", ".join((*_READS[name], *_IGNORED.get(name, ()))) or "none"
        raise CapacityError(f"feature map {name!r} got unknown parameter(s) {', '.join(unknown)}; allowed: {allowed}")
    return name, {p: given[p] for p in _READS[name] if p in given}


def feature_crosstalk(feature: Any, d: Numbers, **params: object) -> Floats:
    """rho2 = E cos^2(phi(k), phi(k')) of a built-in feature map for random unit keys in R^d (T25-T28).

    ``feature``: a name of ``lacapacity.features`` (with its parameters, e.g. ``nu=2``, ``m=256``) or a built-in
    FeatureMap. The linear memory with L2-normalised features then has mean error (n - 1) rho2. Performer: the
    average over i.i.d. projections (T28) whatever the map's ``orthogonal`` and ``seed`` (orthogonal blocks measure
    2-3% lower at m = 256); elu1 and DPFP: the approximations their functions state.
    """
    name, reads = _map(feature, params)
    if name == "identity":
        return polynomial_kernel_error(2, d, [0.0, 1.0])
    if name == "taylor2":
        return polynomial_kernel_error(2, d, [1.0, 1.0, 0.5])
    if name == "relu":
        return relu_feature_error(2, d)
    if name == "elu1":
        return elu1_feature_error(2, d)
    if name == "dpfp":
        return dpfp_error(2, d, **reads)
    return performer_error(2, d, **reads)


def feature_map_error(feature: Any, n: Numbers, d: Numbers, **params: object) -> Floats:
    """Mean error (n - 1) rho2 of the linear memory with L2-normalised features of ``feature`` (see
    ``feature_crosstalk``), random unit keys and values: what the feature-maps study measures."""
    n, _ = _counts(n=n, d=d)
    return _out((n - 1.0) * np.asarray(feature_crosstalk(feature, d, **params)))
