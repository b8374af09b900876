"""The memories lsq, longhorn, delta_product and dplr: fast forms against token-by-token oracles,
gradients, closed forms (T8 for lsq, the delta rule as a special case), check_variant, and
flash-linear-attention 0.6.0's naive references where fla is installed."""

import json
import re

import memory_oracles as _oracles
import numpy as np
import pytest
import torch

from lacapacity import CapacityError, theory, variants
from lacapacity.check.conformance import check_variant
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.variants.declares import declared
from lacapacity.variants.delta_product import rotations
from lacapacity.variants.longhorn import gate_and_key

NAMES = ("lsq", "longhorn", "delta_product", "dplr")


def _rel(a, b) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def _unit(x):
    return x / x.norm(dim=-1, keepdim=True)


def _data(B=2, n=40, d=16, dv=8, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, n, d, generator=g, dtype=dtype), torch.randn(B, n, dv, generator=g, dtype=dtype)


def _write_chunks(mem, K, V, sizes):
    state = mem.init_state(K.shape[0], K.shape[2], V.shape[2])
    start = 0
    for s in sizes:
        state = mem.write(state, K[:, start : start + s], V[:, start : start + s])
        start += s
    assert start == K.shape[1]
    return state


def _oracle_state(mem, K, V):
    """The oracle's final state in float64 for the memory's parameters (draws taken for the whole sequence at once)."""
    B, n, d = K.shape
    K64, V64 = K.double(), V.double()
    if mem.name == "lsq":
        return _oracles.lsq(_unit(K64) if mem.normalize else K64, V64, mem.lam)
    if mem.name == "longhorn":
        beta = mem._values("beta", B, 0, n, d, "cpu").double()
        return _oracles.longhorn(_unit(K64) if mem.normalize else K64, V64, beta)
    if mem.name == "delta_product":
        beta = mem._betas(B, 0, n, "cpu").double()
        return _oracles.delta_product(K64, V64, beta, rotations(mem.steps, d, mem.seed), mem.normalize)
    eta = mem._values("eta", B, 0, n, d, "cpu").double()[..., None]
    w = mem._values("w", B, 0, n, d, "cpu").double()
    k = _unit(K64) if mem.normalize else K64
    a = -k if mem.a is None else mem.a(k)
    b = eta * k if mem.b is None else mem.b(k)
    return _oracles.dplr(eta * k, V64, w, a, b)


def _matrix(mem, state):
    if mem.name == "lsq":
        return mem.solution(state)
    return state.matrix if mem.drawn else state


CASES = [
    ("lsq", {"lam": 1e-2}),
    ("lsq", {"lam": 1e-3, "normalize": True}),
    ("longhorn", {"beta": ("uniform", 0.2, 20.0), "normalize": False, "seed": 3}),
    ("longhorn", {}),
    ("delta_product", {"steps": 3, "beta": ("uniform", 0.3, 1.5), "seed": 1}),
    ("delta_product", {"steps": 2, "beta": 0.8, "normalize": False}),
    ("dplr", {"w": ("uniform", 0.7, 1.0), "eta": ("uniform", 0.3, 1.0), "seed": 2}),
    ("dplr", {"w": [0.5 + 0.5 * i / 15 for i in range(16)], "eta": 0.9}),
]


@pytest.mark.parametrize("name,params", CASES)
def test_fast_form_equals_the_token_by_token_oracle(name, params):
    mem = variants.get(name, **params)
    K, V = _data(n=70)
    if not mem.normalize and name != "lsq":
        K = _unit(K) * 1.3  # unnormalised keys, ||k||^2 beta < 2 for the delta family
    want = _oracle_state(mem, K, V)
    for sizes in ([70], [1, 4, 33, 32]):
        got = _matrix(mem, _write_chunks(mem, K, V, sizes))
        assert _rel(got, want) <= 1e-5, (sizes, _rel(got, want))


