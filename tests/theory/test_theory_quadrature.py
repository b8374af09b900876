"""Private pieces of lacapacity.theory's later modules against independent computations.

``precision._increment_table`` averages the rounding error over quantile cells of an increment's distribution
through antiderivatives of periodic functions (``_psi_integral``, ``_cross_integral``); they are checked here
against adaptive quadrature of the functions they integrate, across many periods and inside one. T14's single
rounding is checked for every memory against the state's second moment summed by hand.
"""

import math

import numpy as np
import pytest
from scipy import integrate

from lacapacity import theory
from lacapacity.theory import precision

PSI = {
    False: lambda y: (y - np.round(y)) ** 2,  # round-to-nearest: the squared distance to the nearest grid point
    True: lambda y: (y - np.floor(y)) * (1.0 - (y - np.floor(y))),  # stochastic rounding: f (1 - f)
}
CROSS = lambda y: y * (np.round(y) - y)  # t (round(t) - t): the rounding error times the increment, per unit


def _quad(f, a, b):
    """int_a^b f, split at every half-integer (f has kinks or jumps there)."""
    cuts = [a, *np.arange(math.floor(a) + 0.5, b, 0.5).tolist(), b]
    cuts = sorted(c for c in set(cuts) if a <= c <= b)
    return sum(integrate.quad(f, lo, hi, epsabs=1e-13, epsrel=1e-12)[0] for lo, hi in zip(cuts, cuts[1:]))


# cells within one period, across a period's ends, and over several periods, on both sides of 0
CELLS = [(0.1, 0.4), (0.3, 0.8), (-0.7, -0.2), (0.45, 1.55), (-2.25, 3.6), (7.1, 7.9), (-5.5, -1.25)]


@pytest.mark.parametrize("stochastic", [False, True])
def test_psi_integral_is_an_antiderivative_of_the_rounding_variance(stochastic):
    F = lambda y: precision._psi_integral(np.asarray(y, dtype=np.float64), stochastic)
    for a, b in CELLS:
        assert F(b) - F(a) == pytest.approx(_quad(PSI[stochastic], a, b), abs=1e-12), (a, b)


def test_cross_integral_is_an_antiderivative_of_cross():
    F = lambda y: precision._cross_integral(np.asarray(y, dtype=np.float64))
    for a, b in CELLS:
        assert F(b) - F(a) == pytest.approx(_quad(CROSS, a, b), abs=1e-12), (a, b)
    # _cross (the narrow cells' value) is the derivative of _cross_integral, away from the jumps at half-integers
    y, h = np.array([-2.3, -0.1, 0.2, 0.7, 1.45, 3.9]), 1e-6
    assert precision._cross(y) == pytest.approx((F(y + h) - F(y - h)) / (2 * h), abs=1e-8)


@pytest.mark.parametrize("stochastic", [False, True])
def test_final_rounding_error_is_one_rounding_of_the_state_each_memory_reaches(stochastic):
    """T14 for every memory: dv rounding_variance(sigma), sigma^2 = E ||S_n||_F^2 / (d dv), with the state's second
    moment summed by hand: sum_t c^(n - t) w, c the memory's contraction, w the write's energy (beta^2 for the
    delta rules, 1 otherwise)."""
    n, d, dv, a, b = 50, 8, 4, 0.9, 0.7
    cases = {
        "linear": (1.0, 1.0, {}),
        "decay": (a * a, 1.0, {"alpha": a}),
        "delta": (1.0 - (2 * b - b * b) / d, b * b, {"beta": b}),
        "gated_delta": (a * a * (1.0 - (2 * b - b * b) / d), b * b, {"alpha": a, "beta": b}),
    }
    for memory, (c, w, params) in cases.items():
        m = sum(c ** (n - t) * w for t in range(1, n + 1))
        want = dv * theory.rounding_variance(math.sqrt(m / (d * dv)), "bfloat16", stochastic=stochastic)
        got = theory.final_rounding_error(n, d, dv, "bfloat16", memory=memory, stochastic=stochastic, **params)
        assert got == pytest.approx(want, rel=1e-12), memory


@pytest.mark.slow
@pytest.mark.parametrize("stochastic", [True, False])
def test_the_rounding_floors_are_the_limits_of_the_step_rounding_error(stochastic):
    """T18, T19: each floor is step_rounding_error at an n where the contraction c^n has died out, with the floor's
    own defaults (beta = 1, alpha = 1 for the delta rule) and its rounding mode passed on."""
    d, dv, a, n = 8, 4, 0.8, 400  # 0.64^400 and (7/8)^400 are below 1e-23

    def step(memory, **params):
        return theory.step_rounding_error(n, d, dv, "bfloat16", memory=memory, stochastic=stochastic, **params)

    assert theory.decay_rounding_floor(d, dv, "bfloat16", a, stochastic=stochastic) == pytest.approx(
        step("decay", alpha=a), rel=1e-9
    )
    assert theory.delta_rounding_floor(d, dv, "bfloat16", stochastic=stochastic) == pytest.approx(
        step("delta", beta=1.0), rel=1e-9
    )
    # the gated delta rule (alpha < 1) and a beta other than the default reach the recursion
    assert theory.delta_rounding_floor(d, dv, "bfloat16", beta=0.7, alpha=0.9, stochastic=stochastic) == pytest.approx(
        step("gated_delta", alpha=0.9, beta=0.7), rel=1e-9
    )
    # rounding_variance broadcasts: each sigma of an array gets its own value
    sigmas = [0.01, 0.7, 30.0]
    each = [theory.rounding_variance(x, "bfloat16", stochastic=stochastic) for x in sigmas]
    assert theory.rounding_variance(sigmas, "bfloat16", stochastic=stochastic).tolist() == pytest.approx(
        each, rel=1e-12
    )
