"""The token-by-token path of a stored state for the per-channel gated memories (gla, kda), against a simulation
written here from their recurrences (S = Diag(alpha) S + k^T v; S = (I - b k^T k) Diag(alpha) S + b k^T v) and
against writing through the memory's own kernels one token at a time."""

import pytest
import torch

from lacapacity import variants
from lacapacity.inputs import keys, values
from lacapacity.variants import precision, quantise

D, DV, B, N = 16, 8, 3, 120
GATES = [0.8] * 8 + [0.97] * 8  # one gate per key channel (row of the state)


def _pairs(seed=0):
    return keys.make("gaussian", N, D, batch=B, seed=seed), values.make("gaussian", N, DV, batch=B, seed=seed)


def _simulate(mode, alpha, beta, state_dtype):
    """Row convention, keys normalised, the state rounded after every write (int8 rows with error feedback, or a
    float format by a cast)."""
    K, V = _pairs()
    K = K / K.norm(dim=-1, keepdim=True)
    a = torch.as_tensor(alpha, dtype=torch.float32).expand(D)[:, None]  # [D, 1]
    S, r = torch.zeros(B, D, DV), torch.zeros(B, D, DV)
    for t in range(N):
        k, v = K[:, t, :, None], V[:, t, None, :]  # [B, D, 1], [B, 1, DV]
        S = a * S
        if mode == "gla":
            S = S + k * v
        else:
            S = S + k * (beta * (v - (k * S).sum(1, keepdim=True)))
        if state_dtype == "bfloat16":
            S = S.to(torch.bfloat16).float()
        else:
            x = S + r
            S = quantise.quantise(x, "int8/row")
            r = x - S
    return S


@pytest.mark.parametrize("mode", ["gla", "kda"])
@pytest.mark.parametrize("alpha", [0.9, GATES], ids=["scalar", "per-channel"])
@pytest.mark.parametrize("state_dtype", ["bfloat16", "int8/row+ef"])
def test_the_token_loop_of_channel_gated_memories_is_their_recurrence(mode, alpha, state_dtype):
    params = {"alpha": alpha} | ({"beta": 0.5} if mode == "kda" else {})
    mem = precision.stored(variants.get(mode, **params), state_dtype, "step")
    assert mem._fast == mode
    K, V = _pairs()
    st = mem.write(mem.init_state(B, D, DV), K[:, :50], V[:, :50])  # in two calls: the loop carries the residual
    got = mem.write(st, K[:, 50:], V[:, 50:]).inner
    want = _simulate(mode, alpha, 0.5, state_dtype)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # the same writes through the memory's own kernels, one token at a time: equal but for rounding flips of
    # last-bit differences (the chunked kernel sums k S in another order); in bfloat16 no flip at this size
    slow = precision.stored(variants.get(mode, **params), state_dtype, "step")
    slow._fast = None
    ref = slow.write(slow.init_state(B, D, DV), K, V).inner
    if state_dtype == "bfloat16":
        assert torch.equal(got, ref)
    else:  # a flip moves an entry by one step of its row's scale (1/127 of the row's largest entry)
        assert float((got - ref).abs().max()) <= 1.01 * float(ref.abs().amax(-1).max()) / 127


def test_a_drawn_gate_still_writes_through_the_memory():
    mem = precision.stored(variants.get("kda", alpha=("uniform", 0.9, 1.0), seed=1), "bfloat16", "step")
    assert mem._fast is None
