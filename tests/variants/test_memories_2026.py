"""The memories of 2025-2026 (gdn2, comba, gated_oja, precond_gated_delta, precond_kda, titans, ttt, log_linear):
each against fla-core 0.6.0's plain-torch reference where it has one (relative RMS error < 1e-5 in float32, fla's
own metric), otherwise against a float64 recurrence written here; their reductions to the older memories; the
growing state's size; and check_variant on each."""

import math
from types import SimpleNamespace

import pytest
import torch
from memory_support import one_head as _h  # fla's [B, T, H=1, ...]
from memory_support import rel_rms, write_in_chunks

from lacapacity import check_variant, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import Bill, probe
from lacapacity.variants import precision
from lacapacity.variants.declares import Declares, declared


@pytest.fixture(scope="module")
def fla() -> SimpleNamespace:
    """fla-core 0.6.0's plain-torch references, imported by the first test that needs them: importing fla.ops
    imports every op's Triton kernels (5.6 s of CPU time on the 2-core VM, 2026-12-03), which collecting the
    tests would otherwise pay in every worker."""
    from fla.ops.comba.naive import naive_recurrent_comba
    from fla.ops.gdn2.naive import naive_recurrent_gdn2
    from fla.ops.log_linear_attn.naive import naive_log_linear_attn
    from fla.ops.precond_gated_delta_rule.naive import naive_recurrent_precond_gated_delta_rule
    from fla.ops.precond_kda.naive import naive_recurrent_precond_kda

    return SimpleNamespace(
        gdn2=naive_recurrent_gdn2,
        comba=naive_recurrent_comba,
        log_linear=naive_log_linear_attn,
        precond_gated_delta=naive_recurrent_precond_gated_delta_rule,
        precond_kda=naive_recurrent_precond_kda,
    )


NEW = ("gdn2", "comba", "gated_oja", "precond_gated_delta", "precond_kda", "titans", "ttt", "log_linear")


def _inputs(B=2, T=40, d=12, dv=8, seed=0):
    K = keys.make("gaussian", T, d, batch=B, seed=seed)  # unit rows
    V = values.make("gaussian", T, dv, batch=B, seed=seed + 1)
    return K, V


def _write(mem, K, V, split=None):
    """The state after writing (K, V), in one call or split at ``split``."""
    return write_in_chunks(mem, K, V, (0,) if split is None else (0, split))


# ------------------------------------------------------------------ against fla-core 0.6.0's references


@pytest.mark.requires_fla
def test_gdn2_matches_fla_reference_with_drawn_channel_gates(fla):
    K, V = _inputs()
    B, T, d = K.shape
    dv = V.shape[2]
    mem = variants.get("gdn2", alpha=("uniform", 0.8, 1.0), beta=("uniform", 0.2, 1.0), gamma=("uniform", 0.5, 1.0))
    ours = _write(mem, K, V, split=13).matrix
    a, b, w = (mem._values(p, B, 0, T, c, K.device) for p, c in (("alpha", d), ("beta", d), ("gamma", dv)))
    assert a.shape == (B, T, d) and w.shape == (B, T, dv) and a.std() > 0.03  # drawn per token and channel
    _, ref = fla.gdn2(_h(K), _h(K), _h(V), _h(a.log()), _h(b), _h(w), scale=1.0, output_final_state=True)
    err = rel_rms(ours, ref[:, 0])
    assert err < 1e-5, err
    assert rel_rms(_write(mem, K, V).matrix, ref[:, 0]) < 1e-5  # one write call, the same state


@pytest.mark.requires_fla
def test_comba_matches_fla_reference(fla):
    K, V = _inputs(seed=2)
    B, T, d = K.shape
    mem = variants.get("comba", alpha=("uniform", 0.85, 1.0), beta=("uniform", 0.3, 1.0), mu=0.6)
    ours = _write(mem, K, V, split=7).matrix
    a, b = mem._values("alpha", B, 0, T, d, K.device), mem._values("beta", B, 0, T, d, K.device)
    _, ref = fla.comba(_h(K), _h(K), _h(V), _h(0.6 * K), _h(b), _h(a.log()), scale=1.0, output_final_state=True)
    err = rel_rms(ours, ref[:, 0])
    assert err < 1e-5, err


