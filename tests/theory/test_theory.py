"""Each closed form of lacapacity.theory against an independent brute-force computation."""

import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from lacapacity import CapacityError, theory
from lacapacity.inputs import keys, values

RNG = np.random.default_rng(12345)


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_two_pair_readout_equals_the_state_read():
    k1, k2 = RNG.normal(size=(2, 5, 7)) * 2.3
    v1, v2 = RNG.normal(size=(2, 5, 3))
    S = np.einsum("bi,bj->bij", k1, v1) + np.einsum("bi,bj->bij", k2, v2)  # explicit outer products
    brute = np.einsum("bi,bij->bj", k1, S)
    assert np.allclose(theory.two_pair_readout(k1, k2, v1, v2), brute, atol=1e-12)
    got = theory.two_pair_readout(*(torch.as_tensor(x) for x in (k1, k2, v1, v2)))
    assert isinstance(got, torch.Tensor) and np.allclose(got.numpy(), brute)


def test_decomposition_splits_each_read_into_g_ii_v_i_and_the_rest():
    K, V = RNG.normal(size=(3, 6, 4)), RNG.normal(size=(3, 6, 5))
    signal, leak = theory.decomposition(K, V)
    for b in range(3):
        for i in range(6):
            assert np.allclose(signal[b, i], (K[b, i] @ K[b, i]) * V[b, i])
            assert np.allclose(leak[b, i], sum((K[b, i] @ K[b, j]) * V[b, j] for j in range(6) if j != i))
    assert np.allclose(signal + leak, K @ K.transpose(0, 2, 1) @ V)  # T1


def test_crosstalk_error_equals_the_measured_error_for_orthonormal_values():
    K = RNG.normal(size=(4, 10, 6))
    V = np.linalg.qr(RNG.normal(size=(4, 12, 10)))[0].transpose(0, 2, 1)  # [4, 10, 12], orthonormal rows
    R = K @ (K.transpose(0, 2, 1) @ V)
    brute = ((R - V) ** 2).sum(-1).mean(-1)
    assert np.allclose(theory.crosstalk_error(K), brute)
    Ku = _unit(K)
    G = Ku @ Ku.transpose(0, 2, 1)
    assert np.allclose(theory.crosstalk_error(Ku), ((G**2).sum((1, 2)) - 10) / 10)  # T4 for unit keys


