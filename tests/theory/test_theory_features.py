"""T25-T29 against simulations written here in plain numpy (features, kernels and softmax spelled out, not imported).

Each simulation draws independent uniform unit keys and computes the quantity the closed form predicts; the
closed form must lie within 3 standard errors of it.
"""

import math

import numpy as np
import pytest

from lacapacity import CapacityError, theory


def _unit(rng, *shape):
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _cos2(fa, fb):
    """cos^2 between matching rows of two feature arrays [N, D] (0 for an all-zero row: relu of a key in the
    negative orthant, probability 2^-d, whose read is 0; the closed forms count it so)."""
    num = (fa * fb).sum(-1) ** 2
    den = (fa * fa).sum(-1) * (fb * fb).sum(-1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def _within(sample, expected, sigmas=3.0, model=0.0):
    """The mean of ``sample`` equals ``expected`` within 3 standard errors (plus ``model``, a stated relative error)."""
    m, se = float(np.mean(sample)), float(np.std(sample) / math.sqrt(len(sample)))
    assert abs(m - expected) <= sigmas * se + model * abs(expected), (m, se, expected)


def test_sphere_moments_against_monte_carlo():
    rng = np.random.default_rng(0)
    for d in (3, 16):
        s = (_unit(rng, 200_000, d) * _unit(rng, 200_000, d)).sum(-1)
        for p in (2, 4, 6):
            _within(s**p, theory.sphere_moment(d, p))
        assert theory.sphere_moment(d, 3) == 0.0
    assert theory.sphere_moment(16, 2) == 1 / 16 and theory.sphere_moment(16, 4) == 3 / (16 * 18)


@pytest.mark.parametrize("p", [2, 3])
def test_the_monomial_kernel_hypothesis(p):
    """kappa(x) = x^p: error (n - 1) (2p - 1)!! / prod_{i<p} (d + 2i), for the read phi(q) S of the tensor features."""
    rng = np.random.default_rng(p)
    n, d, B = 12, 6, 3000
    K, V = _unit(rng, B, n, d), _unit(rng, B, n, 8)
    phi = K
    for _ in range(p - 1):  # the p-fold tensor power: phi(q) . phi(k) = (q . k)^p
        phi = (phi[..., :, None] * K[..., None, :]).reshape(B, n, -1)
    S = np.einsum("bnf,bnv->bfv", phi, V)
    err = ((np.einsum("bnf,bfv->bnv", phi, S) - V) ** 2).sum(-1).mean(-1)
    hyp = (n - 1) * math.prod(range(2 * p - 1, 0, -2)) / math.prod(d + 2 * i for i in range(p))
    _within(err, hyp)
    for norm in (True, False):  # |phi(k)| = 1 for unit keys: normalising changes nothing
        assert theory.polynomial_kernel_error(n, d, [0] * p + [1], normalize=norm) == pytest.approx(hyp, rel=1e-12)


def test_taylor_kernel_with_and_without_normalised_features():
    rng = np.random.default_rng(1)
    n, d, B = 20, 16, 4000
    K, V = _unit(rng, B, n, d), _unit(rng, B, n, d)
    s = np.einsum("bid,bjd->bij", K, K)
    kern = 1 + s + s * s / 2  # phi(q).phi(k) of the Taylor map, 2.5 on the diagonal
    for norm, W in ((True, kern / 2.5), (False, kern)):
        err = ((np.einsum("bij,bjv->biv", W, V) - V) ** 2).sum(-1).mean(-1)
        _within(err, theory.polynomial_kernel_error(n, d, [1, 1, 0.5], normalize=norm))
    # a constant fraction of n: (1 + 2/d + 3/(4 d (d + 2)))/2.5^2 per pair, 0.16 as d grows
    assert theory.polynomial_kernel_error(2, 16, [1, 1, 0.5]) == pytest.approx((1 + 2 / 16 + 3 / (4 * 16 * 18)) / 6.25)
    assert theory.polynomial_kernel_error(2, 4096, [1, 1, 0.5]) == pytest.approx(0.16, rel=1e-3)


def _features(name, x, **p):
    if name == "relu":
        return np.maximum(x, 0)
    if name == "elu1":
        return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))
    if name == "dpfp":
        r = np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], -1)
        return np.concatenate([r * np.roll(r, j, axis=-1) for j in range(1, p["nu"] + 1)], -1)
    raise ValueError(name)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,d,fn,model",
    [
        ("relu", 16, lambda d: theory.relu_feature_error(2, d), 0.0),
        ("relu", 64, lambda d: theory.relu_feature_error(2, d), 0.0),
        ("elu1", 64, lambda d: theory.elu1_feature_error(2, d), 0.0),
        # DPFP for unit features: the ratio of exact means, stated within 1% for nu = 2, d = 32..64
        ("dpfp", 32, lambda d: theory.dpfp_error(2, d, 2), 0.01),
        ("dpfp", 64, lambda d: theory.dpfp_error(2, d, 2), 0.01),
    ],
)
def test_coordinatewise_and_dpfp_crosstalk_against_monte_carlo(name, d, fn, model):
    rng = np.random.default_rng(d)
    N = 120_000 if name != "dpfp" else 60_000
    k, kp = _unit(rng, N, d), _unit(rng, N, d)
    c2 = _cos2(_features(name, k, nu=2), _features(name, kp, nu=2))
    _within(c2, fn(d), model=model)


