"""Closed forms of lacapacity.theory (argmax, features, forgetting, softmax) at the edges their other tests leave out.

Each test compares against an independent computation (a hand-worked value, scipy quadrature written here, a
periodic trapezoid rule over the circle, a small simulation) and was added because a mutant of the function
survived the other tests (scripts/mutation.sh theory; docs/mutation-theory.md).
"""

import math
import re

import numpy as np
import pytest
from scipy import integrate, special

from lacapacity import CapacityError, theory

# ---------------------------------------------------------------- T10 / T30: argmax and recall@k


def test_recall_at_with_fewer_competitors_than_k_and_with_one():
    # n - 1 < k competitors (real n): fewer than k can beat the own value, whatever the scores
    assert theory.recall_at(2.5, 8, 8, 2) == 1.0
    assert theory.recall_at(np.array([1.0, 1.5, 2.0, 2.75]), 8, 8, 3).tolist() == [1.0] * 4
    # n <= k exactly 1, also next to a point whose integrand sets quad_vec's subdivision (there the integral of
    # the bare normal density comes out 1 - 2^-53)
    assert theory.recall_at(np.array([1.0, 3.0, 200.0]), 32, 32, 3)[:2].tolist() == [1.0, 1.0]
    # n = 2, k = 1: one wrong score N(0, s_w^2) below the correct N(1, s_c^2): Phi(1 / sqrt(s_c^2 + s_w^2))
    d, dv = 8, 12
    s2 = 1 / (d * dv) + (1 / dv + 1 / d)
    assert theory.recall_at(2.0, d, dv, 1) == pytest.approx(special.ndtr(1 / math.sqrt(s2)), abs=1e-9)
    # n = k + 1 = 3: both wrong scores must win, P = E[1 - (1 - w)^2], w = Phi((1 + s_c z)/s_w), by scipy's quad
    n, k = 3.0, 2
    s_c, s_w = math.sqrt((n - 1) / (d * dv)), math.sqrt(1 / dv + 1 / d + (n - 2) / (d * dv))
    f = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi) * (1 - (1 - special.ndtr((1 + s_c * z) / s_w)) ** 2)
    assert theory.recall_at(n, d, dv, k) == pytest.approx(integrate.quad(f, -np.inf, np.inf)[0], abs=1e-9)


def test_argmax_recall_against_scipy_quad():
    """T10's integral E_z[Phi((1 + s_c z)/s_w)^(n - 1)] by scipy's adaptive quad over the whole line."""
    for n, d, dv in ((200, 32, 32), (1000, 32, 64), (20, 8, 8)):
        s_c, s_w = math.sqrt((n - 1) / (d * dv)), math.sqrt(1 / dv + 1 / d + (n - 2) / (d * dv))
        f = lambda z, s_c=s_c, s_w=s_w, n=n: (
            math.exp(-0.5 * z * z + (n - 1) * special.log_ndtr((1 + s_c * z) / s_w)) / math.sqrt(2 * math.pi)
        )
        want = integrate.quad(f, -np.inf, np.inf, epsabs=0, epsrel=1e-12, limit=200)[0]
        assert theory.argmax_recall(n, d, dv) == pytest.approx(want, abs=1e-9), (n, d, dv)
    # n = 2: one wrong score, Phi(1 / sqrt(s_c^2 + s_w^2)); n = 1: nothing to confuse
    d, dv = 8, 12
    assert theory.argmax_recall(2.0, d, dv) == pytest.approx(special.ndtr((1 / (d * dv) + 1 / dv + 1 / d) ** -0.5))
    assert theory.argmax_recall(np.array([1.0, 2.0]), d, dv)[0] == 1.0


def test_refined_recall_at_just_above_k():
    # n - 1 < k wrong values (real n): the own value is always in the top k
    assert theory.recall_at_refined(2.5, 4, 4, 2) == 1.0
    assert theory.recall_at_refined(1.5, 4, 4, 1) == 1.0
    # n = k + 1: all k wrong values can beat the own one. A simulation of the additive memory (d = dv = 3, n = 3)
    # puts recall@2 at 0.978 (+- 0.0002); the model is below 0.99 too, and above recall@1
    rng = np.random.default_rng(4)
    K, V = (x / np.linalg.norm(x, axis=-1, keepdims=True) for x in rng.standard_normal((2, 50_000, 3, 3)))
    s = (K @ K.transpose(0, 2, 1) @ V) @ V.transpose(0, 2, 1)  # scores r_i . v_l, [T, n, n]
    own = np.diagonal(s, axis1=1, axis2=2)[..., None]
    assert ((s > own).sum(-1) < 2).mean() < 0.985
    at2 = theory.recall_at_refined(3, 3, 3, 2)
    assert theory.recall_at_refined(3, 3, 3, 1) < at2 < 0.985


