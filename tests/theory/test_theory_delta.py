"""The delta-rule closed form (T12) and the refined argmax prediction (T10) against independent computations."""

import math

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, check, theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe


def _simulate_delta(n, d, dv, beta, trials, seed):
    """Float64 brute force of S_t = S_{t-1} + b k_t^T (v_t - k_t S_{t-1}): per-trial mean error after each write."""
    rng = np.random.default_rng(seed)
    K = rng.standard_normal((trials, n, d))
    K /= np.linalg.norm(K, axis=-1, keepdims=True)
    V = rng.standard_normal((trials, n, dv))
    V /= np.linalg.norm(V, axis=-1, keepdims=True)
    S = np.zeros((trials, d, dv))
    out = np.empty((n, trials))
    for t in range(n):
        k, v = K[:, t], V[:, t]
        S = S + beta * k[:, :, None] * (v - np.einsum("bd,bde->be", k, S))[:, None, :]
        out[t] = ((np.einsum("bnd,bde->bne", K[:, : t + 1], S) - V[:, : t + 1]) ** 2).sum(-1).mean(-1)
    return out  # [n, trials]


@pytest.mark.slow
@pytest.mark.parametrize(
    "n,d,dv,beta,seed", [(24, 4, 3, 1.0, 1), (40, 8, 5, 0.5, 2), (30, 16, 2, 0.2, 3), (16, 3, 6, 1.6, 4)]
)
def test_delta_rule_error_matches_a_float64_brute_force(n, d, dv, beta, seed):
    trials = 4000
    mse = _simulate_delta(n, d, dv, beta, trials, seed)
    mean, se = mse.mean(1), mse.std(1, ddof=1) / math.sqrt(trials)
    pred = theory.delta_rule_error(np.arange(1, n + 1), d, beta=beta)
    for t in (1, 2, n // 2, n - 1):  # a few points of the curve (they are correlated along it)
        assert abs(mean[t] - pred[t]) <= 3.5 * se[t] + 1e-12, (t + 1, mean[t], pred[t], se[t])


def test_delta_rule_error_matches_the_probe_through_the_delta_variant():
    d, dv, B = 32, 24, 64
    K = keys.make("gaussian", 96, d, batch=B, seed=3)
    V = values.make("gaussian", 96, dv, batch=B, seed=4)
    for beta in (0.3, 1.0):
        ds = probe.recall(variants.get("delta", beta=beta), K, V, checkpoints=[8, 32, 96], decode=False)
        mse = ds.mse.values  # [3, B]
        pred = theory.delta_rule_error(ds.n.values, d, beta=beta)
        se = mse.std(1, ddof=1) / math.sqrt(B)
        assert np.all(np.abs(mse.mean(1) - pred) <= 3.5 * se), (mse.mean(1), pred, se)


@pytest.mark.slow
def test_delta_rule_error_exact_limits():
    # n = 1: the read after one write is b v, so the error is (1 - b)^2 |v|^2, whatever d
    for b in (0.1, 0.5, 1.0, 1.7):
        assert theory.delta_rule_error(1, [2, 16, 512], beta=b) == pytest.approx([(1 - b) ** 2] * 3, abs=1e-15)
    # n = 2, b = 1: pair 2 reads back exactly; pair 1's error is -c^2 v1 + c v2, energy E c^4 + E c^2
    for d in (2, 5, 64):
        assert theory.delta_rule_error(2, d) == pytest.approx((1 / d + 3 / (d * (d + 2))) / 2, rel=1e-12)
    # n -> infinity: old pairs are forgotten, their read k_i S is independent of v_i with energy
    # E|S|_F^2 / d -> b / (2 - b), so the mean error tends to 1 + b/(2 - b) = 2/(2 - b) (slowly, like d/n)
    for b in (0.5, 1.0):
        far = theory.delta_rule_error(20_000, 2, beta=b)
        assert far == pytest.approx(2 / (2 - b), rel=1e-3)
        assert far < theory.delta_rule_error(40_000, 2, beta=b) < 2 / (2 - b) + 1e-9


def test_delta_rule_error_broadcasts_and_ignores_dv():
    n = np.arange(1, 65)
    curve = theory.delta_rule_error(n, 32, beta=0.7)
    assert curve.shape == (64,) and isinstance(theory.delta_rule_error(5, 32), float)
    grid = theory.delta_rule_error(n[:, None], [16, 32], beta=0.7)
    assert grid.shape == (64, 2) and np.allclose(grid[:, 1], curve)
    assert np.allclose(theory.delta_rule_error(n, 32, beta=0.7, dv=3), curve)
    both = theory.delta_rule_error(10, 16, beta=[0.25, 1.0])
    assert both[0] == theory.delta_rule_error(10, 16, beta=0.25) and both[1] == theory.delta_rule_error(10, 16)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"n": 2.5, "d": 8}, "whole numbers"),
        ({"n": 0, "d": 8}, "n must be >= 1"),
        ({"n": 4, "d": 1}, "d must be >= 2"),
        ({"n": 4, "d": 8, "beta": 0.0}, r"beta must lie in \(0, 2\)"),
        ({"n": 4, "d": 8, "beta": 2.0}, r"beta must lie in \(0, 2\)"),
        ({"n": 4, "d": 8, "dv": 0}, "dv must be >= 1"),
    ],
)
def test_delta_rule_error_rejects_bad_input(kwargs, match):
    with pytest.raises(CapacityError, match=match):
        theory.delta_rule_error(**kwargs)


