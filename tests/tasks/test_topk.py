"""recall@k (T30): the exact top-k decode, the probe's and the sweep's recall_at, and the closed forms."""

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, theory, variants
from lacapacity.inputs import keys, values
from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall, probe
from lacapacity.tasks.decode import argmax_correct, topk_correct


def _rank(r, v):
    """Own-value rank by a float64 brute force: larger scores, and equal scores at a smaller index, come first."""
    s = r.double() @ v.double().transpose(1, 2)  # [B, c, c]
    own = torch.diagonal(s, dim1=1, dim2=2)[..., None]
    c = s.shape[-1]
    earlier = torch.arange(c)[None, :] < torch.arange(c)[:, None]  # l < i
    return ((s > own) | ((s == own) & earlier)).sum(-1)


@pytest.mark.parametrize("n,d", [(64, 16), (200, 8), (48, 48)])
def test_topk_against_a_float64_ranking(n, d):
    g = torch.Generator().manual_seed(n)
    K = torch.nn.functional.normalize(torch.randn(3, n, d, generator=g), dim=-1)
    V = torch.nn.functional.normalize(torch.randn(3, n, d, generator=g), dim=-1)
    R = (K @ K.transpose(1, 2)) @ V
    ks = [1, 2, 7, n]
    got = topk_correct(R, V, ks, block=17)
    rank = _rank(R, V)
    for j, k in enumerate(ks):
        assert torch.equal(got[..., j], (rank < k).float()), k
    assert torch.equal(got[..., 0], argmax_correct(R, V))


def test_ties_follow_the_argmax_rule():
    v = torch.eye(4)[None]
    r = torch.zeros(1, 4, 4)
    r[0, 1] = v[0, 0] + v[0, 1]  # ties with the earlier value 0
    assert topk_correct(r, v, [1, 2, 3]).tolist() == [[[1, 1, 1], [0, 1, 1], [0, 0, 1], [0, 0, 0]]]
    assert topk_correct(r, v, 1)[..., 0].tolist() == argmax_correct(r, v).tolist()
    for bad in (0, [2, 2], [1.5], True):
        with pytest.raises(CapacityError, match="k must be"):
            topk_correct(r, v, bad)


def test_the_probe_keeps_its_numbers_and_adds_recall_at():
    K = keys.make("gaussian", n=96, d=16, batch=2, seed=0)
    V = values.make("gaussian", n=96, dv=16, batch=2, seed=1)
    lin = variants.get("linear")
    plain = probe.recall(lin, K, V, checkpoints=[24, 96])
    ds = probe.recall(lin, K, V, checkpoints=[24, 96], top_k=[1, 4], per_query=True)
    for name in plain.data_vars:  # bit-identical without and with top_k
        np.testing.assert_array_equal(plain[name].values, ds[name].values)
    assert ds.recall_at.dims == ("n", "batch", "k") and ds.k.values.tolist() == [1, 4]
    np.testing.assert_array_equal(ds.recall_at.sel(k=1).values, ds.recall.values)
    np.testing.assert_allclose(ds.recall_at_q.mean("query").values, ds.recall_at.values, rtol=1e-6)  # float32 means
    S = K.double().transpose(1, 2) @ V.double()  # the additive state, brute force
    rank = _rank(K.double() @ S, V)
    np.testing.assert_array_equal(ds.recall_at.sel(n=96, k=4).values, (rank < 4).double().mean(-1).numpy())


def test_the_sweep_adds_recall_at_over_k(tmp_path):
    from lacapacity import sweep

    grid = Grid(variant=("linear",), d=(16,), load=(1, 4), seed=(0, 1))
    base = Study("topk", "t", grid, Recall())
    assert base.task.top_k == ()  # opt-in: the default study measures no recall_at
    study = base.with_overrides(["top_k=1,3"])
    assert study.task.top_k == (1, 3) and study.config_hash() != base.config_hash()
    ds = sweep.run(study, out=tmp_path).dataset
    assert ds.recall_at.dims[-1] == "k" and ds.k.values.tolist() == [1, 3]
    np.testing.assert_array_equal(ds.recall_at.sel(k=1).values, ds.recall.values)
    with pytest.raises(CapacityError, match="top_k"):
        Recall(top_k=(2, 2))


def test_k_equal_one_is_t10():
    n = np.array([16, 64, 200])
    np.testing.assert_allclose(theory.recall_at(n, 32, 32, 1), theory.argmax_recall(n, 32, 32), atol=1e-12)
    np.testing.assert_allclose(theory.recall_at_refined(n, 32, 32, 1), theory.argmax_recall_refined(n, 32, 32))
    rec = [theory.recall_at_refined(128, 32, 32, k) for k in (1, 2, 5, 20)]
    assert all(a < b for a, b in zip(rec, rec[1:]))  # a longer list holds more
    assert theory.recall_at(8, 32, 32, 8) == 1.0  # at most k - 1 competitors


def test_recall_at_refined_predicts_the_measured_recall_at_k():
    d, B = 32, 96
    ns = [64, 128, 256]
    K = keys.make("gaussian", n=256, d=d, batch=B, seed=5)
    V = values.make("gaussian", n=256, dv=d, batch=B, seed=6)
    ds = probe.recall(variants.get("linear"), K, V, checkpoints=ns, top_k=[2, 5, 10])
    for k in (2, 5, 10):
        m = ds.recall_at.sel(k=k)
        se = m.std("batch") / np.sqrt(B)
        pred = theory.recall_at_refined(np.array(ns), d, d, k)
        assert np.all(np.abs(m.mean("batch").values - pred) <= 3 * se.values + 0.004), (k, m.mean("batch").values, pred)
        assert np.all(m.mean("batch").values >= theory.recall_at(np.array(ns), d, d, k) - 3 * se.values)


def test_recall_at_integrates_its_gaussian_model_exactly():
    """The Gaussian model simulated here: correct score N(1, s_c^2), n - 1 wrong ones N(0, s_w^2) given it."""
    rng = np.random.default_rng(9)
    n, d, dv, k, trials = 64, 16, 24, 4, 200_000
    s_c, s_w = np.sqrt((n - 1) / (d * dv)), np.sqrt(1 / dv + 1 / d + (n - 2) / (d * dv))
    own = 1 + s_c * rng.standard_normal(trials)
    beaten = np.zeros(trials, dtype=int)
    for _ in range(n - 1):
        beaten += s_w * rng.standard_normal(trials) > own
    sim = (beaten < k).mean()
    se = np.sqrt(sim * (1 - sim) / trials)
    assert abs(theory.recall_at(n, d, dv, k) - sim) <= 3 * se


def test_recall_at_capacity_refined_solves_its_recall():
    n = theory.recall_at_capacity_refined(32, 32, 5, tau=0.9)
    assert theory.recall_at_refined(n, 32, 32, 5) == pytest.approx(0.9, abs=1e-5)
    assert n > theory.argmax_capacity_refined(32, 32, 0.9)  # a list of 5 holds more than top-1
