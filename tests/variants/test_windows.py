"""Sliding-window attention and the window + state hybrids: against float64 loops written from their definitions
(relative RMS error < 1e-5 in float32), their reductions (a window as long as the input is softmax; the hybrid with
an empty window is its state memory), their sizes as a function of n, and check_variant."""

import math

import pytest
import torch
from memory_support import pairs, rel_rms, write_in_chunks

from lacapacity import check_variant, variants
from lacapacity.inputs import keys, values
from lacapacity.variants import precision


def _inputs(B=2, T=30, d=12, dv=6, seed=0):
    K, V = pairs(T, d, dv, B=B, seed=seed)
    Q = keys.make("gaussian", 5, d, batch=B, seed=seed + 2)
    return K, V, torch.cat([K[:, -3:], Q], 1)


def _write(mem, K, V):
    """Write (K, V) in uneven chunks (a chunk longer than the window, one of one token)."""
    return write_in_chunks(mem, K, V, (0, 7, 8, 19))


def _window_ref(K, V, Q, w, scale):
    """softmax(scale q k_i) over the last w pairs, float64: numerator, denominator and the read (exp(s) unshifted)."""
    k, v, q = K[:, -w:].double(), V[:, -w:].double(), Q.double()
    e = torch.exp(scale * torch.einsum("bmd,btd->bmt", q, k))
    return e @ v, e.sum(-1, keepdim=True), (e @ v) / e.sum(-1, keepdim=True)


def _gated_delta_ref(K, V, alpha, beta):
    """S = alpha (I - beta k^T k) S + beta k^T v over the pairs in order, float64 ``[B, d, dv]``."""
    S = torch.zeros(K.shape[0], K.shape[2], V.shape[2], dtype=torch.float64)
    for t in range(K.shape[1]):
        k, v = K[:, t].double(), V[:, t].double()
        S = alpha * (S - beta * torch.einsum("bk,bv->bkv", k, torch.einsum("bk,bkv->bv", k, S)))
        S = S + beta * torch.einsum("bk,bv->bkv", k, v)
    return S


@pytest.mark.parametrize("w", [1, 5, 12])
def test_swa_reads_softmax_over_the_last_w_pairs(w):
    K, V, Q = _inputs()
    mem = variants.get("swa", window=w, scale=3.0)
    cache = _write(mem, K, V)
    assert cache.keys.shape[1] == w
    _, _, want = _window_ref(K, V, Q, w, 3.0)
    assert rel_rms(mem.read(cache, Q), want) < 1e-5


def test_swa_with_a_window_as_long_as_the_input_is_softmax():
    K, V, Q = _inputs()
    swa, soft = variants.get("swa", window=30), variants.get("softmax")
    a = swa.read(_write(swa, K, V), Q)
    b = soft.read(soft.write(soft.init_state(2, 12, 6), K, V), Q)
    assert rel_rms(a, b) < 1e-6
    assert rel_rms(variants.get("swa", window=29).read(_write(variants.get("swa", window=29), K, V), Q), b) > 1e-3


def test_swa_recalls_exactly_inside_the_window_and_not_outside():
    K, V, _ = _inputs(B=1, T=40, d=32, dv=8)
    mem = variants.get("swa", window=10, scale=60.0)
    cache = _write(mem, K, V)
    inside = mem.read(cache, K[:, -10:])
    assert (inside - V[:, -10:]).abs().max() < 1e-3
    outside = mem.read(cache, K[:, :10])  # every key of the window is far from these: no pair reads back
    assert (outside - V[:, :10]).pow(2).sum(-1).min() > 0.1


def test_swa_recall_is_its_closed_form():
    """Argmax recall of every stored key after n writes is min(w, n) / n: exact inside the window, none outside."""
    from lacapacity.tasks import probe

    K = keys.make("gaussian", 32, 32, batch=2, seed=0)
    V = values.make("gaussian", 32, 32, batch=2, seed=1)
    ns = [4, 8, 12, 16, 32]
    ds = probe.recall(variants.get("swa", window=8, scale=50.0), K, V, checkpoints=ns)
    got = ds.recall.mean("batch").values
    assert max(abs(g - min(8, n) / n) for g, n in zip(got, ns)) < 1e-6  # recall is kept in float32


@pytest.mark.parametrize("holds", ["evicted", "all"])
def test_hybrid_sum_with_gated_delta_state_matches_float64(holds):
    K, V, Q = _inputs(seed=3)
    w = 6
    mem = variants.get(
        "hybrid", window=w, state="gated_delta(alpha=0.9, beta=0.7, backend=torch)", holds=holds, scale=2.0
    )
    ours = mem.read(_write(mem, K, V), Q)
    old = slice(0, K.shape[1] - w) if holds == "evicted" else slice(None)
    S = _gated_delta_ref(K[:, old], V[:, old], 0.9, 0.7)
    want = _window_ref(K, V, Q, w, 2.0)[2] + Q.double() @ S
    assert rel_rms(ours, want) < 1e-5


