"""The probe's queries= sampling: a fixed seeded subset of the stored pairs, unbiased, with calibrated errors."""

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import decode, probe


def test_sampled_means_are_unbiased_and_their_errors_calibrated():
    n, d, B = 600, 16, 4
    K = keys.make("gaussian", n, d, batch=B, seed=0)
    V = values.make("gaussian", n, d, batch=B, seed=0)
    full = probe.recall("linear", K, V, checkpoints=[50, n])
    z = []
    means = []
    for qs in range(40):
        ds = probe.recall("linear", K, V, checkpoints=[50, n], queries=60, query_seed=qs)
        assert np.array_equal(ds.mse.values[0], full.mse.values[0]) and (ds.mse_se.values[0] == 0).all()  # 50 <= 60
        means.append(ds.mse.values[1])
        z.append((ds.mse.values[1] - full.mse.values[1]) / ds.mse_se.values[1])
    z, means = np.array(z), np.array(means)
    assert abs(float(z.mean())) < 3 / np.sqrt(z.size) + 0.05  # unbiased
    assert 0.8 < float(z.std()) < 1.2  # the standard error is the spread of the estimate
    np.testing.assert_allclose(means.mean(0), full.mse.values[1], rtol=0.02)


def test_sampled_recall_is_the_exact_decode_of_those_pairs():
    n, d, B = 300, 8, 3
    K = keys.make("gaussian", n, d, batch=B, seed=1)
    V = values.make("gaussian", n, d, batch=B, seed=1)
    mem = variants.get("linear")
    S = mem.write(mem.init_state(B, d, d), K, V)
    exact = decode.argmax_correct(mem.read(S, K), V)  # [B, n] over every stored pair
    idx = probe._sample(n, 50, 0, "cpu")
    got = decode.argmax_correct(mem.read(S, K[:, idx]), V, own=idx)
    assert torch.equal(got, exact[:, idx])
    ds = probe.recall(mem, K, V, checkpoints=[n], queries=50)
    np.testing.assert_allclose(ds.recall.values[0], exact[:, idx].double().mean(-1).numpy(), atol=1e-7)


def test_queries_are_the_same_for_every_batch_item_and_checked():
    assert torch.equal(probe._sample(100, 10, 3, "cpu"), probe._sample(100, 10, 3, "cpu"))
    assert not torch.equal(probe._sample(100, 10, 3, "cpu"), probe._sample(100, 10, 4, "cpu"))
    K = keys.make("gaussian", 20, 8, seed=0)
    V = values.make("gaussian", 20, 8, seed=0)
    with pytest.raises(CapacityError, match="queries must be"):
        probe.recall("linear", K, V, queries=0)
    with pytest.raises(CapacityError, match="does not combine with queries"):
        probe.recall("linear", K, V, queries=5, per_query=True)
