"""mesa against fla-core 0.6.0's exact Mesa reference and lsq; omega against a float64 loop and the delta rule
(relative RMS error < 1e-5 in float32); sizes and check_variant."""

import pytest
import torch
from memory_support import pairs, rel_rms

from lacapacity import check_variant, variants
from lacapacity.inputs import keys


def _inputs(B=2, T=30, d=12, dv=6, seed=0):
    K, V = pairs(T, d, dv, B=B, seed=seed)
    return K, V


def _write(mem, K, V, splits=(0, 1, 5, 6, 17)):
    st = mem.init_state(K.shape[0], K.shape[2], V.shape[2])
    edges = [*splits, K.shape[1]]
    for a, b in zip(edges[:-1], edges[1:]):
        st = mem.write(st, K[:, a:b], V[:, a:b])
    return st


@pytest.mark.requires_fla
def test_mesa_matches_fla_mesa_net_exact_at_every_token():
    from fla.ops.mesa_net.naive import naive_mesa_net_exact

    K, V = _inputs(T=24, d=8, dv=8, seed=2)  # fla's Mesa state h_kv is d x d
    Q = keys.make("gaussian", 24, 8, batch=2, seed=7)
    B, T, d = K.shape
    mem = variants.get("mesa", lam=0.05, alpha=("uniform", 0.8, 1.0), beta=("uniform", 0.5, 1.5), seed=3)
    alpha, beta = mem._values("alpha", B, 0, T, d, "cpu"), mem._values("beta", B, 0, T, d, "cpu")
    theirs, G, C = naive_mesa_net_exact(
        Q[:, :, None], K[:, :, None], V[:, :, None], alpha.log()[..., None], torch.full((1, d), 0.05), beta[..., None]
    )
    st, ours = mem.init_state(B, d, d), []
    for t in range(T):  # o_t reads the state after token t
        st = mem.write(st, K[:, t : t + 1], V[:, t : t + 1])
        ours.append(mem.read(st, Q[:, t : t + 1]))
    assert rel_rms(torch.cat(ours, 1), theirs[:, :, 0]) < 1e-5
    assert rel_rms(st.gram, G[:, 0]) < 1e-5 and rel_rms(st.cross, C[:, 0]) < 1e-5


def test_mesa_without_forgetting_is_lsq():
    K, V = _inputs(seed=4)
    mesa, lsq = variants.get("mesa", lam=0.01), variants.get("lsq", lam=0.01)
    a = mesa.read(_write(mesa, K, V), K)
    b = lsq.read(lsq.write(lsq.init_state(2, 12, 6), K, V), K)
    assert rel_rms(a, b) < 1e-6
    faded = variants.get("mesa", lam=0.01, alpha=0.9)
    assert rel_rms(faded.read(_write(faded, K, V), K), b) > 1e-2


def _omega_ref(K, V, c, alpha, beta, phi=lambda x: x):
    """S = alpha S + beta sum_{i in the last c} phi(k_i)^T (v_i - phi(k_i) S), float64, from zeros."""
    P, Vd = phi(K.double()), V.double()
    S = torch.zeros(K.shape[0], P.shape[2], V.shape[2], dtype=torch.float64)
    for t in range(K.shape[1]):
        grad = sum(
            torch.einsum("bk,bv->bkv", P[:, i], Vd[:, i] - torch.einsum("bk,bkv->bv", P[:, i], S))
            for i in range(max(0, t - c + 1), t + 1)
        )
        S = alpha * S + beta * grad
    return S


@pytest.mark.parametrize("c", [1, 3, 8])
def test_omega_matches_a_float64_loop(c):
    K, V = _inputs(seed=6)
    mem = variants.get("omega", context=c, alpha=0.95, beta=0.3)
    assert rel_rms(_write(mem, K, V).matrix, _omega_ref(K, V, c, 0.95, 0.3)) < 1e-5


def test_omega_with_a_polynomial_feature_map_matches_a_float64_loop():
    from lacapacity.inputs import features

    K, V = _inputs(d=6, seed=8)
    phi = features.get("taylor2")
    mem = variants.get("omega", context=2, beta=0.2, feature="taylor2")
    st = _write(mem, K, V)
    want = _omega_ref(K, V, 2, 1.0, 0.2, phi=lambda x: phi(x.float()).double())
    assert st.matrix.shape[1] == phi.feature_dim(6) and rel_rms(st.matrix, want) < 1e-5
    assert mem.state_numel(6, 6) == phi.feature_dim(6) * 6 + 12


def test_omega_with_one_pair_is_the_delta_rule():
    K, V = _inputs(seed=9)
    om, dl = variants.get("omega", context=1, beta=0.6), variants.get("delta", beta=0.6, backend="torch")
    assert rel_rms(_write(om, K, V).matrix, dl.write(dl.init_state(2, 12, 6), K, V)) < 1e-6
    assert rel_rms(_write(variants.get("omega", context=2, beta=0.6), K, V).matrix, _write(om, K, V).matrix) > 1e-2