@pytest.mark.requires_fla
@pytest.mark.parametrize("name", ["precond_gated_delta", "precond_kda"])
def test_preconditioned_delta_rules_match_fla_references(name, fla):
    K, V = _inputs(seed=4)
    B, T, d = K.shape
    per_channel = name == "precond_kda"
    mem = variants.get(
        name, alpha=("uniform", 0.85, 1.0), beta=0.8, alpha_atk=0.9, beta_atk=("uniform", 0.5, 2.0), x=1.5
    )
    st = _write(mem, K, V, split=21)
    a = mem._values("alpha", B, 0, T, d, K.device)  # [B, T, d] per channel, [B, T] per token
    ga = torch.full((B, T), math.log(0.9))
    ba = mem._values("beta_atk", B, 0, T, d, K.device)
    beta = torch.full((B, T), 0.8)
    if per_channel:
        assert a.shape == (B, T, d)
        _, S, A = fla.precond_kda(
            _h(K), _h(K), _h(V), _h(a.log()), _h(ga), _h(ba), _h(beta), scale=1.0, output_final_state=True
        )
    else:
        _, S, A = fla.precond_gated_delta(
            _h(K), _h(K), _h(V), _h(ga), _h(a.log()), _h(ba), _h(beta), scale=1.0, output_final_state=True
        )
    e_s, e_a = rel_rms(st.matrix, S[:, 0]), rel_rms(st.accum, A[:, 0])
    assert e_s < 1e-5 and e_a < 1e-5, (e_s, e_a)


@pytest.mark.requires_fla
@pytest.mark.parametrize("base", ["linear", "decay"])
def test_log_linear_reads_match_fla_reference_at_every_n(base, fla):
    """Our read after n writes is fla's output at position n for a query token whose own key is zero (so its
    level 0 is empty) and whose own gate is 1: the Fenwick buckets of [0, n), weighed by lam per level."""
    B, T, d, dv = 1, 37, 8, 5
    K, V = _inputs(B, T, d, dv, seed=6)
    Q = torch.nn.functional.normalize(torch.randn(B, T + 1, d, generator=torch.Generator().manual_seed(3)), dim=-1)
    alpha = 1.0 if base == "linear" else 0.93
    lam = [1.0, 0.7, 0.45, 0.3, 0.2, 0.1, 0.05]  # lam_1 .. lam_7 (levels 1 .. 6 are reached at n <= 37)
    mem = variants.get("log_linear", alpha=alpha, lam=lam)
    st, worst = mem.init_state(B, d, dv), 0.0
    for n in range(1, T + 1):
        st = mem.write(st, K[:, n - 1 : n], V[:, n - 1 : n])
        ours = mem.read(st, Q[:, n : n + 1])[:, 0]  # [B, dv]
        k = torch.cat([K[:, :n], torch.zeros(B, 1, d)], 1)  # the query's own token writes nothing
        q = torch.cat([torch.zeros(B, n, d), Q[:, n : n + 1]], 1)
        v = torch.cat([V[:, :n], torch.zeros(B, 1, dv)], 1)
        g = torch.full((B, n + 1), math.log(alpha))
        g[:, -1] = 0.0  # no gate on the query's own token
        L = int(math.ceil(math.log2(n + 1))) + 1
        scales = torch.tensor([0.0] + lam[: L - 1])[None, None].expand(B, n + 1, L)  # level 0 (own token): unused
        o = fla.log_linear(_h(q), _h(k), _h(v), _h(g), _h(scales).contiguous(), scale=1.0)
        worst = max(worst, rel_rms(ours, o[:, -1, 0]))
    assert worst < 1e-5, worst


# ------------------------------------------------------------------ recurrences written here (float64)


def test_gated_oja_matches_a_float64_recurrence():
    """fla 0.6.0 ships the gated Oja rule as Triton kernels only (no naive.py): its fused_recurrent kernel's loop,
    h *= exp(gv); k' = beta (k - h v); h += k'^T v, written here in float64."""
    K, V = _inputs(seed=8)
    B, T, d = K.shape
    dv = V.shape[2]
    mem = variants.get("gated_oja", alpha=("uniform", 0.8, 1.0), beta=0.7)
    ours = _write(mem, K, V, split=9).matrix
    a = mem._values("alpha", B, 0, T, dv, K.device).double()  # [B, T, dv]: per value channel
    S = torch.zeros(B, d, dv, dtype=torch.float64)
    for t in range(T):
        k, v = K[:, t].double(), V[:, t].double()
        S = S * a[:, t, None, :]
        back = torch.einsum("bkv,bv->bk", S, v)
        S = S + 0.7 * torch.einsum("bk,bv->bkv", k - back, v)
    assert rel_rms(ours, S) < 1e-5


