"""flash-linear-attention 0.6.0's remaining recurrent ops: wrapped by from_fla (names, several states, a read) and
equal to a recurrence written here, or refused in one line."""

from __future__ import annotations

import functools
import math
import warnings

import pytest
import torch
from memory_support import write_in_chunks

from lacapacity import CapacityError, variants
from lacapacity.check.conformance import check_variant
from lacapacity.inputs import keys, values
from lacapacity.variants import from_fla

pytestmark = pytest.mark.requires_fla


def _fla(path: str):
    module, name = path.rsplit(".", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import importlib

        return getattr(importlib.import_module(module), name)


def _kv(n=24, d=8, dv=8, B=2, seed=0):
    return keys.make("gaussian", n, d, batch=B, seed=seed), values.make("gaussian", n, dv, batch=B, seed=seed + 1)


def _chunked(mem, K, V):
    return write_in_chunks(mem, K, V, (0, 5, 6))


def ident(k):
    return k


def neg(k):
    return -k


# ---------------------------------------------------------------- momentum_delta_rule: two states


def _momentum(K, V, alpha, mu, beta, eta):
    """S_t = alpha S - beta M_t, M_t = mu M + eta k^T (k S - v): the momentum delta rule, float64, written here."""
    B, T, d = K.shape
    S = torch.zeros(B, d, V.shape[2], dtype=torch.float64)
    M = torch.zeros_like(S)
    for t in range(T):
        k, v = K[:, t].double(), V[:, t].double()
        err = torch.einsum("bd,bde->be", k, S) - v  # k S - v
        M = mu * M + eta * k[:, :, None] * err[:, None, :]
        S = alpha * S - beta * M
    return S, M


def test_momentum_delta_rule_wraps_with_two_states():
    fn = _fla("fla.ops.momentum_delta_rule.naive.recurrent_momentum_delta_rule_ref")
    mem = from_fla(
        fn,
        states={"initial_S": "KV", "initial_M": "KV"},
        per_token={"log_alpha": math.log(0.98), "log_mu": math.log(0.6), "p": ident, "beta": 0.8, "eta": 0.5},
    )
    K, V = _kv()
    S = _chunked(mem, K, V)
    want_S, want_M = _momentum(K, V, 0.98, 0.6, 0.8, 0.5)
    torch.testing.assert_close(S["initial_S"].double(), want_S, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(S["initial_M"].double(), want_M, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mem.read(S, K[:, :4]).double(), K[:, :4].double() @ want_S, rtol=1e-5, atol=1e-5)
    assert mem.state_numel(8, 8) == 2 * 64 and mem.params["states"] == {"initial_S": "KV", "initial_M": "KV"}
    assert check_variant(mem, d=8).passed


# ---------------------------------------------------------------- mesa_net: two states and its own read


def mesa_read(q, state, lam):
    """MesaNet's read: q* = (H_kk + lam I)^-1 q, o = q* H_kv."""
    A = state["h_kk_init"].double() + lam * torch.eye(q.shape[-1], dtype=torch.float64)
    x = torch.linalg.solve(A, q.double().transpose(1, 2))  # [B, d, m]
    return (x.transpose(1, 2) @ state["h_kv_init"].double()).float()


def test_mesa_net_wraps_with_two_states_and_a_read():
    fn = _fla("fla.ops.mesa_net.naive.naive_mesa_net_exact")
    d, lam, gate = 8, 0.05, 0.9
    mem = from_fla(
        fn,
        states={"h_kk_init": "KK", "h_kv_init": "KV"},
        per_token={"g": math.log(gate), "beta": 1.0},
        read=functools.partial(mesa_read, lam=lam),
        lamb=torch.full((1, d), lam),
        dims=d,
    )
    K, V = _kv(d=d, dv=d)  # the reference keeps H_kv as [d, d]: values of dimension d only
    S = _chunked(mem, K, V)
    # written here: H_kk = sum_t gate^(T-1-t) k_t^T k_t, H_kv likewise; the read is ridge regression
    w = gate ** torch.arange(K.shape[1] - 1, -1, -1, dtype=torch.float64)  # [T]
    Kd, Vd = K.double(), V.double()
    Hkk = torch.einsum("t,btd,bte->bde", w, Kd, Kd)
    Hkv = torch.einsum("t,btd,bte->bde", w, Kd, Vd)
    torch.testing.assert_close(S["h_kk_init"].double(), Hkk, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(S["h_kv_init"].double(), Hkv, rtol=1e-5, atol=1e-5)
    q = K[:, :6]
    want = q.double() @ torch.linalg.solve(Hkk + lam * torch.eye(d, dtype=torch.float64), Hkv)
    torch.testing.assert_close(mem.read(S, q).double(), want, rtol=1e-4, atol=1e-5)
    # with no gate it is the built-in lsq memory
    lsq = variants.get("lsq", lam=lam)
    plain = from_fla(
        fn,
        states={"h_kk_init": "KK", "h_kv_init": "KV"},
        per_token={"g": 0.0, "beta": 1.0},
        read=functools.partial(mesa_read, lam=lam),
        lamb=torch.full((1, d), lam),
        dims=d,
    )
    a, b = _chunked(plain, K, V), _chunked(lsq, K, V)
    torch.testing.assert_close(plain.read(a, q), lsq.read(b, q), rtol=1e-4, atol=1e-5)
    # check_variant also probes dv != d, which the reference cannot hold: one line says so
    with pytest.raises(CapacityError, match="raised RuntimeError: The expanded size"):
        mem.write(mem.init_state(2, d, 5), K[..., :d], V[..., :5])


# ---------------------------------------------------------------- ttt_linear: three outputs


def _ttt(K, V, eta, eps=1e-6):
    """TTT-linear with mini-batches of one token, written here: a gradient step on 1/2 ||LN(k h + hb) - (v - k)||^2
    (layer norm with unit weight, zero bias), the gradient by autograd."""
    B, T, d = K.shape
    h = torch.zeros(B, d, d, dtype=torch.float64)
    hb = torch.zeros(B, 1, d, dtype=torch.float64)
    for t in range(T):
        k, v = K[:, t : t + 1].double(), V[:, t : t + 1].double()  # [B, 1, d]
        z = (k @ h + hb).detach().requires_grad_(True)
        ln = torch.nn.functional.layer_norm(z, (d,), eps=eps)
        loss = 0.5 * ((ln - (v - k)) ** 2).sum()
        (grad,) = torch.autograd.grad(loss, z)  # [B, 1, d]
        h = h - eta * k.transpose(1, 2) @ grad
        hb = hb - eta * grad
    return h, hb


def ttt_read(q, state):
    """What TTT-linear predicts for v: q + LN(q h + hb) (it learns the residual v - k)."""
    z = q @ state["initial_state"] + state["initial_state_bias"]
    return q + torch.nn.functional.layer_norm(z, (z.shape[-1],), eps=1e-6)


def test_ttt_linear_wraps_its_three_outputs():
    fn = _fla("fla.ops.ttt.naive.ttt_linear")
    d = 8
    mem = from_fla(
        fn,
        layout="BHTK",
        states={"initial_state": "KV", "initial_state_bias": "1V"},
        per_token={"eta": 0.1},
        read=ttt_read,
        w=torch.ones(1, d),
        b=torch.zeros(1, d),
        scale=1.0,  # ttt_linear scales q in place, and from_fla passes the keys as q
        eps=1e-6,
        mini_batch_size=1,
        dims=d,
    )
    K, V = _kv(d=d, dv=d)
    S = _chunked(mem, K, V)
    h, hb = _ttt(K, V, 0.1)
    torch.testing.assert_close(S["initial_state"].double(), h, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(S["initial_state_bias"].double(), hb, rtol=1e-4, atol=1e-5)
    q = K[:, :3].double()
    want = q + torch.nn.functional.layer_norm(q @ h + hb, (d,), eps=1e-6)
    torch.testing.assert_close(mem.read(S, K[:, :3]).double(), want, rtol=1e-4, atol=1e-4)
    assert mem.state_numel(d, d) == d * d + d


# ---------------------------------------------------------------- refused in one line


def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg
    return msg


def test_titans_linear_is_refused_in_one_line():
    fn = _fla("fla.ops.titans.naive.titans_linear")
    d = 8
    mem = from_fla(
        fn,
        layout="BHTK",
        per_token={"theta": 0.1, "alpha": 0.1, "eta": 0.9},
        w=torch.ones(1, d),
        b=torch.zeros(1, d),
        eps=1e-6,
        chunk_size=4,
        dims=d,
    )
    K, V = _kv(d=d, dv=d)
    with pytest.raises(CapacityError) as err:
        mem.write(mem.init_state(2, d, d), K, V)
    msg = _one_line(err)
    assert msg == (
        "fla:titans_linear: fla.ops.titans.naive.titans_linear raised IndexError: too many indices for tensor of "
        "dimension 3"
    ), msg


def test_hgrn_is_refused_in_one_line():
    fn = _fla("fla.ops.hgrn.naive.naive_recurrent_hgrn")
    mem = from_fla(fn)
    K, V = _kv()
    with pytest.raises(CapacityError) as err:
        mem.write(mem.init_state(2, 8, 8), K, V)
    msg = _one_line(err)
    assert msg.startswith(
        "fla:naive_recurrent_hgrn: fla.ops.hgrn.naive.naive_recurrent_hgrn does not take these arguments (multiple "
        "values for argument 'initial_state')"
    ), msg
    assert "its signature is naive_recurrent_hgrn(x" in msg


def rwkv7_standin(r, w, k, v, a, b, scale=None, initial_state=None, output_final_state=True):
    """RWKV-7's signature and recurrence (fla.ops.rwkv7's kernel) in plain torch: h = Diag(exp w) h + b^T (a h) + k^T v."""
    h = initial_state.clone().float()  # [B, H, K, V]
    o = torch.zeros_like(v)
    for t in range(k.shape[1]):
        wt, kt, vt, at, bt = (x[:, t].float() for x in (w, k, v, a, b))  # [B, H, K] or [B, H, V]
        h = wt.exp()[..., None] * h + bt[..., None] * torch.einsum("bhk,bhkv->bhv", at, h)[:, :, None, :]
        h = h + kt[..., None] * vt[:, :, None, :]
        o[:, t] = torch.einsum("bhk,bhkv->bhv", r[:, t].float(), h)
    return o, h


def test_rwkv7_names_map_its_receptance_and_the_fused_op_is_refused_on_this_cpu():
    d = 8
    spec = dict(names={"q": "r"}, per_token={"w": [0.0] * d, "a": neg, "b": ident}, scale=1.0)
    mem = from_fla(rwkv7_standin, **spec)
    K, V = _kv(d=d, dv=5)
    # w = 0, a = -k, b = k: the delta rule with beta = 1
    torch.testing.assert_close(
        _chunked(mem, K, V), _chunked(variants.get("delta", beta=1.0, normalize=False), K, V), rtol=1e-5, atol=1e-5
    )
    assert mem.params["names"] == {"q": "r"}
    fused = from_fla(_fla("fla.ops.rwkv7.fused_recurrent_rwkv7"), **spec)
    if torch.cuda.is_available():  # the Triton kernel itself, compiled
        Kc, Vc = K.cuda(), V.cuda()
        S = fused.write(fused.init_state(2, d, 5, device="cuda"), Kc, Vc)
        torch.testing.assert_close(S.cpu(), _chunked(mem, K, V), rtol=1e-4, atol=1e-4)
        return
    with pytest.raises(CapacityError) as err:
        fused.write(fused.init_state(2, d, 5), K, V)
    msg = _one_line(err)
    assert msg.startswith("fla:fused_recurrent_rwkv7: fla.ops.rwkv7.fused_recurrent.fused_recurrent_rwkv7 raised"), msg


def test_mapping_arguments_are_checked():
    for kwargs, match in (
        ({"names": {"x": "r"}}, "names maps q, k, v"),
        ({"names": {"q": "k"}, "per_token": {}}, None),
        ({"states": {"initial_S": "KQ"}}, "letters K"),
        ({"states": {"h_kk": "KK"}}, "needs a 'KV' state first"),
        ({"read": 3}, "read must be a callable"),
    ):
        if match is None:
            continue
        with pytest.raises(CapacityError, match=match):
            from_fla(rwkv7_standin, **kwargs)
    mem = from_fla(
        _fla("fla.ops.momentum_delta_rule.naive.recurrent_momentum_delta_rule_ref"),
        states={"initial_S": "KV", "initial_M": "KV"},
        per_token={"log_alpha": 0.0, "log_mu": 0.0, "p": ident, "beta": 1.0, "eta": 1.0},
    )
    K, V = _kv()
    with pytest.raises(CapacityError, match="the state is the dict of init_state"):
        mem.write(torch.zeros(2, 8, 8), K, V)
