"""The oracle (kernels/reference.py) against independent float64 brute force, and the dispatch's input checks.

The brute forces here are written from docs/theory.md in matrix form, one token at a time
in float64: (I - b k^T k) S + b k^T v with an explicit identity, Diag(alpha) as a matrix, and
the closed forms of decay (T11, lacapacity.theory.decay_readout) and of gla (products of gates).
"""

from __future__ import annotations

import pytest
import torch

from lacapacity import kernels, theory
from lacapacity.errors import CapacityError
from lacapacity.kernels import reference

B, T, D, DV = 3, 11, 7, 5


def _inputs(seed: int, *, unit: bool = False):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(B, T, D, generator=g, dtype=torch.float64)
    if unit:
        k = k / k.norm(dim=-1, keepdim=True)
    v = torch.randn(B, T, DV, generator=g, dtype=torch.float64)
    s0 = torch.randn(B, D, DV, generator=g, dtype=torch.float64)
    beta = 0.1 + 1.8 * torch.rand(B, T, generator=g, dtype=torch.float64)
    a = 0.5 + 0.5 * torch.rand(B, T, generator=g, dtype=torch.float64)
    alpha = 0.5 + 0.5 * torch.rand(B, T, D, generator=g, dtype=torch.float64)
    return k, v, s0, beta, a, alpha


def _brute(mode, k, v, s0, beta, a, alpha):
    """The recurrences of docs/theory.md in float64 matrix form, token by token, batch item by item."""
    out = []
    eye = torch.eye(D, dtype=torch.float64)
    for b in range(B):
        S = s0[b].clone()
        for t in range(T):
            kt = k[b, t][None, :]  # [1, d] row vector
            vt = v[b, t][None, :]  # [1, dv]
            P = eye - beta[b, t] * kt.T @ kt  # I - b k^T k
            A = torch.diag(alpha[b, t])  # Diag(alpha_t)
            if mode == "linear":
                S = S + kt.T @ vt
            elif mode == "decay":
                S = a[b, t] * S + kt.T @ vt
            elif mode == "gla":
                S = A @ S + kt.T @ vt
            elif mode == "delta":
                S = P @ S + beta[b, t] * kt.T @ vt
            elif mode == "gated_delta":
                S = a[b, t] * (P @ S) + beta[b, t] * kt.T @ vt
            elif mode == "kda":
                S = P @ A @ S + beta[b, t] * kt.T @ vt
        out.append(S)
    return torch.stack(out)


def _run_reference(mode, k, v, s0, beta, a, alpha, normalize=False):
    kw = {}
    if mode in reference.USES_BETA:
        kw["beta"] = beta.float()
    if mode in reference.SCALAR_GATE:
        kw["gate"] = a.float()
    if mode in reference.CHANNEL_GATE:
        kw["gate"] = alpha.float()
    return reference.recurrence(k.float(), v.float(), mode=mode, initial_state=s0.float(), normalize=normalize, **kw)


@pytest.mark.parametrize("mode", reference.MODES)
def test_reference_matches_float64_matrix_form(mode):
    k, v, s0, beta, a, alpha = _inputs(1, unit=True)
    want = _brute(mode, k, v, s0, beta, a, alpha)
    got = _run_reference(mode, k, v, s0, beta, a, alpha).double()
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()


@pytest.mark.parametrize("mode", reference.MODES)
def test_reference_normalize_is_unit_keys(mode):
    """normalize=True on keys of any length equals the brute force on the unit keys."""
    k, v, s0, beta, a, alpha = _inputs(2)
    scale = torch.linspace(0.1, 30.0, T, dtype=torch.float64)[None, :, None]
    want = _brute(mode, k / k.norm(dim=-1, keepdim=True), v, s0, beta, a, alpha)
    got = _run_reference(mode, k * scale, v, s0, beta, a, alpha, normalize=True).double()
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()


def test_reference_decay_matches_t11_closed_form():
    """T11: after n writes from S = 0, reading key i gives sum_j a^(n-j) G_ij v_j."""
    g = torch.Generator().manual_seed(3)
    n, d, dv, a = 40, 16, 6, 0.9
    K = torch.randn(2, n, d, generator=g)
    V = torch.randn(2, n, dv, generator=g)
    S = reference.recurrence(K, V, mode="decay", gate=torch.full((2, n), a), normalize=False)
    want = theory.decay_readout(K.double(), V.double(), a)  # [2, n, dv]
    assert ((K.double() @ S.double()) - want).abs().max() <= 1e-5 * want.abs().max()


