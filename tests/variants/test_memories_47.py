"""Issue 47's memories that are held to fla-core 0.6.0's plain-torch references (relative RMS error < 1e-5 in
float32, fla's own metric): Gated DeltaProduct (``delta_product`` with a gate), Momentum DeltaNet (which ``titans``
is, reparameterised), and their reductions."""

import math
from types import SimpleNamespace

import pytest
import torch
from memory_support import one_head as _h  # fla's [B, T, H=1, ...]
from memory_support import pairs, rel_rms, write_in_chunks

from lacapacity import check_variant, variants
from lacapacity.variants.delta_product import rotations


@pytest.fixture(scope="module")
def fla() -> SimpleNamespace:
    """fla's references, imported by the first test that needs them (importing fla.ops costs seconds)."""
    from fla.ops.gated_delta_product.naive import naive_recurrent_gated_delta_product
    from fla.ops.momentum_delta_rule.naive import recurrent_momentum_delta_rule_ref

    return SimpleNamespace(
        gated_delta_product=naive_recurrent_gated_delta_product, momentum=recurrent_momentum_delta_rule_ref
    )


def _inputs(B=2, T=40, d=12, dv=8, seed=0):
    K, V = pairs(T, d, dv, B=B, seed=seed)
    return K, V


def _write(mem, K, V, split=None):
    return write_in_chunks(mem, K, V, (0,) if split is None else (0, split))


@pytest.mark.requires_fla
@pytest.mark.parametrize("steps", [1, 2, 3])
def test_gated_delta_product_matches_fla(steps, fla):
    K, V = _inputs(seed=2)
    B, T, d = K.shape
    mem = variants.get("delta_product", steps=steps, alpha=("uniform", 0.8, 1.0), beta=("uniform", 0.2, 1.5), seed=4)
    ours = _write(mem, K, V, split=13).matrix
    R = rotations(steps, d, mem.seed).float()
    ks = torch.nn.functional.normalize(torch.einsum("btd,sde->btse", K, R), dim=-1).reshape(B, T * steps, d)
    vs = V[:, :, None].expand(B, T, steps, V.shape[2]).reshape(B, T * steps, V.shape[2])
    beta = mem._betas(B, 0, T, "cpu").reshape(B, T * steps)
    alpha = mem._values("alpha", B, 0, T, d, "cpu")  # [B, T]
    assert alpha.std() > 0.03
    _, ref = fla.gated_delta_product(
        _h(K), _h(ks), _h(vs), _h(alpha.log()), _h(beta), 1.0, output_final_state=True, num_householder=steps
    )
    assert rel_rms(ours, ref[:, 0]) < 1e-5
    ungated = variants.get("delta_product", steps=steps, beta=("uniform", 0.2, 1.5), seed=4)
    assert rel_rms(_write(ungated, K, V).matrix, ref[:, 0]) > 1e-2  # the gate matters


def test_delta_product_with_one_step_and_a_gate_is_gated_delta():
    K, V = _inputs(seed=3)
    dp = _write(variants.get("delta_product", steps=1, alpha=0.9, beta=0.7), K, V)
    gd = _write(variants.get("gated_delta", alpha=0.9, beta=0.7, backend="torch"), K, V)
    assert rel_rms(dp, gd) < 1e-6
    assert variants.label(variants.get("delta_product")) == "delta_product"  # the default is ungated: as before


@pytest.mark.requires_fla
def test_titans_is_fla_momentum_delta_rule(fla):
    """Momentum DeltaNet (fla momentum_delta_rule): M = mu M + eta k^T (p S - v), S = alpha S - b M. With p = k and
    b = 1 it is titans with momentum eta_titans = mu and step beta_titans = eta: titans' momentum is -M."""
    K, V = _inputs(seed=6)
    B, T, d = K.shape
    mem = variants.get("titans", alpha=("uniform", 0.9, 1.0), beta=("uniform", 0.3, 0.8), eta=0.6, seed=1)
    st = _write(mem, K, V, split=11)
    alpha, beta = mem._values("alpha", B, 0, T, d, "cpu"), mem._values("beta", B, 0, T, d, "cpu")
    _, final = fla.momentum(
        _h(K),
        _h(K),
        _h(V),
        log_alpha=_h(alpha.log()),
        log_mu=torch.full((B, T, 1), math.log(0.6)),
        p=_h(K),
        beta=torch.ones(B, T, 1),
        eta=_h(beta),
        scale=1.0,
        output_final_state=True,
    )
    S, M = final[0, :, 0], final[1, :, 0]
    assert rel_rms(st.memory, S) < 1e-5 and rel_rms(st.momentum, -M) < 1e-5


def test_gated_delta_product_passes_check_variant():
    report = check_variant(variants.get("delta_product", alpha=0.95), d=8)
    assert report.passed, str(report)
