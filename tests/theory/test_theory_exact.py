"""lacapacity.theory to full precision against independent computations, and its input checks message by message.

tests/theory/test_theory.py and tests/theory/test_theory_delta.py hold each closed form to a simulation (to a few standard
errors); this file holds the functions to numbers computed here another way (a per-pair recursion, other
quadrature rules, scipy's root finder and integrator) to 1e-6 or better, on numpy and torch inputs, and checks
each error message. It is what kills the mutants of capacity/theory/ (scripts/mutation.sh, docs/testing.md).
"""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, optimize, special

from lacapacity import CapacityError, theory
from lacapacity.theory import _common

RNG = np.random.default_rng(2026)

# ---------------------------------------------------------------- shared checks of the inputs


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: theory.frame_bound(0.5, 4), r"^n must be >= 1 \(finite\), got 0.5$"),
        (lambda: theory.frame_bound(4, float("inf")), r"^d must be >= 1 \(finite\), got inf$"),
        (lambda: theory.welch_bound([4, float("nan")], 2), r"^n must be >= 1 \(finite\), got \[4, nan\]$"),
        (lambda: theory.rank_bound(True, 4), r"^n must be a number or an array of numbers, got True$"),
        (lambda: theory.rank_bound("8", 4), r"^n must be a number or an array of numbers, got '8'$"),
        (lambda: theory.rank_bound(b"8", 4), r"^n must be a number or an array of numbers, got b'8'$"),
        (lambda: theory.rank_bound(np.bool_(True), 4), "n must be a number or an array of numbers"),
        (lambda: theory.rank_bound(8, ["a", "b"]), r"^d must be a number or an array of numbers, got \['a', 'b'\]$"),
        (lambda: theory.rank_bound(8, [{}]), r"^d must be a number or an array of numbers"),
        (lambda: theory.rank_bound(torch.ones(2, device="meta"), 4), "n must be a number or an array of numbers"),
        (lambda: theory.optimal_gain(8, 0), r"^d must be >= 1 \(finite\), got 0$"),
        (lambda: theory.random_coherence_moments(0.0), r"^d must be >= 1 \(finite\), got 0.0$"),
    ],
)
def test_counts_name_the_argument_and_what_is_allowed(call, match):
    with pytest.raises(CapacityError, match=match):
        call()


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: theory.crosstalk_error(torch.ones(3, 2, device="meta")), r"^K is a meta tensor; meta tensors carry no numbers$"),
        (lambda: theory.crosstalk_error(torch.ones(3, 2, dtype=torch.complex64)), r"^K must hold real numbers, got torch.complex64$"),
        (lambda: theory.crosstalk_error(torch.ones(3, 2, dtype=torch.bool)), r"^K must hold real numbers, got torch.bool$"),
        (lambda: theory.crosstalk_error(np.ones(3)), r"^K must have at least 2 dimension\(s\) \[\.\.\., n, d\], got shape \(3,\)$"),
        (lambda: theory.crosstalk_error(torch.ones(3)), r"^K must have at least 2 dimension\(s\) \[\.\.\., n, d\], got shape \(3,\)$"),
        (lambda: theory.two_pair_readout(1.0, np.ones(2), np.ones(2), np.ones(2)), r"^k1 must have at least 1 dimension\(s\) \[\.\.\., d\], got shape \(\)$"),
        (lambda: theory.two_pair_readout(np.ones(2), np.ones(3), np.ones(2), np.ones(2)), r"^k1 and k2 must share their last dimension, got shapes \(2,\), \(3,\)$"),
        (lambda: theory.two_pair_readout(np.ones(2), np.ones(2), np.ones(4), np.ones(2)), r"^v1 and v2 must share their last dimension, got shapes \(4,\), \(2,\)$"),
        (lambda: theory.decomposition(np.ones((3, 2)), np.ones((4, 2))), r"^K \[\.\.\., n, d\] and V \[\.\.\., n, dv\] must share n, got \(3, 2\), \(4, 2\)$"),
        (lambda: theory.decomposition(np.ones((3, 2)), "V"), "^V must be a number or an array of numbers, got 'V'$"),
        (lambda: theory.decay_readout(np.ones((3, 2)), np.ones((4, 2)), 0.5), r"^K \[\.\.\., n, d\] and V \[\.\.\., n, dv\] must share n, got \(3, 2\), \(4, 2\)$"),
        (lambda: theory.decay_readout(np.ones((3, 2)), np.ones((3, 2)), [0.5, 0.5]), r"^alpha must be one finite number \(the gate, in \(0, 1\] for a decaying memory\), got \[0.5, 0.5\]$"),
        (lambda: theory.decay_readout(np.ones((3, 2)), np.ones((3, 2)), float("nan")), "^alpha must be one finite number"),
        (lambda: theory.decay_readout(np.ones((3, 2)), np.ones((3, 2)), "a"), "^alpha must be a number or an array of numbers, got 'a'$"),
    ],
)  # fmt: skip
def test_matrices_are_checked_with_one_message(call, match):
    with pytest.raises(CapacityError, match=match):
        call()