def test_delta_product_with_one_step_is_delta_exactly():
    K, V = _data(n=50)
    for beta in (1.0, 0.6):
        a, b = variants.get("delta_product", steps=1, beta=beta), variants.get("delta", beta=beta)
        assert torch.equal(_write_chunks(a, K, V, [10, 40]), _write_chunks(b, K, V, [10, 40]))
    assert (
        declared(variants.get("delta_product", steps=1)).delta_rule
        and not declared(variants.get("delta_product")).delta_rule
    )
    # the later steps use other keys: two steps differ from one
    two = _write_chunks(variants.get("delta_product", steps=2), K, V, [50])
    assert _rel(two, _write_chunks(variants.get("delta"), K, V, [50])) > 1e-2


def test_delta_product_rotations_are_seeded_orthogonal_and_fixed():
    R = rotations(3, 8, seed=5)
    assert torch.equal(R[0], torch.eye(8, dtype=torch.float64))
    for j in (1, 2):
        assert torch.allclose(R[j] @ R[j].T, torch.eye(8, dtype=torch.float64), atol=1e-12)
    assert torch.equal(R, rotations(3, 8, seed=5)) and not torch.equal(R[1], rotations(3, 8, seed=6)[1])
    assert not torch.allclose(R[1], R[2])


def test_dplr_with_unit_decay_is_the_delta_rule():
    K, V = _data(n=60)
    for eta in (1.0, 0.4):
        a = variants.get("dplr", w=1.0, eta=eta)
        b = variants.get("delta", beta=eta)
        assert _rel(_write_chunks(a, K, V, [60]), _write_chunks(b, K, V, [60])) <= 1e-5
    assert declared(variants.get("dplr", w=1.0, eta=1.0)).delta_rule and not declared(variants.get("dplr")).delta_rule


def _low_rank_inputs(B=2, T=45, d=12, dv=5, seed=8, dtype=torch.float32):
    """Generic DPLR inputs: a and b independent of the keys, small enough to keep the state bounded."""
    g = torch.Generator().manual_seed(seed)
    kw, v = torch.randn(B, T, d, generator=g, dtype=dtype), torch.randn(B, T, dv, generator=g, dtype=dtype)
    a = 0.3 * torch.randn(B, T, d, generator=g, dtype=dtype) / d**0.5
    b = torch.randn(B, T, d, generator=g, dtype=dtype) / d**0.5
    w = 0.5 + 0.5 * torch.rand(B, T, d, generator=g, dtype=dtype)
    return kw, v, a, b, w


def test_general_dplr_recurrence_equals_the_oracle():
    from lacapacity.variants.dplr import recurrence

    kw, v, a, b, w = _low_rank_inputs()
    want = _oracles.dplr(*(x.double() for x in (kw, v, w, a, b)))
    S0 = torch.zeros(2, 12, 5)
    for chunk in (45, 7):
        assert _rel(recurrence(S0, kw, v, a, b, w, chunk=chunk), want) <= 1e-5


def test_dplr_with_callable_low_rank_parts():
    mem = variants.get("dplr", w=("uniform", 0.8, 1.0), eta=0.6, a=lambda k: -0.5 * k, b=lambda k: k.flip(-1), seed=1)
    K, V = _data(n=40)
    assert _rel(_matrix(mem, _write_chunks(mem, K, V, [3, 37])), _oracle_state(mem, K, V)) <= 1e-5
    assert mem.params["a"].endswith("<lambda>") and not declared(mem).delta_rule
    with pytest.raises(
        CapacityError, match=r"dplr: a must be None \(RWKV-7's choice: a = -k, b = eta k\) or a callable"
    ):
        variants.get("dplr", a="rwkv7")
    bad = variants.get("dplr", b=lambda k: k[..., :3])
    with pytest.raises(
        CapacityError, match=r"dplr: b\(k\) must return a tensor of the keys' shape \[B, t, d\] = \(2, 40, 16\)"
    ):
        bad.write(bad.init_state(2, 16, 8), K, V)