@pytest.mark.slow
def test_dpfp_moments_are_exact_for_features_scaled_by_a_constant():
    """For phi / sqrt(E |phi|^2) the crosstalk E (phi . phi')^2 / (E |phi|^2)^2 is exact (no ratio inside)."""
    rng = np.random.default_rng(11)
    d, N = 16, 200_000
    a, b = _features("dpfp", _unit(rng, N, d), nu=1), _features("dpfp", _unit(rng, N, d), nu=1)
    c = _features("dpfp", _unit(rng, 4 * N, d), nu=1)
    scale = (c * c).sum(-1).mean()  # E |phi|^2 from an independent sample; its relative s.e. is 0.1%
    _within((a * b).sum(-1) ** 2 / scale**2, theory.dpfp_error(2, d, 1), model=0.002)


def test_elu1_gaussian_coordinates_are_within_their_stated_error():
    """elu + 1 is not homogeneous: the closed form takes Gaussian coordinates; its stated error is 0.11% at d = 16."""
    rng = np.random.default_rng(7)
    d, N = 16, 200_000
    c2 = _cos2(_features("elu1", _unit(rng, N, d)), _features("elu1", _unit(rng, N, d)))
    m, se = c2.mean(), c2.std() / math.sqrt(N)
    got = theory.elu1_feature_error(2, d)
    assert abs(got - m) <= 3 * se + 1.2e-3 * m
    assert got > m  # the documented sign: the Gaussian-coordinate form is high at d = 16


def test_the_mean_error_is_n_minus_one_times_the_crosstalk():
    for name, params in (("relu", {}), ("elu1", {}), ("dpfp", {"nu": 2}), ("taylor2", {}), ("identity", {})):
        rho2 = theory.feature_crosstalk(name, 32, **params)
        assert theory.feature_map_error(name, 17, 32, **params) == pytest.approx(16 * rho2, rel=1e-12)
    assert theory.feature_crosstalk("identity", 32) == pytest.approx(1 / 32)
    with pytest.raises(CapacityError, match="no closed form is known for the feature map"):
        theory.feature_crosstalk("softplus", 16)


@pytest.mark.slow
def test_performer_crosstalk_against_monte_carlo_over_the_projections():
    """E cos^2 over keys and over i.i.d. N(0, I) projections, the features spelled out here."""
    rng = np.random.default_rng(3)
    d, m, draws, N = 16, 64, 200, 2000
    vals = []
    for _ in range(draws):
        W = rng.standard_normal((m, d))
        k, kp = _unit(rng, N, d), _unit(rng, N, d)
        vals.append(_cos2(np.exp(k @ W.T - 0.5), np.exp(kp @ W.T - 0.5)).mean())
    _within(np.array(vals), theory.performer_error(2, d, m))
    # the exponential kernel's crosstalk is the m -> infinity limit, and the random features only add to it
    assert theory.performer_error(2, d, 4096) > theory.exp_kernel_error(2, d, 1.0)
    assert theory.performer_error(2, d, 4096) < theory.performer_error(2, d, 256) < theory.performer_error(2, d, m)


def _softmax_sim(rng, n, d, scale, B):
    K, V = _unit(rng, B, n, d), _unit(rng, B, n, d)
    s = np.einsum("bid,bjd->bij", K, K)
    z = scale * s
    P = np.exp(z - z.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    err = ((np.einsum("bij,bjv->biv", P, V) - V) ** 2).sum(-1).mean(-1)
    weight = np.diagonal(P, axis1=1, axis2=2).mean(-1)
    X = np.exp(scale * (s - 1))
    kern = ((np.einsum("bij,bjv->biv", X, V) - V) ** 2).sum(-1).mean(-1)  # the kernel read, X_ii = 1
    return err, weight, kern


@pytest.mark.slow
@pytest.mark.parametrize("n,d,scale", [(64, 32, 4.0), (256, 16, 2.0), (128, 64, 8.0)])
def test_softmax_error_weight_and_kernel_against_simulation(n, d, scale):
    rng = np.random.default_rng(n + d)
    err, weight, kern = _softmax_sim(rng, n, d, scale, 400)
    _within(err, theory.softmax_error(n, d, scale))
    _within(weight, theory.softmax_weight(n, d, scale))
    _within(kern, theory.exp_kernel_error(n, d, scale))


def test_the_exponential_kernel_hypothesis_and_its_limits():
    """(n - 1) exp(2 beta^2/d - 2 beta) holds while beta <= 0.29 d^(3/4); the exact error falls with beta for
    every beta (no optimum at d/2)."""
    for d in (16, 64, 256):
        b = 0.29 * d**0.75
        hyp = math.exp(2 * b * b / d - 2 * b)
        assert 1.0 <= hyp / theory.exp_kernel_error(2, d, b) <= 1.03
        betas = np.linspace(0.5, 2 * d, 40)
        exact = theory.exp_kernel_error(2, d, betas)
        assert np.all(np.diff(exact) < 0)
        hyp_curve = 2 * betas**2 / d - 2 * betas  # the log of the approximation
        assert abs(betas[np.argmin(hyp_curve)] - d / 2) < 2 * d / 40  # the approximation's minimum, an artefact
    assert theory.softmax_error(1, 16, 3.0) == 0.0 and theory.softmax_weight(1, 16, 3.0) == 1.0
    with pytest.raises(CapacityError, match="scale"):
        theory.softmax_error(8, 16, 0.0)


def test_feature_closed_forms_reject_bad_input():
    with pytest.raises(CapacityError, match="coefficients"):
        theory.polynomial_kernel_error(4, 8, [])
    with pytest.raises(CapacityError, match="nu"):
        theory.dpfp_error(4, 3, 9)
    with pytest.raises(CapacityError, match=">= 1"):
        theory.relu_feature_error(0, 8)
