"""T21-T24 (forgetting per age), the probe's age bins and the mamba2 built-in, against independent computations."""

import math

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe

RULES = {
    "delta": {"beta": 0.5},
    "decay": {"alpha": 0.95},
    "gated_delta": {"alpha": 0.97, "beta": 1.2},
    "mamba2": {"A": 2.0, "dt": 0.03, "w_std": 1.5},
}


def _unit(rng, *shape):
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _softplus(x):
    return np.logaddexp(0.0, x)


def _simulate(rule, params, n, d, dv, trials, seed):
    """Float64 numpy recurrence S = a_t (I - b k^T k) S + w_t k^T v for i.i.d. unit keys and values.

    Returns per-trial signal <k_i S, v_i> and error ||k_i S - v_i||^2 after n writes, ``[trials, n]`` indexed by
    age (0 = last written), and the trace energy ||Q k_i^T||^2 / w_i^2 of every pair, same layout.
    """
    rng = np.random.default_rng(seed)
    K, V = _unit(rng, trials, n, d), _unit(rng, trials, n, dv)
    if rule == "mamba2":
        w = _unit(rng, d) * params["w_std"] * math.sqrt(d)  # any fixed direction: the keys are isotropic
        dt = _softplus(K @ w + math.log(math.expm1(params["dt"])))  # [trials, n]
        gate, write, erase = np.exp(-params["A"] * dt), dt, 0.0
    else:
        a = params.get("alpha", 1.0)
        erase = params.get("beta", 0.0)
        gate = np.full((trials, n), a)
        write = np.full((trials, n), erase if rule != "decay" else 1.0)
    S = np.zeros((trials, d, dv))
    U = np.zeros((trials, n, d))  # the trace Q k_i^T of each pair, divided by its write scale
    for t in range(n):
        k, v = K[:, t], V[:, t]
        kS = np.einsum("bd,bde->be", k, S)
        S = gate[:, t, None, None] * (S - erase * k[:, :, None] * kS[:, None, :]) + write[:, t, None, None] * (
            k[:, :, None] * v[:, None, :]
        )
        kU = np.einsum("bd,bnd->bn", k, U[:, :t])
        U[:, :t] = gate[:, t, None, None] * (U[:, :t] - erase * kU[:, :, None] * k[:, None, :])
        U[:, t] = k
    R = np.einsum("bnd,bde->bne", K, S)
    signal = (R * V).sum(-1)[:, ::-1]
    error = ((R - V) ** 2).sum(-1)[:, ::-1]
    energy = (U * U).sum(-1)[:, ::-1]
    return signal, error, energy


@pytest.mark.slow
@pytest.mark.parametrize("rule", list(RULES))
def test_signal_error_and_trace_energy_match_a_float64_simulation(rule):
    params, n, d, dv, trials = RULES[rule], 40, 12, 6, 3000
    signal, error, energy = _simulate(rule, params, n, d, dv, trials, seed=len(rule))
    ages = np.array([0, 1, 5, 12, 25, 39])
    s_pred = theory.forgetting_signal(ages, d, rule, **params)
    e_pred = theory.forgetting_error(ages, n, d, rule, **params)
    tau_e = theory.forgetting_horizon(d, rule, quantity="energy", **params)
    g_pred = np.exp(-ages / tau_e)  # the simulated trace leaves the pair's own write scale out
    se = lambda x: x.std(0, ddof=1) / math.sqrt(trials)
    for name, x, pred, slack in (
        ("signal", signal, s_pred, 0.0),
        # mamba2's error neglects the correlation of a pair's own step with its overlaps (order 1/d): 2% relative
        ("error", error, e_pred, 0.02 if rule == "mamba2" else 0.0),
        ("energy", energy, g_pred, 0.0),
    ):
        m, s = x[:, ages].mean(0), se(x[:, ages])
        assert np.all(np.abs(m - pred) <= 4 * s + slack * np.abs(pred) + 1e-12), (name, m, pred, s)