def test_titans_matches_a_float64_recurrence_and_is_the_delta_rule_without_momentum():
    K, V = _inputs(seed=10)
    B, T, d = K.shape
    mem = variants.get("titans", alpha=("uniform", 0.9, 1.0), beta=0.6, eta=0.7)
    st = _write(mem, K, V, split=17)
    a = mem._values("alpha", B, 0, T, d, K.device).double()
    M = torch.zeros(B, d, V.shape[2], dtype=torch.float64)
    S = torch.zeros_like(M)
    for t in range(T):  # S = eta S - beta grad, grad of 1/2 |k M - v|^2 at M_{t-1}; M = alpha M + S
        k, v = K[:, t].double(), V[:, t].double()
        grad = torch.einsum("bk,bv->bkv", k, torch.einsum("bk,bkv->bv", k, M) - v)
        S = 0.7 * S - 0.6 * grad
        M = a[:, t, None, None] * M + S
    assert rel_rms(st.memory, M) < 1e-5 and rel_rms(st.momentum, S) < 1e-5
    plain, delta = variants.get("titans", alpha=1.0, beta=0.6, eta=0.0), variants.get("delta", beta=0.6)
    assert rel_rms(_write(plain, K, V).memory, _write(delta, K, V)) < 1e-6


def test_ttt_is_one_autograd_step_per_token_on_a_two_layer_mlp():
    K, V = _inputs(B=2, T=24, d=8, dv=6, seed=12)
    B, T, d = K.shape
    mem = variants.get("ttt", expand=2, beta=0.9, seed=5)
    st = _write(mem, K, V, split=5)
    h = 2 * d
    W1 = mem.init_state(B, d, V.shape[2]).w1.double().clone()
    W2 = torch.zeros(B, h, V.shape[2], dtype=torch.float64)
    for t in range(T):
        w1, w2 = W1.clone().requires_grad_(), W2.clone().requires_grad_()
        y = torch.einsum("bh,bhv->bv", torch.nn.functional.gelu(torch.einsum("bd,bdh->bh", K[:, t].double(), w1)), w2)
        loss = 0.5 * (y - V[:, t].double()).pow(2).sum()
        g1, g2 = torch.autograd.grad(loss, (w1, w2))
        W1, W2 = W1 - 0.9 / h * g1, W2 - 0.9 / h * g2
    assert rel_rms(st.w1, W1) < 1e-5 and rel_rms(st.w2, W2) < 1e-5
    Q = K[:, :5]
    want = torch.nn.functional.gelu(Q.double() @ W1) @ W2  # the nonlinear read
    assert rel_rms(mem.read(st, Q), want) < 1e-5


def test_log_linear_over_gated_delta_matches_its_pairwise_form():
    """Independent of the merges: o = sum_c lam_level(n, c) q (prod_{s > c} A_s) beta k_c^T v_c, each pair c carried
    by the transitions after it, with the Fenwick level of c for a read after n writes (the bit of n whose bucket
    holds c)."""
    B, T, d, dv = 1, 23, 8, 4
    K, V = _inputs(B, T, d, dv, seed=14)
    lam = [1.0, 0.8, 0.5, 0.4, 0.3]
    mem = variants.get("log_linear", base="gated_delta", alpha=0.9, beta=0.7, lam=lam)
    st = mem.init_state(B, d, dv)
    Q = K[:, :6]
    for n in range(1, T + 1):
        st = mem.write(st, K[:, n - 1 : n], V[:, n - 1 : n])
        k, v = K[0].double(), V[0].double()
        total = torch.zeros(d, dv, dtype=torch.float64)
        for c in range(n):
            S = 0.7 * torch.outer(k[c], v[c])
            for s in range(c + 1, n):
                S = 0.9 * (S - 0.7 * torch.outer(k[s], k[s] @ S))
            # Fenwick level of c: walk the set bits of n from the top; bucket j (level j + 1) spans 2^j tokens
            start, level = 0, None
            for j in reversed(range(n.bit_length())):
                if n >> j & 1:
                    if start <= c < start + (1 << j):
                        level = j
                    start += 1 << j
            total += lam[min(level, len(lam) - 1)] * S
        assert rel_rms(mem.read(st, Q)[0], Q[0].double() @ total) < 1e-5, n