def test_longhorn_is_the_gla_kernel_with_a_gate_in_0_1():
    k = torch.cat([_data(n=30)[0], torch.zeros(2, 1, 16)], dim=1)  # a zero key: gate 1, nothing written
    for beta in (1e-6, 1.0, 1e6):
        gate, key = gate_and_key(k, torch.full(k.shape[:2], beta))
        assert bool((gate > 0).all()) and bool((gate <= 1).all())
        eps = beta / (1 + beta * (k * k).sum(-1, keepdim=True))
        assert torch.allclose(gate, 1 - eps * k * k, atol=1e-6) and torch.allclose(key, eps * k)
    assert bool((gate[:, -1] == 1).all())


def _grads(fn, K, V, Q, W):
    K = K.clone().requires_grad_(True)
    V = V.clone().requires_grad_(True)
    (fn(K, V, Q) * W).sum().backward()
    return K.grad, V.grad


@pytest.mark.parametrize(
    "name,params", [c for c in CASES if c[0] != "lsq" or "normalize" in c[1]] + [("lsq", {"lam": 0.5})]
)
def test_gradients_flow_to_keys_and_values_as_in_the_oracle(name, params):
    mem = variants.get(name, **params)
    K, V = _data(B=2, n=12, d=16, dv=3, seed=4)
    if not mem.normalize and name != "lsq":
        K = _unit(K) * 1.3
    Q = _data(B=2, n=5, d=16, dv=1, seed=5)[0]
    W = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(6))

    def fast(K, V, Q):
        return mem.read(_write_chunks(mem, K, V, [5, 7]), Q)

    def oracle(K, V, Q):
        S = _oracle_state(mem, K, V)
        q = _unit(Q.double()) if mem.normalize else Q.double()
        return q @ S

    gk, gv = _grads(fast, K, V, Q, W)
    ok, ov = _grads(oracle, K.double(), V.double(), Q, W.double())
    assert gk is not None and float(gk.abs().max()) > 0 and float(gv.abs().max()) > 0
    assert _rel(gk, ok) <= 1e-4 and _rel(gv, ov) <= 1e-4


def test_oracle_gradient_agrees_with_finite_differences():
    """The token-by-token forms themselves, differentiated by torch, against central differences (float64)."""
    K, V = _data(B=1, n=6, d=5, dv=2, seed=7, dtype=torch.float64)
    K = _unit(K)
    beta = torch.full((1, 6), 0.7, dtype=torch.float64)
    w = torch.full((1, 6, 5), 0.9, dtype=torch.float64)
    R = rotations(2, 5, seed=0)
    fns = [
        lambda K, V: _oracles.lsq(K, V, 0.3),
        lambda K, V: _oracles.longhorn(K, V, beta),
        lambda K, V: _oracles.delta_product(K, V, beta[..., None].expand(1, 6, 2), R, True),
        lambda K, V: _oracles.dplr(0.7 * K, V, w, -K, 0.7 * K),
    ]
    for fn in fns:
        assert torch.autograd.gradcheck(fn, (K.clone().requires_grad_(True), V.clone().requires_grad_(True)))


@pytest.mark.parametrize("family", ["gaussian", "orthogonal"])
def test_lsq_meets_t8_through_the_probe(family):
    n, d = 64, 16
    K = keys.make(family, n, d, batch=3, seed=1)
    V = values.make("orthonormal", n, n, batch=3, seed=1)
    cps = [24, 40, 64]
    ds = probe.recall(variants.get("lsq", lam=1e-4), K, V, checkpoints=cps)
    if family == "gaussian":  # i.i.d. rows: every prefix is full rank
        want = theory.rank_bound(np.array(cps), d)
        np.testing.assert_allclose(ds.mse.mean("batch").values, want, atol=1e-3)
    else:  # a tight frame is built for n = 64: check the last checkpoint
        assert abs(float(ds.mse.isel(n=-1).mean()) - float(theory.rank_bound(n, d))) < 1e-3
    # below d the keys are interpolated: almost no error; larger lam costs accuracy
    few = probe.recall(variants.get("lsq", lam=1e-4), K[:, :8], V[:, :8], checkpoints=[8])
    assert float(few.mse.max()) < 1e-3
    ridge = probe.recall(variants.get("lsq", lam=10.0), K, V, checkpoints=[n])
    assert float(ridge.mse.mean()) > float(theory.rank_bound(n, d)) + 0.05


