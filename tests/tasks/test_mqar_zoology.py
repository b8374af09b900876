"""zoology's MQAR (lacapacity.mqar.zoology_task / zoology) against an independent restatement of zoology's rules.

The restatement below follows zoology's generator (HazyResearch/zoology, zoology/data/associative_recall.py,
``_mqar``) with numpy's legacy RandomState, as zoology does; the package draws with its own seeded torch generators,
so the two are compared in distribution (chi-square and Kolmogorov-Smirnov tests on many sequences), not bit by bit.
"""

import numpy as np
import pytest
from scipy import stats

from lacapacity import CapacityError, variants
from lacapacity.tasks.mqar import probe as mqar


def restated(vocab, seq_len, pairs, power_a, count, seed, random_non_queries=True):
    """zoology's rules in plain numpy: keys from [1, V/2), values from [V/2, V), distinct; queries at power-law gaps."""
    rs = np.random.RandomState(seed)
    slots = (seq_len - 2 * pairs) // 2
    p = power_a * np.arange(1, slots + 1) ** (power_a - 1)
    p = p / p.sum()
    inputs = np.zeros((count, seq_len), dtype=np.int64)
    labels = np.full((count, seq_len), -100, dtype=np.int64)
    for b in range(count):
        keys = rs.choice(np.arange(1, vocab // 2), size=pairs, replace=False)
        vals = rs.choice(np.arange(vocab // 2, vocab), size=pairs, replace=False)
        gaps = rs.choice(slots, size=pairs, replace=False, p=p)
        inputs[b, 0 : 2 * pairs : 2], inputs[b, 1 : 2 * pairs : 2] = keys, vals
        inputs[b, 2 * pairs + 2 * gaps] = keys
        labels[b, 2 * pairs + 2 * gaps] = vals
    if random_non_queries:
        zero = inputs == 0
        inputs[zero] = rs.randint(0, vocab, size=int(zero.sum()))
    return inputs, labels


def _chi2_same(a, b, bins):
    table = np.stack([np.bincount(a, minlength=bins), np.bincount(b, minlength=bins)])
    return stats.chi2_contingency(table[:, table.sum(0) > 0])[1]


@pytest.fixture(scope="module")
def both():
    args = dict(vocab=128, seq_len=64, pairs=8, power_a=0.01)
    t = mqar.zoology_task(**args, batch=6000, seed=3)
    ref_inputs, ref_labels = restated(**args, count=6000, seed=4)
    return args, t, ref_inputs, ref_labels


def test_keys_values_and_labels_follow_the_rules(both):
    args, t, _, _ = both
    V, n = args["vocab"], args["pairs"]
    keys, vals = t.keys.numpy(), t.values.numpy()
    assert keys.min() >= 1 and keys.max() < V // 2 and vals.min() >= V // 2 and vals.max() < V
    assert all(len(set(r)) == n for r in keys) and all(len(set(r)) == n for r in vals)  # distinct per sequence
    inputs, labels = t.inputs.numpy(), t.labels.numpy()
    np.testing.assert_array_equal(inputs[:, 0 : 2 * n : 2], keys)
    np.testing.assert_array_equal(inputs[:, 1 : 2 * n : 2], vals)
    rows = np.arange(len(keys))[:, None]
    np.testing.assert_array_equal(inputs[rows, t.positions.numpy()], keys)  # every key queried once, at its position
    np.testing.assert_array_equal(labels[rows, t.positions.numpy()], vals)
    assert ((labels >= 0).sum(1) == n).all() and (t.positions.numpy() % 2 == 0).all()
    # keys and values uniform over their halves (chi-square against the uniform law)
    assert stats.chisquare(np.bincount(keys.ravel() - 1, minlength=V // 2 - 1))[1] > 1e-3
    assert stats.chisquare(np.bincount(vals.ravel() - V // 2, minlength=V // 2))[1] > 1e-3


def test_query_positions_match_zoologys_power_law(both):
    args, t, ref_inputs, ref_labels = both
    n = args["pairs"]
    slots = (args["seq_len"] - 2 * n) // 2
    gaps = (t.positions.numpy() - 2 * n) // 2  # [B, n], key i's slot
    ref_pos = np.stack([np.flatnonzero(r >= 0) for r in ref_labels])  # positions, sorted
    ref_gaps_sorted = (ref_pos - 2 * n) // 2
    # key i's slot (key i is the i-th gap drawn), for the first and the last key, against the restatement
    for i in (0, n - 1):
        ref_i = np.array([np.flatnonzero(lab == inp[2 * i + 1])[0] for inp, lab in zip(ref_inputs, ref_labels)])
        assert _chi2_same(gaps[:, i], (ref_i - 2 * n) // 2, slots) > 1e-3, i
    # the ordered query slots of a sequence (the j-th smallest) and their sum
    mine_sorted = np.sort(gaps, 1)
    for j in (0, n // 2, n - 1):  # the j-th smallest query slot
        assert _chi2_same(mine_sorted[:, j], ref_gaps_sorted[:, j], slots) > 1e-3, j
    assert stats.ks_2samp(gaps.sum(1), ref_gaps_sorted.sum(1)).pvalue > 1e-3
    # the test has power: a uniform law of gaps (power_a = 1) is rejected outright
    _, uni = restated(args["vocab"], args["seq_len"], n, 1.0, 3000, seed=5)
    uni_sorted = (np.stack([np.flatnonzero(r >= 0) for r in uni]) - 2 * n) // 2
    assert _chi2_same(mine_sorted[:, 0], uni_sorted[:, 0], slots) < 1e-6


def test_filler_tokens_are_uniform_over_the_vocabulary(both):
    args, t, ref_inputs, ref_labels = both
    n, V = args["pairs"], args["vocab"]
    region = t.inputs.numpy()[:, 2 * n :][t.labels.numpy()[:, 2 * n :] < 0]
    ref_region = ref_inputs[:, 2 * n :][ref_labels[:, 2 * n :] < 0]
    assert stats.chisquare(np.bincount(region, minlength=V))[1] > 1e-3
    assert _chi2_same(region, ref_region, V) > 1e-3
    plain = mqar.zoology_task(**args, batch=4, seed=0, random_non_queries=False).inputs.numpy()
    assert (plain[:, 2 * n :] == 0).sum() == 4 * (args["seq_len"] - 3 * n)  # zeros where neither query nor pair


def test_zoology_through_memories():
    lin, delta = variants.get("linear"), variants.get("delta", beta=1.0)
    common = dict(d=32, vocab=512, seq_len=64, pairs=8, batch=16, seed=1)
    # orthonormal key embeddings (vocab = d = 128) and beta = 1: every read exact (T12)
    exact = mqar.zoology(
        delta, d=128, vocab=128, seq_len=64, pairs=8, batch=4, seed=1, keys="orthogonal", filler="skip"
    )
    assert float(exact.accuracy.min()) == 1.0 and float(exact.mse.max()) < 1e-10  # T12: orthonormal keys, beta = 1
    skip = mqar.zoology(lin, filler="skip", **common)
    write = mqar.zoology(lin, filler="write", **common)
    assert float(write.accuracy.mean()) <= float(skip.accuracy.mean())  # filler only adds interference
    assert float(write.mse.mean()) > float(skip.mse.mean())
    assert write.attrs["task"] == "zoology multiquery_ar" and write.attrs["power_a"] == 0.01
    with pytest.raises(CapacityError, match="even seq_len"):
        mqar.zoology_task(vocab=128, seq_len=63, pairs=4)
    with pytest.raises(CapacityError, match="4 pairs <= seq_len"):
        mqar.zoology_task(vocab=128, seq_len=64, pairs=17)
    with pytest.raises(CapacityError, match="filler"):
        mqar.zoology(lin, d=16, filler="maybe")