def test_reference_gla_matches_gate_product_closed_form():
    """gla unrolled: S_T = Diag(prod_t alpha_t) S_0 + sum_t Diag(prod_{s > t} alpha_s) k_t^T v_t."""
    k, v, s0, _, _, alpha = _inputs(4)
    after = torch.flip(torch.cumprod(torch.flip(alpha, [1]), 1), [1])  # [B, T, d]: prod_{s >= t} alpha_s
    later = torch.cat([after[:, 1:], torch.ones(B, 1, D, dtype=torch.float64)], 1)  # prod_{s > t}
    want = after[:, 0, :, None] * s0 + torch.einsum("btk,btv->bkv", later * k, v)
    got = reference.recurrence(
        k.float(), v.float(), mode="gla", gate=alpha.float(), initial_state=s0.float(), normalize=False
    ).double()
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()


def test_reference_delta_t12_exact_recall():
    """T12: unit keys, b = 1: the last key reads back exactly; orthonormal keys all read back (n <= d)."""
    g = torch.Generator().manual_seed(5)
    k = torch.randn(2, 9, 12, generator=g)
    v = torch.randn(2, 9, 4, generator=g)
    S = reference.recurrence(k, v, mode="delta", beta=torch.ones(2, 9))
    kn = k / k.norm(dim=-1, keepdim=True)
    assert (kn[:, -1:] @ S - v[:, -1:]).abs().max() < 1e-5
    Q = torch.linalg.qr(torch.randn(2, 12, 12, generator=g))[0][:, :, :9].transpose(1, 2)  # [2, 9, 12] orthonormal rows
    S = reference.recurrence(Q, v, mode="delta", beta=torch.ones(2, 9), normalize=False)
    assert (Q @ S - v).abs().max() < 1e-5


def test_update_torch_backend_in_place_equals_reference():
    """The torch backend (the chunked forms) updates in place and agrees with the oracle to float32 rounding."""
    k, v, s0, beta, _, _ = _inputs(7)
    state = s0.float().clone()
    ptr = state.data_ptr()
    out = kernels.update(state, k.float(), v.float(), mode="delta", beta=beta.float(), backend="torch")
    assert out is state and state.data_ptr() == ptr
    want = reference.recurrence(k.float(), v.float(), mode="delta", beta=beta.float(), initial_state=s0.float())
    assert float((state - want).abs().max() / want.abs().max()) <= 1e-5


def test_broadcast_parameters_equal_full_tensors():
    """beta as a number, [B] or [B, T] and a gla gate as [d], [B, d] or [B, T, d] mean the same thing."""
    k, v, s0, _, _, _ = _inputs(8)
    k, v, s0 = k.float(), v.float(), s0.float()
    full = kernels.update(
        s0.clone(), k, v, mode="kda", beta=torch.full((B, T), 0.7), alpha=torch.full((B, T, D), 0.9), backend="torch"
    )
    for beta in (0.7, torch.tensor(0.7), torch.full((B,), 0.7), torch.full((1,), 0.7)):
        for gate in (0.9, torch.full((D,), 0.9), torch.full((B, D), 0.9)):
            got = kernels.update(s0.clone(), k, v, mode="kda", beta=beta, alpha=gate, backend="torch")
            assert torch.equal(got, full)


# ------------------------------------------------------------------ bad input