@pytest.mark.parametrize("label", ["mesa(alpha=0.95)", "omega", "omega(context=1, beta=1.0)"])
def test_solvers_pass_check_variant(label):
    report = check_variant(variants.resolve(label), d=8)
    assert report.passed, str(report)


def test_params_rebuild_and_errors():
    for label in ["mesa(lam=0.1, alpha=0.9, beta=2.0)", "omega(context=3, feature=taylor2)"]:
        mem = variants.resolve(label)
        assert variants.get(mem.name, **mem.params).params == mem.params
    for name, kw, match in [
        ("mesa", {"lam": 0.0}, "lam"),
        ("omega", {"context": 0}, "context"),
        ("omega", {"beta": 2.5}, "beta must lie in"),
        ("omega", {"nu": 2}, "unknown parameter"),
    ]:
        with pytest.raises(ValueError, match=match):
            variants.get(name, **kw)


def test_gka_exact_read_is_the_ridge_regression_with_the_adaptive_ridge():
    """G, C faded and weighted in float64; lam = eta |G|_F; the read q (G + lam I)^-1 C."""
    K, V = _inputs(seed=10)
    B, T, d = K.shape
    mem = variants.get("gka", eta=0.05, iterations=None, alpha=("uniform", 0.9, 1.0), beta=0.8, seed=1)
    alpha = mem._values("alpha", B, 0, T, d, "cpu").double()
    G = torch.zeros(B, d, d, dtype=torch.float64)
    C = torch.zeros(B, d, 6, dtype=torch.float64)
    for t in range(T):
        k, v = K[:, t].double(), V[:, t].double()
        G = alpha[:, t, None, None] * G + 0.8 * torch.einsum("bi,bj->bij", k, k)
        C = alpha[:, t, None, None] * C + 0.8 * torch.einsum("bi,bj->bij", k, v)
    lam = 0.05 * G.flatten(1).norm(dim=1)
    want = K.double() @ torch.linalg.solve(G + lam[:, None, None] * torch.eye(d, dtype=torch.float64), C)
    assert rel_rms(mem.read(_write(mem, K, V), K), want) < 1e-5
    assert (
        rel_rms(
            variants.get("gka", eta=0.05, iterations=80, alpha=("uniform", 0.9, 1.0), beta=0.8, seed=1).read(
                _write(mem, K, V), K
            ),
            want,
        )
        < 1e-5
    )  # Chebyshev iteration reaches the exact read


@pytest.mark.parametrize("eta", [0.02, 0.2])
def test_chebyshev_iteration_keeps_its_error_bound(eta):
    """||x_k - x||_A <= 2 rho^k ||x||_A, rho = (sqrt(kappa) - 1) / (sqrt(kappa) + 1), kappa <= (1 + eta) / eta."""
    from lacapacity.variants.solvers import chebyshev

    K, V = _inputs(seed=12)
    mem = variants.get("gka", eta=eta, iterations=None)
    st = _write(mem, K, V)
    G, C = st.gram.double(), st.cross.double()
    lam = mem.ridge(st)
    high = lam + torch.linalg.matrix_norm(G)
    A = G + lam[:, None, None] * torch.eye(12, dtype=torch.float64)
    x = torch.linalg.solve(A, C)
    kappa = float((high / lam).max())
    assert kappa <= (1 + eta) / eta + 1e-9
    rho = (kappa**0.5 - 1) / (kappa**0.5 + 1)

    def a_norm(e):
        return torch.einsum("bij,bik,bkj->b", e, A, e).sqrt()

    for k in (1, 3, 8, 20):
        err = a_norm(chebyshev(A, C, lam, high, k) - x)
        assert (err <= 2 * rho**k * a_norm(x) * (1 + 1e-9)).all(), (k, err, rho)
    assert float(a_norm(chebyshev(A, C, lam, high, 3) - x).max()) > 1e-3  # three steps are not the solution
    # exactly: the error after k steps is T_k((c - A) / h) / T_k(c / h) applied to the first, c, h the interval's
    # centre and half-width (T_k the Chebyshev polynomial), computed here through A's eigenvectors
    w, U = torch.linalg.eigh(A)
    c, h = ((high + lam) / 2)[:, None], ((high - lam) / 2)[:, None]
    for k in (1, 2, 5, 12):
        poly = torch.cos(k * torch.arccos(((c - w) / h).clamp(-1, 1))) / torch.cosh(k * torch.arccosh(c / h))
        want = x - U @ (poly[:, :, None] * (U.transpose(1, 2) @ x))
        assert rel_rms(chebyshev(A, C, lam, high, k), want) < 1e-9, k


def test_gka_passes_check_variant():
    report = check_variant(variants.get("gka", alpha=0.95), d=8)
    assert report.passed, str(report)
