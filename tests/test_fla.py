"""from_fla: fla-style functions written here (no fla needed), and flash-linear-attention's own references when installed."""

import importlib.util
import math

import numpy as np
import pytest
import torch

from capacity import CapacityError, keys, probe, values, variants
from capacity.variants import check_variant, from_fla


def fake_delta_bthk(q, k, v, beta, scale=None, initial_state=None, output_final_state=False):
    """The delta rule with fla's convention: q, k [B, T, H, K], v [B, T, H, V], beta [B, T, H], state [B, H, K, V]."""
    B, T, H, K = k.shape
    S = torch.zeros(B, H, K, v.shape[-1]) if initial_state is None else initial_state.clone().float()
    scale = K**-0.5 if scale is None else scale
    o = torch.zeros_like(v, dtype=torch.float32)
    for t in range(T):
        kt, vt, bt = k[:, t].float(), v[:, t].float(), beta[:, t].float()  # [B, H, K], [B, H, V], [B, H]
        err = vt - torch.einsum("bhk,bhkv->bhv", kt, S)
        S = S + torch.einsum("bhk,bhv->bhkv", kt, bt[..., None] * err)
        o[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t].float() * scale, S)
    return o, (S if output_final_state else None)


def fake_linear_bhtk(q, k, v, initial_state=None, output_final_state=False):
    """Additive memory, head-first layout [B, H, T, K]."""
    S = initial_state + torch.einsum("bhtk,bhtv->bhkv", k.float(), v.float())
    return torch.einsum("bhtk,bhkv->bhtv", q.float(), S), S


def test_fake_fla_delta_matches_the_builtin_and_the_read_is_q_s():
    n, d, dv = 40, 16, 8
    K = keys.make("gaussian", n, d, batch=3, seed=0)
    V = values.make("gaussian", n, dv, batch=3, seed=0)
    mem = from_fla(fake_delta_bthk, per_token={"beta": 0.7})
    assert mem.name == "fla:fake_delta_bthk" and mem.params["per_token.beta"] == pytest.approx(0.7)
    ours = variants.get("delta", beta=0.7, normalize=False)
    cps = [3, 17, 40]
    a = probe.recall(mem, K, V, checkpoints=cps)
    b = probe.recall(ours, K, V, checkpoints=cps)
    np.testing.assert_allclose(a.mse.values, b.mse.values, rtol=1e-5)
    # the read is q S, not fla's scaled causal output
    S = mem.write(mem.init_state(3, d, dv), K, V)
    assert torch.allclose(mem.read(S, K[:, :5]), K[:, :5] @ S)


def test_head_first_layout_and_per_channel_inputs():
    n, d, dv = 12, 6, 4
    K, V = torch.randn(2, n, d), torch.randn(2, n, dv)
    mem = from_fla(fake_linear_bhtk, name="fla-linear", layout="BHTK")
    S = mem.write(mem.write(mem.init_state(2, d, dv), K[:, :5], V[:, :5]), K[:, 5:], V[:, 5:])
    assert torch.allclose(S, K.transpose(1, 2) @ V, atol=1e-5)  # T1: S = K^T V
    assert check_variant(from_fla(fake_linear_bhtk, layout="BHTK", additive=True), d=16).passed

    seen = {}

    def gated(q, k, v, g, initial_state=None, output_final_state=True):
        seen["g"] = g.shape
        S = initial_state * torch.exp(g[:, -1])[..., None] + torch.einsum("bthk,bthv->bhkv", k, v)
        return torch.einsum("bthk,bhkv->bthv", q, S), S

    mem = from_fla(gated, per_token={"g": [math.log(0.9)] * d})
    mem.write(mem.init_state(2, d, dv), K, V)
    assert seen["g"] == (2, n, 1, d)  # [B, T, H, K]


def test_the_fake_delta_passes_check_variant():
    report = check_variant(from_fla(fake_delta_bthk, per_token={"beta": 1.0}, delta_rule=True), d=16)
    assert report.passed, str(report)
    assert [r.status for r in report.results if r.check == "T12 last key"] == ["pass"]