def test_hybrid_normalise_with_taylor_linear_state_matches_float64():
    """Based-style: the state's phi(q) . phi(k) = 1 + q.k + (q.k)^2 / 2 stands in for exp(q.k) of the evicted pairs."""
    K, V, Q = _inputs(seed=5)
    w = 7
    mem = variants.get("hybrid", window=w, state="linear(feature=taylor2)", combine="normalise", scale=1.0)
    ours = mem.read(_write(mem, K, V), Q)
    num, den, _ = _window_ref(K, V, Q, w, 1.0)
    s = torch.einsum("bmd,btd->bmt", Q.double(), K[:, :-w].double())
    kern = 1 + s + s * s / 2
    want = (num + kern @ V[:, :-w].double()) / (den + kern.sum(-1, keepdim=True))
    assert rel_rms(ours, want) < 1e-5
    summed = variants.get("hybrid", window=w, state="linear(feature=taylor2)", scale=1.0)
    assert rel_rms(summed.read(_write(summed, K, V), Q), want) > 1e-2  # the two combines differ


def test_hybrid_reductions_to_its_parts():
    K, V, Q = _inputs(seed=7)
    hyb = variants.get("hybrid", window=30, state="delta", scale=2.0)  # nothing leaves the window
    swa = variants.get("swa", window=30, scale=2.0)
    assert rel_rms(hyb.read(_write(hyb, K, V), Q), swa.read(_write(swa, K, V), Q)) < 1e-6
    assert _write(hyb, K, V).state.abs().max() == 0  # the state memory was never written
    lin = variants.get("linear")
    hyb = variants.get("hybrid", window=1, state="linear", holds="all", scale=2.0)
    want = lin.read(lin.write(lin.init_state(2, 12, 6), K, V), Q) + V[:, -1:]  # a window of one reads its value
    assert rel_rms(hyb.read(_write(hyb, K, V), Q), want) < 1e-6


@pytest.mark.parametrize(
    "label,fixed",
    [
        ("swa(window=5)", 0),
        ("hybrid(window=5, state=gated_delta)", 8 * 4),
        ("hybrid(window=5, combine=normalise)", 8 * 5),
    ],
)
def test_sizes_grow_to_the_window_and_the_bytes_follow(label, fixed):
    mem = variants.resolve(label)
    K, V, _ = _inputs(B=1, T=9, d=8, dv=4)
    st = mem.init_state(1, 8, 4)
    for n in range(1, 10):
        st = mem.write(st, K[:, n - 1 : n], V[:, n - 1 : n])
        assert mem.numel(st) == mem.state_numel(8, 4, n=n) == min(n, 5) * 12 + fixed
    assert precision.state_bytes(mem, 8, 4, "bfloat16", n=9) == (5 * 12 + fixed) * 2
    with pytest.raises(ValueError, match="pass n"):
        mem.state_numel(8, 4)


@pytest.mark.parametrize(
    "label",
    [
        "swa(window=6)",
        "hybrid(window=6, state=gated_delta)",
        "hybrid(window=6, combine=normalise, state='linear(feature=taylor2)')",
    ],
)
def test_windows_pass_check_variant(label):
    report = check_variant(variants.resolve(label), d=8)
    assert report.passed, str(report)
    t8 = next(k for k in report.bounds if k.startswith("T8"))
    assert math.isnan(report.bounds[t8])  # a softmax read of a cache: T8 does not bind it


def test_hybrid_declares_its_state_memorys_matrices():
    from lacapacity.variants.declares import declared

    assert declared(variants.get("hybrid", state="lsq")).states == 2  # lsq's A and B
    assert declared(variants.get("hybrid")).states == 1 and declared(variants.get("swa")).state == "growing"
    assert declared(variants.get("hybrid", state="linear(backend=triton)")).differentiable is False


def test_hybrid_params_rebuild_it_and_bad_parameters_are_one_line_errors():
    mem = variants.get("hybrid", window=3, state="gated_delta(alpha=0.9)", holds="all", combine="normalise")
    again = variants.get("hybrid", **mem.params)
    assert again.params == mem.params and variants.label(again) == variants.label(mem)
    for kw, match in [
        ({"window": 0}, "window"),
        ({"holds": "some"}, "holds must be one of"),
        ({"combine": "max"}, "combine must be one of"),
        ({"state": "softmax"}, "fixed state"),
        ({"state": 3}, "label"),
    ]:
        with pytest.raises(ValueError, match=match):
            variants.get("hybrid", **kw)
