"""Head layouts (lacapacity.variants.heads) against a per-head computation written here, and their closed form T20."""

import math

import pytest
import torch

from lacapacity import CapacityError, theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.variants import heads


def _per_head_reads(K, V, Q, H, HV):
    """Reads of the additive memory in H key and HV value heads, head by head with explicit outer products."""
    B, n, d = K.shape
    dv = V.shape[2]
    G = max(H, HV)
    dk, dvh = d // H, dv // HV
    out = torch.zeros(B, Q.shape[1], dv, dtype=torch.float64)
    count = torch.zeros(HV)
    for g in range(G):
        a, b = g // (G // H), g // (G // HV)  # this state's key head and value head
        k = K[:, :, a * dk : (a + 1) * dk].double()
        k = k / k.norm(dim=-1, keepdim=True)
        q = Q[:, :, a * dk : (a + 1) * dk].double()
        q = q / q.norm(dim=-1, keepdim=True)
        S = sum(k[:, i, :, None] * V[:, i, None, b * dvh : (b + 1) * dvh].double() for i in range(n))
        out[:, :, b * dvh : (b + 1) * dvh] += q @ S
        count[b] += 1
    for b in range(HV):
        out[:, :, b * dvh : (b + 1) * dvh] /= count[b]
    return out


@pytest.mark.parametrize("H,HV", [(4, 4), (1, 4), (4, 1), (2, 8), (8, 2)])
def test_heads_read_what_each_head_holds(H, HV):
    K = keys.make("gaussian", 24, 16, batch=2, seed=0)
    V = values.make("gaussian", 24, 16, batch=2, seed=0)
    mem = heads.split(variants.get("linear"), heads=H, value_heads=HV)
    r = mem.read(mem.write(mem.init_state(2, 16, 16), K, V), K[:, :7])
    want = _per_head_reads(K, V, K[:, :7], H, HV)
    assert torch.allclose(r.double(), want, atol=1e-5)
    assert mem.state_numel(16, 16) == 16 * 16 // min(H, HV) == theory.heads_state_numel(16, 16, H, HV)


def test_t20_random_key_error_against_a_per_head_simulation():
    n, d, B = 96, 32, 160
    K = keys.make("gaussian", n, d, batch=B, seed=3)
    V = values.make("gaussian", n, d, batch=B, seed=3)
    for H, HV in ((4, 4), (2, 8), (8, 2)):
        err = ((_per_head_reads(K, V, K, H, HV) - V.double()) ** 2).sum(-1).mean(-1)  # [B]
        m, se = float(err.mean()), float(err.std() / math.sqrt(B))
        want = theory.heads_random_keys_error(n, d, H, HV)
        assert abs(m - want) <= 3 * se and 3 * se < 0.03 * want, (H, HV, m, want, se)
        mem = heads.split(variants.get("linear"), heads=H, value_heads=HV)  # the wrapper gives the same numbers
        got = probe.recall(mem, K[:8], V[:8], checkpoints=[n], decode=False).mse.values[0]
        assert torch.allclose(torch.as_tensor(got), err[:8], rtol=1e-4)
    assert theory.heads_random_keys_error(65, 64, 4) == 4.0  # (n - 1) H / d: the hypothesis, for H = HV
    assert theory.heads_capacity(0.5, 64, 4, 16) == 1 + 0.5 * 64 / 4


def test_layouts_are_checked_in_one_line():
    with pytest.raises(CapacityError, match="heads = 3 must divide the key dimension d = 16"):
        heads.check_layout(16, 16, 3)
    with pytest.raises(CapacityError, match="one of heads = 2 and value_heads = 3 must divide the other"):
        heads.check_layout(16, 18, 2, 3)
    with pytest.raises(CapacityError, match="must divide the other"):
        theory.heads_random_keys_error(10, 16, 2, 3)


def test_heads_and_precision_compose_and_keep_batch_items_apart():
    from lacapacity.variants import precision

    K = keys.make("gaussian", 40, 16, batch=3, seed=1)
    V = values.make("gaussian", 40, 16, batch=3, seed=1)
    mem = heads.split(precision.stored(variants.get("delta"), "bfloat16", "step"), heads=4)
    st = mem.write(mem.init_state(3, 16, 16), K, V)
    assert torch.equal(st.inner.to(torch.bfloat16).float(), st.inner) and st.inner.shape == (12, 4, 4)
    alone = mem.write(mem.init_state(1, 16, 16), K[2:], V[2:])
    assert torch.equal(mem.read(alone, K[2:]), mem.read(st, K)[2:])
    assert mem.state_bytes(16, 16, "bfloat16") == 4 * 4 * 4 * 2