@pytest.mark.parametrize(
    "name,params,t12",
    [
        ("lsq", {}, "n/a"),
        ("longhorn", {}, "n/a"),
        ("longhorn", {"beta": ("uniform", 0.5, 2.0), "seed": 1}, "n/a"),
        ("delta_product", {}, "n/a"),
        ("delta_product", {"steps": 1}, "pass"),
        ("dplr", {}, "n/a"),
        ("dplr", {"w": 1.0}, "pass"),
        ("dplr", {"w": ("uniform", 0.9, 1.0), "eta": ("uniform", 0.5, 1.0), "seed": 3}, "n/a"),
    ],
)
def test_check_variant_passes(name, params, t12):
    report = check_variant(variants.get(name, **params), d=16)
    assert report.passed, str(report)
    status = {r.check: r.status for r in report.results}
    assert status["T2 two pairs"] == "n/a" and status["T12 last key"] == t12
    assert status["chunked writes"] == "pass" and status["probe"] == "pass"


def test_state_sizes_and_registry():
    avail = variants.available()
    assert all(n in avail for n in NAMES)
    assert variants.get("lsq").state_numel(16, 8) == 16 * 16 + 16 * 8
    for name in NAMES[1:]:
        assert variants.get(name).state_numel(16, 8) == 128


def test_params_rebuild_the_memory():
    for name, params in CASES:
        mem = variants.get(name, **params)
        again = variants.get(name, **mem.params)
        assert again.params == mem.params
        json.dumps(mem.params)
    assert variants.get("delta_product", beta=("uniform", 0.5, 1.0), seed=4).params == {
        "beta": ["uniform", 0.5, 1.0],
        "alpha": 1.0,
        "steps": 2,
        "normalize": True,
        "seed": 4,
    }


def test_bad_input_names_the_memory_and_the_value():
    with pytest.raises(CapacityError, match=r"lsq: lam must lie in \(0, inf\), got 0"):
        variants.get("lsq", lam=0)
    with pytest.raises(CapacityError, match=r"longhorn: beta must lie in \(0, inf\), got -1.0"):
        variants.get("longhorn", beta=-1.0)
    with pytest.raises(CapacityError, match=r"delta_product: steps must be a whole number >= 1, got 0"):
        variants.get("delta_product", steps=0)
    with pytest.raises(CapacityError, match=r"delta_product: beta must lie in \(0, 2\), got 2.0"):
        variants.get("delta_product", beta=2.0)
    with pytest.raises(CapacityError, match=r"dplr: w must lie in \(0, 1\], got 1.5"):
        variants.get("dplr", w=1.5)
    with pytest.raises(CapacityError, match=r"dplr: eta high must lie in \(0, 1\]"):
        variants.get("dplr", eta=("uniform", 0.5, 1.5))
    with pytest.raises(CapacityError, match=r"dplr: w has 3 entries but the state has 8 feature rows"):
        mem = variants.get("dplr", w=[0.9, 0.9, 0.9])
        mem.write(mem.init_state(1, 8, 2), torch.randn(1, 4, 8), torch.randn(1, 4, 2))
    with pytest.raises(CapacityError, match=r"variant 'lsq' got unknown parameter\(s\) beta; allowed: lam, normalize"):
        variants.get("lsq", beta=1.0)
    mem = variants.get("lsq")
    with pytest.raises(CapacityError, match="lsq: the state must be the LsqState"):
        mem.write(torch.zeros(1, 4, 2), torch.randn(1, 3, 4), torch.randn(1, 3, 2))
    with pytest.raises(CapacityError, match=r"longhorn: shapes do not match"):
        m = variants.get("longhorn")
        m.write(m.init_state(1, 4, 2), torch.randn(1, 3, 5), torch.randn(1, 3, 2))


# ------------------------------------------------------------------ flash-linear-attention 0.6.0 references


