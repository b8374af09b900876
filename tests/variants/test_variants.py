"""Every built-in variant against a brute-force float64 implementation written here, and T11-T13 through the probe."""

import json
import math

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.variants import _params
from lacapacity.variants.recurrent import TokenState

B, N, D, DV = 3, 20, 8, 5


def _inputs(seed=0, n=N, d=D, dv=DV):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(B, n, d, generator=g)
    return k / k.norm(dim=-1, keepdim=True) * 1.3, torch.randn(B, n, dv, generator=g), torch.randn(B, 7, d, generator=g)


def _unit(x):
    return x / x.norm(dim=-1, keepdim=True)


def brute_state(mode, K, V, *, alpha=None, beta=None):
    """S after writing K [n, d], V [n, dv] one token at a time with explicit d x d matrices, float64.

    alpha: [n] scalar gates (decay, gated_delta) or [n, d] channel gates (gla, kda); beta: [n].
    """
    K, V = K.double(), V.double()
    n, d = K.shape
    S = torch.zeros(d, V.shape[1], dtype=torch.float64)
    eye = torch.eye(d, dtype=torch.float64)
    for t in range(n):
        k, v = K[t : t + 1], V[t : t + 1]  # row vectors [1, d], [1, dv]
        if mode == "linear":
            S = S + k.T @ v
        elif mode == "decay":
            S = float(alpha[t]) * S + k.T @ v
        elif mode == "gla":
            S = torch.diag(alpha[t].double()) @ S + k.T @ v
        elif mode == "delta":
            b = float(beta[t])
            S = (eye - b * k.T @ k) @ S + b * k.T @ v
        elif mode == "gated_delta":
            b = float(beta[t])
            S = float(alpha[t]) * (eye - b * k.T @ k) @ S + b * k.T @ v
        elif mode == "kda":
            b = float(beta[t])
            S = (eye - b * k.T @ k) @ torch.diag(alpha[t].double()) @ S + b * k.T @ v
    return S


def brute_softmax(K, V, Q, scale):
    scores = scale * Q.double() @ K.double().T  # [m, n]
    w = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return (w / w.sum(-1, keepdim=True)) @ V.double()


def _per_token(value, n, d=None):
    t = torch.full((n,), float(value)) if d is None else torch.full((n, d), float(value))
    return t


CONSTANT_CASES = [
    ("linear", {}, {}),
    ("decay", {"alpha": 0.9}, {"alpha": 0.9}),
    ("gla", {"alpha": 0.8}, {"alpha": 0.8}),
    ("delta", {"beta": 0.7, "normalize": False}, {"beta": 0.7}),
    ("gated_delta", {"alpha": 0.9, "beta": 1.3, "normalize": False}, {"alpha": 0.9, "beta": 1.3}),
    ("kda", {"alpha": 0.85, "beta": 0.6, "normalize": False}, {"alpha": 0.85, "beta": 0.6}),
]


@pytest.mark.parametrize("name,params,brute", CONSTANT_CASES)
def test_recurrent_variants_match_brute_force(name, params, brute):
    K, V, Q = _inputs()
    mem = variants.get(name, **params)
    S = mem.init_state(B, D, DV)
    S = mem.write(S, K[:, :7], V[:, :7])  # two chunks, as the probe writes
    S = mem.write(S, K[:, 7:], V[:, 7:])
    r = mem.read(S, Q)
    assert r.dtype == torch.float32 and r.shape == (B, 7, DV)
    for b in range(B):
        kw = {}
        if "alpha" in brute:
            kw["alpha"] = _per_token(brute["alpha"], N, D if name in ("gla", "kda") else None)
        if "beta" in brute:
            kw["beta"] = _per_token(brute["beta"], N)
        want_S = brute_state(name, K[b], V[b], **kw)
        assert torch.allclose(S[b].double(), want_S, rtol=1e-5, atol=1e-5)
        assert torch.allclose(r[b].double(), Q[b].double() @ want_S, rtol=1e-5, atol=1e-5)