# ------------------------------------------------------------------ reductions (closed forms at equal gates)


def test_gdn2_is_kda_with_scalar_channel_gates_and_gated_delta_with_a_scalar_decay():
    K, V = _inputs(seed=16)
    d = K.shape[2]
    alpha = torch.linspace(0.85, 1.0, d).tolist()
    gdn2 = _write(variants.get("gdn2", alpha=alpha, beta=0.6, gamma=0.6), K, V)
    kda = _write(variants.get("kda", alpha=alpha, beta=0.6, backend="torch"), K, V)
    assert rel_rms(gdn2, kda) < 1e-6
    gdn2 = _write(variants.get("gdn2", alpha=0.9, beta=0.6, gamma=0.6), K, V)
    gd = _write(variants.get("gated_delta", alpha=0.9, beta=0.6, backend="torch"), K, V)
    assert rel_rms(gdn2, gd) < 1e-6
    other = _write(variants.get("gdn2", alpha=0.9, beta=0.6, gamma=0.5), K, V)  # unequal gates: another memory
    assert rel_rms(other, gd) > 1e-2


def test_comba_is_gated_delta_with_the_key_as_feedback():
    K, V = _inputs(seed=18)
    comba = _write(variants.get("comba", alpha=0.9, beta=0.6, mu=1.0), K, V)
    gd = _write(variants.get("gated_delta", alpha=0.9, beta=0.6, backend="torch"), K, V)
    assert rel_rms(comba, gd) < 1e-6
    assert rel_rms(_write(variants.get("comba", alpha=0.9, beta=0.6, mu=0.5), K, V), gd) > 1e-2


@pytest.mark.parametrize(
    "base,other", [("linear", "linear"), ("gated_delta", "gated_delta(alpha=0.9, beta=0.7, backend=torch)")]
)
def test_log_linear_with_unit_weights_reads_as_its_base(base, other):
    K, V = _inputs(seed=20)
    kw = {"alpha": 0.9, "beta": 0.7} if base == "gated_delta" else {}
    mem, ref = variants.get("log_linear", base=base, lam=1.0, **kw), variants.resolve(other)
    assert rel_rms(mem.read(_write(mem, K, V), K), ref.read(_write(ref, K, V), K)) < 1e-5


def test_log_linear_equals_linear_recall_at_powers_of_two_only():
    """At n = 2^m every pair sits in one bucket: the read is lam^m times linear attention's, so argmax recall is the
    same; between powers of two the buckets are weighed differently and the reads are not proportional."""
    K = keys.make("gaussian", 48, 16, batch=2, seed=0)
    V = values.make("gaussian", 48, 16, batch=2, seed=1)
    ll = probe.recall(variants.get("log_linear", lam=0.5), K, V, checkpoints=[16, 32, 48])
    lin = probe.recall(variants.get("linear"), K, V, checkpoints=[16, 32, 48])
    assert (ll.recall.sel(n=[16, 32]).values == lin.recall.sel(n=[16, 32]).values).all()
    assert (ll.cosine.sel(n=[16, 32]).values - lin.cosine.sel(n=[16, 32]).values).__abs__().max() < 1e-5
    assert abs(ll.cosine.sel(n=48).values - lin.cosine.sel(n=48).values).max() > 1e-3
    assert list(ll.state_numel.values) == [5 * 256, 6 * 256, 6 * 256]  # floor(log2 n) + 1 levels of d dv


def test_the_variants_figure_notes_where_log_linear_coincides_with_its_base(tmp_path):
    from lacapacity import sweep
    from lacapacity.plots.variants import variant_curves

    res = sweep.compare(["linear", "log_linear"], d=(8,), load=(1, 2, 3), seeds=1, out=tmp_path, progress=False)
    fig = variant_curves(res.dataset)
    assert any("at n = 2^m every pair lies in one Fenwick level" in t.get_text() for t in fig.texts)


