"""Mixture of memories: against a float64 loop written here (relative RMS error < 1e-5 in float32), its reductions
(one memory is the memory itself), the router, sizes and check_variant."""

import pytest
import torch
from memory_support import pairs, rel_rms, write_in_chunks

from lacapacity import check_variant, variants
from lacapacity.inputs import keys


def _inputs(B=2, T=40, d=12, dv=6, seed=0):
    K, V = pairs(T, d, dv, B=B, seed=seed)
    Q = torch.cat([K[:, :5], keys.make("gaussian", 5, d, batch=B, seed=seed + 2)], 1)
    return K, V, Q


def _write(mem, K, V):
    return write_in_chunks(mem, K, V, (0, 3, 4, 21))


def _reference(mem, K, V, Q, alpha, beta, M, top, shared):
    """Route with the memory's router matrix (scores of unit rows, top-k, softmax over the top), write each token to
    its memories with S = alpha (I - beta k^T k) S + beta k^T v (alpha = beta = 1 with beta None: S + k^T v), read the
    mix. Float64, one token at a time."""
    W = mem.router(K.shape[2])
    B, T, d = K.shape
    slots = M + int(shared)
    S = torch.zeros(B, slots, d, V.shape[2], dtype=torch.float64)

    def step(S, k, v):
        if beta is None:
            return S + torch.outer(k, v)
        return alpha * (S - beta * torch.outer(k, k @ S)) + beta * torch.outer(k, v)

    for b in range(B):
        for t in range(T):
            k, v = K[b, t].double(), V[b, t].double()
            s = (k / k.norm()) @ W
            for m in torch.topk(s, top).indices.tolist() + ([M] if shared else []):
                S[b, m] = step(S[b, m], k, v)
    out = torch.zeros(B, Q.shape[1], V.shape[2], dtype=torch.float64)
    for b in range(B):
        for i in range(Q.shape[1]):
            q = Q[b, i].double()
            sc, ix = torch.topk((q / q.norm()) @ W, top)
            w = torch.softmax(sc, 0)
            out[b, i] = sum(w[j] * (q @ S[b, int(ix[j])]) for j in range(top))
            if shared:
                out[b, i] += q @ S[b, M]
    return out


@pytest.mark.parametrize(
    "label,alpha,beta",
    [("linear", 1.0, None), ("gated_delta(alpha=0.9, beta=0.7, backend=torch)", 0.9, 0.7)],
)
@pytest.mark.parametrize("M,top,shared", [(4, 2, False), (3, 1, True)])
def test_mom_matches_a_float64_loop(label, alpha, beta, M, top, shared):
    K, V, Q = _inputs(seed=M + top)
    mem = variants.get("mom", memories=M, top=top, memory=label, shared=shared, seed=5)
    ours = mem.read(_write(mem, K, V), Q)
    assert rel_rms(ours, _reference(mem, K, V, Q, alpha, beta, M, top, shared)) < 1e-5


def test_one_memory_is_the_memory_itself_and_the_router_spreads_tokens():
    K, V, Q = _inputs(seed=1)
    one, gd = variants.get("mom", memories=1, top=1, memory="gated_delta"), variants.get("gated_delta", backend="torch")
    st = _write(one, K, V)
    assert rel_rms(one.read(st, Q), gd.read(gd.write(gd.init_state(2, 12, 6), K, V), Q)) < 1e-6
    idx, w = variants.get("mom", memories=4, top=2).route(K)
    counts = torch.bincount(idx.flatten(), minlength=4)
    assert (counts > 0).all() and int(counts.sum()) == 2 * 2 * 40  # every memory gets tokens, each token two
    assert torch.allclose(w.sum(-1), torch.ones(2, 40)) and (w[..., 0] >= w[..., 1]).all()


def test_sizes_check_variant_params_and_errors():
    mem = variants.get("mom", memories=3, top=2, shared=True, memory="gated_delta")
    assert mem.state_numel(8, 4) == 4 * 32
    assert variants.get("mom", **mem.params).params == mem.params
    report = check_variant(mem, d=8)
    assert report.passed, str(report)
    for kw, match in [
        ({"top": 5}, "top must be at most"),
        ({"memory": "lsq"}, "one \\[B, d, dv\\] tensor state"),
        ({"memory": "gated_delta(alpha=('uniform', 0.8, 1.0))"}, "tensor state"),
        ({"shared": 1}, "shared must be"),
    ]:
        with pytest.raises(ValueError, match=match):
            variants.get("mom", **kw)
