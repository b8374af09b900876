"""from_fla: fla-style functions written here (no fla needed), and fla's own references when installed."""

import copy
import math
import pathlib
import pickle

import numpy as np
import pytest
import torch
from script_support import load_script

from lacapacity import CapacityError, variants
from lacapacity.check.conformance import check_variant
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.variants import from_fla


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
    with pytest.raises(
        CapacityError,
        match=(
            r"transposed: .*wrong_state returned final_state of shape \(2, 1, 4, 8\), expected \[B, H, K, V\] = \(2, "
            r"1, 8, 4\)"
        ),
    ):
        mem.write(mem.init_state(2, 8, 4), K, V)

    def wrong_output(q, k, v, initial_state=None, output_final_state=True):
        return q, initial_state  # o has K channels instead of V

    with pytest.raises(
        CapacityError, match=r"fla:wrong_output: .* returned o of shape \(2, 5, 1, 8\), expected BTHK = \(2, 5, 1, 4\)"
    ):
        from_fla(wrong_output).write(torch.zeros(2, 8, 4), K, V)

    def no_state(q, k, v, initial_state=None, output_final_state=True):
        return v, None

    with pytest.raises(CapacityError, match=r"fla:no_state: .* returned final_state NoneType"):
        from_fla(no_state).write(torch.zeros(2, 8, 4), K, V)
    with pytest.raises(
        CapacityError,
        match="fla:<lambda>: .* returned tensor \\(2, 5, 1, 4\\); the fla convention returns \\(o, final_state\\)",
    ):
        from_fla(lambda q, k, v, initial_state=None, output_final_state=True: v).write(torch.zeros(2, 8, 4), K, V)
    with pytest.raises(CapacityError, match="unknown layout 'TBHK'"):
        from_fla(fake_linear_bhtk, layout="TBHK")
    with pytest.raises(CapacityError, match="initial_state are set by the wrapper"):
        from_fla(fake_linear_bhtk, initial_state=None)
    with pytest.raises(CapacityError, match=r"per_token\['beta'\] must be a number"):
        from_fla(fake_delta_bthk, per_token={"beta": "one"})
    with pytest.raises(
        CapacityError,
        match=(
            r"per_token\['g'\] has 3 entries \(one per key channel\), so this variant takes only d = 3, got keys with "
            r"d = 8; to follow d, give a callable"
        ),
    ):
        from_fla(fake_delta_bthk, per_token={"beta": 1.0, "g": [0.0, 0.0, 0.0]}).write(torch.zeros(2, 8, 4), K, V)
    with pytest.raises(CapacityError, match="from_fla needs a callable"):
        from_fla("delta_rule")


@pytest.mark.requires_fla
def test_real_fla_delta_rule_reference_matches_the_builtin():
    # delta_rule_recurrence: [B, H, T, K], beta [B, H, T]
    from fla.ops.delta_rule.naive import delta_rule_recurrence

    n, d = 96, 32
    K = keys.make("gaussian", n, d, batch=2, seed=1)
    V = values.make("gaussian", n, d, batch=2, seed=1)
    cps = [8, 32, 96]
    theirs = probe.recall(
        from_fla(delta_rule_recurrence, layout="BHTK", per_token={"beta": 0.8}), K, V, checkpoints=cps
    )
    ours = probe.recall(variants.get("delta", beta=0.8, normalize=False), K, V, checkpoints=cps)
    np.testing.assert_allclose(theirs.mse.values, ours.mse.values, rtol=1e-4)
    assert check_variant(
        from_fla(delta_rule_recurrence, layout="BHTK", per_token={"beta": 1.0}, delta_rule=True), d=16
    ).passed


@pytest.mark.requires_fla
def test_real_fla_gated_references_match_the_builtins():
    # gated delta rule: [B, T, H, K], g: log-gate [B, T, H]; KDA: g: per-channel log-gate [B, T, H, K]
    from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule
    from fla.ops.kda.naive import naive_recurrent_kda

    n, d = 48, 16
    K = keys.make("gaussian", n, d, batch=2, seed=2)
    V = values.make("gaussian", n, 8, batch=2, seed=2)
    cps = [5, 20, 48]
    gd = from_fla(naive_recurrent_gated_delta_rule, per_token={"beta": 0.9, "g": math.log(0.93)})
    np.testing.assert_allclose(
        probe.recall(gd, K, V, checkpoints=cps).mse.values,
        probe.recall(
            variants.get("gated_delta", alpha=0.93, beta=0.9, normalize=False), K, V, checkpoints=cps
        ).mse.values,
        rtol=1e-4,
    )
    alpha = torch.linspace(0.8, 1.0, d)
    kda = from_fla(naive_recurrent_kda, per_token={"beta": 0.9, "g": alpha.log().tolist()})
    np.testing.assert_allclose(
        probe.recall(kda, K, V, checkpoints=cps).mse.values,
        probe.recall(
            variants.get("kda", alpha=alpha.tolist(), beta=0.9, normalize=False), K, V, checkpoints=cps
        ).mse.values,
        rtol=1e-4,
    )