def test_normalize_flag_uses_unit_keys_and_queries():
    K, V, Q = _inputs()
    mem = variants.get("delta", beta=1.0)  # normalize=True by default
    r = mem.read(mem.write(mem.init_state(B, D, DV), K, V), Q)
    want = _unit(Q[0]).double() @ brute_state("delta", _unit(K[0]), V[0], beta=torch.ones(N))
    assert torch.allclose(r[0].double(), want, atol=1e-5)


@pytest.mark.parametrize(
    "name,params",
    [
        ("decay", {"alpha": ("uniform", 0.5, 0.9)}),
        ("gla", {"alpha": ("uniform", 0.6, 1.0)}),
        ("delta", {"beta": ("uniform", 0.2, 1.5), "normalize": False}),
        ("gated_delta", {"alpha": ("uniform", 0.7, 1.0), "beta": ("uniform", 0.5, 1.0), "normalize": False}),
        ("kda", {"alpha": ("uniform", 0.7, 1.0), "beta": 0.9, "normalize": False}),
    ],
)
def test_drawn_gates_match_brute_force_with_the_drawn_values(name, params):
    K, V, Q = _inputs(1)
    mem = variants.get(name, seed=5, **params)
    state = mem.init_state(B, D, DV)
    assert isinstance(state, TokenState)
    for lo, hi in [(0, 3), (3, 4), (4, N)]:  # uneven chunks: the draws follow the token index
        state = mem.write(state, K[:, lo:hi], V[:, lo:hi])
    assert state.tokens == N
    r = mem.read(state, Q)
    drawn = {p: mem._params[p].values(B, 0, N, D, 5, "cpu") for p in mem._params}
    for p, x in drawn.items():
        if isinstance(x, torch.Tensor):
            lo, hi = params[p][1], params[p][2]
            assert bool((x >= lo).all() and (x <= hi).all())
    for b in range(B):
        kw = {}
        for p, x in drawn.items():
            if isinstance(x, float):
                kw[p] = _per_token(x, N)
            else:
                kw[p] = x[b]
        want = brute_state(name, K[b], V[b], **kw)
        assert torch.allclose(state.matrix[b].double(), want, rtol=1e-5, atol=1e-5)
        assert torch.allclose(r[b].double(), Q[b].double() @ want, rtol=1e-5, atol=1e-5)


def test_draws_are_seeded_uniform_and_chunk_invariant():
    p = _params.Param(
        "decay", "alpha", ("uniform", 0.2, 0.6), low=0.0, high=1.0, high_open=False, per_channel=False, stream="a"
    )
    whole = p.values(4, 0, 700, 1, 3, "cpu")  # crosses block boundaries (BLOCK = 256)
    parts = torch.cat(
        [p.values(4, 0, 250, 1, 3, "cpu"), p.values(4, 250, 300, 1, 3, "cpu"), p.values(4, 550, 150, 1, 3, "cpu")],
        dim=1,
    )
    assert whole.shape == (4, 700) and torch.equal(whole, parts)
    assert float(whole.min()) >= 0.2 and float(whole.max()) <= 0.6
    # uniform on [0.2, 0.6]: mean 0.4, variance 0.4^2 / 12; 2800 draws
    assert abs(float(whole.double().mean()) - 0.4) < 4 * math.sqrt(0.16 / 12 / 2800)
    assert not torch.equal(whole, p.values(4, 0, 700, 1, 4, "cpu"))  # another seed
    assert torch.equal(whole[:1], p.values(1, 0, 700, 1, 3, "cpu"))  # item 0 does not depend on the batch size
    # the documented streams: token t's draw is entry [b, t % 256] of block t // 256's stream (decay's gate alpha
    # keeps the stream of its old name "a", so that its draws did not change with the name)
    from lacapacity.base import _random

    assert variants.get("decay", alpha=("uniform", 0.2, 0.6))._params["alpha"].stream == "a"

    for t in (0, 255, 256, 699):
        u = torch.rand(4, 256, generator=_random.generator(3, f"variants/decay/a/{t // 256}"), dtype=torch.float64)
        assert torch.allclose(whole[:, t].double(), 0.2 + 0.4 * u[:, t % 256])