def test_wrong_shapes_and_bad_arguments_name_the_variant():
    K, V = torch.randn(2, 5, 8), torch.randn(2, 5, 4)

    def wrong_state(q, k, v, initial_state=None, output_final_state=True):
        return v, initial_state.transpose(-1, -2)  # [B, H, V, K]: the other orientation

    mem = from_fla(wrong_state, name="transposed")
    with pytest.raises(CapacityError, match=r"transposed: .*wrong_state returned final_state of shape \(2, 1, 4, 8\), expected \[B, H, K, V\] = \(2, 1, 8, 4\)"):
        mem.write(mem.init_state(2, 8, 4), K, V)

    def wrong_output(q, k, v, initial_state=None, output_final_state=True):
        return q, initial_state  # o has K channels instead of V

    with pytest.raises(CapacityError, match=r"fla:wrong_output: .* returned o of shape \(2, 5, 1, 8\), expected BTHK = \(2, 5, 1, 4\)"):
        from_fla(wrong_output).write(torch.zeros(2, 8, 4), K, V)

    def no_state(q, k, v, initial_state=None, output_final_state=True):
        return v, None

    with pytest.raises(CapacityError, match=r"fla:no_state: .* returned final_state NoneType"):
        from_fla(no_state).write(torch.zeros(2, 8, 4), K, V)
    with pytest.raises(CapacityError, match="fla:<lambda>: .* returned Tensor; the fla convention returns \\(o, final_state\\)"):
        from_fla(lambda q, k, v, initial_state=None, output_final_state=True: v).write(torch.zeros(2, 8, 4), K, V)
    with pytest.raises(CapacityError, match="unknown layout 'TBHK'"):
        from_fla(fake_linear_bhtk, layout="TBHK")
    with pytest.raises(CapacityError, match="initial_state are set by the wrapper"):
        from_fla(fake_linear_bhtk, initial_state=None)
    with pytest.raises(CapacityError, match=r"per_token\['beta'\] must be a number"):
        from_fla(fake_delta_bthk, per_token={"beta": "one"})
    with pytest.raises(CapacityError, match=r"per_token\['g'\] has 3 entries; a per-channel input needs K = d = 8"):
        from_fla(fake_delta_bthk, per_token={"beta": 1.0, "g": [0.0, 0.0, 0.0]}).write(torch.zeros(2, 8, 4), K, V)
    with pytest.raises(CapacityError, match="from_fla needs a callable"):
        from_fla("delta_rule")


HAVE_FLA = importlib.util.find_spec("fla") is not None
needs_fla = pytest.mark.skipif(not HAVE_FLA, reason="flash-linear-attention is not installed (pip install 'capacity[fla]')")


@needs_fla
def test_real_fla_delta_rule_reference_matches_the_builtin():
    from fla.ops.delta_rule.naive import delta_rule_recurrence  # [B, H, T, K], beta [B, H, T]

    n, d = 96, 32
    K = keys.make("gaussian", n, d, batch=2, seed=1)
    V = values.make("gaussian", n, d, batch=2, seed=1)
    cps = [8, 32, 96]
    theirs = probe.recall(from_fla(delta_rule_recurrence, layout="BHTK", per_token={"beta": 0.8}), K, V, checkpoints=cps)
    ours = probe.recall(variants.get("delta", beta=0.8, normalize=False), K, V, checkpoints=cps)
    np.testing.assert_allclose(theirs.mse.values, ours.mse.values, rtol=1e-4)
    assert check_variant(from_fla(delta_rule_recurrence, layout="BHTK", per_token={"beta": 1.0}, delta_rule=True), d=16).passed


@needs_fla
def test_real_fla_gated_references_match_the_builtins():
    from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule  # [B, T, H, K], g: log-gate [B, T, H]
    from fla.ops.kda.naive import naive_recurrent_kda  # g: per-channel log-gate [B, T, H, K]

    n, d = 48, 16
    K = keys.make("gaussian", n, d, batch=2, seed=2)
    V = values.make("gaussian", n, 8, batch=2, seed=2)
    cps = [5, 20, 48]
    gd = from_fla(naive_recurrent_gated_delta_rule, per_token={"beta": 0.9, "g": math.log(0.93)})
    np.testing.assert_allclose(probe.recall(gd, K, V, checkpoints=cps).mse.values, probe.recall(variants.get("gated_delta", a=0.93, beta=0.9, normalize=False), K, V, checkpoints=cps).mse.values, rtol=1e-4)
    alpha = torch.linspace(0.8, 1.0, d)
    kda = from_fla(naive_recurrent_kda, per_token={"beta": 0.9, "g": alpha.log().tolist()})
    np.testing.assert_allclose(probe.recall(kda, K, V, checkpoints=cps).mse.values, probe.recall(variants.get("kda", alpha=alpha.tolist(), beta=0.9, normalize=False), K, V, checkpoints=cps).mse.values, rtol=1e-4)