def _fla(module):
    """Import an fla module, or skip (fla absent, or installed without its own dependencies such as einops)."""
    reason = "flash-linear-attention is not installed (pip install fla-core==0.6.0 einops)"
    return pytest.importorskip(module, reason=reason, exc_type=ImportError)


def _bhtk(x):
    return x[:, None]  # [B, T, C] -> [B, H=1, T, C]


@pytest.mark.parametrize("w_spec", [0.93, ("uniform", 0.6, 1.0)])
def test_dplr_matches_fla_dplr_recurrence(w_spec):
    naive = _fla("fla.ops.generalized_delta_rule.dplr.naive")
    mem = variants.get("dplr", w=w_spec, eta=("uniform", 0.3, 1.0), seed=1)
    K, V = _data(n=50)
    B, n, d = K.shape
    k = _unit(K)
    eta = mem._values("eta", B, 0, n, d, "cpu")
    w = mem._values("w", B, 0, n, d, "cpu")
    S0 = torch.randn(B, 1, d, V.shape[2], generator=torch.Generator().manual_seed(9))
    # fla: S = Diag(exp gk) S + k^T v + beta^T (alpha S)
    # ours: a = -k (fla beta), b = eta k (fla alpha), written key eta k
    _, theirs = naive.dplr_recurrence(
        _bhtk(k),
        _bhtk(eta[..., None] * k),
        _bhtk(V),
        _bhtk(eta[..., None] * k),
        _bhtk(-k),
        _bhtk(w.log()),
        initial_state=S0.clone(),
    )
    state = mem.init_state(B, d, V.shape[2])
    state.matrix.copy_(S0[:, 0])
    ours = mem.write(state, K[:, :20], V[:, :20])
    ours = mem.write(ours, K[:, 20:], V[:, 20:]).matrix
    assert _rel(ours, theirs[:, 0]) <= 1e-5


def test_general_dplr_matches_fla_dplr_recurrence():
    """a and b not derived from the keys: the whole DPLR transition, with an initial state."""
    naive = _fla("fla.ops.generalized_delta_rule.dplr.naive")
    from lacapacity.variants.dplr import recurrence

    kw, v, a, b, w = _low_rank_inputs()
    S0 = torch.randn(2, 12, 5, generator=torch.Generator().manual_seed(3))
    _, theirs = naive.dplr_recurrence(
        _bhtk(kw), _bhtk(kw), _bhtk(v), _bhtk(b), _bhtk(a), _bhtk(w.log()), initial_state=S0[:, None].clone()
    )
    assert _rel(recurrence(S0, kw, v, a, b, w, chunk=16), theirs[:, 0]) <= 1e-5


def test_dplr_with_unit_decay_matches_fla_iplr_recurrence():
    naive = _fla("fla.ops.generalized_delta_rule.iplr.naive")
    mem = variants.get("dplr", w=1.0, eta=0.8)
    K, V = _data(n=50)
    k = _unit(K)
    _, theirs = naive.iplr_recurrence(_bhtk(k), _bhtk(0.8 * k), _bhtk(V), _bhtk(0.8 * k), _bhtk(-k), initial_state=None)
    assert _rel(_write_chunks(mem, K, V, [50]), theirs[:, 0]) <= 1e-5


@pytest.mark.parametrize("steps", [1, 3])
def test_delta_product_matches_fla_gated_delta_product(steps):
    naive = _fla("fla.ops.gated_delta_product.naive")
    mem = variants.get("delta_product", steps=steps, beta=("uniform", 0.2, 1.5), seed=2)
    K, V = _data(n=40)
    B, n, d = K.shape
    R = rotations(steps, d, mem.seed).float()
    ks = _unit(torch.einsum("btd,sde->btse", K, R)).reshape(B, n * steps, 1, d)  # token i step j at i * steps + j
    vs = V[:, :, None, None, :].expand(B, n, steps, 1, V.shape[2]).reshape(B, n * steps, 1, V.shape[2])
    beta = mem._betas(B, 0, n, "cpu").reshape(B, n * steps, 1)
    g = torch.zeros(B, n, 1)  # log-gate 0: no decay
    _, theirs = naive.naive_recurrent_gated_delta_product(
        K[:, :, None], ks, vs, g, beta, 1.0, None, initial_state=None, output_final_state=True, num_householder=steps
    )
    ours = _write_chunks(mem, K, V, [13, 27]).matrix
    assert _rel(ours, theirs[:, 0]) <= 1e-5