def test_gla_per_channel_vector_and_its_length_check():
    K, V, Q = _inputs(2)
    alpha = torch.linspace(0.5, 1.0, D)
    mem = variants.get("gla", alpha=alpha.tolist())
    S = mem.write(mem.init_state(B, D, DV), K, V)
    want = brute_state("gla", K[0], V[0], alpha=alpha.expand(N, D))
    assert torch.allclose(S[0].double(), want, atol=1e-5)
    with pytest.raises(CapacityError, match=r"gla: alpha has 3 entries but the state has 8 feature rows"):
        variants.get("gla", alpha=[0.9, 0.8, 0.7]).write(mem.init_state(B, D, DV), K, V)


def test_feature_map_variant_against_brute_force():
    K, V, Q = _inputs(3)
    phi = lambda x: torch.where(x > 0, x + 1.0, torch.exp(x))  # elu + 1, written out
    mem = variants.get("decay", alpha=0.8, feature="elu1")
    S = mem.write(mem.init_state(B, D, DV), K, V)
    assert S.shape == (B, D, DV) and mem.feature_dim(D) == D
    r = mem.read(S, Q)
    for b in range(B):
        want = brute_state("decay", phi(K[b].double()), V[b], alpha=_per_token(0.8, N))
        assert torch.allclose(r[b].double(), phi(Q[b].double()) @ want, rtol=1e-5, atol=1e-5)
    mem = variants.get("linear", feature="dpfp", nu=2)
    S = mem.write(mem.init_state(B, D, DV), K, V)
    assert S.shape == (B, 2 * D * 2, DV) and mem.state_numel(D, DV) == 4 * D * DV


def test_normalized_read_divides_by_phi_q_dot_z():
    K, V, Q = _inputs(4)
    phi = lambda x: torch.where(x > 0, x + 1.0, torch.exp(x))
    for name, gate in (("linear", {}), ("decay", {"alpha": 0.9}), ("gla", {"alpha": 0.7})):
        mem = variants.get(name, feature="elu1", normalize_read=True, **gate)
        S = mem.write(mem.init_state(B, D, DV), K, V)
        assert S.shape == (B, D, DV + 1) and mem.state_numel(D, DV) == D * (DV + 1)
        r = mem.read(S, Q)
        w = (
            torch.ones(N, dtype=torch.float64)
            if not gate
            else float(next(iter(gate.values()))) ** torch.arange(N - 1, -1, -1, dtype=torch.float64)
        )
        for b in range(B):
            pk, pq = phi(K[b].double()), phi(Q[b].double())
            num = pq @ (pk.T @ (w[:, None] * V[b].double()))
            den = pq @ (pk.T @ w)
            assert torch.allclose(r[b].double(), num / den[:, None], rtol=1e-5, atol=1e-6)


def test_softmax_against_explicit_softmax_and_cache_size():
    K, V, Q = _inputs(5)
    for scale in (None, 3.0):
        mem = variants.get("softmax", scale=scale)
        cache = mem.write(mem.write(mem.init_state(B, D, DV), K[:, :5], V[:, :5]), K[:, 5:], V[:, 5:])
        r = mem.read(cache, Q)
        for b in range(B):
            want = brute_softmax(K[b], V[b], Q[b], math.sqrt(D) if scale is None else scale)
            assert torch.allclose(r[b].double(), want, rtol=1e-5, atol=1e-6)
        assert mem.numel(cache) == N * (D + DV) == mem.state_numel(D, DV, n=N)
    assert torch.equal(mem.read(mem.init_state(B, D, DV), Q), torch.zeros(B, 7, DV))
    with pytest.raises(CapacityError, match="pass n"):
        mem.state_numel(D, DV)


def test_probe_records_growing_state_and_feature_dim():
    K = keys.make("gaussian", 32, 16, batch=2, seed=0)
    V = values.make("gaussian", 32, 8, batch=2, seed=0)
    ds = probe.recall(variants.get("softmax"), K, V, checkpoints=[4, 16, 32])
    assert list(ds.state_numel.values) == [4 * 24, 16 * 24, 32 * 24] and ds.attrs["state_numel"] == 32 * 24
    assert ds.attrs["feature_dim"] == 16
    ds = probe.recall(variants.get("linear", feature="taylor2"), K, V, checkpoints=[8, 32])
    D = 1 + 16 + 16 * 17 // 2
    assert ds.attrs["feature_dim"] == D and ds.attrs["state_numel"] == D * 8 and "state_numel" not in ds.data_vars
    assert json.loads(ds.attrs["variant_params"])["feature"] == "taylor2"


