"""MQAR without training (lacapacity.mqar): the drawn task's structure, a brute-force re-implementation for the
linear memory, the delta rule's exact recall under overwrites, softmax's averaging of duplicates, T10 over a
vocabulary, the grid, the figure, and the errors."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
import torch

from lacapacity import theory, variants
from lacapacity.errors import CapacityError
from lacapacity.tasks.mqar import probe as mqar
from lacapacity.tasks.mqar.figures import mqar_figure


def brute_force_linear(t: mqar.Task) -> dict[str, np.ndarray]:
    """The MQAR metrics of the additive memory, one token and one query at a time in float64 Python loops.

    Only the drawn sequence and embeddings come from the task; the latest and stale values are found by
    replaying the writes, the state is summed outer product by outer product, the argmax scans the vocabulary.
    """
    B, vocab = t.key_emb.shape[:2]
    out = {m: np.zeros(B) for m in mqar.METRICS}
    for b in range(B):
        K, V = t.key_emb[b].double(), t.value_emb[b].double()
        S = torch.zeros(K.shape[1], V.shape[1], dtype=torch.float64)
        latest, earlier = {}, {}
        for k, v in zip(t.keys[b].tolist(), t.values[b].tolist()):
            S += torch.outer(K[k], V[v])  # S += k^T v
            if k in latest:
                earlier[k] = latest[k]
            latest[k] = v
        right = wrong = stale = over = over_right = 0
        sq = 0.0
        for k in t.queries[b].tolist():
            r = K[k] @ S  # read q S
            scores = [float(r @ V[j]) for j in range(vocab)]
            answer = max(range(vocab), key=lambda j: scores[j])
            ok = answer == latest[k]
            right += ok
            wrong += not ok
            stale += (not ok) and answer == earlier.get(k)
            over += k in earlier
            over_right += ok and k in earlier
            sq += float(((r - V[latest[k]]) ** 2).sum())
        Q = len(t.queries[b])
        out["accuracy"][b] = right / Q
        out["mse"][b] = sq / Q
        out["stale"][b] = stale / wrong if wrong else math.nan
        out["overwritten_accuracy"][b] = over_right / over if over else math.nan
    return out


CASES = [
    {"vocab": 48, "pairs": 40, "d": 12, "dv": 8},  # no overwrites, past d: crosstalk errors
    {"vocab": 48, "pairs": 30, "d": 16, "dv": 8, "overwrite": 0.5, "distractors": 7, "queries": 20},
    {"vocab": 40, "pairs": 24, "d": 24, "keys": "orthogonal", "overwrite": 1.0},  # tight frame keys (vocab > d)
    {
        "vocab": 30,
        "pairs": 20,
        "d": 8,
        "keys": "correlated",
        "key_params": {"rho": 0.3},
        "overwrite": 0.25,
        "distractors": 5,
    },
]


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_linear_memory_matches_brute_force(case):
    t = mqar.task(batch=3, seed=5, **case)
    ds = mqar.mqar(variants.get("linear"), batch=3, seed=5, **case)
    want = brute_force_linear(t)
    np.testing.assert_array_equal(ds.accuracy.values[0], want["accuracy"])
    np.testing.assert_allclose(ds.mse.values[0], want["mse"], rtol=1e-4)
    np.testing.assert_array_equal(ds.stale.values[0], want["stale"])
    np.testing.assert_array_equal(ds.overwritten_accuracy.values[0], want["overwritten_accuracy"])
    assert 0 < want["accuracy"].min() and want["accuracy"].max() <= 1


def test_task_structure():
    vocab, p, ow, D = 50, 20, 0.4, 9
    m = round(ow * p)
    t = mqar.task(vocab=vocab, pairs=p, d=8, dv=6, overwrite=ow, distractors=D, batch=4, seed=1)
    assert t.keys.shape == t.values.shape == (4, p + m + D)
    assert t.key_emb.shape == (4, vocab, 8) and t.value_emb.shape == (4, vocab, 6)
    for b in range(4):
        ks, vs, queried = t.keys[b].tolist(), t.values[b].tolist(), t.queries[b].tolist()
        pairs = [(k, v) for k, v in zip(ks, vs) if k in set(queried)]
        assert len(set(queried)) == p and [k for k, _ in pairs[:p]] == queried  # p distinct keys, then overwrites
        again = pairs[p:]
        assert len(again) == m and len({k for k, _ in again}) == m
        first = dict(pairs[:p])
        assert all(v != first[k] for k, v in again)  # a new value token
        assert len([k for k in ks if k not in set(queried)]) == D  # distractors: tokens outside the pairs
        latest = dict(pairs)
        for i, k in enumerate(queried):
            assert t.target[b, i] == latest[k]
            assert t.stale[b, i] == (first[k] if k in dict(again) else -1)
    # a subsample of queries reads a subset of the same keys (the queries are drawn last)
    sub = mqar.task(vocab=vocab, pairs=p, d=8, dv=6, overwrite=ow, distractors=D, queries=7, batch=4, seed=1)
    assert torch.equal(sub.keys, t.keys) and torch.equal(sub.values, t.values)
    for b in range(4):
        full = dict(zip(t.queries[b].tolist(), t.target[b].tolist()))
        q = sub.queries[b].tolist()
        assert len(set(q)) == 7 and all(full[k] == v for k, v in zip(q, sub.target[b].tolist()))


def test_distractors_never_queried_nor_pair_keys():
    t = mqar.task(vocab=40, pairs=25, d=8, distractors=30, batch=3, seed=2)
    for b in range(3):
        ks = t.keys[b].tolist()
        pair_keys = set(t.queries[b].tolist())
        assert len(pair_keys) == 25 and len(ks) == 55
        others = [k for k in ks if k not in pair_keys]
        assert len(others) == 30  # every distractor uses a token outside the written pairs
        first_pos = [i for i, k in enumerate(ks) if k not in pair_keys]
        assert first_pos != list(range(25, 55))  # interleaved, not appended
        assert [k for k in ks if k in pair_keys] == t.queries[b].tolist()  # pairs keep their order


def test_seeds_reproducible_and_per_item():
    kw = {"vocab": 32, "pairs": 16, "d": 8, "overwrite": 0.5, "distractors": 4, "queries": 10}
    a = mqar.task(batch=2, seed=7, **kw)
    b = mqar.task(batch=2, seed=7, **kw)
    c = mqar.task(batch=2, seed=8, **kw)
    assert torch.equal(a.keys, b.keys) and torch.equal(a.key_emb, b.key_emb)
    assert not torch.equal(a.keys, c.keys)
    items = mqar.task(batch=3, seed=[4, 9, 4], **kw)
    for i, s in enumerate([4, 9, 4]):
        one = mqar.task(seed=s, **kw)
        for f in ("key_emb", "value_emb", "keys", "values", "queries", "target", "stale"):
            assert torch.equal(getattr(items, f)[i], getattr(one, f)[0]), f
    ds = mqar.mqar(variants.get("linear"), batch=3, seed=[4, 9, 4], **kw)
    assert ds.accuracy.values[0, 0] == ds.accuracy.values[0, 2]


def test_list_of_pairs_in_one_pass_equals_separate_calls():
    pairs = [4, 12, 32, 64]
    mem = variants.get("delta", beta=0.5)
    ds = mqar.mqar(mem, vocab=96, pairs=pairs, d=16, dv=12, batch=2, seed=3)
    assert ds.accuracy.dims == ("pairs", "batch") and ds.pairs.values.tolist() == pairs
    for p in pairs:
        one = mqar.mqar(mem, vocab=96, pairs=p, d=16, dv=12, batch=2, seed=3)
        np.testing.assert_array_equal(ds.accuracy.sel(pairs=p).values, one.accuracy.values[0])
        np.testing.assert_allclose(ds.mse.sel(pairs=p).values, one.mse.values[0], rtol=1e-5)
    assert ds.accuracy.sel(pairs=4).min() == 1 and ds.accuracy.sel(pairs=64).max() < 1
    # with overwrites each pairs value is drawn separately; results still equal separate calls
    ow = mqar.mqar(mem, vocab=96, pairs=[8, 24], d=16, overwrite=0.5, batch=2, seed=3)
    one = mqar.mqar(mem, vocab=96, pairs=24, d=16, overwrite=0.5, batch=2, seed=3)
    np.testing.assert_array_equal(ow.accuracy.sel(pairs=24).values, one.accuracy.values[0])
    assert ow.overwrites.values.tolist() == [4, 12] and ow.writes.values.tolist() == [12, 36]


def test_delta_rule_recalls_exactly_with_overwrites_linear_recalls_stale():
    kw = {"vocab": 32, "pairs": 32, "d": 32, "keys": "orthogonal", "overwrite": 0.5, "batch": 4, "seed": 0}
    delta = mqar.mqar(variants.get("delta", beta=1.0), **kw)
    assert (delta.accuracy == 1).all() and (delta.overwritten_accuracy == 1).all()
    assert float(delta.mse.max()) < 1e-8  # T12: each key reads back its latest value
    assert np.isnan(delta.stale).all()  # no wrong answers
    # distractors (unqueried vocabulary keys, orthogonal to the queried ones) change nothing
    dis = mqar.mqar(variants.get("delta", beta=1.0), **{**kw, "pairs": 20, "distractors": 40})
    assert (dis.accuracy == 1).all()
    lin = mqar.mqar(variants.get("linear"), **kw)
    assert (lin.accuracy < 1).all()  # reads v_old + v_new for each of the 16 overwritten keys
    assert (lin.stale == 1).all()  # every wrong answer is the overwritten value
    assert (lin.accuracy == 0.5 + 0.5 * lin.overwritten_accuracy).all()  # keys written once read back exactly
    # beta = 0.5: a key written once reads v / 2, an overwritten one v_old / 4 + v_new / 2, so the argmax is right,
    # and the mean error is (16 * 1/4 + sum over the 16 overwritten keys of ||v_old / 4 - v_new / 2||^2) / 32
    half = mqar.mqar(variants.get("delta", beta=0.5), **kw)
    assert (half.accuracy == 1).all()
    t = mqar.task(**kw)
    old = torch.take_along_dim(t.value_emb, t.stale.clamp_min(0)[..., None], 1)  # [B, Q, dv]
    new = torch.take_along_dim(t.value_emb, t.target[..., None], 1)
    err = torch.where(t.stale[..., None] >= 0, old / 4 - new / 2, -new / 2)
    np.testing.assert_allclose(half.mse.values[0], (err**2).sum(-1).mean(-1).double().numpy(), rtol=1e-4)


def test_softmax_averages_duplicate_keys():
    kw = {"vocab": 32, "pairs": 32, "d": 32, "keys": "orthogonal", "overwrite": 0.5, "batch": 4, "seed": 0}
    mem = variants.get("softmax", scale=60.0)
    soft = mqar.mqar(mem, **kw)
    lin = mqar.mqar(variants.get("linear"), **kw)
    # orthonormal keys: softmax reads (v_old + v_new) / 2 for an overwritten key, the linear memory v_old + v_new
    t = mqar.task(**kw)
    k, v, q = t.embed()
    r = mem.read(mem.write(mem.init_state(4, 32, 32), k, v), q)
    old = torch.take_along_dim(t.value_emb, t.stale.clamp_min(0)[..., None], 1)  # [B, Q, dv]
    new = torch.take_along_dim(t.value_emb, t.target[..., None], 1)
    want = torch.where(t.stale[..., None] >= 0, (old + new) / 2, new)
    assert float((r - want).abs().max()) < 1e-5
    np.testing.assert_allclose(lin.mse.values, 0.5, rtol=1e-5)  # error ||v_old||^2 = 1 on 16 of the 32 keys
    # v_old and v_new then score alike (an exact tie up to rounding): about half the overwritten keys come back stale
    assert (soft.stale == 1).all() and (soft.accuracy < 1).all()
    assert (soft.accuracy == 0.5 + 0.5 * soft.overwritten_accuracy).all()
    assert 0.25 < float(soft.overwritten_accuracy.mean()) < 0.75
    free = mqar.mqar(mem, **{**kw, "overwrite": 0.0})
    assert (free.accuracy == 1).all()


def test_vocab_argmax_recall():
    n = np.array([2, 10, 40, 100])
    np.testing.assert_allclose(theory.vocab_argmax_recall(n, 32, 16, n), theory.argmax_recall(n, 32, 16), rtol=1e-9)
    by_vocab = theory.vocab_argmax_recall(40, 32, 16, np.array([40, 100, 1000, 10000]))
    assert np.all(np.diff(by_vocab) < 0)  # more wrong candidates, lower accuracy
    # Monte Carlo of the model itself: Gaussian scores with the stated spreads, independent
    g = torch.Generator().manual_seed(0)
    nn, d, dv, vocab = 40, 32, 16, 200
    sc, sw, su = (
        math.sqrt((nn - 1) / (d * dv)),
        math.sqrt(1 / dv + 1 / d + (nn - 2) / (d * dv)),
        math.sqrt((1 + (nn - 1) / d) / dv),
    )
    trials = 100_000
    own = 1 + sc * torch.randn(trials, generator=g, dtype=torch.float64)
    best = torch.maximum(
        (sw * torch.randn(trials, nn - 1, generator=g, dtype=torch.float64)).amax(1),
        (su * torch.randn(trials, vocab - nn, generator=g, dtype=torch.float64)).amax(1),
    )
    assert abs(float((own > best).double().mean()) - theory.vocab_argmax_recall(nn, d, dv, vocab)) < 0.005
    # measured: the additive memory with Gaussian keys runs above the (conservative) prediction, by at most ~0.15
    pairs = [16, 32, 64, 128]
    ds = mqar.mqar(variants.get("linear"), vocab=256, pairs=pairs, d=32, batch=16, seed=0)
    gap = ds.accuracy.mean("batch").values - theory.vocab_argmax_recall(np.array(pairs), 32, 32, 256)
    assert np.all(gap > -0.02) and np.all(gap < 0.15), gap
    with pytest.raises(CapacityError, match="vocab must be >= n"):
        theory.vocab_argmax_recall(10, 8, 8, 5)


def test_figure(tmp_path):
    from lacapacity import studies, sweep

    study = studies.get("mqar").with_overrides(
        ["variant=linear,delta(beta=1),softmax(scale=16)", "d=16", "n=8,16,32,64", "seed=0,1", "vocab=96"]
        + ["overwrite=0,0.5"]
    )
    ds = sweep.run(study, out=tmp_path, device="cpu", progress=False).dataset
    fig = mqar_figure(ds)
    left, right = fig.axes[:2]
    assert left.get_xscale() == "log" and right.get_xscale() == "linear"
    th = [ln for ln in left.get_lines() if ln.get_gid() == "theory:T10"]
    assert len(th) == 1
    x, y = th[0].get_data()
    np.testing.assert_allclose(y, theory.vocab_argmax_recall(x, 16, 16, 96), rtol=1e-12)
    assert not [ln for ln in right.get_lines() if (ln.get_gid() or "").startswith("theory:")]
    for lab in ("linear", "delta", "softmax(scale=16.0)"):  # the sweep's labels leave out default parameters
        for ax in (left, right):
            found = [ln for ln in ax.get_lines() if ln.get_gid() == f"measured:{lab}"]
            assert len(found) == 1
        _, ys = next(ln for ln in right.get_lines() if ln.get_gid() == f"measured:{lab}").get_data()
        np.testing.assert_allclose(ys, ds.accuracy.sel(variant=lab, n=8).squeeze().mean("seed").values)
    # no additive memory, or keys that are not random: no T10 line
    fig = mqar_figure(ds.sel(variant=["delta"]))
    assert not [ln for ln in fig.axes[0].get_lines() if ln.get_gid() == "theory:T10"]
    with pytest.raises(CapacityError, match="missing variable 'accuracy'"):
        mqar_figure(ds[["mse"]])
    with pytest.raises(CapacityError, match="was not measured"):
        mqar_figure(ds, pairs=12)
    with pytest.raises(CapacityError, match="pairs must be a whole number"):
        mqar_figure(ds, pairs="many")
    with pytest.raises(CapacityError, match="missing dimensions 'variant', 'n', 'overwrite'"):
        mqar_figure(mqar.mqar(variants.get("linear"), vocab=16, pairs=[4, 8], d=8))


def _lin():
    return variants.get("linear")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"vocab": 8, "pairs": 9, "d": 4}, "pairs must be at most vocab = 8"),
        ({"vocab": 8, "pairs": [2, 9], "d": 4}, "pairs must be at most vocab"),
        ({"vocab": 8, "pairs": [], "d": 4}, "non-empty list"),
        ({"vocab": 8, "pairs": 0, "d": 4}, "pairs must be a whole number >= 1"),
        ({"vocab": 1, "pairs": 1, "d": 4}, "vocab must be a whole number >= 2"),
        ({"vocab": 8, "pairs": 4, "d": 4, "overwrite": 1.5}, r"overwrite must lie in \[0, 1\]"),
        ({"vocab": 8, "pairs": 4, "d": 4, "overwrite": -0.1}, r"overwrite must lie in \[0, 1\]"),
        ({"vocab": 8, "pairs": 4, "d": 4, "distractors": -1}, "distractors must be a whole number >= 0"),
        ({"vocab": 8, "pairs": 8, "d": 4, "distractors": 2}, "need pairs < vocab = 8"),
        ({"vocab": 8, "pairs": [4, 6], "d": 4, "queries": 5}, "queries must be at most pairs = 4"),
        ({"vocab": 8, "pairs": 4, "d": 0}, "d must be a whole number >= 1"),
        ({"vocab": 8, "pairs": 4, "d": 4, "keys": "nope"}, "unknown key family 'nope'"),
        ({"vocab": 8, "pairs": 4, "d": 4, "keys": "correlated", "key_params": 0.5}, "key_params must be a dict"),
        ({"vocab": 8, "pairs": 4, "d": 4, "seed": -1}, "seed must be a whole number >= 0"),
    ],
)
def test_errors(kwargs, match):
    with pytest.raises(CapacityError, match=match):
        mqar.mqar(_lin(), **kwargs)


def test_errors_variant_and_task():
    with pytest.raises(CapacityError, match="has no method init_state"):
        mqar.mqar(object(), vocab=8, pairs=4, d=4)
    with pytest.raises(CapacityError, match="task draws one sequence"):
        mqar.task(vocab=8, pairs=[2, 4], d=4)


def test_docstring_examples_run():
    result = doctest.testmod(mqar, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_the_mqar_study_runs_through_the_sweep_and_equals_direct_calls(tmp_path):
    from lacapacity import plots, studies, sweep

    study = studies.get("mqar").with_overrides(
        ["variant=linear,delta(beta=1.0)", "d=16", "n=8,16", "seed=0,1", "vocab=64", "overwrite=0,0.5"]
    )
    ds = sweep.run(study, out=tmp_path, device="cpu", progress=False).dataset
    assert dict(ds.accuracy.sizes) == {"variant": 2, "key_family": 1, "d": 1, "n": 2, "overwrite": 2, "seed": 2}
    direct = mqar.mqar(
        variants.get("delta", beta=1.0), vocab=64, pairs=[8, 16], d=16, overwrite=0.5, batch=2, seed=[0, 1]
    )
    got = ds.accuracy.sel(variant="delta", key_family="gaussian", d=16, overwrite=0.5).transpose("n", "seed").values
    np.testing.assert_array_equal(got, direct.accuracy.transpose("pairs", "batch").values)
    assert plots.choose(ds) == ["mqar"] and [p.name for p in plots.render(ds, out=tmp_path / "f")] == [
        "mqar_mqar.png",
        "mqar_mqar.pdf",
    ]
    with pytest.raises(CapacityError, match="too many"):
        sweep.run(studies.get("mqar").with_overrides(["n=128", "vocab=64"]), out=tmp_path, progress=False)
