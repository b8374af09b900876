"""CyFA (cyclic flow attention) against fla-core 0.6.0's ``naive_recurrent_cyfa`` and against a float64 loop in
relative time written here from the Dirichlet kernel's closed form (relative RMS error < 1e-5 in float32); its
whole-step limit, sliding-window attention; its bytes; check_variant; bad parameters."""

import math

import pytest
import torch
from memory_support import pairs, rel_rms

from lacapacity import check_variant, variants
from lacapacity.errors import CapacityError
from lacapacity.variants import precision


def _write(mem, K, V, cuts):
    st = mem.init_state(K.shape[0], K.shape[2], V.shape[2])
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        st = mem.write(st, K[:, a:b], V[:, a:b])
    return st


def _readout(P, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.eye(P, dtype=torch.float64) + 0.3 * torch.randn(P, P, generator=g, dtype=torch.float64)).tolist()


DRAWN = {"alpha": ("uniform", 0.8, 1.0), "beta": ("uniform", 0.5, 1.5), "delta": ("uniform", 0.3, 1.0), "seed": 4}


@pytest.mark.requires_fla
@pytest.mark.parametrize("P", [7, pytest.param(15, marks=pytest.mark.slow)])
def test_cyfa_matches_fla_naive_recurrent_cyfa(P):
    """Every token's read of its own query, and the final state (fla's P + 1 columns, column 1 always zero)."""
    from fla.ops.cyfa.naive import naive_recurrent_cyfa

    B, T, d, dv = 2, 40, 12, 6
    K, V = pairs(T, d, dv, B=B, seed=P)
    Q, _ = pairs(T, d, dv, B=B, seed=P + 10)
    mem = variants.get("cyfa", slots=P, scale=3.0, readout=_readout(P, P), **DRAWN)
    alpha, beta, delta = (mem._draw(p, B, 0, T, "cpu").float() for p in ("alpha", "beta", "delta"))
    w = torch.full((d,), d**-0.5)  # fla RMS-normalises q and k: a weight of d^-1/2 gives back the unit rows
    R = mem.readout.float()[None]
    o, (hk, hv, lam) = naive_recurrent_cyfa(
        Q[:, :, None], K[:, :, None], V[:, :, None], torch.log(alpha)[..., None], delta[..., None], beta[..., None],
        R, w, w, 1e-12, 1e-12, scale=3.0, output_final_state=True,
    )  # fmt: skip
    st, ours = mem.init_state(B, d, dv), []
    for t in range(T):  # token by token, each read with its own query after its write
        st = mem.write(st, K[:, t : t + 1], V[:, t : t + 1])
        ours.append(mem.read(st, Q[:, t : t + 1]))
    assert rel_rms(torch.cat(ours, 1), o[:, :, 0]) < 1e-5
    chunked = _write(mem, K, V, [0, 7, 8, 19, 40])
    keep = [0] + list(range(2, P + 1))  # fla's columns that hold numbers
    assert torch.count_nonzero(hk[:, 0, :, 1]) == 0
    assert rel_rms(chunked.keys, hk[:, 0][..., keep]) < 1e-5
    assert rel_rms(chunked.values, hv[:, 0][:, keep]) < 1e-5
    assert torch.allclose(chunked.clock, lam[:, 0].double(), rtol=1e-6)
    assert rel_rms(mem.read(chunked, Q[:, -1:]), o[:, -1:, 0]) < 1e-5