# ------------------------------------------------------------------ closed forms through the probe


def test_t11_decay_through_the_probe():
    n, d, a = 40, 16, 0.9
    K = keys.make("gaussian", n, d, batch=4, seed=1)
    V = values.make("orthonormal", n, n, batch=4, seed=1)
    ds = probe.recall(variants.get("decay", alpha=a), K, V, checkpoints=[n], per_query=True)
    want = theory.decay_readout(K.double(), V.double(), a)  # [B, n, n]
    brute = ((want - V.double()) ** 2).sum(-1).numpy()
    np.testing.assert_allclose(ds.mse_q.isel(n=0).values, brute, rtol=1e-5, atol=1e-6)
    # signal coefficient of pair i is a^(n-i) (unit keys, orthonormal values)
    np.testing.assert_allclose(
        ds.signal_q.isel(n=0).values, np.broadcast_to(a ** np.arange(n - 1, -1, -1), (4, n)), atol=1e-5
    )


@pytest.mark.parametrize(
    "name,params", [("delta", {}), ("gated_delta", {"alpha": 0.8}), ("kda", {"alpha": ("uniform", 0.5, 1.0)})]
)
def test_t12_delta_types_through_the_probe(name, params):
    n, d = 48, 16
    K = keys.make("gaussian", n, d, batch=4, seed=2)
    V = values.make("gaussian", n, 8, batch=4, seed=2)
    cps = [5, 17, 48]
    ds = probe.recall(variants.get(name, beta=1.0, **params), K, V, checkpoints=cps, per_query=True)
    for i, c in enumerate(cps):  # the last written key reads back exactly at every checkpoint
        assert float(ds.mse_q.isel(n=i, query=c - 1).max()) < 1e-10
    assert float(ds.mse.isel(n=-1).min()) > 0.05  # the earlier ones do not: n > d
    Ko = keys.make("orthogonal", d, d, batch=4, seed=2)
    ds = probe.recall(variants.get("delta"), Ko, V[:, :d], checkpoints=[d])
    assert float(ds.mse.max()) < 1e-10


def test_t13_softmax_through_the_probe():
    n, d = 64, 64
    K = keys.make("gaussian", n, d, batch=4, seed=3)
    V = values.make("gaussian", n, d, batch=4, seed=3)
    mse = [
        float(probe.recall(variants.get("softmax", scale=s), K, V, checkpoints=[n]).mse.mean())
        for s in (2.0, 8.0, 32.0, 200.0)
    ]
    assert mse[0] > mse[1] > mse[2] > mse[3] and mse[3] < 1e-10  # exact as the scale grows
    ds = probe.recall(variants.get("softmax"), K, V, checkpoints=[n])
    assert ds.attrs["state_numel"] == theory.bill(n, d, d)["softmax_cache"] == 2 * n * d


# ------------------------------------------------------------------ third-party objects and bad input


class _HebbianWithGain:
    """A user's memory, not registered: additive write, read scaled by a gain."""

    name = "my-hebbian"

    def __init__(self, c):
        self.c = c

    def init_state(self, batch, d, dv, *, device=None):
        return torch.zeros(batch, d, dv, device=device)

    def write(self, state, k, v):
        return state + k.float().transpose(1, 2) @ v.float()

    def read(self, state, q):
        return self.c * (q.float() @ state)

    def state_numel(self, d, dv):
        return d * dv


def test_a_third_party_object_works_in_recall():
    n, d = 96, 32
    K = keys.make("orthogonal", n, d, batch=2, seed=0)
    V = values.make("orthonormal", n, n, batch=2, seed=0)
    ds = probe.recall(_HebbianWithGain(d / n), K, V, checkpoints=[n])
    np.testing.assert_allclose(ds.mse.values[0], theory.rank_bound(n, d), atol=1e-5)  # T8 with the gain d/n
    assert ds.attrs["variant"] == "my-hebbian" and ds.attrs["feature_dim"] == d