def test_outputs_are_floats_for_scalars_and_arrays_otherwise():
    for value in (
        theory.frame_bound(3, 2),
        theory.welch_bound(3, 2),
        theory.random_keys_error(3, 2),
        theory.rank_bound(3, 2),
    ):
        assert type(value) is float
    assert type(theory.optimal_gain(3, 2)) is float and type(theory.optimal_gain_error(3, 2)) is float
    m2, m4 = theory.random_coherence_moments(4)
    assert type(m2) is float and type(m4) is float
    out = theory.frame_bound(np.array([3, 4]), 2)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == (2,)
    assert theory.frame_bound(np.array(5), 2) == 1.5 and type(theory.frame_bound(np.array(5), 2)) is float
    assert _common._out(np.array([[1]])).shape == (1, 1)
    # counts broadcast to float64 arrays, finite and >= 1
    n, d = _common._counts(n=[1, 2], d=3)
    assert n.dtype == np.float64 and d.tolist() == [3.0, 3.0]
    assert _common._numbers("x", torch.tensor([1, 2])).tolist() == [1.0, 2.0]
    assert (
        _common._numbers("x", torch.tensor([1, 2])).dtype == np.float64
        and _common._numbers("x", [1]).dtype == np.float64
    )
    assert _common._numbers("x", torch.tensor([0.1], dtype=torch.float32)).dtype == np.float64


# ---------------------------------------------------------------- T2-T9


@pytest.mark.parametrize("bad", ["k1", "k2", "v1", "v2"])
def test_two_pair_readout_names_the_bad_argument(bad):
    args = {"k1": np.ones(3), "k2": np.ones(3), "v1": np.ones(2), "v2": np.ones(2)}
    args[bad] = 1.0
    with pytest.raises(
        CapacityError, match=rf"^{bad} must have at least 1 dimension\(s\) \[\.\.\., d\], got shape \(\)$"
    ):
        theory.two_pair_readout(**args)
    args[bad] = "x"
    with pytest.raises(CapacityError, match=rf"^{bad} must be a number or an array of numbers, got 'x'$"):
        theory.two_pair_readout(**args)
    # one pair of unbatched vectors: the read of k1 after writing both
    k1, k2, v1, v2 = np.array([1.0, 2.0]), np.array([3.0, -1.0]), np.array([1.0, 0.0, 2.0]), np.array([0.0, 1.0, 1.0])
    assert theory.two_pair_readout(k1, k2, v1, v2).tolist() == [5.0, 1.0, 11.0]  # 5 v1 + 1 v2


def test_reads_with_two_batch_dimensions():
    K, V = RNG.normal(size=(2, 3, 4, 5)), RNG.normal(size=(2, 3, 4, 6))  # [..., n, d], [..., n, dv]
    got = theory.two_pair_readout(K[..., 0, :], K[..., 1, :], V[..., 0, :], V[..., 1, :])
    want = np.einsum("abd,abd->ab", K[..., 0, :], K[..., 0, :])[..., None] * V[..., 0, :]
    want += np.einsum("abd,abd->ab", K[..., 0, :], K[..., 1, :])[..., None] * V[..., 1, :]
    assert got.shape == (2, 3, 6) and np.allclose(got, want, rtol=1e-12)
    signal, leak = theory.decomposition(K, V)
    G = K @ np.swapaxes(K, -1, -2)
    assert np.allclose(signal + leak, G @ V, rtol=1e-12) and signal.shape == (2, 3, 4, 6)
    assert np.allclose(theory.crosstalk_error(K), ((G**2).sum((-2, -1)) - 2 * np.trace(G, axis1=-2, axis2=-1) + 4) / 4)
    for x in (np.ones(4), "K"):
        with pytest.raises(CapacityError, match="^K must"):
            theory.decomposition(x, V)
        with pytest.raises(CapacityError, match="^K must"):
            theory.crosstalk_error(x)