def _ok():
    return torch.zeros(2, 8, 4), torch.randn(2, 3, 8), torch.randn(2, 3, 4)


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize(
    "case, match",
    [
        (lambda s, k, v: dict(state=s, k=k[:, :, :7], v=v, mode="linear"), "shapes do not match"),
        (lambda s, k, v: dict(state=s, k=k, v=v[:1], mode="linear"), "shapes do not match"),
        (lambda s, k, v: dict(state=s, k=k, v=v[:, :2], mode="linear"), "shapes do not match"),
        (lambda s, k, v: dict(state=s, k=k[0], v=v, mode="linear"), "3 dimensions"),
        (lambda s, k, v: dict(state=s.double(), k=k, v=v, mode="linear"), "state must be float32"),
        (lambda s, k, v: dict(state=s.half(), k=k, v=v, mode="linear"), "state must be float32"),
        (lambda s, k, v: dict(state=s, k=k.half(), v=v, mode="linear"), "share one dtype"),
        (
            lambda s, k, v: dict(state=s, k=k.double(), v=v.double(), mode="linear"),
            "k must be float32 or bfloat16 or float16",
        ),
        (lambda s, k, v: dict(state=s, k=k.long(), v=v.long(), mode="linear"), "k must be"),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="nope"), "unknown mode"),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="delta"), "needs beta"),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="linear", beta=0.5), "takes no beta"),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="decay"), "needs a gate"),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="delta", beta=0.5, alpha=0.5), "takes no gate"),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="delta", beta=2.0), r"beta must lie in \(0, 2\)"),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="delta", beta=0.0), r"beta must lie in \(0, 2\)"),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="delta", beta=torch.tensor([0.5, -0.1])), r"beta must lie in"),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="delta", beta=float("nan")), r"beta must lie in"),
        (
            lambda s, k, v: dict(state=s, k=k, v=v, mode="delta", beta=torch.full((2, 5), 0.5)),
            "beta must be a number or a tensor of shape",
        ),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="decay", alpha=1.01), r"alpha must lie in \(0, 1\]"),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="decay", alpha=0.0), r"alpha must lie in \(0, 1\]"),
        (
            lambda s, k, v: dict(state=s, k=k, v=v, mode="gla", alpha=torch.full((8,), 1.5)),
            r"alpha must lie in \(0, 1\]",
        ),
        (
            lambda s, k, v: dict(state=s, k=k, v=v, mode="kda", beta=1.0, alpha=torch.full((2, 3, 7), 0.5)),
            "alpha must be a number or a tensor of shape",
        ),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="linear", normalize=1), "normalize must be True or False"),
        (lambda s, k, v: dict(state=torch.zeros(0, 8, 4), k=k[:0], v=v[:0], mode="linear"), "B, d, dv >= 1"),
        (lambda s, k, v: dict(state=s, k=k, v=v, mode="linear", backend="cuda"), "unknown backend"),
        (
            lambda s, k, v: dict(state=s, k=k, v=v, mode="delta", beta=torch.full((2,), 0.5, device="meta")),
            "state's device",
        ),
        (lambda s, k, v: dict(state=s, k=k.to("meta"), v=v, mode="linear"), "one device"),
    ],
)
def test_update_bad_input_raises_before_launch(case, match, backend):
    s, k, v = _ok()
    kwargs = case(s, k, v)
    kwargs.setdefault("backend", backend)
    before = kwargs["state"].clone() if kwargs["state"].device.type != "meta" else None
    with pytest.raises(CapacityError, match=match):
        kernels.update(**kwargs)
    if before is not None:
        assert torch.equal(kwargs["state"], before)  # nothing was written


def test_triton_backend_rejects_dims_above_256():
    k, v = torch.randn(1, 2, 257), torch.randn(1, 2, 4)
    with pytest.raises(CapacityError, match="up to 256"):
        kernels.update(torch.zeros(1, 257, 4), k, v, mode="linear", backend="triton")
    with pytest.raises(CapacityError, match="up to 256"):
        kernels.update(
            torch.zeros(1, 4, 300),
            torch.randn(1, 2, 4),
            torch.randn(1, 2, 300),
            mode="delta",
            beta=1.0,
            backend="triton",
        )
    # the torch backend takes any size
    S = kernels.update(torch.zeros(1, 257, 4), k, v, mode="linear", backend="torch")
    assert S.abs().sum() > 0


@pytest.mark.parametrize(
    "case, match",
    [
        (lambda s, q: (s, q[:, :, :5]), "shapes do not match"),
        (lambda s, q: (s, q[:1]), "shapes do not match"),
        (lambda s, q: (s.double(), q), "state must be float32"),
        (lambda s, q: (s, q.long()), "q must be"),
        (lambda s, q: (s, q.to("meta")), "one device"),
        (lambda s, q: (s.to("meta"), q.to("meta")), "meta tensor"),
        (lambda s, q: (s, q[0]), "3 dimensions"),
    ],
)
def test_read_bad_input_raises(case, match):
    with pytest.raises(CapacityError, match=match):
        kernels.read(*case(torch.zeros(2, 8, 4), torch.randn(2, 3, 8)))