# ------------------------------------------------------------------ growing state, bookkeeping, check_variant


def test_log_linear_state_grows_with_log2_n_and_its_bytes_follow():
    mem = variants.get("log_linear")
    K, V = _inputs(B=1, T=40, d=8, dv=4)
    st = mem.init_state(1, 8, 4)
    for n in range(1, 41):
        st = mem.write(st, K[:, n - 1 : n], V[:, n - 1 : n])
        assert mem.numel(st) == mem.state_numel(8, 4, n=n) == n.bit_length() * 32
        nonzero = [j for j in range(st.levels.shape[1]) if st.levels[0, j].abs().sum() > 0]
        assert nonzero == [j for j in range(n.bit_length()) if n >> j & 1]  # the set bits of n
    assert precision.state_bytes(mem, 8, 4, "bfloat16", n=40) == 6 * 32 * 2
    with pytest.raises(ValueError, match="pass n"):
        mem.state_numel(8, 4)


def test_bfloat16_log_linear_state_keeps_counting_past_256():
    mem = variants.get("log_linear", lam=0.5)
    low = precision.stored(mem, "bfloat16", "step")
    K = keys.make("gaussian", 300, 8, batch=1, seed=0)
    V = values.make("gaussian", 300, 8, batch=1, seed=1)
    st = low.write(low.init_state(1, 8, 8), K, V)
    assert int(st.inner.tokens[0]) == 300 and st.inner.tokens.dtype == torch.int64
    full = mem.write(mem.init_state(1, 8, 8), K, V)
    assert [int(x.abs().sum() > 0) for x in st.inner.levels[0]] == [int(x.abs().sum() > 0) for x in full.levels[0]]
    assert (st.inner.levels.to(torch.bfloat16).float() == st.inner.levels).all()  # the levels are rounded
    assert rel_rms(low.read(st, K), mem.read(full, K)) < 2e-2


class _CountingMemory:
    """A user memory that keeps its token counter as a float32 tensor (the issue's log-linear memory did)."""

    name = "counting"

    def __init__(self, mark: bool):
        import dataclasses

        self.declares = Declares(bookkeeping=("count",) if mark else ())
        self.State = dataclasses.make_dataclass("State", [("matrix", torch.Tensor), ("count", torch.Tensor)])

    def init_state(self, batch, d, dv, *, device=None):
        return self.State(torch.zeros(batch, d, dv), torch.zeros(batch))

    def write(self, state, k, v):
        return self.State(state.matrix + k.float().transpose(1, 2) @ v.float(), state.count + k.shape[1])

    def read(self, state, q):
        return q.float() @ state.matrix

    def state_numel(self, d, dv):
        return d * dv


@pytest.mark.parametrize("mark", [True, False])
def test_a_counter_marked_bookkeeping_is_never_rounded(mark):
    low = precision.stored(_CountingMemory(mark), "bfloat16", "step")
    K = keys.make("gaussian", 300, 4, batch=1, seed=0)
    st = low.write(low.init_state(1, 4, 2), K, torch.ones(1, 300, 2))
    assert float(st.inner.count[0]) == (300.0 if mark else 256.0)  # bfloat16 stops counting at 256 (8 bits)
    if mark:
        assert precision.state_bytes(_CountingMemory(mark), 4, 2, "bfloat16") == 4 * 2 * 2
        report = check_variant(_CountingMemory(mark), d=8)
        assert report.passed, str(report)


@pytest.mark.parametrize("name", NEW)
def test_new_memories_pass_check_variant(name):
    report = check_variant(name, d=8)  # contract checks at d = 16, the capacity at d = 8
    assert report.passed, str(report)
    t8 = next(k for k in report.bounds if k.startswith("T8"))
    if name == "ttt":  # a nonlinear read: T8 does not apply, and the report says why
        assert math.isnan(report.bounds[t8]) and "linear_read = False" in report.bound_notes[t8]
        assert "linear_read = False" in str(report)
    else:  # log_linear grows but reads through one d x dv matrix: T8 applies
        assert report.bounds[t8] == 16.0
    if name == "log_linear":
        shape = next(r for r in report.results if r.check == "shape and dtype")
        assert "numel(state)" in shape.detail