def test_refined_recalls_over_empty_grids():
    # an empty grid of n gives an empty array (not numpy's "size 0 inputs" error of an untyped np.vectorize)
    assert theory.recall_at_refined(np.array([]), 4, 4, 2).shape == (0,)
    assert theory.argmax_recall_refined(np.array([]), 4, 4).shape == (0,)


def test_refined_capacities_accept_d_and_dv_2():
    # the smallest keys and values the refined model allows; at d = dv = 2 even n = 2 is below 90% recall@1,
    # so the capacity is the floor 1 that _solve_capacity returns when recall(2) < tau
    assert theory.recall_at_refined(2.0, 2, 2, 1) < 0.9
    assert theory.recall_at_capacity_refined(2, 2, 1) == 1.0
    assert theory.recall_at_capacity_refined(np.array([2, 3]), 2, 1).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("tau", [0.0, 1.0, 1.5])
def test_refined_capacities_check_tau_before_d(tau):
    # with two bad arguments the first one checked (tau) is the one named
    for call in (
        lambda: theory.argmax_capacity_refined(1, 4, tau),
        lambda: theory.recall_at_capacity_refined(1, 4, 2, tau=tau),
    ):
        with pytest.raises(CapacityError, match=r"tau must lie in \(0, 1\)"):
            call()


def test_refined_capacity_names_the_arrays_it_was_given():
    # the message quotes the user's d and dv (the whole arrays), as argmax_recall_refined's does
    want = re.escape("got d=array([1., 4.]), dv=array([4., 4.])")
    with pytest.raises(CapacityError, match=want):
        theory.argmax_capacity_refined(np.array([1, 4]), 4)
    want = re.escape("got d=array([4., 4.]), dv=array([4., 1.])")
    with pytest.raises(CapacityError, match=want):
        theory.argmax_capacity_refined(4, np.array([4, 1]))


# ---------------------------------------------------------------- T25-T28: feature maps


def test_sphere_moment_keeps_the_shape_of_d():
    d = np.array([4.0, 8.0])
    assert theory.sphere_moment(d, 0).tolist() == [1.0, 1.0]  # E s^0 = 1 at each d (an array, as d is one)
    assert theory.sphere_moment(d, 3).tolist() == [0.0, 0.0]  # odd moments vanish
    np.testing.assert_allclose(theory.sphere_moment(d, 2), 1 / d, rtol=1e-15)


def test_feature_errors_over_empty_grids():
    empty = np.array([])
    for fn in (theory.relu_feature_error, theory.elu1_feature_error, theory.dpfp_error, theory.performer_error):
        assert fn(3, empty).shape == (0,), fn.__name__
    assert theory.softmax_error(empty, 4, 1.0).shape == (0,)
    assert theory.softmax_weight(4, empty, 1.0).shape == (0,)
    assert theory.exp_kernel_error(3, empty, 1.0).shape == (0,)


def _dpfp1(x):
    """DPFP with nu = 1, written out: r = [relu(x), relu(-x)], phi_a = r_a r_(a-1 mod 2d)."""
    r = np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], axis=-1)
    return r * np.roll(r, 1, axis=-1)


def test_dpfp_default_is_nu_1_and_its_crosstalk_is_the_simulated_ratio():
    d, N = 4, 400_000
    rho2 = theory.dpfp_error(2, d)  # the default nu
    assert rho2 == theory.dpfp_error(2, d, nu=1)
    assert rho2 == theory.feature_crosstalk("dpfp", d)  # the map's own default
    # rho2 = E[(phi(g) . phi(g'))^2] / (E |phi(g)|^2)^2, g, g' independent N(0, I_d)
    rng = np.random.default_rng(3)
    p, q = _dpfp1(rng.standard_normal((N, d))), _dpfp1(rng.standard_normal((N, d)))
    a = (p * q).sum(-1) ** 2
    b = 0.5 * ((p * p).sum(-1) + (q * q).sum(-1))
    A, B = a.mean(), b.mean()
    # delta method for A / B^2
    grad = np.stack([np.full(N, 1 / B**2), np.full(N, -2 * A / B**3)])
    se = math.sqrt(np.mean((grad[0] * (a - A) + grad[1] * (b - B)) ** 2) / N)
    assert abs(rho2 - A / B**2) <= 3 * se, (rho2, A / B**2, se)
    assert abs(theory.dpfp_error(2, d, nu=2) - A / B**2) > 10 * se  # nu = 2 is far off: the test sees the default


def test_performer_default_is_the_maps_m():
    assert theory.performer_error(2, 8) == theory.feature_crosstalk("performer", 8)  # m = 256 both


# ---------------------------------------------------------------- T21-T24: forgetting


