"""Key and value families against brute-force properties, and describe() against a double loop."""

import itertools
import math

import numpy as np
import pytest
import torch

from lacapacity import CapacityError
from lacapacity.inputs import keys, values


@pytest.mark.parametrize(
    "family,params",
    [
        ("gaussian", {}),
        ("orthogonal", {}),
        ("correlated", {"rho": 0.4}),
        ("anisotropic", {"rank": 5.0}),
        ("simplex", {}),
    ],
)
def test_shape_dtype_unit_rows_and_seed(family, params):
    n, d = (9, 8) if family == "simplex" else (40, 16)
    K = keys.make(family, n, d, batch=3, seed=7, **params)
    assert K.shape == (3, n, d) and K.dtype == torch.float32 and K.device.type == "cpu"
    assert torch.allclose(K.norm(dim=-1), torch.ones(3, n), atol=1e-6)
    assert torch.equal(K, keys.make(family, n, d, batch=3, seed=7, **params))
    assert not torch.equal(K, keys.make(family, n, d, batch=3, seed=8, **params))


def test_seed_list_gives_one_item_per_seed():
    K = keys.make("gaussian", 20, 8, seed=[3, 5, 9], batch=3)
    for b, s in enumerate([3, 5, 9]):
        assert torch.equal(K[b], keys.make("gaussian", 20, 8, seed=s)[0])
    with pytest.raises(CapacityError, match="seeds"):
        keys.make("gaussian", 20, 8, seed=[1, 2], batch=3)


def test_keys_and_values_with_the_same_seed_differ():
    assert not torch.equal(keys.make("gaussian", 10, 8, seed=0), values.make("gaussian", 10, 8, seed=0))


def test_orthogonal_is_orthonormal_up_to_d():
    K = keys.make("orthogonal", 12, 20, batch=2, seed=1).double()
    assert torch.allclose(K @ K.transpose(1, 2), torch.eye(12, dtype=torch.float64), atol=1e-6)


@pytest.mark.parametrize("n,d", [(33, 32), (96, 32), (100, 17), (65, 64), (7, 3)])
def test_orthogonal_past_d_is_a_unit_norm_tight_frame(n, d):
    K = keys.make("orthogonal", n, d, batch=3, seed=2).double()
    frame = K.transpose(1, 2) @ K  # [B, d, d]
    assert torch.allclose(frame, (n / d) * torch.eye(d, dtype=torch.float64), atol=1e-5 * n / d)
    # T5 met: ||K^T K||_F^2 = n^2 / d
    assert torch.allclose((frame**2).sum((-2, -1)), torch.full((3,), n * n / d, dtype=torch.float64), rtol=1e-5)


def test_simplex_is_equiangular_at_minus_one_over_d():
    d = 6
    K = keys.make("simplex", d + 1, d, batch=2, seed=0).double()
    G = K @ K.transpose(1, 2)
    off = G[:, ~torch.eye(d + 1, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, -1.0 / d), atol=1e-6)
    with pytest.raises(CapacityError, match="n <= d \\+ 1"):
        keys.make("simplex", d + 2, d)


def test_correlated_mean_inner_product_is_rho():
    for rho in (0.0, 0.3, 0.8):
        K = keys.make("correlated", 64, 32, batch=16, seed=3, rho=rho).double()
        G = K @ K.transpose(1, 2)
        mean = G[:, ~torch.eye(64, dtype=torch.bool)].mean().item()
        assert abs(mean - rho) < 0.02, (rho, mean)


def test_anisotropic_rank_sets_the_spectrum_and_lowers_effective_rank():
    from lacapacity.inputs.keys import _spectrum_for_rank

    for r in (1.0, 3.5, 10.0, 32.0):
        lam = _spectrum_for_rank(r, 32)
        assert abs(lam.sum() ** 2 / (lam**2).sum() - r) < 1e-6
    eff = [
        float(keys.describe(keys.make("anisotropic", 400, 32, seed=0, rank=r)).effective_rank[0])
        for r in (2.0, 8.0, 32.0)
    ]
    assert eff[0] < eff[1] < eff[2]
    K = keys.make("anisotropic", 50, 4, seed=1, spectrum=[1.0, 0.0, 0.0, 0.0]).double()
    assert torch.allclose(
        (K @ K.transpose(1, 2)).abs(), torch.ones(1, 50, 50, dtype=torch.float64), atol=1e-6
    )  # rank one