def test_lsq_matches_fla_mesa_net_exact():
    naive = _fla("fla.ops.mesa_net.naive")
    n, d, lam = 40, 16, 0.05
    mem = variants.get("lsq", lam=lam)
    K, V = _data(n=n, d=d, dv=d)  # fla's Mesa state h_kv is d x d
    K = _unit(K)  # unit keys, as the probe writes: both sides solve in float32 to ~1e-6 of the float64 truth
    Q = _data(n=n, d=d, dv=1, seed=1)[0]
    # fla: o_t = q_t (h_kk_t + Diag(lamb))^-1 h_kv_t with h_kk = sum beta k^T k, h_kv = sum beta k^T v; g = 0, beta = 1
    theirs, _, _ = naive.naive_mesa_net_exact(
        Q[:, :, None], K[:, :, None], V[:, :, None], torch.zeros(2, n, 1), torch.full((1, d), lam), torch.ones(2, n, 1)
    )
    state, ours = mem.init_state(2, d, d), []
    for t in range(n):  # o_t reads the state after token t
        state = mem.write(state, K[:, t : t + 1], V[:, t : t + 1])
        ours.append(mem.read(state, Q[:, t : t + 1]))
    assert _rel(torch.cat(ours, dim=1), theirs[:, :, 0]) <= 1e-5


def test_fla_has_no_longhorn_op():
    """Checked: fla 0.6.0 ships no Longhorn op, so longhorn is held to the oracle only."""
    fla = _fla("fla")
    import pathlib

    if getattr(fla, "__version__", None) != "0.6.0":
        pytest.skip(f"the check is about fla 0.6.0; installed: {getattr(fla, '__version__', '?')}")

    hits = [
        p for p in pathlib.Path(fla.__file__).parent.rglob("*.py") if "longhorn" in p.read_text(errors="ignore").lower()
    ]
    assert hits == [], f"fla now has a Longhorn op: {hits}; hold longhorn to it"


@pytest.mark.parametrize("name", NAMES)
def test_docstring_examples_run(name):
    import doctest
    import importlib

    result = doctest.testmod(
        importlib.import_module(f"lacapacity.variants.{name}"),
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(
    "name,params",
    [("longhorn", {"beta": ("uniform", 0.2, 20.0), "seed": 3}), ("delta_product", {"steps": 3, "beta": 0.9})],
)
@pytest.mark.requires_triton
def test_triton_backend_equals_the_oracle(name, params):
    """longhorn and delta_product write through kernels.update: its Triton kernels (interpreted on the CPU) too."""
    mem = variants.get(name, backend="triton", **params)
    K, V = _data(n=20, d=16, dv=8)
    assert _rel(_matrix(mem, _write_chunks(mem, K, V, [5, 15])), _oracle_state(mem, K, V)) <= 1e-5


@pytest.mark.parametrize(
    "name",
    ["delta_product", "gdn2", "precond_kda", "lsq", "omega", "log_linear", "swa", "cyfa", "mom", "softmax", "mamba3"],
)
def test_a_query_that_does_not_fit_the_state_is_one_line_naming_both(name):
    """Each read checks q [B, m, d] against the state it reads (mamba3 maps q to its features first: B only)."""
    mem = variants.get(name)
    K, V = _data(B=2, n=3, d=8, dv=4)
    state = mem.write(mem.init_state(2, 8, 4), K, V)
    assert mem.read(state, K[:, :1]).shape == (2, 1, 4)
    bad = [torch.zeros(3, 1, 8)] + ([] if name == "mamba3" else [torch.zeros(2, 1, 5)])
    for q in bad:
        shape = re.escape(str(list(q.shape)))
        with pytest.raises(CapacityError, match=rf"^{name}: q \[B, m, d\] = {shape} does not match the \w"):
            mem.read(state, q)
