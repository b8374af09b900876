"""The needle probe (lacapacity.tasks.needle.probe), the needle and age-binned sweeps, and their figures."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, plots, studies, sweep, theory, variants
from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Mqar, Needle, Recall
from lacapacity.tasks.needle import probe as needle


@pytest.mark.slow
def test_recall_among_matches_drawn_candidates():
    rng = np.random.default_rng(0)
    for dv, m in ((8, 5), (16, 50), (64, 100)):
        r = rng.standard_normal(dv)
        r /= np.linalg.norm(r)
        for target in (0.0, 0.3, 0.6):
            u = rng.standard_normal(dv)
            u -= (u @ r) * r
            v = target * r + math.sqrt(1 - target**2) * u / np.linalg.norm(u)  # cos(r, v) = target
            others = rng.standard_normal((4000, m - 1, dv))
            others /= np.linalg.norm(others, axis=-1, keepdims=True)
            drawn = ((others @ r).max(-1) < v @ r).mean()
            want = float(needle.recall_among(v @ r, dv, m))
            assert abs(drawn - want) <= 4 * math.sqrt(want * (1 - want) / 4000) + 1e-3, (dv, m, target)
    assert float(needle.recall_among(1.0, 32, 2.0**122)) == 1.0 and float(needle.recall_among(-1.0, 32, 3)) == 0.0
    assert needle.recall_among(np.zeros((2, 3)), 16, [2, 1e6]).shape == (2, 3, 2)


def _brute(variant, HK, HV, NK, NV, depth):
    """The needle's read by a plain token loop of the rule, written here (delta rule and linear)."""
    B, L, d = HK.shape
    k, v = HK.clone().double(), HV.clone().double()
    p = round(depth * (L - 1))
    k[:, p], v[:, p] = NK[:, 0].double(), NV[:, 0].double()
    S = torch.zeros(B, d, v.shape[-1], dtype=torch.float64)
    b = variant.get("beta")
    for t in range(L):
        kt, vt = k[:, t], v[:, t]
        if b is None:
            S = S + kt[:, :, None] * vt[:, None, :]
        else:
            S = S + b * kt[:, :, None] * (vt - torch.einsum("bd,bde->be", kt, S))[:, None, :]
    r = torch.einsum("bd,bde->be", NK[:, 0].double(), S)
    return r, NV[:, 0].double()