def test_reads_of_the_additive_state_on_numpy_and_torch():
    K, V = RNG.normal(size=(2, 5, 3)), RNG.normal(size=(2, 5, 4))
    S = K.transpose(0, 2, 1) @ V
    G = K @ K.transpose(0, 2, 1)
    for lib in (np.asarray, torch.as_tensor):
        k, v = lib(K), lib(V)
        got = theory.two_pair_readout(k[:, 0], k[:, 1], v[:, 0], v[:, 1])
        want = (K[:, 0] @ K[:, 0].T).diagonal()[:, None] * V[:, 0] + np.einsum("bd,bd->b", K[:, 0], K[:, 1])[
            :, None
        ] * V[:, 1]
        assert np.allclose(np.asarray(got), want, rtol=1e-12)
        signal, leak = theory.decomposition(k, v)
        assert np.allclose(np.asarray(signal), G.diagonal(axis1=1, axis2=2)[..., None] * V, rtol=1e-12)
        assert np.allclose(np.asarray(signal) + np.asarray(leak), K @ S, rtol=1e-12)
        err = np.asarray(theory.crosstalk_error(k))  # orthonormal-value formula, any key norms
        want = ((G**2).sum((1, 2)) - 2 * np.trace(G, axis1=1, axis2=2) + 5) / 5
        assert err.shape == (2,) and np.allclose(err, want, rtol=1e-12)
    assert isinstance(theory.crosstalk_error(torch.as_tensor(K)), torch.Tensor)


def test_bounds_and_expectations_are_their_formulas():
    n = np.array([1, 2, 5, 8, 9, 40, 1000])
    for d in (1, 2, 8, 33):
        assert np.allclose(theory.frame_bound(n, d), [max(m / d - 1, 0) for m in n], rtol=1e-15, atol=0)
        assert np.allclose(theory.rank_bound(n, d), [max(1 - d / m, 0) for m in n], rtol=1e-15, atol=0)
        welch = [math.sqrt((m - d) / (d * (m - 1))) if m > d else 0.0 for m in n]
        assert np.allclose(theory.welch_bound(n, d), welch, rtol=1e-15, atol=0)
        assert np.allclose(theory.random_keys_error(n, d), (n - 1) / d, rtol=1e-15, atol=0)
        assert np.allclose(theory.optimal_gain(n, d), d / (d + n - 1), rtol=1e-15, atol=0)
        assert np.allclose(theory.optimal_gain_error(n, d), (n - 1) / (d + n - 1), rtol=1e-15, atol=0)
        m2, m4 = theory.random_coherence_moments(d)
        assert m2 == pytest.approx(1 / d, rel=1e-15) and m4 == pytest.approx(3 / (d * (d + 2)), rel=1e-15)
    # T9: the gain minimises c^2 E|r|^2 - 2 c E r.v + 1 with E|r|^2 = 1 + (n - 1)/d, E r.v = 1
    for m, d in ((10, 4), (300, 64)):
        c = optimize.minimize_scalar(lambda c, r=1 + (m - 1) / d: c * c * r - 2 * c + 1).x
        assert theory.optimal_gain(m, d) == pytest.approx(c, rel=1e-6)
        assert theory.optimal_gain_error(m, d) == pytest.approx(c * c * (1 + (m - 1) / d) - 2 * c + 1, rel=1e-6)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("d", [1, 16, 100])