def test_the_signal_decays_with_tau_and_the_hypotheses_name_other_quantities():
    d, b = 16, 0.5
    signal, _, energy = _simulate("delta", {"beta": b}, 48, d, 4, 4000, seed=7)
    tau = theory.forgetting_horizon(d, "delta", beta=b)
    tau_e = theory.forgetting_horizon(d, "delta", beta=b, quantity="energy")
    # measured time constants: least squares of log(mean) against age
    ages = np.arange(48)
    fit = lambda y: -1.0 / np.polyfit(ages, np.log(y), 1)[0]
    assert fit(signal.mean(0)) == pytest.approx(tau, rel=0.03)
    assert fit(energy.mean(0)) == pytest.approx(tau_e, rel=0.03)
    # the delta-rule hypothesis d / (b (2 - b)) is the energy's time constant, not the signal's (d / b)
    assert d / (b * (2 - b)) == pytest.approx(tau_e, rel=0.05) and tau / tau_e == pytest.approx((2 - b), rel=0.05)
    # first-order forms of the docstring at large d
    D = 1024
    for rule, p, want in (
        ("delta", {"beta": 0.5}, D / 0.5),
        ("decay", {"alpha": 0.99}, 1 / 0.01),
        ("gated_delta", {"alpha": 0.999, "beta": 0.5}, 1 / (0.001 + 0.5 / D)),
    ):
        assert theory.forgetting_horizon(D, rule, **p) == pytest.approx(want, rel=0.01)
    trace = theory.forgetting_horizon(D, "gated_delta", alpha=0.999, beta=0.5, quantity="trace")
    assert trace == pytest.approx(1 / (0.001 + 0.5 * 1.5 / (2 * D)), rel=0.01)
    assert theory.forgetting_horizon(8, "decay", alpha=1.0) == math.inf


def test_mamba2_step_moments_against_monte_carlo():
    rng = np.random.default_rng(3)
    d, A, dt, w_std = 24, 3.0, 0.05, 2.0
    x = _unit(rng, 400_000, d) @ (_unit(rng, d) * w_std * math.sqrt(d))
    step = _softplus(x + math.log(math.expm1(dt)))
    got = theory.mamba2_step_moments(d, A=A, dt=dt, w_std=w_std)
    for key, sample in (
        ("omega", step),
        ("omega2", step**2),
        ("alpha", np.exp(-A * step)),
        ("alpha2", np.exp(-2 * A * step)),
    ):
        assert abs(got[key] - sample.mean()) <= 4 * sample.std() / math.sqrt(sample.size), key


def test_theory_refuses_bad_input_in_one_line():
    with pytest.raises(CapacityError, match="unknown rule"):
        theory.forgetting_signal(1, 8, "bogus")
    with pytest.raises(CapacityError, match="takes beta; got alpha"):
        theory.forgetting_signal(1, 8, "delta", beta=0.5, alpha=0.9)
    with pytest.raises(CapacityError, match="needs alpha"):
        theory.forgetting_signal(1, 8, "decay")
    with pytest.raises(CapacityError, match="age must lie in 0 .. n - 1"):
        theory.forgetting_error(5, 5, 8, "delta", beta=1.0)
    with pytest.raises(CapacityError, match="beta must lie in"):
        theory.forgetting_horizon(8, "delta", beta=2.0)
    with pytest.raises(CapacityError, match="quantity must be one of"):
        theory.forgetting_horizon(8, "delta", beta=1.0, quantity="recall")


# ---------------------------------------------------------------- the probe's age bins


def _pair(n=40, d=8, dv=6, B=3):
    return keys.make("gaussian", n, d, batch=B, seed=0), values.make("gaussian", n, dv, batch=B, seed=1)


def test_age_bins_average_the_per_query_metrics():
    K, V = _pair()
    ds = probe.recall(variants.get("delta", beta=0.7), K, V, checkpoints=[5, 40], per_query=True, age_bins=True)
    assert ds.age.values.tolist() == [0, 1, 2, 4, 8, 16, 32] and ds.age_end.values.tolist() == [1, 2, 4, 8, 16, 32, 64]
    for ci, c in enumerate([5, 40]):
        age = c - 1 - np.arange(c)
        for j, (lo, hi) in enumerate(zip(ds.age.values, ds.age_end.values)):
            sel = (age >= lo) & (age < hi)
            assert int(ds.pairs_age[ci, j]) == sel.sum()
            for m in probe.METRICS:
                got = ds[probe.PER_AGE[m]].values[ci, :, j]
                if not sel.any():
                    assert np.isnan(got).all()
                else:
                    want = ds[probe.PER_QUERY[m]].values[ci, :, :c][:, sel].mean(-1)
                    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    assert ds.recall_age.dims == ("n", "batch", "age") and "age_bins" in ds.attrs["config"]