def test_a_growing_memory_that_does_not_declare_linear_read_gets_no_t8():
    soft = check_variant("softmax", d=8)
    t8 = next(k for k in soft.bounds if k.startswith("T8"))
    assert math.isnan(soft.bounds[t8]) and "linear_read = False" in soft.bound_notes[t8]


@pytest.mark.parametrize(
    "name,params,match",
    [
        ("gdn2", {"gamma": 1.5}, "gamma must lie in"),
        ("comba", {"mu": 0.0}, "mu must lie in"),
        ("titans", {"eta": 1.0}, "eta"),
        ("ttt", {"expand": 0}, "expand must be"),
        ("log_linear", {"base": "mamba"}, "base must be one of"),
        ("log_linear", {"lam": 0.0}, "lam must be"),
        ("log_linear", {"beta": 0.5}, "needs base='gated_delta'"),
        ("precond_kda", {"x": 0.5}, "x"),
    ],
)
def test_bad_parameters_are_one_line_errors(name, params, match):
    with pytest.raises(ValueError, match=match):
        variants.get(name, **params)


# ------------------------------------------------------------------ frontier and bill at the true bytes


def test_frontier_draws_log_linear_and_ttt_at_their_true_bytes(tmp_path):
    import numpy as np

    from lacapacity import sweep
    from lacapacity.plots.frontier import _bytes, frontier
    from lacapacity.tasks import metrics

    res = sweep.compare(
        ["log_linear(lam=1.0)", "ttt"],
        d=(8,),
        load=(0.5, 1, 1.5, 2, 3, 4),
        seeds=1,
        out=tmp_path,
        device="cpu",
        progress=False,
    )
    size = res.dataset["state_numel"].squeeze("key_family", drop=True).sel(d=8)  # recorded per point
    ns = [int(x) for x in res.dataset.n.sel(d=8).values]
    assert size.sel(variant="log_linear(lam=1.0)").values[:, 0].tolist() == [n.bit_length() * 64 for n in ns]
    assert set(size.sel(variant="ttt").values.ravel().tolist()) == {8 * 32 + 32 * 8}
    from lacapacity import studies
    from lacapacity.tasks import TASKS

    study = studies.get("capacity-vs-d")
    assert "state_numel" not in TASKS["recall"].schema(study).variables  # fixed states: nothing new
    fig = frontier(res.dataset)
    left = fig.axes[0]
    cap = metrics.capacity(res.dataset.squeeze("key_family", drop=True), metric="mse", threshold=0.5)
    drawn = {
        line.get_gid()[len("measured:") :]: line for line in left.get_lines() if "measured:" in (line.get_gid() or "")
    }

    def at(label):
        return float(np.asarray(drawn[label].get_xdata())[0]), float(cap.sel(variant=label, d=8).values.ravel()[0])

    x, n = at("log_linear(lam=1.0)")
    lo = int(np.floor(n))
    want = 4 * 64 * (lo.bit_length() + (n - lo) * ((lo + 1).bit_length() - lo.bit_length()))
    dv = 8  # the frontier gives the bytes to d at the memory's dv: x = bytes / (4 dv)
    assert x == pytest.approx(want / (4 * dv)) and x != pytest.approx(n * 16 / dv)  # its levels, not a softmax cache
    x, _ = at("ttt")
    assert x == (8 * 32 + 32 * 8) / dv  # W1 and W2, d h + h dv with h = 4 d
    grown, grows = _bytes(variants.get("softmax"), 8, 8, "bfloat16")
    assert grows and grown(10.0) == 2 * 10 * 16 and grown(10.5) == 2 * 10.5 * 16  # softmax's cache, n (d + dv)
    assert any("floor(log2 n*) + 1 levels" in " ".join(t.get_text().split()) for t in fig.texts)


def test_bill_counts_the_log_linear_levels_not_its_counter(tmp_path):
    from lacapacity import sweep
    from lacapacity.sweep.config import Grid, Study

    study = Study(
        name="bill-growing",
        description="bill of a growing memory",
        grid=Grid(variant=("log_linear",), keys=("gaussian",), d=(8,), n=(1, 5, 8, 13), seed=(0,)),
        task=Bill(values="gaussian", repeats=2),
    )
    res = sweep.run(study, out=tmp_path, device="cpu", progress=False)
    got = res.dataset["state_numel"].squeeze().values.tolist()
    assert got == [n.bit_length() * 64 for n in (1, 5, 8, 13)]


