"""Input checks of lacapacity.theory (T11, T14-T30): each bad input gets its whole message, and each edge of an
allowed range is accepted with the value its closed form gives there.

The messages are pinned whole (``^...$``) so that a check that tests the wrong bound, names the wrong argument
or loses its message fails here; the accepted edges are compared with values worked out by hand or with scipy.
"""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, special

from lacapacity import CapacityError, theory
from lacapacity.inputs import features


class _Plain(features.FeatureMap):
    """A user feature map (the identity under another name): no closed form is known for it."""

    name = "plain"

    def feature_dim(self, d):
        return int(d)

    def map(self, x):
        return x


_COEFFICIENTS = (
    r"coefficients must be a non-empty list of finite numbers c_0, c_1, \.\.\. \(kappa\(s\) = sum_p c_p s\^p\), got "
)
_STALE = r"age must hold whole numbers >= 0 \(writes since the pair was stored\), got "
_DTYPES = "known: float32, bfloat16, float16, float8_e4m3fn, float8_e5m2"

BAD = {
    # T4 from the keys' statistics
    "coherence below 0": (
        lambda: theory.crosstalk_from_coherence(8, [0.1, -0.1]),
        r"mean_sq_coherence must be >= 0, got \[0\.1, -0\.1\]",
    ),
    "effective rank 0": (lambda: theory.crosstalk_from_effective_rank(8, 0.0), r"effective_rank must be > 0, got 0\.0"),
    "T4 n below 1": (lambda: theory.crosstalk_from_coherence(0, 0.1), r"n must be >= 1 \(finite\), got 0"),
    # T11: the decaying memory's reads name the matrix that is not one
    "decay K a string": (
        lambda: theory.decay_readout("K", np.ones((3, 2)), 0.5),
        r"K must be a number or an array of numbers, got 'K'",
    ),
    "decay V a string": (
        lambda: theory.decay_readout(np.ones((3, 2)), "V", 0.5),
        r"V must be a number or an array of numbers, got 'V'",
    ),
    # T25-T28: feature maps
    "sphere p < 0": (lambda: theory.sphere_moment(4, -1), r"p must be a whole number >= 0, got -1"),
    "sphere d < 1": (lambda: theory.sphere_moment(0, 2), r"d must be >= 1 \(finite\), got 0"),
    "coefficients empty": (lambda: theory.polynomial_kernel_error(2, 4, []), _COEFFICIENTS + r"\[\]"),
    "coefficients 2-D": (lambda: theory.polynomial_kernel_error(2, 4, [[1.0]]), _COEFFICIENTS + r"\[\[1\.0\]\]"),
    "coefficients inf": (lambda: theory.polynomial_kernel_error(2, 4, [1.0, math.inf]), _COEFFICIENTS + r"\[1\.0, inf\]"),
    "coefficients nan only": (lambda: theory.polynomial_kernel_error(2, 4, [math.nan]), _COEFFICIENTS + r"\[nan\]"),
    "coefficients a string": (
        lambda: theory.polynomial_kernel_error(2, 4, "x"),
        r"coefficients must be a number or an array of numbers, got 'x'",
    ),
    "normalize 1": (
        lambda: theory.polynomial_kernel_error(2, 4, [0, 1], normalize=1),
        r"normalize must be True or False, got 1",
    ),
    "kappa(1) = 0": (
        lambda: theory.polynomial_kernel_error(2, 4, [1, -1]),
        r"normalised features need kappa\(1\) = sum\(coefficients\) > 0, got 0\.0",
    ),
    "kappa(1) < 0": (
        lambda: theory.polynomial_kernel_error(2, 4, [0, -1]),
        r"normalised features need kappa\(1\) = sum\(coefficients\) > 0, got -1\.0",
    ),
    "relu d not whole": (lambda: theory.relu_feature_error(2, 2.5), r"d must be a whole number, got array\(2\.5\)"),
    "elu1 d < 1": (lambda: theory.elu1_feature_error(2, 0), r"d must be >= 1 \(finite\), got 0"),
    "elu1 n < 1": (lambda: theory.elu1_feature_error(0, 4), r"n must be >= 1 \(finite\), got 0"),
    "dpfp nu 0": (lambda: theory.dpfp_error(2, 4, 0), r"dpfp: nu must lie in \[1, 2 d - 1\], got nu = 0 for d = 4"),
    "dpfp nu 2d": (lambda: theory.dpfp_error(2, 4, 8), r"dpfp: nu must lie in \[1, 2 d - 1\], got nu = 8 for d = 4"),
    "dpfp n < 1": (lambda: theory.dpfp_error(0, 4, 1), r"n must be >= 1 \(finite\), got 0"),
    "performer m 1": (lambda: theory.performer_error(2, 4, 1), r"performer: m must be >= 2, got 1"),
    "performer d < 1": (lambda: theory.performer_error(2, 0, 4), r"d must be >= 1 \(finite\), got 0"),
    "feature a number": (
        lambda: theory.feature_crosstalk(3, 4),
        r"feature must be a built-in feature map name or FeatureMap, got 3",
    ),
    "feature without a closed form": (
        lambda: theory.feature_crosstalk(_Plain(), 4),
        r"no closed form is known for the feature map 'plain' \(built-ins: T25-T28\)",
    ),
    "feature_map_error n < 1": (lambda: theory.feature_map_error("relu", 0, 4), r"n must be >= 1 \(finite\), got 0"),
    # T21-T24: forgetting
    "A 0": (lambda: theory.mamba2_step_moments(8, A=0.0), r"A must lie in \(0, inf\), got 0\.0"),
    "A inf": (lambda: theory.mamba2_step_moments(8, A=math.inf), r"A must be one finite number, got inf"),
    "A two numbers": (lambda: theory.mamba2_step_moments(8, A=[1.0, 2.0]), r"A must be one finite number, got \[1\.0, 2\.0\]"),
    "A a string": (lambda: theory.mamba2_step_moments(8, A="x"), r"A must be a number or an array of numbers, got 'x'"),
    "dt 0": (lambda: theory.mamba2_step_moments(8, dt=0.0), r"dt must lie in \(0, inf\), got 0\.0"),
    "w_std < 0": (lambda: theory.mamba2_step_moments(8, w_std=-1.0), r"w_std must lie in \[0, inf\), got -1\.0"),
    "d 1": (lambda: theory.forgetting_signal(0, 1, beta=1.0), r"d must be one whole number >= 2 \(unit keys in R\^d\), got 1"),
    "d not whole": (lambda: theory.forgetting_signal(0, 2.5, beta=1.0), r"d must be one whole number >= 2 \(unit keys in R\^d\), got 2\.5"),
    "d two numbers": (lambda: theory.forgetting_signal(0, [4, 8], beta=1.0), r"d must be one whole number >= 2 \(unit keys in R\^d\), got \[4, 8\]"),
    "d inf": (lambda: theory.mamba2_step_moments(math.inf), r"d must be one whole number >= 2 \(unit keys in R\^d\), got inf"),
    "d a string": (lambda: theory.forgetting_horizon("x", beta=1.0), r"d must be a number or an array of numbers, got 'x'"),
    "unknown rule": (lambda: theory.forgetting_signal(0, 8, "x"), r"unknown rule 'x'; known: delta, decay, gated_delta, mamba2"),
    "a parameter of another rule": (
        lambda: theory.forgetting_signal(0, 8, "delta", beta=1.0, alpha=0.5),
        r"rule 'delta' takes beta; got alpha",
    ),
    "two parameters of other rules": (
        lambda: theory.forgetting_error(0, 2, 8, "decay", alpha=0.5, beta=1.0, A=1.0),
        r"rule 'decay' takes alpha; got A, beta",
    ),
    "mamba2 given beta": (
        lambda: theory.forgetting_horizon(8, "mamba2", beta=1.0),
        r"rule 'mamba2' takes A, dt, w_std; got beta",
    ),
    "a missing parameter": (
        lambda: theory.forgetting_signal(0, 8, "gated_delta", alpha=0.5),
        r"rule 'gated_delta' needs beta",
    ),
    "two missing parameters": (lambda: theory.forgetting_signal(0, 8, "gated_delta"), r"rule 'gated_delta' needs alpha, beta"),
    "delta's beta missing": (lambda: theory.forgetting_signal(0, 8, "delta"), r"rule 'delta' needs beta"),
    "beta 2": (lambda: theory.forgetting_signal(0, 8, "delta", beta=2.0), r"beta must lie in \(0, 2\), got 2\.0"),
    "beta 0": (lambda: theory.forgetting_signal(0, 8, "gated_delta", alpha=0.5, beta=0.0), r"beta must lie in \(0, 2\), got 0\.0"),
    "alpha 0": (lambda: theory.forgetting_signal(0, 8, "decay", alpha=0.0), r"alpha must lie in \(0, 1\], got 0\.0"),
    "alpha above 1": (lambda: theory.forgetting_signal(0, 8, "gated_delta", alpha=1.5, beta=1.0), r"alpha must lie in \(0, 1\], got 1\.5"),
    "age < 0": (lambda: theory.forgetting_signal(-1, 8, "delta", beta=1.0), _STALE + "-1"),
    "age not whole": (lambda: theory.forgetting_signal([1, 1.5], 8, "delta", beta=1.0), _STALE + r"\[1, 1\.5\]"),
    "age nan": (lambda: theory.forgetting_signal(math.nan, 8, "delta", beta=1.0), _STALE + "nan"),
    "n 0": (lambda: theory.forgetting_error(0, 0, 8, "delta", beta=1.0), r"n must be one whole number >= 1 \(pairs written\), got 0"),
    "n not whole": (lambda: theory.forgetting_error(0, 1.5, 8, "delta", beta=1.0), r"n must be one whole number >= 1 \(pairs written\), got 1\.5"),
    "n two numbers": (lambda: theory.forgetting_error(0, [2, 3], 8, "delta", beta=1.0), r"n must be one whole number >= 1 \(pairs written\), got \[2, 3\]"),
    "n inf": (lambda: theory.forgetting_error(0, math.inf, 8, "delta", beta=1.0), r"n must be one whole number >= 1 \(pairs written\), got inf"),
    "n a string": (lambda: theory.forgetting_error(0, "x", 8, "delta", beta=1.0), r"n must be a number or an array of numbers, got 'x'"),
    "age past n - 1": (lambda: theory.forgetting_error([0, 3], 3, 8, "delta", beta=1.0), r"age must lie in 0 \.\. n - 1 = 2, got \[0, 3\]"),
    "quantity": (
        lambda: theory.forgetting_horizon(8, "delta", quantity="x", beta=1.0),
        r"quantity must be one of signal, energy, trace, got 'x'",
    ),
    # T20: heads
    "heads that do not divide": (
        lambda: theory.heads_random_keys_error(4, 16, 2, 3),
        r"one of heads and value_heads must divide the other, got 2 and 3",
    ),
    "heads 0": (lambda: theory.heads_random_keys_error(4, 16, 0), r"heads must be >= 1 \(finite\), got 0"),
    "value_heads 0": (lambda: theory.heads_state_numel(16, 16, 2, 0), r"value_heads must be >= 1 \(finite\), got 0"),
    "heads d 0": (lambda: theory.heads_effective_d(0, 2), r"d must be >= 1 \(finite\), got 0"),
    "heads eps < 0": (lambda: theory.heads_capacity(-1, 16, 2), r"eps must be a finite error bound >= 0, got array\(-1\.\)"),
    "heads eps inf": (lambda: theory.heads_capacity(math.inf, 16, 2), r"eps must be a finite error bound >= 0, got array\(inf\)"),
    "heads eps a string": (lambda: theory.heads_capacity("x", 16, 2), r"eps must be a number or an array of numbers, got 'x'"),
    "heads dv 0": (lambda: theory.heads_state_numel(16, 0, 2), r"dv must be >= 1 \(finite\), got 0"),
    # T14-T19: precision
    "unknown dtype": (lambda: theory.unit_roundoff("x"), "unknown state dtype 'x'; " + _DTYPES),
    "an integer dtype": (lambda: theory.unit_roundoff(torch.int8), "unknown state dtype torch.int8; " + _DTYPES),
    "sigma 0": (lambda: theory.rounding_variance(0.0, "bfloat16"), r"sigma must be > 0 and finite, got 0\.0"),
    "sigma inf": (lambda: theory.rounding_variance([1.0, math.inf], "bfloat16"), r"sigma must be > 0 and finite, got \[1\.0, inf\]"),
    "sigma a string": (lambda: theory.rounding_variance("x", "bfloat16"), r"sigma must be a number or an array of numbers, got 'x'"),
    "unknown memory": (
        lambda: theory.final_rounding_error(4, 4, 4, "bfloat16", memory="x"),
        r"memory must be one of linear, decay, delta, gated_delta, got 'x'",
    ),
    "decay alpha 0": (
        lambda: theory.final_rounding_error(4, 4, 4, "bfloat16", memory="decay", alpha=0.0),
        r"alpha must lie in \(0, 1\], got 0\.0",
    ),
    "gated alpha above 1": (
        lambda: theory.step_rounding_error(4, 4, 4, "bfloat16", memory="gated_delta", alpha=1.5),
        r"alpha must lie in \(0, 1\], got 1\.5",
    ),
    "delta beta 2": (
        lambda: theory.final_rounding_error(4, 4, 4, "bfloat16", memory="delta", beta=2.0),
        r"beta must lie in \(0, 2\), got 2\.0",
    ),
    "gated beta 0": (
        lambda: theory.final_rounding_error(4, 4, 4, "bfloat16", memory="gated_delta", alpha=0.5, beta=0.0),
        r"beta must lie in \(0, 2\), got 0\.0",
    ),
    "ratio 0": (lambda: theory.rounding_crossover(4, 4, "bfloat16", ratio=0.0), r"ratio must lie in \(0, 1\], got 0\.0"),
    "ratio above 1": (lambda: theory.rounding_crossover(4, 4, "bfloat16", ratio=1.5), r"ratio must lie in \(0, 1\], got 1\.5"),
    "fraction 0": (lambda: theory.stall_onset(4, 4, "bfloat16", fraction=0.0), r"fraction must lie in \(0, 1\), got 0\.0"),
    "fraction 1": (lambda: theory.stall_onset(4, 4, "bfloat16", fraction=1.0), r"fraction must lie in \(0, 1\), got 1\.0"),
    "floor alpha 1": (lambda: theory.decay_rounding_floor(4, 4, "bfloat16", 1.0), r"alpha must lie in \(0, 1\) for a floor, got 1\.0"),
    "floor alpha 0": (lambda: theory.decay_rounding_floor(4, 4, "bfloat16", 0.0), r"alpha must lie in \(0, 1\) for a floor, got 0\.0"),
    "delta floor beta 2": (lambda: theory.delta_rounding_floor(4, 4, "bfloat16", beta=2.0), r"beta must lie in \(0, 2\), got 2\.0"),
    "delta floor alpha 0": (lambda: theory.delta_rounding_floor(4, 4, "bfloat16", alpha=0.0), r"alpha must lie in \(0, 1\], got 0\.0"),
    "final n 0": (lambda: theory.final_rounding_error(0, 4, 4, "bfloat16"), r"n must be >= 1 \(finite\), got 0"),
    "step dv 0": (lambda: theory.step_rounding_error(4, 4, 0, "bfloat16"), r"dv must be >= 1 \(finite\), got 0"),
    "crossover d 0": (lambda: theory.rounding_crossover(0, 4, "bfloat16"), r"d must be >= 1 \(finite\), got 0"),
    "stall n 0": (lambda: theory.stall_fraction(0, 4, 4, "bfloat16"), r"n must be >= 1 \(finite\), got 0"),
    "onset dv 0": (lambda: theory.stall_onset(4, 0, "bfloat16"), r"dv must be >= 1 \(finite\), got 0"),
    # T29: softmax and the exponential kernel
    "scale 0": (lambda: theory.exp_kernel_error(2, 4, 0.0), r"scale \(the inverse temperature\) must be > 0 and finite, got 0\.0"),
    "scale inf": (lambda: theory.softmax_error(2, 4, math.inf), r"scale \(the inverse temperature\) must be > 0 and finite, got inf"),
    "scale a string": (lambda: theory.softmax_weight(2, 4, "x"), r"scale must be a number or an array of numbers, got 'x'"),
    "exp kernel d 1": (lambda: theory.exp_kernel_error(2, 1, 1.0), r"d must be a whole number >= 2, got array\(1\.\)"),
    "exp kernel d not whole": (lambda: theory.exp_kernel_error(2, 2.5, 1.0), r"d must be a whole number >= 2, got array\(2\.5\)"),
    "exp kernel n 0": (lambda: theory.exp_kernel_error(0, 4, 1.0), r"n must be >= 1 \(finite\), got 0"),
    "softmax d 1": (lambda: theory.softmax_error(2, 1, 1.0), r"d must be a whole number >= 2, got array\(1\.\)"),
    "softmax d not whole": (lambda: theory.softmax_weight(2, 2.5, 1.0), r"d must be a whole number >= 2, got array\(2\.5\)"),
    "softmax n 0": (lambda: theory.softmax_weight(0, 4, 1.0), r"n must be >= 1 \(finite\), got 0"),
    # T30: recall@k
    "k 0": (lambda: theory.recall_at(4, 4, 4, 0), r"k must be a whole number >= 1, got 0"),
    "k not whole": (lambda: theory.recall_at(4, 4, 4, 1.5), r"k must be a whole number >= 1, got 1\.5"),
    "k inf": (lambda: theory.recall_at_refined(4, 4, 4, math.inf), r"k must be a whole number >= 1, got inf"),
    "k two numbers": (lambda: theory.recall_at(4, 4, 4, [1, 2]), r"k must be a whole number >= 1, got \[1, 2\]"),
    "k a string": (lambda: theory.recall_at_capacity_refined(4, 4, "x"), r"k must be a number or an array of numbers, got 'x'"),
    "recall_at n 0": (lambda: theory.recall_at(0, 4, 4, 1), r"n must be >= 1 \(finite\), got 0"),
    "refined d 1": (
        lambda: theory.recall_at_refined(4, 1, 4, 2),
        r"d and dv must be >= 2 for the refined prediction, got d=array\(1\.\), dv=array\(4\.\)",
    ),
    "refined dv 1": (
        lambda: theory.recall_at_refined(4, 4, 1, 2),
        r"d and dv must be >= 2 for the refined prediction, got d=array\(4\.\), dv=array\(1\.\)",
    ),
    "refined capacity tau 0": (lambda: theory.recall_at_capacity_refined(4, 4, 2, tau=0.0), r"tau must lie in \(0, 1\), got 0\.0"),
    "refined capacity tau 1": (lambda: theory.recall_at_capacity_refined(4, 4, 2, tau=1.0), r"tau must lie in \(0, 1\), got 1\.0"),
    "refined capacity d 1": (
        lambda: theory.recall_at_capacity_refined(1, 4, 2),
        r"d and dv must be >= 2 for the refined prediction, got d=array\(1\.\), dv=array\(4\.\)",
    ),
    "refined capacity dv 1": (
        lambda: theory.recall_at_capacity_refined(4, 1, 2),
        r"d and dv must be >= 2 for the refined prediction, got d=array\(4\.\), dv=array\(1\.\)",
    ),
    "refined capacity d 0": (lambda: theory.recall_at_capacity_refined(0, 4, 2), r"d must be >= 1 \(finite\), got 0"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_input_gets_its_whole_message(case):
    call, message = BAD[case]
    with pytest.raises(CapacityError, match=f"^{message}$"):
        call()


def test_the_feature_maps_accept_the_edges_of_their_ranges():
    assert theory.sphere_moment(5, 0) == 1.0  # E s^0
    # kappa(1) = 0 is allowed without normalisation: (kappa(1) - 1)^2 + (n - 1) E (1 - s)^2 = 1 + (n - 1)(1 + 1/d)
    assert theory.polynomial_kernel_error(3, 4, [1, -1], normalize=False) == pytest.approx(1 + 2 * 1.25, rel=1e-12)
    # DPFP's largest nu (2 d - 1) and Performer's smallest m (2) are accepted and give a crosstalk in (0, 1]
    assert 0 < theory.dpfp_error(2, 2, 3) <= 1
    assert 0 < theory.performer_error(2, 2, 2) <= 1


def test_the_forgetting_rules_accept_the_edges_of_their_ranges():
    # decay with alpha = 1 is the additive memory: nothing fades, and nothing decays
    assert theory.forgetting_signal([0, 7], 8, "decay", alpha=1.0).tolist() == [1.0, 1.0]
    assert theory.forgetting_horizon(8, "decay", alpha=1.0) == math.inf
    # w_std = 0: every key gets the step dt exactly
    m = theory.mamba2_step_moments(8, A=2.0, dt=0.05, w_std=0.0)
    assert m == pytest.approx(
        {"omega": 0.05, "omega2": 0.0025, "alpha": math.exp(-0.1), "alpha2": math.exp(-0.2)}, rel=1e-12
    )
    # mamba2's parameters have defaults (A = 1, dt = 0.01, w_std = 1): none is missing
    assert theory.forgetting_signal(0, 8, "mamba2") == pytest.approx(theory.mamba2_step_moments(8)["omega"], rel=1e-12)
    # the oldest pair (age n - 1) of the decaying memory: (1 - a^(n-1))^2 + sum_{j < n-1} a^(2j) / d, as the docstring
    a, n, d = 0.8, 4, 16
    want = (1 - a ** (n - 1)) ** 2 + sum(a ** (2 * j) for j in range(n - 1)) / d
    assert theory.forgetting_error(n - 1, n, d, "decay", alpha=a) == pytest.approx(want, rel=1e-12)


def test_heads_accept_layouts_where_one_count_divides_the_other():
    assert theory.heads_random_keys_error(5, 16, 2, 4) == pytest.approx(4 * 2 / 16, rel=1e-12)  # (n - 1) min / d
    assert theory.heads_random_keys_error(5, 16, 4, 2) == pytest.approx(4 * 2 / 16, rel=1e-12)
    assert theory.heads_state_numel(16, 8, 2, 4) == 16 * 8 / 2
    assert theory.heads_capacity(0.0, 16, 2) == 1.0
    assert theory.heads_effective_d(16, 4) == 4.0  # value_heads defaults to heads
    assert theory.heads_effective_d(16, 2, 4) == theory.heads_effective_d(16, 4, 2) == 8.0  # d / min(H, HV)
    assert theory.heads_capacity(0.5, 16, 4, 2) == theory.heads_capacity(0.5, 16, 2, 4) == 1 + 0.5 * 16 / 2


def test_precision_accepts_the_edges_of_its_ranges():
    assert theory.unit_roundoff(torch.bfloat16) == theory.unit_roundoff("bfloat16") == 2.0**-8
    assert theory.unit_roundoff(torch.float16) == 2.0**-11
    # alpha = 1 for the decaying memory is the linear memory
    linear = theory.final_rounding_error(64, 8, 8, "bfloat16")
    assert theory.final_rounding_error(64, 8, 8, "bfloat16", memory="decay", alpha=1.0) == linear


def test_softmax_accepts_d_2_where_the_kernel_error_is_a_bessel_function():
    # d = 2: s = cos(theta), theta uniform, so E e^(a s) = I_0(a) and the error is (n - 1) e^(-2 beta) I_0(2 beta)
    for beta in (0.5, 3.0):
        want = 2 * special.i0e(2 * beta)  # i0e(x) = e^-x I_0(x)
        assert theory.exp_kernel_error(3, 2, beta) == pytest.approx(want, rel=1e-6)

    # two pairs: Z = Q^(1/2) = X = exp(beta (cos(theta) - 1)), so the weight is E 1/(1 + X), the error E 2 X^2/(1 + X)^2
    def mean(f, beta):  # E f(X) over theta uniform on [0, pi]
        return integrate.quad(lambda th: f(math.exp(beta * (math.cos(th) - 1.0))), 0.0, math.pi)[0] / math.pi

    for beta in (1.0, 6.0):
        weight = mean(lambda x: 1.0 / (1.0 + x), beta)
        error = mean(lambda x: 2.0 * x * x / (1.0 + x) ** 2, beta)
        assert theory.softmax_weight(2, 2, beta) == pytest.approx(weight, rel=1e-6)
        assert theory.softmax_error(2, 2, beta) == pytest.approx(error, rel=1e-6)


def test_recall_at_accepts_d_and_dv_2():
    assert 0 < theory.recall_at_refined(3, 2, 2, 1) < 1
    assert theory.recall_at_refined(3, 2, 2, 1) == pytest.approx(theory.argmax_recall_refined(3, 2, 2), abs=1e-12)
    assert theory.recall_at_refined(np.array([2]), 2, 2, 2).tolist() == [1.0]  # n <= k: the own value is in the top k


def test_feature_crosstalk_passes_each_map_and_its_parameters_on():
    d = 16
    # taylor2: kappa(s) = 1 + s + s^2/2, kappa(1) = 5/2, E kappa(s)^2 = 1 + 2 E s^2 + E s^4 / 4 (odd moments vanish)
    taylor = (1 + 2 / d + 3 / (4 * d * (d + 2))) / 2.5**2
    assert theory.feature_crosstalk("taylor2", d) == pytest.approx(taylor, rel=1e-12)
    assert theory.feature_crosstalk("identity", d) == pytest.approx(1 / d, rel=1e-12)
    for name, params, direct in (
        ("relu", {}, lambda: theory.relu_feature_error(2, d)),
        ("elu1", {}, lambda: theory.elu1_feature_error(2, d)),
        ("dpfp", {"nu": 3}, lambda: theory.dpfp_error(2, d, 3)),
        ("performer", {"m": 4}, lambda: theory.performer_error(2, d, 4)),
    ):
        want = direct()
        assert theory.feature_crosstalk(name, d, **params) == want
        assert theory.feature_crosstalk(features.get(name, **params), d) == want  # a FeatureMap object
        assert theory.feature_map_error(name, 5, d, **params) == pytest.approx(4 * want, rel=1e-12)
    assert theory.dpfp_error(2, d, 3) != theory.dpfp_error(2, d, 1)  # the parameter matters


def test_a_meta_tensor_is_one_line_naming_the_argument():
    """A meta tensor holds no numbers: the closed forms say so in the message of any other non-number."""
    with pytest.raises(
        CapacityError, match=r"^n must be a number or an array of numbers, got tensor\(\.\.\., device='meta'"
    ):
        theory.random_keys_error(torch.empty(3, device="meta"), 8)


def test_a_tensor_that_requires_grad_is_read_as_its_numbers():
    """A count given as a tensor that tracks gradients (numpy cannot read it directly) gives the closed form of its
    value, as a plain number does."""
    n = torch.tensor([4.0, 9.0], requires_grad=True)
    np.testing.assert_array_equal(theory.random_keys_error(n, 8), theory.random_keys_error(np.array([4.0, 9.0]), 8))