def test_forgetting_defaults_to_the_delta_rule_and_accepts_d_2():
    b = 0.5
    assert theory.forgetting_signal(3, 8, beta=b) == pytest.approx(b * (1 - b / 8) ** 3, rel=1e-14)
    assert theory.forgetting_signal(3, 2, beta=b) == pytest.approx(b * (1 - b / 2) ** 3, rel=1e-14)  # d = 2
    assert theory.forgetting_error(0, 1, 8, beta=b) == pytest.approx((1 - b) ** 2, rel=1e-14)  # n = 1
    assert theory.forgetting_horizon(64, beta=1.0) == pytest.approx(-1 / math.log(1 - 1 / 64), rel=1e-14)


@pytest.mark.parametrize("d", [2, 3, 8])
@pytest.mark.parametrize("b", [0.5, 1.0, 1.5])
def test_delta_error_of_the_older_of_two_pairs_by_hand(d, b):
    # S = (I - b k2^T k2) b k1^T v1 + b k2^T v2, so k1 S = b (1 - b c^2) v1 + b c v2 with c = k1 . k2;
    # E c^2 = 1/d, E c^4 = 3/(d (d + 2)) (a sphere coordinate), unit values with E v1 . v2 = 0:
    # error = E (b - 1 - b^2 c^2)^2 + b^2 E c^2
    m2, m4 = 1 / d, 3 / (d * (d + 2))
    want = (b - 1) ** 2 - 2 * (b - 1) * b * b * m2 + b**4 * m4 + b * b * m2
    assert theory.forgetting_error(1, 2, d, beta=b) == pytest.approx(want, rel=1e-13)
    assert theory.forgetting_error(1, 2, d, "gated_delta", alpha=1.0, beta=b) == pytest.approx(want, rel=1e-13)


def test_forgetting_names_a_bad_age():
    with pytest.raises(CapacityError, match=r"^age must be a number or an array of numbers, got 'x'"):
        theory.forgetting_signal("x", 8, beta=0.5)


def _mamba2_reference(d, A, dt, w_std):
    """E dt, E dt^2, E exp(-A dt), E exp(-2 A dt) with (u + 1)/2 ~ Beta((d-1)/2, (d-1)/2), by scipy's quad."""
    a, bias, scale = (d - 1) / 2.0, math.log(math.expm1(dt)), w_std * math.sqrt(d)
    out = []
    for f in (lambda s: s, lambda s: s * s, lambda s: math.exp(-A * s), lambda s: math.exp(-2 * A * s)):
        g = lambda x, f=f: (
            f(np.logaddexp(0.0, scale * (2 * x - 1) + bias))
            * math.exp((a - 1) * math.log(x) + (a - 1) * math.log1p(-x) - special.betaln(a, a))
        )
        out.append(integrate.quad(g, 0, 1, epsabs=0, epsrel=1e-13, limit=500)[0])
    return dict(zip(("omega", "omega2", "alpha", "alpha2"), out))


@pytest.mark.parametrize(
    "kw",
    [
        {},  # the defaults: A = 1, dt = 0.01, w_std = 1
        dict(w_std=0.5),  # w_std sqrt(d) = 1
        dict(A=2.0, dt=1.0, w_std=5.0),
    ],
)
def test_mamba2_step_moments_against_scipy_quad(kw):
    d = 4
    full = dict(A=1.0, dt=0.01, w_std=1.0) | kw
    got, want = theory.mamba2_step_moments(d, **kw), _mamba2_reference(d, **full)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-12, abs=0), key


# ---------------------------------------------------------------- T29: softmax


def _circle_softmax(n, beta, points=256):
    """d = 2: s = cos(theta), theta uniform; the mean over a periodic grid (the trapezoid rule, exact to rounding
    for these smooth periodic integrands). Returns (error, weight) for n = 1, 2 or 3."""
    X = np.exp(beta * (np.cos(2 * np.pi * np.arange(points) / points) - 1.0))
    if n == 1:
        return 0.0, 1.0
    if n == 2:
        return float(np.mean(2 * X**2 / (1 + X) ** 2)), float(np.mean(1 / (1 + X)))
    Z, Q = X[:, None] + X[None, :], X[:, None] ** 2 + X[None, :] ** 2
    return float(np.mean((Z * Z + Q) / (1 + Z) ** 2)), float(np.mean(1 / (1 + Z)))


@pytest.mark.parametrize("beta", [0.01, 0.2, 3.0])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_softmax_on_the_circle(n, beta):
    # small beta makes E e^(-t X) underflow at large t: the closed form must stay finite there
    err, weight = _circle_softmax(n, beta)
    assert theory.softmax_error(n, 2, beta) == pytest.approx(err, rel=1e-9, abs=1e-300)
    assert theory.softmax_weight(n, 2, beta) == pytest.approx(weight, rel=1e-9)
