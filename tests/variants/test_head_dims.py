"""Head dimensions that are not powers of two (60, 96, 100; OLMo-Hybrid's key dimension is 96): every built-in
memory whose write is chunked or vectorised against its token-by-token float64 recurrence there (relative RMS error
< 1e-5 in float32), and fla-core 0.6.0's references wrapped with from_fla against the built-ins (fla issue #1134
read past the row at such d)."""

import pathlib

import memory_oracles as _oracles
import pytest
import torch
from memory_support import rel_rms

from lacapacity import variants
from lacapacity.inputs import keys, values
from lacapacity.variants.delta_product import rotations

DIMS = (60, 96, 100)


def _inputs(d, B=2, T=24, dv=8, seed=0):
    K = keys.make("gaussian", T, d, batch=B, seed=seed) * 1.2  # not unit: normalisation is part of the memory
    V = values.make("gaussian", T, dv, batch=B, seed=seed + 1)
    return K, V


def _write(mem, K, V):
    st = mem.init_state(K.shape[0], K.shape[2], V.shape[2])
    for a, b in ((0, 5), (5, 6), (6, K.shape[1])):  # uneven chunks
        st = mem.write(st, K[:, a:b], V[:, a:b])
    return st.matrix if hasattr(st, "matrix") else st


def _param(mem, name, B, T, D):
    p = mem._params[name]
    x = p.values(B, 0, T, D, mem.seed, "cpu")
    if isinstance(x, float):
        return torch.full((B, T, D) if p.per_channel else (B, T), x, dtype=torch.float64)
    return x.double()


def _unit(x):
    return x / x.norm(dim=-1, keepdim=True)


RECURRENT = [
    ("linear", {}),
    ("decay", {"alpha": ("uniform", 0.8, 1.0), "seed": 1}),
    ("gla", {"alpha": ("uniform", 0.8, 1.0), "seed": 2}),
    ("delta", {"beta": ("uniform", 0.3, 1.5), "seed": 3}),
    ("gated_delta", {"alpha": ("uniform", 0.8, 1.0), "beta": ("uniform", 0.3, 1.5), "seed": 4}),
    ("kda", {"alpha": ("uniform", 0.8, 1.0), "beta": 0.7, "seed": 5}),
]


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("name,params", RECURRENT)
def test_recurrent_memories_at_odd_head_dims(name, params, d):
    mem = variants.get(name, backend="torch", **params)
    K, V = _inputs(d, seed=d)
    B, T, _ = K.shape
    k = _unit(K.double()) if mem.normalize else K.double()
    alpha = _param(mem, "alpha", B, T, d) if "alpha" in mem._params else None
    beta = _param(mem, "beta", B, T, d) if "beta" in mem._params else None
    S = torch.zeros(B, d, V.shape[2], dtype=torch.float64)
    for t in range(T):  # the module docstrings' recurrences, float64
        kt, vt = k[:, t], V[:, t].double()
        if alpha is not None:
            S = (alpha[:, t, :, None] if alpha.ndim == 3 else alpha[:, t, None, None]) * S
        if beta is not None:
            vt = beta[:, t, None] * (vt - torch.einsum("bk,bkv->bv", kt, S))
        S = S + torch.einsum("bk,bv->bkv", kt, vt)
    assert rel_rms(_write(mem, K, V), S) < 1e-5


@pytest.mark.parametrize("d", DIMS)
def test_mamba2_at_odd_head_dims(d):
    mem = variants.get("mamba2", A=1.0, dt=0.1, backend="torch")
    K, V = _inputs(d, seed=d + 1)
    dt = mem.steps(K).double()  # [B, T]
    S = torch.zeros(K.shape[0], d, V.shape[2], dtype=torch.float64)
    for t in range(K.shape[1]):
        S = torch.exp(-dt[:, t])[:, None, None] * S + dt[:, t, None, None] * torch.einsum(
            "bk,bv->bkv", K[:, t].double(), V[:, t].double()
        )
    assert rel_rms(_write(mem, K, V), S) < 1e-5


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize(
    "name,params",
    [
        ("lsq", {"lam": 0.1}),
        ("longhorn", {"beta": ("uniform", 0.2, 5.0), "seed": 1}),
        ("delta_product", {"steps": 2, "alpha": ("uniform", 0.8, 1.0), "beta": 0.8, "seed": 2}),
        ("dplr", {"w": ("uniform", 0.7, 1.0), "eta": 0.8, "seed": 3}),
    ],
)
def test_oracle_memories_at_odd_head_dims(name, params, d):
    mem = variants.get(name, **params)
    K, V = _inputs(d, seed=d + 2)
    B, T, _ = K.shape
    K64, V64 = K.double(), V.double()
    k = _unit(K64) if mem.normalize else K64
    if name == "lsq":
        st = mem.init_state(B, d, V.shape[2])
        ours, want = (
            mem.solution(mem.write(mem.write(st, K[:, :7], V[:, :7]), K[:, 7:], V[:, 7:])),
            _oracles.lsq(k, V64, 0.1),
        )
    elif name == "longhorn":
        ours, want = _write(mem, K, V), _oracles.longhorn(k, V64, _param(mem, "beta", B, T, d))
    elif name == "delta_product":
        beta = mem._betas(B, 0, T, "cpu").double()
        alpha = _param(mem, "alpha", B, T, d)
        R = rotations(2, d, mem.seed)
        S = torch.zeros(B, d, V.shape[2], dtype=torch.float64)
        for t in range(T):  # the gate, then the oracle's steps for this token
            S = alpha[:, t, None, None] * S
            for j in range(2):
                kj = _unit(K64[:, t] @ R[j])
                S = S + beta[:, t, j, None, None] * torch.einsum(
                    "bk,bv->bkv", kj, V64[:, t] - torch.einsum("bk,bkv->bv", kj, S)
                )
        ours, want = _write(mem, K, V), S
        assert (
            rel_rms(
                _write(variants.get("delta_product", steps=2, beta=0.8, seed=2), K, V),
                _oracles.delta_product(K64, V64, torch.full((B, T, 2), 0.8, dtype=torch.float64), R, True),
            )
            < 1e-5
        )
    else:
        w = _param(mem, "w", B, T, d)
        ours, want = _write(mem, K, V), _oracles.dplr(0.8 * k, V64, w, -k, 0.8 * k)
    assert rel_rms(ours, want) < 1e-5


@pytest.mark.requires_fla
@pytest.mark.slow
@pytest.mark.parametrize("d", DIMS)
def test_fla_references_match_the_builtins_at_odd_head_dims(d):
    """Every reference of docs/fla.md's table, wrapped with from_fla at d, against the built-in it is."""
    from script_support import load_script

    table = load_script(pathlib.Path(__file__).resolve().parents[2] / "docs" / "scripts" / "fla_table.py", "fla_table")
    compared = []
    for e in table.references(d):
        if e["builtin"] is None:
            continue
        row = table.measure(e, d, [4, 12], [d, d + 1])
        assert row["rel_diff"] <= 1e-5, (e["name"], d, row["rel_diff"])
        compared.append(e["name"])
    assert len(compared) >= 10, compared