def test_capacities_are_the_roots_of_their_errors(eps, d):
    f = lambda n, err: err(n, d) - eps
    assert theory.capacity_random_keys(eps, d) == pytest.approx(
        optimize.brentq(f, 1, 1e6, args=(theory.random_keys_error,)), rel=1e-9
    )
    assert theory.capacity_tight_frame(eps, d) == pytest.approx(d * (1 + eps), rel=1e-15)
    tight = lambda n, d: n / d - 1  # the frame bound past n = d, where the capacity lies
    assert theory.capacity_tight_frame(eps, d) == pytest.approx(optimize.brentq(f, d, 1e6, args=(tight,)), rel=1e-9)
    assert theory.rank_bound_capacity(eps, d) == pytest.approx(d / (1 - eps), rel=1e-15)
    if eps > 0:
        assert theory.rank_bound_capacity(eps, d) == pytest.approx(
            optimize.brentq(f, d, 1e6, args=(theory.rank_bound,)), rel=1e-9
        )
    assert type(theory.capacity_random_keys(eps, d)) is float


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: theory.capacity_random_keys(-0.1, 8), r"^eps must be a finite error bound >= 0, got "),
        (lambda: theory.capacity_random_keys(float("nan"), 8), "^eps must be a finite error bound >= 0"),
        (lambda: theory.capacity_tight_frame(-1e-9, 8), "^eps must be a finite error bound >= 0"),
        (lambda: theory.capacity_tight_frame(float("inf"), 8), "^eps must be a finite error bound >= 0"),
        (lambda: theory.capacity_random_keys(0.5, 0), r"^d must be >= 1 \(finite\)"),
        (lambda: theory.capacity_tight_frame(0.5, 0), r"^d must be >= 1 \(finite\)"),
        (lambda: theory.rank_bound_capacity(-0.1, 8), r"^eps must lie in \[0, 1\) for the rank-bound capacity, got "),
        (lambda: theory.rank_bound_capacity([0.5, 1.0], 8), r"^eps must lie in \[0, 1\) for the rank-bound capacity"),
        (lambda: theory.rank_bound_capacity(0.5, 0), r"^d must be >= 1 \(finite\)"),
        (lambda: theory.rank_bound_capacity(float("nan"), 8), r"^eps must lie in \[0, 1\)"),
        (lambda: theory.rank_bound_capacity("x", 8), "^eps must be a number or an array of numbers, got 'x'$"),
        (lambda: theory.capacity_random_keys("x", 8), "^eps must be a number or an array of numbers, got 'x'$"),
        (lambda: theory.capacity_tight_frame("x", 8), "^eps must be a number or an array of numbers, got 'x'$"),
    ],
)
def test_capacity_inputs(call, match):
    with pytest.raises(CapacityError, match=match):
        call()
    assert np.allclose(theory.capacity_random_keys([0.0, 0.5], [[8], [16]]), [[1, 5], [1, 9]])
    assert np.allclose(theory.capacity_tight_frame([0.0, 0.5], 8), [8, 12])
    assert np.allclose(theory.rank_bound_capacity([0.0, 0.5], 8), [8, 16])


# ---------------------------------------------------------------- T10


def _gaussian_recall(n, d, dv):
    """The Gaussian model of argmax_recall, integrated by scipy's adaptive quad (not quad_vec)."""
    if n <= 1:
        return 1.0
    sc = math.sqrt((n - 1) / (d * dv))
    sw = math.sqrt(1 / dv + 1 / d + max(n - 2, 0) / (d * dv))
    f = lambda z: math.exp(-z * z / 2 + (n - 1) * special.log_ndtr((1 + sc * z) / sw)) / math.sqrt(2 * math.pi)
    return integrate.quad(f, -np.inf, np.inf, epsabs=1e-13, epsrel=1e-11, limit=200)[0]


@pytest.mark.parametrize("n,d,dv", [(1, 4, 4), (2, 4, 4), (3, 1, 1), (40, 32, 32), (200, 64, 16), (7, 8, 64)])
def test_argmax_recall_is_its_integral(n, d, dv):
    assert theory.argmax_recall(n, d, dv) == pytest.approx(_gaussian_recall(n, d, dv), abs=1e-8)