# ------------------------------------------------------------------ from_fla on the new references


@pytest.mark.requires_fla
@pytest.mark.parametrize("name", ["precond_gated_delta", "precond_kda"])
def test_from_fla_wraps_the_preconditioned_references_with_their_second_state(name, fla):
    """states= maps the accumulator A ([B, H, K], letters "K") next to S; the wrapper's state, written in two calls,
    is the built-in's."""
    from lacapacity.variants import from_fla

    K, V = _inputs(seed=22)
    d = K.shape[2]
    if name == "precond_kda":
        alpha = torch.linspace(0.85, 1.0, d)
        fn, gate = fla.precond_kda, {"g": alpha.log().tolist()}
    else:
        alpha = 0.95
        fn, gate = fla.precond_gated_delta, {"g": math.log(0.95)}
    mem = from_fla(
        fn,
        states={"initial_state": "KV", "initial_A_state": "K"},
        per_token={**gate, "g_atk": math.log(0.9), "beta_atk": 1.0, "beta": 0.8},
        scale=1.0,
    )
    st = _write(mem, K, V, split=11)
    ours = _write(
        variants.get(name, alpha=alpha.tolist() if name == "precond_kda" else alpha, beta=0.8, alpha_atk=0.9), K, V
    )
    assert rel_rms(st["initial_state"], ours.matrix) < 1e-5 and rel_rms(st["initial_A_state"], ours.accum) < 1e-5
    assert mem.state_numel(d, V.shape[2]) == variants.get(name).state_numel(d, V.shape[2])


@pytest.mark.requires_fla
def test_from_fla_wraps_gdn2_only_with_a_value_gate_of_the_keys_width(fla):
    """fla's GDN-2 reference takes its write gate over the value channels, [B, T, H, V]; per_token builds inputs per
    token or per key channel only, so from_fla wraps it where dv = d (the gate a sequence of d numbers); the
    built-in gdn2 takes any dv."""
    from lacapacity.variants import from_fla

    K, V = _inputs(d=8, dv=8, seed=24)
    alpha, b, w = torch.linspace(0.85, 1.0, 8), torch.linspace(0.3, 0.9, 8), torch.linspace(0.5, 1.0, 8)
    mem = from_fla(
        fla.gdn2,
        per_token={"g": alpha.log().tolist(), "b": b.tolist(), "w": w.tolist()},
        scale=1.0,
    )
    ours = _write(variants.get("gdn2", alpha=alpha.tolist(), beta=b.tolist(), gamma=w.tolist()), K, V)
    assert rel_rms(_write(mem, K, V, split=5), ours) < 1e-5


@pytest.mark.parametrize("n,alpha", [(13, 1.0), pytest.param(24, 0.95, marks=pytest.mark.slow)])
def test_log_linear_random_key_error_per_level_matches_the_probe(n, alpha):
    """T7 and T11 level by level: the expected error of each Fenwick level's pairs, against the probe's per-query
    errors of 512 draws (3 standard errors)."""
    from lacapacity import theory

    d, B, lam = 16, 512, [1.0, 0.6, 0.3, 0.2, 0.1]
    K = keys.make("gaussian", n, d, batch=B, seed=0)
    V = values.make("gaussian", n, 8, batch=B, seed=1)
    ds = probe.recall(variants.get("log_linear", alpha=alpha, lam=lam), K, V, checkpoints=[n], per_query=True)
    err = ds.mse_q.isel(n=0).values  # [B, n]
    mean, per = theory.log_linear_error(n, d, lam, alpha), theory.log_linear_level_error(n, d, lam, alpha)
    item = err.mean(1)
    assert abs(item.mean() - mean) < 3 * item.std() / B**0.5, (item.mean(), mean)
    start = 0
    for j in reversed(range(n.bit_length())):  # each level's pairs: the bucket of bit j, oldest first
        if n >> j & 1:
            x = err[:, start : start + (1 << j)].mean(1)
            assert abs(x.mean() - per[j + 1]) < 3 * x.std() / B**0.5 + 1e-9, (j, x.mean(), per[j + 1])
            start += 1 << j
    assert theory.log_linear_error(n, d, 1.0, 1.0) == pytest.approx((n - 1) / d)  # T7