# ------------------------------------------------------------------ inputs that follow d, refusals, pickling


def neg(k):
    """IPLR's a for a delta rule: -k (module level, so that a variant using it pickles)."""
    return -k


def fake_iplr_bthk(q, k, v, a, b, initial_state=None, output_final_state=True):
    """S = (I + b^T a) S + k^T v per token (IPLR), tokens [B, T, H, K]; a, b [B, T, H, K]."""
    S = initial_state.clone().float()
    for t in range(k.shape[1]):
        S = (
            S
            + torch.einsum("bhk,bhj,bhjv->bhkv", b[:, t], a[:, t], S)
            + torch.einsum("bhk,bhv->bhkv", k[:, t], v[:, t])
        )
    return v, S


def test_callable_inputs_follow_d_and_iplr_with_a_minus_k_is_the_delta_rule():
    for d in (8, 20):
        K = keys.make("gaussian", 30, d, batch=2, seed=3)
        V = values.make("gaussian", 30, 5, batch=2, seed=3)
        mem = from_fla(fake_iplr_bthk, per_token={"a": neg, "b": lambda k: k})
        assert mem.declares.dims is None and mem.params["per_token.a"].endswith("test_fla.neg")
        S = mem.write(mem.write(mem.init_state(2, d, 5), K[:, :7], V[:, :7]), K[:, 7:], V[:, 7:])
        ref = variants.get("delta", beta=1.0, normalize=False)
        S_ref = ref.write(ref.init_state(2, d, 5), K, V)
        assert torch.allclose(S, S_ref, atol=1e-5)
    seen = {}

    def spy(q, k, v, g, initial_state=None, output_final_state=True):
        seen["g"] = tuple(g.shape)
        return v, initial_state

    from_fla(spy, per_token={"g": lambda k: k.norm(dim=-1)}).write(
        torch.zeros(2, 6, 3), torch.randn(2, 4, 6), torch.randn(2, 4, 3)
    )
    assert seen["g"] == (2, 4, 1)  # [B, T] -> [B, T, H]
    from_fla(spy, layout="BHTK", per_token={"g": lambda k: k}).write(
        torch.zeros(2, 6, 3), torch.randn(2, 4, 6), torch.randn(2, 4, 3)
    )
    assert seen["g"] == (2, 1, 4, 6)  # [B, T, d] -> [B, H, T, K]
    with pytest.raises(
        CapacityError,
        match=(
            r"per_token\['g'\] = .*<lambda> returned \(2, 4, 3\) for keys k \[B, T, d\] = \(2, 4, 6\); a callable of "
            r"the keys must return \[B, T\]"
        ),
    ):
        from_fla(spy, per_token={"g": lambda k: k[..., :3]}).write(
            torch.zeros(2, 6, 3), torch.randn(2, 4, 6), torch.randn(2, 4, 3)
        )


def test_a_per_channel_sequence_fixes_d_and_declares_dims():
    mem = from_fla(fake_iplr_bthk, per_token={"a": [0.0] * 12, "b": [0.0] * 12})
    assert mem.declares.dims == (12,) and mem.params["dims"] == [12]
    assert from_fla(fake_linear_bhtk, layout="BHTK", dims=[16, 8]).declares.dims == (8, 16)
    with pytest.raises(
        CapacityError,
        match=r"per-channel inputs must all have K = d entries, but per_token\['a'\] has 12, per_token\['b'\] has 4",
    ):
        from_fla(fake_iplr_bthk, per_token={"a": [0.0] * 12, "b": [0.0] * 4})
    with pytest.raises(
        CapacityError, match=r"per_token\['a'\] has 12 entries, so the variant takes only d = 12, but dims = \[8\]"
    ):
        from_fla(fake_iplr_bthk, per_token={"a": [0.0] * 12, "b": neg}, dims=8)
    # check_variant measures such a variant at its own d
    report = check_variant(from_fla(fake_iplr_bthk, per_token={"a": [-0.0] * 24, "b": [0.0] * 24}, additive=True))
    assert report.passed, str(report)
    assert report.d == report.check_d == 24