def test_argmax_capacity_between_two_and_three_pairs_and_empty_input():
    # a tau between the recall at n = 2 and n = 3: the capacity lies between them, found by the root solver
    tau = theory.argmax_recall(2.5, 4, 4)
    assert theory.argmax_capacity(4, 4, tau=tau) == pytest.approx(2.5, rel=1e-6)
    assert theory.argmax_capacity(4, 4, tau=theory.argmax_recall(2, 4, 4)) == pytest.approx(2.0, rel=1e-6)
    assert theory.argmax_capacity(np.array([]), 8).shape == (0,)
    assert theory.argmax_recall_refined(np.array([]), 8, 8).shape == (0,)
    two = theory.argmax_recall_refined(2, 16, 16)
    assert two == pytest.approx(_refined_recall(2, 16, 16), abs=2e-5) and two < 1
    for bad in (0.0, 1.0, "x"):
        with pytest.raises(CapacityError, match="^tau must"):
            theory.argmax_capacity(8, 8, tau=bad)
    with pytest.raises(CapacityError, match="^tau must be a number or an array of numbers, got 'x'$"):
        theory.argmax_capacity(8, 8, tau="x")


def test_private_quadrature_pieces():
    from lacapacity.theory import argmax

    # P(u > x) for a coordinate u of a uniform unit vector: 1 below -1, 0 above 1, 1/2 at 0, and the Beta law between
    got = argmax._coordinate_sf(np.array([-2.0, -1.0, 0.0, 0.3, 1.0, 2.0]), 16)
    assert got[[0, 1, 2, 4, 5]].tolist() == pytest.approx([1.0, 1.0, 0.5, 0.0, 0.0])
    mc = (
        integrate.quad(lambda u: (1 - u * u) ** 6.5, 0.3, 1)[0] / integrate.quad(lambda u: (1 - u * u) ** 6.5, -1, 1)[0]
    )
    assert got[3] == pytest.approx(mc, rel=1e-9)
    x, w = argmax._coordinate_nodes(16, 40)
    assert w.sum() == pytest.approx(1.0) and (x**2 * w).sum() == pytest.approx(1 / 16, rel=1e-10)  # E u^2 = 1/m
    sc, sw = argmax._score_spreads(np.array([1.0, 2.0, 50.0]), 16.0, 8.0)
    assert np.allclose(sc, np.sqrt([0, 1, 49]) / np.sqrt(128)) and np.allclose(
        sw**2, 1 / 8 + 1 / 16 + np.array([0, 0, 48]) / 128
    )


def test_argmax_recall_broadcasts_and_its_capacity_is_the_root():
    got = theory.argmax_recall([[10], [100]], [16, 32], 32)
    assert got.shape == (2, 2)
    assert np.allclose(got, [[_gaussian_recall(n, d, 32) for d in (16, 32)] for n in (10, 100)], atol=1e-8)
    for d, dv, tau in ((16, 16, 0.9), (64, 32, 0.5), (8, 64, 0.99)):
        f = lambda x, d, dv, tau: _gaussian_recall(math.exp(x), d, dv) - tau
        root = math.exp(optimize.brentq(f, math.log(2), 12, args=(d, dv, tau), xtol=1e-12))
        assert theory.argmax_capacity(d, dv, tau=tau) == pytest.approx(root, rel=1e-7)
    caps = theory.argmax_capacity([16, 32], 16)
    assert caps.shape == (2,) and caps[0] == pytest.approx(theory.argmax_capacity(16, 16), rel=1e-12)
    assert theory.argmax_capacity(1, 1, tau=0.99) == 1.0  # two pairs already miss: no n >= 2 keeps recall 0.99
    assert theory.argmax_recall(2, 1, 1) < 0.99


