"""The torch backend (kernels/chunked.py: closed and chunked WY forms) against the one-token oracle.

Also through the dispatch (backend="torch"), for gradients (learned keys optimise through it),
for gates small enough that naive cumulative products would overflow, and for long sequences.
"""

from __future__ import annotations

import pytest
import torch

from lacapacity import kernels
from lacapacity.kernels import chunked, reference

MODES = reference.MODES


def _case(mode, B, T, d, dv, seed, *, gate_low=0.5):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(B, T, d, generator=g)
    v = torch.randn(B, T, dv, generator=g)
    s0 = torch.randn(B, d, dv, generator=g)
    beta = 0.05 + 1.9 * torch.rand(B, T, generator=g) if mode in reference.USES_BETA else None
    if mode in reference.SCALAR_GATE:
        gate = gate_low + (1 - gate_low) * torch.rand(B, T, generator=g)
    elif mode in reference.CHANNEL_GATE:
        gate = gate_low + (1 - gate_low) * torch.rand(B, T, d, generator=g)
    else:
        gate = None
    return k, v, s0, beta, gate


def _rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "B,T,d,dv,chunk", [(1, 1, 4, 3, 64), (3, 150, 33, 20, 64), (2, 65, 16, 40, 16), (5, 7, 100, 9, 3)]
)
def test_matches_the_oracle(mode, B, T, d, dv, chunk):
    k, v, s0, beta, gate = _case(mode, B, T, d, dv, seed=B * 1000 + T)
    for init in (None, s0):
        want = reference.recurrence(k, v, mode=mode, beta=beta, gate=gate, initial_state=init)
        got = chunked.recurrence(k, v, mode=mode, beta=beta, gate=gate, initial_state=init, chunk=chunk)
        assert got.dtype == torch.float32 and got.shape == (B, d, dv)
        assert _rel(got, want) <= 1e-5, (mode, init is None)


@pytest.mark.parametrize("mode", ["decay", "gla", "gated_delta", "kda"])
def test_small_gates_do_not_overflow(mode):
    k, v, s0, beta, gate = _case(mode, 2, 200, 12, 6, seed=3, gate_low=0.01)
    gate = gate * 0.05  # gates down to 5e-4: products over a chunk fall far below float32's range
    want = reference.recurrence(k, v, mode=mode, beta=beta, gate=gate, initial_state=s0)
    got = chunked.recurrence(k, v, mode=mode, beta=beta, gate=gate, initial_state=s0)
    assert torch.isfinite(got).all() and _rel(got, want) <= 1e-5


def test_long_sequence_of_decay_does_not_drift():
    k, v, s0, _, gate = _case("decay", 1, 20000, 8, 4, seed=5, gate_low=0.999)
    want = reference.recurrence(k, v, mode="decay", gate=gate, initial_state=s0)
    assert _rel(chunked.recurrence(k, v, mode="decay", gate=gate, initial_state=s0), want) <= 1e-5


@pytest.mark.parametrize("mode", ["decay", "gla", "delta", "gated_delta", "kda"])
def test_gradients_match_the_oracle(mode):
    k0, v, s0, beta, g0 = _case(mode, 2, 70, 9, 5, seed=11)
    grads = []
    for f in (reference.recurrence, chunked.recurrence):
        k = k0.clone().requires_grad_()
        g = None if g0 is None else g0.clone().requires_grad_()
        (f(k, v, mode=mode, beta=beta, gate=g, initial_state=s0) ** 2).sum().backward()
        grads.append((k.grad, None if g is None else g.grad))
    assert _rel(grads[1][0], grads[0][0]) <= 1e-4
    if g0 is not None:
        assert _rel(grads[1][1], grads[0][1]) <= 1e-4


def test_dispatch_torch_backend_is_the_chunked_form_and_updates_in_place():
    k, v, s0, beta, gate = _case("gated_delta", 3, 40, 10, 6, seed=2)
    state = s0.clone()
    out = kernels.update(state, k, v, mode="gated_delta", beta=beta, alpha=gate, backend="torch")
    assert out is state
    want = reference.recurrence(k, v, mode="gated_delta", beta=beta, gate=gate, initial_state=s0)
    assert _rel(state, want) <= 1e-5