@pytest.mark.requires_fla
def test_fla_md_lists_every_op_of_fla_core():
    """docs/fla.md's table of every op: one row per folder of fla/ops, each built-in, wrapped or refused."""
    import re
    from pathlib import Path

    import fla.ops

    root = Path(fla.ops.__file__).parent
    ops = {p.name for p in root.iterdir() if p.is_dir() and p.name not in ("utils", "common", "__pycache__")}
    text = (Path(__file__).resolve().parents[2] / "docs" / "fla.md").read_text().split("## Every op of fla-core")[1]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|", text, re.MULTILINE)}
    assert ops <= set(rows), sorted(ops - set(rows))
    assert all(set(s.strip().split(", ")) <= {"built-in", "wrapped", "refused"} for s in rows.values()), rows
    built = [op for op, s in rows.items() if "built-in" in s]
    assert {"gdn2", "comba", "gated_oja_rule", "precond_kda", "titans", "ttt", "log_linear_attn"} <= set(built)


def test_preconditioned_rules_without_preconditioning_are_gated_delta_and_kda():
    """x = 1 makes the preconditioner m = x^(-s) one: the written key is k, the rule the gated delta rule (KDA)."""
    K, V = _inputs(seed=26)
    alpha = torch.linspace(0.85, 1.0, K.shape[2]).tolist()
    pg = _write(variants.get("precond_gated_delta", alpha=0.9, beta=0.6, x=1.0), K, V).matrix
    assert rel_rms(pg, _write(variants.get("gated_delta", alpha=0.9, beta=0.6, backend="torch"), K, V)) < 1e-6
    pk = _write(variants.get("precond_kda", alpha=alpha, beta=0.6, x=1.0), K, V).matrix
    assert rel_rms(pk, _write(variants.get("kda", alpha=alpha, beta=0.6, backend="torch"), K, V)) < 1e-6
    assert rel_rms(_write(variants.get("precond_kda", alpha=alpha, beta=0.6), K, V).matrix, pk) > 1e-2


@pytest.mark.parametrize(
    "name,params",
    [
        ("gdn2", {"alpha": [0.9, 0.95, 1.0, 0.99], "beta": ("uniform", 0.2, 1.0), "gamma": 0.5, "seed": 3}),
        ("comba", {"mu": 0.7, "alpha": ("uniform", 0.9, 1.0)}),
        ("gated_oja", {"alpha": 0.9, "beta": 0.5}),
        ("precond_kda", {"x": 2.0, "center": 0.1, "beta_atk": ("uniform", 0.5, 1.0)}),
        ("titans", {"eta": 0.0, "alpha": 1.0, "beta": 1.0}),
        ("ttt", {"expand": 2, "seed": 7}),
        ("log_linear", {"base": "gated_delta", "lam": [1.0, 0.5], "beta": 0.5}),
    ],
)
def test_params_and_labels_rebuild_the_memory(name, params):
    import json

    mem = variants.get(name, **params)
    again = variants.resolve(variants.label(mem))
    assert again.params == mem.params == variants.get(name, **mem.params).params
    json.dumps(mem.params)
    K, V = _inputs(B=1, T=9, d=4, dv=3)
    assert torch.equal(mem.read(_write(mem, K, V), K), again.read(_write(again, K, V), K))


def test_log_linear_over_the_delta_rule_reads_its_last_key_back_only_with_unit_weights():
    """T12 through the levels: the last key reads back lam_l v with l the level its write merged into."""
    exact = check_variant(variants.get("log_linear", base="gated_delta", alpha=0.9, lam=1.0), d=8)
    assert {r.check: r.status for r in exact.results}["T12 last key"] == "pass", str(exact)
    mem = variants.get("log_linear", base="gated_delta", alpha=0.9, lam=0.5)
    assert declared(mem).delta_rule is False
    K, V = _inputs(B=1, T=24, d=16, dv=4)
    st = _write(mem, K, V)  # 24 = 16 + 8: the last write merged 8 tokens into level 4, read with 0.5^3
    assert rel_rms(mem.read(st, K[:, -1:]), 0.125 * V[:, -1:]) < 1e-5