def _refined_recall(n, d, dv, nodes=(161, 30, 80)):
    """argmax_recall_refined's model integrated with other rules and more nodes.

    a = N . v_i ~ N(0, s2) by Gauss-Hermite; |N|^2 = a^2 + s2 chi2_(dv-1) by Gauss-Laguerre in chi2/2; g = G_il
    with density (1 - g^2)^((d - 3)/2) by Gauss-Jacobi; P(u > x) of a coordinate of a uniform unit vector in R^dv
    from the Beta((dv-1)/2, (dv-1)/2) survival function.
    """
    if n <= 1:
        return 1.0
    s2 = (n - 1) / (d * dv)
    z, wz = np.polynomial.hermite_e.hermegauss(nodes[0])
    wz = wz / wz.sum()
    y, wy = special.roots_genlaguerre(nodes[1], (dv - 1) / 2 - 1)
    wy = wy / wy.sum()
    g, wg = special.roots_jacobi(nodes[2], (d - 3) / 2, (d - 3) / 2)
    wg = wg / wg.sum()
    a = math.sqrt(s2) * z[:, None, None]
    norm2 = a * a + 2 * s2 * y[None, :, None]
    s_g = np.sqrt(np.maximum((1 - g) ** 2 + 2 * (1 - g) * a + norm2 - 1 / d, 1e-12))
    x = np.clip((1 + a - g) / s_g, -1, 1)
    lose = (special.betainc((dv - 1) / 2, (dv - 1) / 2, (1 - x) / 2) * wg).sum(-1)
    return float((((1 - lose) ** (n - 1)) * wy).sum(-1) @ wz)


@pytest.mark.slow
@pytest.mark.parametrize(
    "n,d,dv", [(13, 16, 16), (52, 32, 32), (44, 64, 16), (33, 16, 64), (190, 64, 64), (20, 16, 32)]
)
def test_argmax_recall_refined_is_its_integral(n, d, dv):
    assert theory.argmax_recall_refined(n, d, dv) == pytest.approx(_refined_recall(n, d, dv), abs=2e-5)


@pytest.mark.slow
def test_argmax_capacity_refined_is_the_root_of_its_recall():
    for d, dv, tau, lo, hi in ((32, 32, 0.9, 48, 56),):
        root = optimize.brentq(
            lambda n, d, dv, tau: _refined_recall(n, d, dv) - tau, lo, hi, args=(d, dv, tau), xtol=1e-6
        )
        assert theory.argmax_capacity_refined(d, dv, tau=tau) == pytest.approx(root, rel=2e-4)
    assert theory.argmax_recall_refined(1, 4, 4) == 1.0
    assert theory.argmax_recall_refined([1, 2], 4, 4).shape == (2,)
    assert 0 < theory.argmax_recall_refined(3, 2, 2) < 1  # d = dv = 2 is the smallest allowed
    assert theory.argmax_capacity_refined(2, 2) >= 1.0 and theory.argmax_capacity_refined(2, 8) >= 1.0
    with pytest.raises(CapacityError, match=r"^tau must lie in \(0, 1\), got 0.0$"):
        theory.argmax_capacity_refined(8, 8, tau=0.0)
    with pytest.raises(CapacityError, match=r"^tau must lie in \(0, 1\), got \[0.5\]$"):
        theory.argmax_capacity(8, 8, tau=[0.5])
    with pytest.raises(CapacityError, match=r"^tau must lie in \(0, 1\), got \[0.5\]$"):
        theory.argmax_capacity_refined(8, 8, tau=[0.5])
    with pytest.raises(CapacityError, match=r"^d and dv must be >= 2 for the refined argmax prediction, got d="):
        theory.argmax_capacity_refined(8, 1)
    with pytest.raises(CapacityError, match="d and dv must be >= 2"):
        theory.argmax_recall_refined(8, 4, 1)


# ---------------------------------------------------------------- T11


def test_decay_readout_against_the_recurrence_on_numpy_and_torch():
    n, d, dv = 7, 4, 3
    K, V = RNG.normal(size=(2, n, d)), RNG.normal(size=(2, n, dv))
    for alpha in (0.5, 1.0, 1.3):
        S = np.zeros((2, d, dv))
        for t in range(n):
            S = alpha * S + K[:, t, :, None] * V[:, t, None, :]
        want = K @ S
        assert np.allclose(theory.decay_readout(K, V, alpha), want, rtol=1e-12)
        got = theory.decay_readout(
            torch.as_tensor(K, dtype=torch.float64), torch.as_tensor(V, dtype=torch.float64), alpha=alpha
        )
        assert got.dtype == torch.float64 and np.allclose(got.numpy(), want, rtol=1e-12)
    assert np.allclose(theory.decay_readout(K, V, 1.0), K @ K.transpose(0, 2, 1) @ V, rtol=1e-12)  # alpha = 1: T1


# ---------------------------------------------------------------- T12