def test_bad_input_names_the_variant_and_the_value():
    with pytest.raises(
        CapacityError,
        match=r"unknown variant 'lstm'; known: comba, cyfa, decay, delta, delta_product, dplr, gated_delta, gated_oja, gdn2, gka, gla, hybrid, kda, lattice, linear, log_linear, longhorn, lsq, mamba2, mamba3, mesa, mom, omega, precond_gated_delta, precond_kda, softmax, swa, titans, ttt, ",
    ):
        variants.get("lstm")
    with pytest.raises(CapacityError, match=r"decay: alpha must lie in \(0, 1\], got 1.5"):
        variants.get("decay", alpha=1.5)
    with pytest.raises(CapacityError, match=r"delta: beta must lie in \(0, 2\), got 2.0"):
        variants.get("delta", beta=2.0)
    with pytest.raises(CapacityError, match=r"gated_delta: beta high must lie in \(0, 2\), got 2.5"):
        variants.get("gated_delta", beta=("uniform", 0.5, 2.5))
    with pytest.raises(
        CapacityError, match=r"kda: alpha must be a number, a sequence .* or \(\"uniform\", low, high\)"
    ):
        variants.get("kda", alpha=("normal", 0.5, 0.1))
    with pytest.raises(CapacityError, match="needs low <= high"):
        variants.get("decay", alpha=("uniform", 0.9, 0.5))
    with pytest.raises(
        CapacityError, match=r"variant 'softmax' got unknown parameter\(s\) gate; allowed: scale, normalize"
    ):
        variants.get("softmax", gate=0.5)
    with pytest.raises(CapacityError, match=r"variant 'linear' got unknown parameter\(s\) nu"):
        variants.get("linear", nu=2)
    with pytest.raises(
        CapacityError,
        match=r"linear: unknown feature map 'cosine'; known: dpfp, elu1, identity, performer, relu, taylor2",
    ):
        variants.get("linear", feature="cosine")
    with pytest.raises(CapacityError, match=r"decay: feature map 'elu1' got unknown parameter\(s\) nu"):
        variants.get("decay", feature="elu1", nu=3)
    with pytest.raises(CapacityError, match="delta: normalize_read applies to the additive and gated memories"):
        variants.get("delta", feature="elu1", normalize_read=True)
    with pytest.raises(CapacityError, match="linear: normalize_read .* positive inner products"):
        variants.get("linear", normalize_read=True)
    with pytest.raises(CapacityError, match=r"softmax: scale must lie in \(0, inf\)"):
        variants.get("softmax", scale=-1.0)
    with pytest.raises(CapacityError, match="decay: draws per token, so its state is a TokenState"):
        mem = variants.get("decay", alpha=("uniform", 0.5, 1.0))
        mem.write(torch.zeros(1, 4, 2), torch.randn(1, 3, 4), torch.randn(1, 3, 2))


def test_params_rebuild_the_variant():
    for mem in (
        variants.get("kda", alpha=("uniform", 0.5, 1.0), beta=0.5, seed=4, feature="performer", m=32),
        variants.get("softmax", scale=3.0),
        variants.get("gla", alpha=[0.5, 0.9]),
        variants.get("linear", feature="dpfp", nu=3, normalize_read=True),
    ):
        again = variants.get(mem.name, **mem.params)
        assert again.params == mem.params
        json.dumps(mem.params)  # recorded by the probe as JSON
    from lacapacity.inputs import features

    mem = variants.get("linear", feature=features.get("performer", m=8, seed=5))  # a built map keeps its seed
    assert mem.params["seed"] == 5 and variants.get("linear", **mem.params).feature.seed == 5
    with pytest.raises(CapacityError, match="decay: the performer map has seed 5 but the variant's seed is 0"):
        variants.get("decay", alpha=("uniform", 0.5, 1.0), feature=features.get("performer", m=8, seed=5))