@pytest.mark.slow
def test_capacity_check_catches_a_wrong_delta_formula(monkeypatch):
    cache = {}  # the probe runs once; the patched runs recompute only the expected values
    rows = check.run_checks(seed=0, only=["T12"], cache=cache)
    assert all(r.passed for r in rows) and sum("mean mse = theory" in r.what for r in rows) == 2
    true = theory.delta_rule_error
    monkeypatch.setattr(theory, "delta_rule_error", lambda n, d, beta=1.0, dv=None: 1.01 * true(n, d, beta=beta))
    bad = [r.what for r in check.run_checks(seed=0, only=["T12"], cache=cache) if not r.passed]
    assert sum("mean mse = theory" in w for w in bad) == 2 and any("n = 1" in w for w in bad)  # 1% off is caught
    monkeypatch.setattr(theory, "delta_rule_error", lambda n, d, beta=1.0, dv=None: (np.asarray(n) - 1.0) / d)
    assert any(not r.passed for r in check.run_checks(seed=0, only=["T12"], cache=cache))  # T7's additive formula
    monkeypatch.setattr(theory, "delta_rule_error", true)
    capacity = theory.delta_rule_capacity
    monkeypatch.setattr(theory, "delta_rule_capacity", lambda eps, d, beta=1.0: capacity(eps, d, beta) + 1)
    bad = [r.what for r in check.run_checks(seed=0, only=["T12"], cache=cache) if not r.passed]
    assert bad and all("capacity" in w for w in bad)  # one pair too many


# ---------------------------------------------------------------- T10 refined


def test_argmax_recall_refined_integrates_its_model():
    # Draw the model's variables directly (a, |N|^2, g = a coordinate in R^d, u = a coordinate in R^dv) and compare.
    rng = np.random.default_rng(0)
    for n, d, dv in [(40, 32, 32), (33, 16, 64), (44, 64, 16)]:
        trials = 20000
        sig2 = (n - 1) / (d * dv)
        a = math.sqrt(sig2) * rng.standard_normal(trials)
        eta = a**2 + sig2 * rng.chisquare(dv - 1, trials)
        g = 2 * rng.beta((d - 1) / 2, (d - 1) / 2, (trials, n - 1)) - 1
        u = 2 * rng.beta((dv - 1) / 2, (dv - 1) / 2, (trials, n - 1)) - 1
        scale = np.sqrt(np.maximum((1 - g) ** 2 + 2 * (1 - g) * a[:, None] + eta[:, None] - 1 / d, 1e-12))
        mc = float((g + scale * u < 1 + a[:, None]).all(1).mean())
        assert abs(theory.argmax_recall_refined(n, d, dv) - mc) < 4 * math.sqrt(mc * (1 - mc) / trials) + 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("n,d,dv", [(13, 16, 16), (40, 32, 32), (52, 32, 32), (33, 16, 64), (44, 64, 16)])
def test_argmax_recall_refined_predicts_the_real_decode(n, d, dv):
    B = 96
    K = keys.make("gaussian", n, d, batch=B, seed=11).double()
    V = values.make("gaussian", n, dv, batch=B, seed=12).double()
    R = K @ (K.transpose(1, 2) @ V)  # reads of the additive memory, [B, n, dv]
    per = ((R @ V.transpose(1, 2)).argmax(-1) == torch.arange(n)).double().mean(-1).numpy()  # [B]
    measured, se = per.mean(), per.std(ddof=1) / math.sqrt(B)
    refined, gaussian = theory.argmax_recall_refined(n, d, dv), theory.argmax_recall(n, d, dv)
    assert abs(measured - refined) <= 3 * se + 0.01, (measured, refined, se)
    assert gaussian < refined  # the Gaussian model stays the conservative bound


@pytest.mark.slow
def test_argmax_capacity_refined_solves_its_recall_and_sits_above_the_bound():
    for d, dv in [(16, 16), (64, 16), (32, 128)]:
        c = theory.argmax_capacity_refined(d, dv)
        assert theory.argmax_recall_refined(c, d, dv) == pytest.approx(0.9, abs=1e-5)
        assert c > theory.argmax_capacity(d, dv)
    caps = theory.argmax_capacity_refined([16, 32], [16, 32], tau=0.8)
    assert caps.shape == (2,) and caps[1] > 3 * caps[0]
    assert theory.argmax_recall_refined(1, 8, 8) == 1.0
    with pytest.raises(CapacityError, match="tau must lie in"):
        theory.argmax_capacity_refined(16, 16, tau=1.0)
    with pytest.raises(CapacityError, match="d and dv must be >= 2"):
        theory.argmax_recall_refined(10, 1, 16)