def test_more_state_than_one_matrix_is_refused_naming_the_op():
    K, V = torch.randn(2, 5, 8), torch.randn(2, 5, 4)

    def with_a_second_state(q, k, v, initial_state=None, output_final_state=True):
        return v, initial_state + torch.einsum("bthk,bthv->bhkv", k, v), k.sum(1)  # (o, S, A)

    with pytest.raises(
        CapacityError,
        match=(
            r"fla:with_a_second_state: .*with_a_second_state returned 3 outputs \(tuple of 3 \(tensor \(2, 5, 1, 4\), "
            r"tensor \(2, 1, 8, 4\), tensor \(2, 1, 8\)\)\); from_fla keeps one state"
        ),
    ):
        from_fla(with_a_second_state).write(torch.zeros(2, 8, 4), K, V)

    def tuple_state(q, k, v, initial_state=None, output_final_state=True):
        return v, (initial_state, k.sum(1))

    with pytest.raises(
        CapacityError,
        match=(
            r"tuple_state returned final_state as a tuple of 2 \(tensor \(2, 1, 8, 4\), tensor \(2, 1, 8\)\); from_fla "
            r"keeps a single"
        ),
    ):
        from_fla(tuple_state).write(torch.zeros(2, 8, 4), K, V)


def test_signature_mismatches_and_transposed_layouts_are_explained():
    K, V = torch.randn(2, 5, 8), torch.randn(2, 5, 4)
    with pytest.raises(
        CapacityError,
        match=(
            r"fla:fake_delta_bthk: .*fake_delta_bthk does not take these arguments \(missing a required argument: "
            r"'beta'\); from_fla calls it as fn\(q, k, v, initial_state=\[B, H, K, V\], output_final_state=True\) with "
            r"tokens \[B, T, H, K\]; its signature is fake_delta_bthk\(q, k, v, beta, .*give its other inputs in "
            r"per_token"
        ),
    ):
        from_fla(fake_delta_bthk).write(torch.zeros(2, 8, 4), K, V)
    with pytest.raises(
        CapacityError, match=r"does not take these arguments \(got an unexpected keyword argument 'gamma'\)"
    ):
        from_fla(fake_delta_bthk, per_token={"beta": 1.0}, gamma=2).write(torch.zeros(2, 8, 4), K, V)

    def bad_body(q, k, v, initial_state=None, output_final_state=True):
        return v, initial_state + "x"

    with pytest.raises(
        CapacityError, match=r"bad_body raised TypeError: .*from_fla calls it as fn\(q, k, v, initial_state="
    ):
        from_fla(bad_body).write(torch.zeros(2, 8, 4), K, V)
    with pytest.raises(
        CapacityError,
        match=(
            r"fake_linear_bhtk returned final_state of shape \(2, 5, 8, 4\).*; it looks transposed: with layout='BHTK' "
            r"\(tokens \[B, H, T, K\]\) the op returns the expected shapes, so pass layout='BHTK'"
        ),
    ):
        from_fla(fake_linear_bhtk).write(torch.zeros(2, 8, 4), K, V)
    with pytest.raises(CapacityError, match=r"it looks transposed: with layout='BTHK' .* so pass layout='BTHK'"):
        from_fla(fake_delta_bthk, layout="BHTK", per_token={"beta": 1.0}).write(torch.zeros(2, 8, 4), K, V)


