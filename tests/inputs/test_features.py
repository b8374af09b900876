"""Feature maps: dimensions, formulas written out here, the positivity of elu1, and the kernels they estimate."""

import pytest
import torch

from lacapacity import CapacityError
from lacapacity.inputs import features, keys


@pytest.mark.parametrize("d", [1, 3, 16, 64])
def test_feature_dimensions(d):
    x = torch.randn(2, 5, d)
    want = {
        "identity": d,
        "elu1": d,
        "relu": d,
        "dpfp": 2 * d * 2,
        "taylor2": 1 + d + d * (d + 1) // 2,
        "performer": 48,
    }
    params = {"dpfp": {"nu": 2}, "performer": {"m": 48}}
    for name, D in want.items():
        if name == "dpfp" and 2 * d - 1 < 2:
            continue  # nu = 2 needs 2 d - 1 >= 2
        phi = features.get(name, **params.get(name, {}))
        assert phi.feature_dim(d) == D, name
        out = phi(x)
        assert out.shape == (2, 5, D) and out.dtype == torch.float32, name


def test_elu1_features_are_positive_so_every_pair_interferes():
    K = keys.make("gaussian", 200, 32, batch=2, seed=0)
    phi = features.get("elu1")(K)  # [2, 200, 32]
    assert bool((phi > 0).all())
    G = phi @ phi.transpose(1, 2)  # phi(k_i) . phi(k_j) for every pair
    assert bool((G > 0).all())
    # while the raw keys have about half their pairs at negative inner product
    raw = K @ K.transpose(1, 2)
    assert float((raw < 0).double().mean()) > 0.4


def test_elu1_and_relu_formulas():
    x = torch.linspace(-3, 3, 61).reshape(1, 61)
    assert torch.allclose(features.get("elu1")(x), torch.where(x > 0, x + 1, torch.exp(x)))
    assert torch.equal(features.get("relu")(x), torch.clamp(x, min=0))
    assert torch.equal(features.get("identity")(x), x)


def test_dpfp_against_the_paper_formula():
    d, nu = 5, 3
    x = torch.randn(4, d, dtype=torch.float64)
    out = features.get("dpfp", nu=nu)(x).double()
    for b in range(4):
        r = [max(float(x[b, i]), 0.0) for i in range(d)] + [max(-float(x[b, i]), 0.0) for i in range(d)]  # 2d
        want = [r[i] * r[(i - j) % (2 * d)] for j in range(1, nu + 1) for i in range(2 * d)]
        assert torch.allclose(out[b], torch.tensor(want, dtype=torch.float64), atol=1e-6)
    with pytest.raises(CapacityError, match="dpfp: nu must be at most 2 d - 1 = 9"):
        features.get("dpfp", nu=10)(x.float())


def test_taylor2_inner_product_is_the_second_order_taylor_series():
    q, k = torch.randn(6, 12, dtype=torch.float64), torch.randn(6, 12, dtype=torch.float64)
    phi = features.get("taylor2")
    got = (phi(q).double() * phi(k).double()).sum(-1)
    s = (q * k).sum(-1)
    assert torch.allclose(got, 1 + s + s * s / 2, rtol=1e-5)


def test_performer_features_are_positive_and_estimate_exp():
    d, m = 16, 4096
    K = keys.make("gaussian", 20, d, seed=1)[0] * 0.8  # [20, d], norm 0.8
    for orthogonal in (True, False):
        phi = features.get("performer", m=m, seed=3, orthogonal=orthogonal)
        f = phi(K).double()
        assert bool((f > 0).all())
        est = f @ f.T
        want = torch.exp(K.double() @ K.double().T)
        # unbiased Monte Carlo estimate: measured mean relative error about 0.02 at m = 4096
        assert float(((est - want) / want).abs().mean()) < 0.05
    a = features.get("performer", m=64, seed=3)(K)
    assert torch.equal(a, features.get("performer", m=64, seed=3)(K))
    assert not torch.equal(a, features.get("performer", m=64, seed=4)(K))


def test_performer_orthogonal_blocks():
    W = features.get("performer", m=40, seed=0).projection(16)  # [40, 16]: blocks of 16 orthogonal rows
    block = W[:16].double()
    G = block @ block.T
    assert torch.allclose(G - torch.diag(torch.diag(G)), torch.zeros(16, 16, dtype=torch.float64), atol=1e-4)


def test_positive_kernel_flags():
    flags = {name: features.get(name).positive_kernel for name in features.available()}
    assert flags == {"identity": False, "elu1": True, "relu": True, "dpfp": True, "taylor2": True, "performer": True}


def test_bad_feature_input():
    with pytest.raises(
        CapacityError, match=r"unknown feature map 'softplus'; known: dpfp, elu1, identity, performer, relu, taylor2"
    ):
        features.get("softplus")
    with pytest.raises(CapacityError, match=r"feature map 'taylor2' got unknown parameter\(s\) m; allowed: none"):
        features.get("taylor2", m=3)
    with pytest.raises(CapacityError, match="performer: m must be a whole number >= 1"):
        features.get("performer", m=0)
    with pytest.raises(CapacityError, match="seed must be a whole number >= 0"):
        features.get("performer", seed=-1)
    with pytest.raises(CapacityError, match="contains NaN or inf"):
        features.get("elu1")(torch.tensor([[float("nan")]]))
