"""Learned keys: Adam through a variant reaches the frame bound (T5) and, with a gain, the rank bound (T8)."""

import pytest
import torch

from lacapacity import CapacityError, theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import learned, probe


def test_linear_reaches_the_frame_bound_and_with_gain_the_rank_bound():
    n, d = 64, 16
    plain = learned.optimise(n, d, steps=100, seed=0)
    start = plain.history[0]
    assert abs(start - theory.random_keys_error(n, d)) < 0.5  # Gaussian start: about (n - 1)/d
    assert abs(plain.mse[0] - theory.frame_bound(n, d)) < 0.01 * theory.frame_bound(n, d)  # T5: n/d - 1 = 3
    assert plain.mse[0] >= theory.frame_bound(n, d) - 1e-4  # and never below it
    assert float(keys.describe(plain.keys).frame_potential_ratio[0]) < 1.01  # a tight frame, K^T K = (n/d) I
    gained = learned.optimise(n, d, steps=100, seed=0, gain=True)
    assert abs(gained.mse[0] - theory.rank_bound(n, d)) < 0.01  # T8: 1 - d/n = 0.75
    assert abs(float(gained.gain[0]) - d / n) < 0.02  # the tight frame's optimal gain d/n
    below = learned.optimise(12, d, steps=100, seed=1)
    assert below.mse[0] < 1e-4  # n <= d: orthonormal keys, error 0


def test_the_key_family_returns_unit_rows_and_follows_the_seed():
    K = keys.make("learned", 24, 8, batch=2, seed=[3, 4], steps=30)
    assert K.shape == (2, 24, 8) and K.dtype == torch.float32
    assert torch.allclose(K.norm(dim=-1), torch.ones(2, 24), atol=1e-6)
    assert torch.equal(K[1:], keys.make("learned", 24, 8, seed=4, steps=30))
    assert not keys.family("learned").iid_rows
    # the probe measures the keys the optimiser found: linear read, orthonormal values, T4 = its loss
    V = values.make("orthonormal", 24, 24, batch=2, seed=0)
    res = learned.optimise(24, 8, steps=30, seed=3, values=V[0])
    ds = probe.recall(variants.get("linear"), res.keys, res.values, checkpoints=[24])
    assert abs(float(ds.mse[0, 0]) - res.mse[0]) < 1e-4


@pytest.mark.parametrize("variant", ["delta", "decay", "softmax"])
def test_other_variants_improve_on_their_start(variant):
    res = learned.optimise(24, 8, variant=variant, steps=40, seed=2)
    assert res.mse[0] < 0.8 * res.history[0]
    assert (
        res.mse[0] >= theory.rank_bound(24, 8) - 1e-4 or variant == "softmax"
    )  # T8 bounds every d x dv state with a linear read


def test_learned_bad_input():
    with pytest.raises(CapacityError, match=r"key family 'learned' got unknown parameter\(s\) rho"):
        keys.make("learned", 8, 4, rho=0.5)
    with pytest.raises(CapacityError, match=r"learned keys: lr must lie in \(0, 10\]"):
        keys.make("learned", 8, 4, lr=0)
    with pytest.raises(CapacityError, match="unknown variant 'rnn'"):
        keys.make("learned", 8, 4, variant="rnn")
    with pytest.raises(CapacityError, match="orthonormal values need n <= dv"):
        keys.make("learned", 8, 4, dv=4)
    with pytest.raises(CapacityError, match="values must be a family name or a tensor"):
        learned.optimise(8, 4, values=torch.zeros(9, 3))