def test_variants_pickle_when_their_functions_are_importable():
    K, V = keys.make("gaussian", 10, 8, batch=2, seed=4), torch.randn(2, 10, 4)
    mem = from_fla(fake_iplr_bthk, name="iplr", per_token={"a": neg, "b": [1.0] * 8})
    back = pickle.loads(pickle.dumps(mem))
    assert back.name == "iplr" and back.declares.dims == (8,)
    assert torch.equal(back.write(back.init_state(2, 8, 4), K, V), mem.write(mem.init_state(2, 8, 4), K, V))
    with pytest.raises(
        CapacityError,
        match=(
            r"iplr: cannot be pickled \(to send it to worker processes\): per_token\['b'\] = .*<lambda> is not "
            r"importable by module and name .*define it as a module-level function"
        ),
    ):
        pickle.dumps(from_fla(fake_iplr_bthk, name="iplr", per_token={"a": neg, "b": lambda k: k}))
    local_b = from_fla(fake_iplr_bthk, name="iplr", per_token={"a": neg, "b": lambda k: k})
    twin = copy.deepcopy(local_b)  # copies need no pickle
    assert twin.name == "iplr" and torch.equal(
        twin.write(twin.init_state(2, 8, 4), K, V), local_b.write(local_b.init_state(2, 8, 4), K, V)
    )

    def local(q, k, v, initial_state=None, output_final_state=True):
        return v, initial_state

    with pytest.raises(CapacityError, match=r"cannot be pickled .*: fn = .*local is not importable"):
        pickle.dumps(from_fla(local))


def test_t12_reads_from_flas_per_token_beta():
    half = check_variant(from_fla(fake_delta_bthk, per_token={"beta": 0.5}, delta_rule=True), d=16)
    assert half.passed, str(half)
    (row,) = [r for r in half.results if r.check == "T12 last key"]
    assert row.status == "n/a" and row.detail.startswith('beta = 0.5 (per_token["beta"]); T12 needs beta = 1')


# ------------------------------------------------------------ the docs table: every reference against the built-ins


def _table_script():
    return load_script(pathlib.Path(__file__).resolve().parents[2] / "docs" / "scripts" / "fla_table.py", "fla_table")


@pytest.mark.requires_fla
def test_every_reference_in_the_docs_table_matches_its_builtin():
    table = _table_script()
    entries = table.references(16)
    assert {e["name"] for e in entries} >= {
        "linear attention",
        "delta rule",
        "gated delta rule",
        "KDA",
        "GLA",
        "simple GLA",
        "RWKV-6",
        "IPLR",
        "DPLR",
        "Comba",
        "gated delta product",
    }
    K = keys.make("gaussian", 40, 16, batch=2, seed=[5, 6])
    V = values.make("gaussian", 40, 16, batch=2, seed=[5, 6])
    for e in entries:
        row = table.measure(e, 16, [8, 16, 40], [5, 6])
        assert all(np.isfinite(row["mse"])), e["name"]
        if e["builtin"] is None:
            continue
        assert row["rel_diff"] <= 1e-5, (e["name"], row["rel_diff"])
        ours = probe.recall(e["builtin"](), K, V, checkpoints=[8, 16, 40], decode=False).mse.mean("batch").values
        np.testing.assert_allclose(row["mse"], ours, rtol=1e-4, err_msg=e["name"])


@pytest.mark.requires_fla
def test_real_fla_delta_rule_with_beta_one_half_is_not_failed_by_t12_and_rwkv6_is_checked_at_its_d():
    from fla.ops.delta_rule.naive import delta_rule_recurrence
    from fla.ops.linear_attn.naive import naive_recurrent_linear_attn
    from fla.ops.rwkv6.recurrent_naive import naive_recurrent_rwkv6

    half = check_variant(from_fla(delta_rule_recurrence, layout="BHTK", per_token={"beta": 0.5}, delta_rule=True), d=16)
    assert half.passed and [r.status for r in half.results if r.check == "T12 last key"] == ["n/a"], str(half)
    rwkv = from_fla(
        naive_recurrent_rwkv6,
        layout="BHTK",
        per_token={"w": lambda k: torch.full_like(k, math.log(0.9))},
        u=torch.zeros(1, 12),
        dims=12,
    )
    report = check_variant(rwkv)
    assert report.passed and report.d == report.check_d == 12, str(report)
    assert (
        pickle.loads(pickle.dumps(from_fla(delta_rule_recurrence, layout="BHTK", per_token={"beta": 1.0}))).fn
        is delta_rule_recurrence
    )
    with pytest.raises(CapacityError, match=r"naive_recurrent_linear_attn returned final_state as a tuple of 2"):
        from_fla(naive_recurrent_linear_attn, normalize=True).write(
            torch.zeros(1, 8, 4), torch.randn(1, 3, 8), torch.randn(1, 3, 4)
        )
    with pytest.raises(CapacityError, match=r"looks transposed: with layout='BHTK'"):
        from_fla(delta_rule_recurrence, per_token={"beta": 1.0}).write(
            torch.zeros(1, 8, 4), torch.randn(1, 3, 8), torch.randn(1, 3, 4)
        )