def _delta_per_pair(n, d, b):
    """delta_rule_error's second-moment recursion run pair by pair (lists of A_i, B_i), not on the sums."""
    m2, m4 = 1 / d, 3 / (d * (d + 2))
    kap = b * b * (m2 - m4) / (d - 1)
    A, B, F, out = [], [], 0.0, []
    for _ in range(n):
        A = [
            (1 - 2 * b * m2 + b * b * m4) * a
            - 2 * b * (m2 - b * m4) * bb
            + b * b * (m2 + m4)
            + kap * (F - 1 - 2 * bb - a)
            for a, bb in zip(A, B)
        ]
        B = [(1 - b / d) * bb - b / d for bb in B]
        A.append((1 - b) ** 2 * (1 + F / d))
        B.append(-(1 - b))
        F = (1 - b * (2 - b) / d) * F + b * b
        out.append(sum(A) / len(A))
    return np.array(out)


@pytest.mark.parametrize("d,beta", [(2, 1.0), (3, 0.3), (16, 1.0), (16, 1.7), (64, 0.5)])
def test_delta_rule_error_is_its_recursion(d, beta):
    n = 60
    want = _delta_per_pair(n, d, beta)
    assert np.allclose(theory.delta_rule_error(np.arange(1, n + 1), d, beta=beta), want, rtol=1e-12, atol=0)
    assert theory.delta_rule_error(n, d, beta=beta) == pytest.approx(want[-1], rel=1e-12)
    assert theory.delta_rule_error(1, d, beta=beta) == pytest.approx((1 - beta) ** 2, abs=1e-15)


def test_delta_rule_error_broadcasts_over_dv_too():
    assert theory.delta_rule_error(10, 16, dv=[8, 16]).shape == (2,)
    assert np.all(theory.delta_rule_error(10, 16, dv=[8, 16]) == theory.delta_rule_error(10, 16))
    assert theory.delta_rule_error(1, 8, beta=1) == 0.0 and theory.delta_rule_error(3, 8, beta=1) == pytest.approx(
        _delta_per_pair(3, 8, 1.0)[-1]
    )


def test_delta_rule_error_mixes_its_arguments_in_one_call():
    got = theory.delta_rule_error([[5], [40]], [4, 16], beta=[[0.5, 1.0]])
    for i, n in enumerate((5, 40)):
        for j, (d, b) in enumerate(((4, 0.5), (16, 1.0))):
            assert got[i, j] == pytest.approx(_delta_per_pair(n, d, b)[-1], rel=1e-12)


@pytest.mark.parametrize("d,beta", [(4, 1.0), (8, 0.5), (12, 1.5)])
def test_delta_rule_capacity_is_the_last_n_within_eps(d, beta):
    curve = _delta_per_pair(64 * d, d, beta)
    for eps in (0.05, 0.2, 0.5, 0.9):
        over = np.nonzero(curve > eps)[0]
        want = float(over[0]) if over.size else np.inf
        assert theory.delta_rule_capacity(eps, d, beta=beta) == want
    assert theory.delta_rule_capacity(2 / (2 - beta), d, beta=beta) == np.inf  # the error never reaches its limit
    assert theory.delta_rule_capacity(((1 - beta) ** 2) / 2, d, beta=beta) == (
        0.0 if beta != 1 else theory.delta_rule_capacity(0.0, d, beta=beta)
    )
    assert theory.delta_rule_capacity(0.5, 2, beta=beta) == float(np.nonzero(_delta_per_pair(200, 2, beta) > 0.5)[0][0])
    both = theory.delta_rule_capacity([0.2, 0.5], [[8], [16]], beta=1.0)
    assert both.shape == (2, 2) and both[1, 1] == theory.delta_rule_capacity(0.5, 16)
    assert type(theory.delta_rule_capacity(0.5, 8)) is float