def test_t4_from_the_keys_statistics_is_the_crosstalk_by_a_double_loop():
    """(n - 1) mu^2 = n / r_eff - 1 = T4 for unit keys of any geometry, the statistics and T4 computed pair by pair."""
    for K in (RNG.normal(size=(2, 12, 5)), RNG.normal(size=(2, 12, 5)) + 2.0, np.eye(6)[None, :4]):
        Ku, n = _unit(K), K.shape[1]
        G = Ku @ Ku.transpose(0, 2, 1)
        mu2 = np.array([sum(g[i, j] ** 2 for i in range(n) for j in range(n) if i != j) / (n * (n - 1)) for g in G])
        rank = np.array([n * n / sum(g[i, j] ** 2 for i in range(n) for j in range(n)) for g in G])
        brute = np.array([np.mean([np.sum((g[i] @ np.eye(n) - np.eye(n)[i]) ** 2) for i in range(n)]) for g in G])
        np.testing.assert_allclose(theory.crosstalk_from_coherence(n, mu2), brute, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(theory.crosstalk_from_effective_rank(n, rank), brute, rtol=1e-12, atol=1e-15)
    assert theory.crosstalk_from_coherence([4, 8], 0.25).tolist() == [0.75, 1.75]  # n broadcasts


def test_scalar_bounds_values_and_broadcasting():
    assert theory.frame_bound(96, 32) == 2.0 and theory.frame_bound(10, 32) == 0.0
    assert np.array_equal(theory.frame_bound([16, 64], [[32], [8]]), [[0.0, 1.0], [1.0, 7.0]])
    assert theory.rank_bound(96, 32) == pytest.approx(2 / 3) and theory.rank_bound(5, 32) == 0.0
    assert theory.welch_bound(32, 32) == 0.0
    assert theory.random_keys_error(33, 32) == 1.0
    assert theory.optimal_gain(33, 32) == pytest.approx(0.5)
    assert theory.optimal_gain_error(33, 32) == pytest.approx(0.5)
    assert isinstance(theory.frame_bound(3, 2), float)
    assert theory.capacity_random_keys(0.5, 64) == 33.0 and theory.capacity_tight_frame(0.5, 64) == 96.0
    # capacities invert their curves: error(n*) = eps
    assert theory.random_keys_error(theory.capacity_random_keys(0.25, 40), 40) == pytest.approx(0.25)
    assert theory.frame_bound(theory.capacity_tight_frame(0.25, 40), 40) == pytest.approx(0.25)


def test_welch_bound_is_met_by_the_simplex_and_beaten_by_nobody():
    for d in (2, 3, 8):
        K = keys.make("simplex", d + 1, d, seed=0)[0].double().numpy()
        G = np.abs(K @ K.T - np.eye(d + 1))
        assert G.max() == pytest.approx(theory.welch_bound(d + 1, d), abs=1e-6)
    assert theory.welch_bound(3, 2) == pytest.approx(0.5)  # three lines at 60 degrees


def test_random_key_moments_and_error_against_monte_carlo():
    d, n, trials = 16, 40, 400
    K = keys.make("gaussian", n, d, batch=trials, seed=5).double()
    G = K @ K.transpose(1, 2)
    off = G[:, ~torch.eye(n, dtype=torch.bool)]
    per2, per4 = (off**2).mean(-1), (off**4).mean(-1)
    m2, m4 = theory.random_coherence_moments(d)
    assert abs(per2.mean() - m2) < 3 * per2.std() / math.sqrt(trials)
    assert abs(per4.mean() - m4) < 3 * per4.std() / math.sqrt(trials)
    err = ((G**2).sum((1, 2)) - n) / n  # T4 for unit keys
    assert abs(err.mean() - theory.random_keys_error(n, d)) < 3 * err.std() / math.sqrt(trials)


def test_rank_bound_is_the_least_squares_optimum():
    n, d = 30, 12
    K = RNG.normal(size=(n, d))
    V = np.linalg.qr(RNG.normal(size=(n, n)))[0]  # orthonormal values, dv = n
    S, *_ = np.linalg.lstsq(K, V, rcond=None)
    assert ((K @ S - V) ** 2).sum(-1).mean() == pytest.approx(theory.rank_bound(n, d), rel=1e-9)


def test_optimal_gain_minimises_the_expected_error():
    n, d, trials = 48, 16, 200
    K = keys.make("gaussian", n, d, batch=trials, seed=9).double()
    V = values.make("orthonormal", n, n, batch=trials, seed=9).double()
    R = K @ (K.transpose(1, 2) @ V)
    # the measured error is the quadratic a c^2 - 2 b c + e in the gain c; minimise it empirically
    a, b, e = float((R * R).sum(-1).mean()), float((R * V).sum(-1).mean()), float((V * V).sum(-1).mean())
    gains = np.linspace(0.1, 0.6, 5001)
    errs = a * gains**2 - 2 * b * gains + e
    assert abs(gains[int(np.argmin(errs))] - theory.optimal_gain(n, d)) < 0.02
    assert errs.min() == pytest.approx(theory.optimal_gain_error(n, d), rel=0.02)
    assert float(((b / a * R - V) ** 2).sum(-1).mean()) == pytest.approx(errs.min(), rel=1e-6)


def test_argmax_recall_integrates_its_gaussian_model_exactly():
    # Simulate the model the formula assumes (independent Gaussian scores) and compare.
    gen = np.random.default_rng(0)
    for n, d, dv in [(50, 32, 32), (200, 64, 16), (30, 8, 64)]:
        sc = math.sqrt((n - 1) / (d * dv))
        sw = math.sqrt(1 / dv + 1 / d + (n - 2) / (d * dv))
        trials = 40000
        correct = 1 + sc * gen.standard_normal(trials)
        wrong = sw * gen.standard_normal((trials, n - 1)).max(1)
        mc = float((correct > wrong).mean())
        assert abs(theory.argmax_recall(n, d, dv) - mc) < 4 * math.sqrt(mc * (1 - mc) / trials) + 1e-3


def test_argmax_recall_is_a_conservative_prediction_of_the_real_decode():
    n, d, dv = 100, 32, 32
    K = keys.make("gaussian", n, d, batch=48, seed=1)
    V = values.make("gaussian", n, dv, batch=48, seed=2)
    R = K @ (K.transpose(1, 2) @ V)
    measured = float(((R @ V.transpose(1, 2)).argmax(-1) == torch.arange(n)).float().mean())
    predicted = theory.argmax_recall(n, d, dv)
    assert predicted - 0.02 <= measured <= predicted + 0.15
    assert theory.argmax_recall(1, 4, 4) == 1.0
    r = theory.argmax_recall([10, 100, 1000], 32, 32)
    assert r[0] > r[1] > r[2]


def test_argmax_capacity_solves_recall_equals_tau_and_outgrows_d():
    for d in (16, 64):
        c = theory.argmax_capacity(d, d, tau=0.9)
        assert theory.argmax_recall(c, d, d) == pytest.approx(0.9, abs=1e-6)
    caps = theory.argmax_capacity([16, 32, 64, 128], [16, 32, 64, 128])
    assert np.all(np.diff(np.log(caps)) > math.log(2) * 1.5)  # grows much faster than d


def test_decay_readout_equals_the_explicit_recurrence():
    n, d, dv, alpha = 9, 5, 3, 0.8
    K, V = RNG.normal(size=(n, d)), RNG.normal(size=(n, dv))
    S = np.zeros((d, dv))
    for t in range(n):
        S = alpha * S + np.outer(K[t], V[t])
    assert np.allclose(theory.decay_readout(K, V, alpha=alpha), K @ S)
    assert np.allclose(theory.decay_readout(torch.as_tensor(K), torch.as_tensor(V), alpha).numpy(), K @ S)


def test_bill_counts_and_break_even():
    b = theory.bill(n=[16, 32, 64], d=64)
    cache = [torch.zeros(n, 64).numel() + torch.zeros(n, 64).numel() for n in (16, 32, 64)]  # K and V caches
    assert np.array_equal(b["softmax_cache"], cache)
    assert np.array_equal(b["linear_state"], [64 * 64] * 3)
    assert np.array_equal(b["softmax_decode_flops"], [2 * n * 128 for n in (16, 32, 64)])
    assert theory.break_even_n(64) == 32.0  # n = d/2 when dv = d
    assert theory.break_even_n(64, measure="flops") == 64.0
    n = theory.break_even_n(48, 80)
    assert n * (48 + 80) == pytest.approx(48 * 80)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: theory.frame_bound(0, 4), "n must be >= 1"),
        (lambda: theory.welch_bound(4, -1), "d must be >= 1"),
        (lambda: theory.random_keys_error(float("nan"), 4), "n must be >= 1"),
        (lambda: theory.argmax_capacity(8, 8, tau=1.2), r"tau must lie in \(0, 1\)"),
        (lambda: theory.break_even_n(8, measure="time"), "measure must be"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(CapacityError, match=match):
        call()


# --- property-based: no generated key set beats T5, T6 or T8 -------------------------------

_dims = st.tuples(st.integers(2, 6), st.integers(1, 8)).map(lambda t: (t[0] + t[1], t[0]))  # (n, d), n > d
_finite = st.floats(-10, 10, allow_nan=False, allow_infinity=False, width=64)


@st.composite
def _key_sets(draw):
    n, d = draw(_dims)
    K = draw(arrays(np.float64, (n, d), elements=_finite))
    assume(np.all(np.linalg.norm(K, axis=1) > 1e-3))  # a zero key has no direction
    return K


@settings(max_examples=150, deadline=None)
@given(_key_sets())
def test_no_key_set_beats_the_frame_bound(K):
    n, d = K.shape
    Ku = _unit(K)
    assert theory.crosstalk_error(Ku) >= theory.frame_bound(n, d) - 1e-9


@settings(max_examples=150, deadline=None)
@given(_key_sets())
def test_no_key_set_beats_the_welch_bound(K):
    n, d = K.shape
    Ku = _unit(K)
    G = np.abs(Ku @ Ku.T)
    np.fill_diagonal(G, 0.0)
    assert G.max() >= theory.welch_bound(n, d) - 1e-9


@settings(max_examples=100, deadline=None)
@given(_key_sets())
def test_no_state_beats_the_rank_bound(K):
    n, d = K.shape
    V = np.eye(n)  # orthonormal values
    S, *_ = np.linalg.lstsq(K, V, rcond=None)
    assert ((K @ S - V) ** 2).sum(-1).mean() >= theory.rank_bound(n, d) - 1e-9


def test_rank_bound_capacity_is_where_the_rank_bound_crosses_eps():
    for d in (8, 64, 256):
        for eps in (0.1, 0.5, 0.9):
            n_star = theory.rank_bound_capacity(eps, d)
            assert abs(theory.rank_bound(n_star, d) - eps) < 1e-12
            assert theory.rank_bound(n_star * 1.01, d) > eps
    with pytest.raises(CapacityError, match="eps"):
        theory.rank_bound_capacity(1.0, 16)