def test_custom_age_edges_and_pairs_past_the_last_edge():
    K, V = _pair()
    ds = probe.recall("linear", K, V, checkpoints=[40], age_bins=[0, 3, 10])
    assert ds.age.values.tolist() == [0, 3] and ds.pairs_age.values.tolist() == [[3, 7]]
    full = probe.recall("linear", K, V, checkpoints=[40], per_query=True)
    want = full.mse_q.values[0][:, 40 - 10 : 40 - 3].mean(-1)  # ages 3..9
    np.testing.assert_allclose(ds.mse_age.values[0, :, 1], want, rtol=1e-6)


def test_without_age_bins_the_result_is_unchanged():
    K, V = _pair()
    plain = probe.recall("gated_delta", K, V, checkpoints=[8, 40])
    binned = probe.recall("gated_delta", K, V, checkpoints=[8, 40], age_bins=True)
    assert not [v for v in plain.data_vars if str(v).endswith("_age")] and "age" not in plain.dims
    for m in probe.METRICS:
        assert np.array_equal(plain[m].values, binned[m].values)  # bit for bit
    assert "age_bins" not in plain.attrs["config"]


@pytest.mark.parametrize("bad", [[1, 2], [0, 4, 4], [0], "0,1", [0, -1]])
def test_bad_age_bins_are_one_line_errors(bad):
    K, V = _pair()
    with pytest.raises(CapacityError, match="age"):
        probe.recall("linear", K, V, age_bins=bad)


# ---------------------------------------------------------------- the mamba2 built-in


def _mamba2_recurrence(k, v, w, A, bias, normalize):
    """Token by token, float64: dt = softplus(k . w + bias), S = exp(-A dt) S + dt k^T v."""
    k, v = k.double(), v.double()
    if normalize:
        k = k / k.norm(dim=-1, keepdim=True)
    B, T, d = k.shape
    S = torch.zeros(B, d, v.shape[-1], dtype=torch.float64)
    for t in range(T):
        dt = torch.log1p(torch.exp(k[:, t] @ w + bias))  # [B]
        S = torch.exp(-A * dt)[:, None, None] * S + dt[:, None, None] * k[:, t, :, None] * v[:, t, None, :]
    return S


@pytest.mark.parametrize("normalize", [False, True])
def test_mamba2_equals_an_independent_recurrence(normalize):
    g = torch.Generator().manual_seed(5)
    k = torch.randn(3, 30, 10, generator=g) * (1.0 if normalize else 0.3)
    v = torch.randn(3, 30, 7, generator=g)
    mem = variants.get("mamba2", A=2.5, dt=0.2, w_std=0.8, normalize=normalize, seed=4)
    w = mem.projection(10)
    assert float(w.norm()) == pytest.approx(0.8 * math.sqrt(10), rel=1e-12)
    assert torch.equal(w, variants.get("mamba2", w_std=0.8, seed=4).projection(10))  # seeded
    assert not torch.equal(w, variants.get("mamba2", w_std=0.8, seed=5).projection(10))
    S = mem.init_state(3, 10, 7)
    for a, b in ((0, 7), (7, 8), (8, 30)):  # chunked writes
        S = mem.write(S, k[:, a:b], v[:, a:b])
    want = _mamba2_recurrence(k, v, w, 2.5, math.log(math.expm1(0.2)), normalize)
    torch.testing.assert_close(S.double(), want, rtol=1e-5, atol=1e-6)
    q = torch.randn(3, 4, 10, generator=g).double()
    qn = q / q.norm(dim=-1, keepdim=True) if normalize else q  # normalize=True normalises queries too
    torch.testing.assert_close(mem.read(S, q.float()).double(), qn @ want, rtol=1e-5, atol=1e-5)


def test_mamba2_passes_check_variant_and_refuses_bad_parameters():
    from lacapacity import check_variant

    report = check_variant(variants.resolve("mamba2(A=0.5, dt=0.05)"))
    assert report.passed, report
    assert variants.display_name("mamba2").startswith("Mamba2")
    for bad, match in (("mamba2(A=0)", "A must be"), ("mamba2(dt=-1)", "dt must be"), ("mamba2(w_std=-1)", "w_std")):
        with pytest.raises(CapacityError, match=match):
            variants.resolve(bad)


# ---------------------------------------------------------------- the check rows


# That the rows of T21-T24 hold, and fail when a closed form they name is 3% off, is tests/check/test_check_cli.py's
# (test_every_check_holds, test_every_closed_form_3_percent_off_fails_a_row).