def _describe_brute(K: np.ndarray, d: int):
    n = K.shape[0]
    K = K / np.linalg.norm(K, axis=1, keepdims=True)
    pairs = [abs(float(K[i] @ K[j])) for i, j in itertools.permutations(range(n), 2)]
    fp = sum(float(K[i] @ K[j]) ** 2 for i in range(n) for j in range(n))
    return np.mean(np.square(pairs)), max(pairs), fp / (n * n / d), n * n / fp


def test_describe_matches_a_double_loop():
    K = torch.randn(2, 30, 7, generator=torch.Generator().manual_seed(0)) * 3
    ds = keys.describe(K, block=8)
    for b in range(2):
        msc, mc, fpr, er = _describe_brute(K[b].double().numpy(), 7)
        assert ds.mean_sq_coherence[b] == pytest.approx(msc, rel=1e-9)
        assert ds.max_coherence[b] == pytest.approx(mc, rel=1e-9)
        assert ds.frame_potential_ratio[b] == pytest.approx(fpr, rel=1e-9)
        assert ds.effective_rank[b] == pytest.approx(er, rel=1e-9)
    assert float(ds.welch_bound) == pytest.approx(math.sqrt((30 - 7) / (7 * 29)))
    assert set(ds.data_vars) == {
        "mean_sq_coherence",
        "max_coherence",
        "welch_bound",
        "frame_potential_ratio",
        "effective_rank",
    }


def test_values_families():
    V = values.make("orthonormal", 10, 16, batch=2, seed=0).double()
    assert torch.allclose(V @ V.transpose(1, 2), torch.eye(10, dtype=torch.float64), atol=1e-6)
    V = values.make("gaussian", 10, 16, batch=2, seed=0)
    assert V.shape == (2, 10, 16) and torch.allclose(V.norm(dim=-1), torch.ones(2, 10), atol=1e-6)
    with pytest.raises(CapacityError, match="n <= dv"):
        values.make("orthonormal", 17, 16)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: keys.make("nope", 4, 4), "unknown key family 'nope'; known: anisotropic, correlated, gaussian"),
        (lambda: keys.make("gaussian", 0, 4), "n must be a whole number >= 1"),
        (lambda: keys.make("gaussian", 4, -2), "d must be a whole number >= 1"),
        (lambda: keys.make("gaussian", 4.5, 4), "n must be a whole number"),
        (lambda: keys.make("correlated", 4, 4, rho=1.0), r"rho must lie in \[0, 1\)"),
        (lambda: keys.make("correlated", 4, 4, rho=-0.1), r"rho must lie in \[0, 1\)"),
        (lambda: keys.make("correlated", 4, 4), "needs rho"),
        (lambda: keys.make("gaussian", 4, 4, rho=0.5), "unknown parameter"),
        (lambda: keys.make("anisotropic", 4, 4), "exactly one of rank"),
        (lambda: keys.make("anisotropic", 4, 4, rank=9), r"rank must lie in \[1, 4\]"),
        (lambda: keys.make("anisotropic", 4, 3, spectrum=[1, 2]), "spectrum must be 3"),
        (lambda: keys.make("gaussian", 4, 4, seed=-1), "seed must be"),
        (
            lambda: (
                keys.make("gaussian", 4, 4, device="cuda:0")
                if not torch.cuda.is_available()
                else keys.make("nope", 1, 1)
            ),
            "cuda|unknown",
        ),
        (lambda: values.make("bogus", 4, 4), "unknown value family 'bogus'; known: gaussian, orthonormal"),
        (lambda: keys.describe(torch.zeros(3, 4)), "nonzero"),
        (lambda: keys.describe(torch.full((3, 4), float("nan"))), "NaN or inf"),
        (lambda: keys.describe(np.ones((3, 4))), "torch.Tensor"),
    ],
)
def test_bad_input_raises_one_clear_error(call, match):
    with pytest.raises(CapacityError, match=match):
        call()