@pytest.mark.parametrize("haystack", ["random", "repeat"])
@pytest.mark.parametrize("label,rule", [("linear", {}), ("delta(beta=0.5)", {"beta": 0.5})])
def test_needle_reads_equal_a_token_loop(haystack, label, rule):
    L, d, dv, depths = 40, 8, 6, [0.0, 0.5, 1.0]
    ds = needle.needle(
        label, lengths=[L], depths=depths, d=d, dv=dv, haystack=haystack, batch=2, seed=3, candidates=[2, 100]
    )
    for b in range(2):
        HK, HV, NK, NV = needle.haystack(haystack, len(depths), L, d, dv, seed=3 + b, period=24)
        for j, depth in enumerate(depths):  # row j of the draw is depth j's sequence
            r, v = _brute(rule, HK[j : j + 1], HV[j : j + 1], NK[j : j + 1], NV[j : j + 1], depth)
            cos = float((r * v).sum() / r.norm())
            np.testing.assert_allclose(ds.mse.values[0, j, b], float(((r - v) ** 2).sum()), rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(ds.cosine.values[0, j, b], cos, rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(
                ds.recall.values[0, j, b], needle.recall_among(cos, dv, [2, 100]), rtol=1e-3, atol=1e-6
            )
    assert ds.age.values.tolist() == [[39, 19, 0]]  # index round(0.5 * 39) = 20


def test_needle_signal_of_random_haystacks_is_t21():
    """With random keys the needle is a pair of age L - 1 - p: its mean signal is forgetting_signal."""
    L, d = 96, 16
    ds = needle.needle("delta(beta=0.5)", lengths=[L], depths=[0.0, 0.5], d=d, dv=32, batch=64, seed=0)
    for j, age in enumerate(ds.age.values[0]):
        x = ds.signal.values[0, j]
        want = theory.forgetting_signal(int(age), d, "delta", beta=0.5)
        assert abs(x.mean() - want) <= 4 * x.std(ddof=1) / math.sqrt(x.size), (age, x.mean(), want)


def test_haystacks_are_what_they_say():
    HK, HV, NK, NV = needle.haystack("repeat", 2, 100, 16, 8, seed=1, period=24, needles=3)
    assert torch.equal(HK[:, :24], HK[:, 24:48]) and torch.equal(HV[:, 24:48], HV[:, 48:72])
    assert NK.shape == (2, 3, 16) and NV.shape == (2, 3, 8)
    assert torch.allclose(HK.norm(dim=-1), torch.ones(2, 100)) and torch.allclose(NV.norm(dim=-1), torch.ones(2, 3))
    again = needle.haystack("repeat", 2, 100, 16, 8, seed=1, period=24, needles=3)
    assert all(torch.equal(a, b) for a, b in zip((HK, HV, NK, NV), again))  # seeded
    HK2 = needle.haystack("random", 2, 100, 16, 8, seed=1)[0]
    assert not torch.equal(HK2[:, :24], HK2[:, 24:48])


def test_several_needles_and_bad_input():
    ds = needle.needle("softmax", lengths=[64], depths=[0.5], d=16, needles=3, batch=1)
    assert float(ds.recall.min()) > 0.99  # softmax keeps every pair
    for kwargs, match in (
        ({"haystack": "essays"}, "unknown haystack"),
        ({"depths": [1.5]}, "depths"),
        ({"candidates": [1]}, "candidates must be numbers >= 2"),
        ({"lengths": [2], "needles": 3}, "cannot hold 3 needles"),
        ({"lengths": []}, "lengths"),
    ):
        args = {"lengths": [32], "d": 8, **kwargs}
        with pytest.raises(CapacityError, match=match):
            needle.needle("linear", **args)


def test_text_haystack_windows_and_held_out_needles(monkeypatch):
    """The text haystack's bookkeeping on a stand-in key table (the real model: the next test)."""
    from lacapacity.inputs import pretrained

    T_all, g = 600, torch.Generator().manual_seed(0)
    table = torch.randn(T_all, 384, generator=g)
    monkeypatch.setattr(pretrained, "token_count", lambda text=None: T_all)
    monkeypatch.setattr(pretrained, "token_keys", lambda layer, head, positions: table[positions])
    HK, HV, NK, NV = needle.haystack("text", 3, 500, 48, 8, seed=0, needles=2)
    proj = needle._projection(48, 0)
    rows = torch.nn.functional.normalize(table.double() @ proj, dim=-1)  # [T_all, 48]
    T = T_all - needle.HELD_OUT
    for b in range(3):
        start = int(torch.cdist(HK[b, :1].double(), rows[:T]).argmin())
        np.testing.assert_allclose(HK[b].double(), rows[(start + torch.arange(500)) % T], atol=1e-6)  # a ring window
        picked = torch.cdist(NK[b].double(), rows).argmin(1)
        assert bool((picked >= T).all()) and picked[0] != picked[1]  # held out, distinct
        np.testing.assert_allclose(NK[b].double(), rows[picked], atol=1e-6)
    assert proj.shape == (384, 48) and torch.allclose(proj.T @ proj, torch.eye(48, dtype=torch.float64), atol=1e-10)
    with pytest.raises(CapacityError, match="d must be <= 384"):
        needle.haystack("text", 1, 8, 512, 8, seed=0)


@pytest.mark.slow
def test_text_haystack_with_the_real_model():
    pytest.importorskip("transformers")
    HK, HV, NK, NV = needle.haystack("text", 2, 64, 48, 8, seed=0)
    assert HK.shape == (2, 64, 48) and NK.shape == (2, 1, 48)
    assert torch.allclose(HK.norm(dim=-1), torch.ones(2, 64), atol=1e-5)
    coherence = float(((HK[0] @ HK[0].T) ** 2).mean())
    assert coherence > 5 / 48  # text keys are far more coherent than random ones (1/d)


# ---------------------------------------------------------------- sweeps


def _run(study, tmp_path):
    return sweep.run(study, out=tmp_path, device="cpu", executor="serial", progress=False)


@pytest.mark.slow
def test_needle_study_runs_resumes_and_draws(tmp_path):
    study = studies.get("needle").with_overrides(
        ["n=32,64", "d=16", "dv=16", "haystack=random,repeat", "seed=0,1", "depth=0,1", "candidates=2,1e6"]
    )
    res = _run(study, tmp_path)
    ds = res.dataset
    assert ds.recall.dims == ("variant", "d", "n", "haystack", "depth", "seed", "candidates")
    assert ds.mse.dims == ("variant", "d", "n", "haystack", "depth", "seed") and "key_family" not in ds.coords
    # the sweep's numbers are needle.needle's, sequence for sequence
    one = needle.needle(
        "delta(beta=0.5)",
        lengths=[32, 64],
        depths=[0.0, 1.0],
        d=16,
        haystack="repeat",
        batch=2,
        seed=0,
        candidates=[2, 1e6],
    )
    np.testing.assert_array_equal(
        ds.recall.sel(variant="delta(beta=0.5)", haystack="repeat").squeeze("d").values, one.recall.values
    )
    again = _run(study, tmp_path)
    assert again.measured == 0 and again.reused == res.measured > 0
    paths = plots.render(ds, out=tmp_path / "figures")
    assert {p.name for p in paths} >= {"needle_needle.png", "needle_needle-depth.png"}
    with pytest.raises(CapacityError, match="a needle study takes n"):
        Study("x", "", Grid(variant=("linear",), d=(8,), load=(1,)), Needle())
    with pytest.raises(CapacityError, match="haystack"):
        Needle(haystack=("essays",))
    with pytest.raises(CapacityError, match="haystack applies to needle studies only"):
        Study("x", "", Grid(variant=("linear",), d=(8,), n=(4,)), Recall(haystack=("text",)))


def test_the_needle_figures_bars_are_one_standard_error_over_the_sequences(tmp_path):
    study = studies.get("needle").with_overrides(
        ["variant=delta(beta=0.5)", "n=32,64", "d=16", "dv=16", "haystack=random", "seed=0,1,2", "depth=0,1"]
    )
    ds = _run(study, tmp_path).dataset
    fig = plots.needle_figure(ds)
    per = ds.recall.isel(candidates=0).squeeze(["d", "haystack", "variant"]).mean("depth")
    per = per.transpose("n", "seed").values  # [n, seed]: three sequences, where the range is not one standard error
    (bars,) = [c for c in fig.axes[0].collections if c.get_gid() == "range:delta(beta=0.5)"]
    ends = np.array([[seg[0][1], seg[1][1]] for seg in bars.get_segments()])
    se = per.std(1, ddof=1) / np.sqrt(3)  # numpy's sample standard deviation
    assert (se > 0).all()
    np.testing.assert_allclose(ends, np.stack([per.mean(1) - se, per.mean(1) + se], 1), atol=1e-12)
    assert "one standard error of that mean over the sequences" in fig.texts[-1].get_text().replace("\n", " ")


def test_age_bins_in_a_sweep_and_the_reuse_key(tmp_path):
    base = Study("ages", "", Grid(variant=("delta(beta=0.5)", "decay(alpha=0.9)"), d=(8, 16), load=(1, 4), seed=(0, 1)))
    binned = Study(base.name, "", base.grid, Recall(age_bins=True))
    assert binned.config_hash() != base.config_hash()
    ds = _run(binned, tmp_path).dataset
    plain = _run(base, tmp_path / "plain").dataset
    assert np.array_equal(ds.mse.values, plain.mse.values)  # bit for bit
    assert ds.age.values.tolist() == [0, 1, 2, 4, 8, 16, 32] and ds.age_end.values[-1] == 64
    assert ds.signal_age.dims == ("variant", "key_family", "d", "load", "seed", "age")
    # the age bins average the per-query metrics that probe.recall reports
    from lacapacity.inputs import keys, values
    from lacapacity.tasks import probe

    K = keys.make("gaussian", 64, 16, batch=2, seed=[0, 1])
    V = values.make("gaussian", 64, 16, batch=2, seed=[0, 1])
    direct = probe.recall(
        variants.resolve("decay(alpha=0.9)"), K, V, checkpoints=[64], age_bins=[0, 1, 2, 4, 8, 16, 32, 64]
    )
    got = ds.mse_age.sel(variant="decay(alpha=0.9)", d=16, load=4.0).squeeze("key_family").values
    np.testing.assert_allclose(got, direct.mse_age.isel(n=0).values, rtol=1e-6)
    assert int(ds.pairs_age.sel(variant="delta(beta=0.5)", d=8, load=1.0).squeeze("key_family").sum()) == 8
    again = _run(binned, tmp_path)
    assert again.measured == 0
    with pytest.raises(CapacityError, match="age_bins applies to recall studies only"):
        Study("x", "", Grid(variant=("linear",), d=(8,), n=(4,)), Mqar(age_bins=True))


def test_forgetting_figure_draws_theory_and_horizons(tmp_path):
    study = studies.get("forgetting").with_overrides(["d=16", "seed=0,1"])
    ds = _run(study, tmp_path).dataset
    assert plots.choose(ds) == ["forgetting"]
    fig = plots.forgetting(ds)
    signal, error, recall = fig.axes[:3]
    labels = [str(v) for v in ds.variant.values]
    n = int(ds.n.values.ravel()[0])
    for lab in labels:
        rule, p = _rule(lab)
        tau = theory.forgetting_horizon(16, rule, **p)
        lines = [ln for ln in signal.get_lines() if ln.get_gid() == f"horizon:{lab}"]
        if tau < n:
            assert len(lines) == 1 and lines[0].get_xdata()[0] == pytest.approx(tau)
    theory_err = [ln for ln in error.get_lines() if (ln.get_gid() or "").startswith("theory:")]
    assert len(theory_err) == len(labels)
    # the delta rule's dashed error curve is the bin mean of forgetting_error
    lo, hi = ds.age.values, np.minimum(ds.age_end.values, n)
    want = [
        np.mean(theory.forgetting_error(np.arange(a, b), n, 16, "delta", beta=0.5)) for a, b in zip(lo, hi) if a < n
    ]
    delta = [ln for ln in theory_err if ln.get_gid() == "theory:T21" and ln.get_color() is not None]
    assert any(np.allclose(ln.get_ydata(), want) for ln in delta)
    for ax in (signal, error, recall):
        assert ax.get_xlabel().endswith("(writes since stored)")


def _rule(label):
    from lacapacity.plots.forgetting import rule_of

    return rule_of(label)


def test_rule_of_reads_labels():
    from lacapacity.plots.forgetting import rule_of

    assert rule_of("delta(beta=0.5)") == ("delta", {"beta": 0.5})
    assert rule_of("gated_delta(alpha=0.9, beta=1.0)") == ("gated_delta", {"alpha": 0.9, "beta": 1.0})
    assert rule_of("decay(alpha=['uniform', 0.9, 1.0])") is None and rule_of("linear") is None
    assert theory.forgetting_hypothesis(64, "delta", beta=0.5) == pytest.approx(64 / 0.75)


def test_the_needle_study_settings_come_from_the_paper():
    """The study's mamba2 step gives the 4096-token horizon it claims; the gates are exp(-1/4096)."""
    s = studies.get("needle")
    labels = [v.label for v in s.grid.variant]
    mamba = variants.resolve([lab for lab in labels if lab.startswith("mamba2")][0])
    tau = theory.forgetting_horizon(200, "mamba2", A=mamba.A, dt=mamba.dt, w_std=mamba.w_std)
    assert tau == pytest.approx(4096, rel=1e-3)
    gd = variants.resolve([lab for lab in labels if lab.startswith("gated_delta")][0])
    assert gd.params["alpha"] == pytest.approx(math.exp(-1 / 4096), abs=1e-6) and gd.params["beta"] == 0.5
    assert s.grid.d == (200,) and s.grid.dv == (400,) and s.grid.n == (1024, 2048, 4096, 8192)