@pytest.mark.slow
def test_delta_rule_capacity_near_the_limiting_error():
    """Past 64 d pairs: eps = 1.97 at d = 8 is first exceeded at n = 534 (the error tends to 2 like 2 - 2d/n)."""
    curve = _delta_per_pair(700, 8, 1.0)
    assert theory.delta_rule_capacity(1.97, 8) == float(np.nonzero(curve > 1.97)[0][0]) == 533.0
    with pytest.raises(
        CapacityError,
        match=r"^eps = 1.99999 lies so close to the delta rule's limiting error .* beyond 4096 d pairs; use a smaller eps$",
    ):
        theory.delta_rule_capacity(1.99999, 8)
    # a crossing past 4096 pairs (but before 4096 d): d = 2, eps between the errors at 4999 and 5000 pairs
    e = theory.delta_rule_error([4999, 5000], 2)
    assert theory.delta_rule_capacity((e[0] + e[1]) / 2, 2) == 4999.0
    # eps equal to an error value: that n still counts (error <= eps)
    assert theory.delta_rule_capacity(theory.delta_rule_error(10, 8), 8) == 10.0
    assert theory.delta_rule_capacity(2.0, 8) == np.inf and theory.delta_rule_capacity(4.0 / 3.0, 8, beta=0.5) == np.inf


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: theory.delta_rule_capacity(0.5, 8, beta="b"), "^beta must be a number or an array of numbers, got 'b'$"),
        (lambda: theory.delta_rule_capacity(0.5, 1), r"^d must be a whole number >= 2, got "),
        (lambda: theory.delta_rule_capacity(0.5, 8.5), r"^d must be a whole number >= 2, got "),
        (lambda: theory.delta_rule_capacity(0.5, 8, beta=2.0), r"^beta must lie in \(0, 2\), got 2.0$"),
        (lambda: theory.delta_rule_capacity(0.5, 8, beta=0.0), r"^beta must lie in \(0, 2\)"),
        (lambda: theory.delta_rule_capacity(0.5, 8, beta=float("nan")), r"^beta must lie in \(0, 2\)"),
        (lambda: theory.delta_rule_capacity("x", 8), "^eps must be a number or an array of numbers"),
        (lambda: theory.delta_rule_capacity(float("nan"), 8), r"^eps must be an error bound \(a number, not NaN\), got "),
        (lambda: theory.delta_rule_error(4, 8, beta=float("inf")), r"^beta must lie in \(0, 2\) \(the delta rule is stable there\), got inf$"),
        (lambda: theory.delta_rule_error(4, 8, dv=0), r"^dv must be >= 1 \(finite\)"),
        (lambda: theory.delta_rule_error(4.5, 8), r"^n must hold whole numbers of pairs \(>= 1\), got "),
        (lambda: theory.delta_rule_error(4, 1.5), r"^d must be >= 2 for random unit keys, got "),
    ],
)  # fmt: skip
def test_delta_inputs(call, match):
    with pytest.raises(CapacityError, match=match):
        call()


# ---------------------------------------------------------------- T13


def test_bill_entries_and_break_even_with_dv_apart_from_d():
    n, d, dv = np.array([1, 30, 100]), 48, 80
    b = theory.bill(n, d, dv)
    assert set(b) == {"softmax_cache", "linear_state", "softmax_decode_flops", "linear_decode_flops"}
    assert b["softmax_cache"].tolist() == (n * 128).tolist()
    assert b["linear_state"].tolist() == [3840.0] * 3
    assert b["softmax_decode_flops"].tolist() == (2 * n * 128).tolist()
    assert b["linear_decode_flops"].tolist() == [4 * 3840.0] * 3
    one = theory.bill(5, 8)
    assert one == {
        "softmax_cache": 80.0,
        "linear_state": 64.0,
        "softmax_decode_flops": 160.0,
        "linear_decode_flops": 256.0,
    }
    assert all(type(v) is float for v in one.values())
    assert theory.break_even_n(d, dv) == 30.0 and theory.break_even_n(d, dv, measure="flops") == 60.0
    assert theory.break_even_n(12) == 6.0 and theory.break_even_n(12, measure="flops") == 12.0
    assert np.allclose(theory.break_even_n([8, 16], 8), [4.0, 16 * 8 / 24])
    with pytest.raises(CapacityError, match=r"^measure must be 'cache' or 'flops', got 'time'$"):
        theory.break_even_n(8, measure="time")
    with pytest.raises(CapacityError, match=r"^dv must be >= 1 \(finite\)"):
        theory.bill(4, 8, 0)