def _dirichlet(x, P):
    """sin(pi x) / (P sin(pi x / P)) as the sum of its P frequencies, float64 (the closed form's other side)."""
    p = torch.arange(-(P // 2), P // 2 + 1, dtype=torch.float64)
    return torch.cos(2 * math.pi * x[..., None] * p / P).sum(-1) / P


@pytest.mark.parametrize("P,d", [(7, 12), (9, 96), pytest.param(5, 100, marks=pytest.mark.slow)])
def test_cyfa_matches_a_relative_time_float64_loop(P, d):
    """K = alpha Sh(delta) K + beta e_0 k^T with Sh(delta)[r, s] = D(r - s - delta), read (R V)^T softmax(scale R K q):
    the slots in relative time, no clock, no Fourier coefficients (also at the head dimensions 96 and 100)."""
    B, T, dv = 2, 30, 6
    K, V = pairs(T, d, dv, B=B, seed=3 * P)
    Q, _ = pairs(8, d, dv, B=B, seed=3 * P + 7)
    mem = variants.get("cyfa", slots=P, scale=2.5, readout=_readout(P, 3 * P), **DRAWN)
    st = _write(mem, K, V, [0, 5, 6, 30])
    alpha, beta, delta = (mem._draw(p, B, 0, T, "cpu") for p in ("alpha", "beta", "delta"))
    R = mem.readout
    r = torch.arange(P, dtype=torch.float64)
    want = torch.zeros(B, 8, dv, dtype=torch.float64)
    for b in range(B):
        Ks, Vs = torch.zeros(P, d, dtype=torch.float64), torch.zeros(P, dv, dtype=torch.float64)
        for t in range(T):
            shift = _dirichlet(r[:, None] - r[None, :] - delta[b, t], P)  # [P, P]
            Ks, Vs = alpha[b, t] * shift @ Ks, alpha[b, t] * shift @ Vs
            Ks[0] += beta[b, t] * K[b, t].double()
            Vs[0] += beta[b, t] * V[b, t].double()
        for j in range(8):
            a = torch.softmax(2.5 * R @ Ks @ Q[b, j].double(), dim=0)
            want[b, j] = (R @ Vs).T @ a
    assert rel_rms(mem.read(st, Q), want) < 1e-5


def test_sliding_window_attention_is_the_whole_step_limit():
    """delta = 1, alpha = 1, R = I: after n = P writes the read is swa(window=P) exactly; for n < P the P - n empty
    slots add exp(0) to the normaliser; a fractional step blurs the window."""
    P, d, dv = 9, 16, 8
    K, V = pairs(P, d, dv, B=2, seed=5)
    Q, _ = pairs(6, d, dv, B=2, seed=6)
    mem, swa = variants.get("cyfa", slots=P, scale=4.0), variants.get("swa", window=P, scale=4.0, normalize=True)
    got = mem.read(_write(mem, K, V, [0, 4, P]), torch.cat([Q, K], 1))
    want = swa.read(swa.write(swa.init_state(2, d, dv), K, V), torch.cat([Q, K], 1))
    assert rel_rms(got, want) < 1e-5
    n = 5
    e = torch.exp(4.0 * Q @ K[:, :n].transpose(1, 2))  # [B, 6, n]
    short = mem.read(mem.write(mem.init_state(2, d, dv), K[:, :n], V[:, :n]), Q)
    assert rel_rms(short, (e @ V[:, :n]) / (e.sum(-1, keepdim=True) + (P - n))) < 1e-5
    blur = variants.get("cyfa", slots=P, scale=4.0, delta=0.5)
    assert rel_rms(blur.read(_write(blur, K, V, [0, P]), Q), want[:, :6]) > 1e-2


def test_cyfa_bytes_check_variant_and_labels():
    mem = variants.get("cyfa", slots=15, alpha=0.95)
    assert mem.state_numel(16, 8) == 15 * 24
    assert precision.state_bytes(mem, 16, 8, "float32") == 4 * 15 * 24  # the clock is bookkeeping: not counted
    assert precision.state_bytes(mem, 16, 8, "bfloat16") == 2 * 15 * 24
    report = check_variant(mem, d=16)
    assert report.passed, str(report)
    drawn = variants.get("cyfa", slots=5, readout=_readout(5, 1), **DRAWN)
    again = variants.resolve(variants.label(drawn))
    assert again.params == drawn.params
    K, V = pairs(9, 4, 3, B=1)
    assert torch.equal(drawn.read(_write(drawn, K, V, [0, 9]), K), again.read(_write(again, K, V, [0, 9]), K))


@pytest.mark.parametrize(
    "params,message",
    [
        ({"slots": 8}, r"cyfa: slots must be odd .* got 8"),
        ({"slots": 3, "readout": [[1.0, 0.0], [0.0, 1.0]]}, r"cyfa: readout must be a finite 3 x 3 matrix .* \[2, 2\]"),
        ({"alpha": 1.5}, r"cyfa: alpha must lie in \(0, 1\], got 1.5"),
        ({"delta": 0.0}, r"cyfa: delta must lie in \(0, inf\), got 0.0"),
    ],
)
def test_bad_parameters_are_one_line(params, message):
    with pytest.raises(CapacityError, match=message):
        variants.get("cyfa", **params)
