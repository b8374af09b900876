"""T31-T33 (lacapacity.theory.quantised) against simulations written here: groups quantised by numpy, the additive,
decaying and delta recurrences written token by token in plain torch with their own int8 rounding."""

import math
import warnings

import numpy as np
import pytest
import torch

from lacapacity import theory
from lacapacity.errors import CapacityWarning
from lacapacity.inputs import keys, values


def _pairs(n, d, dv, B, seed=0):
    return keys.make("gaussian", n, d, batch=B, seed=seed), values.make("gaussian", n, dv, batch=B, seed=seed)


def _rows(x, Q, u=None):
    """Per-row symmetric rounding of x [..., m] (numpy-free torch, written from the definition)."""
    scale = x.abs().max(-1, keepdim=True).values / Q
    y = x / torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(y) if u is None else torch.floor(y + u)
    return q.clamp(-Q, Q) * scale


def _mean_se(x):
    x = torch.as_tensor(x, dtype=torch.float64).flatten()
    return float(x.mean()), float(x.std() / math.sqrt(x.numel()))


def test_scale_moment_and_rounding_variance_against_sampled_groups():
    rng = np.random.default_rng(0)
    for m in (1, 8, 32, 256):
        z = rng.standard_normal((20000, m))
        mx = np.abs(z).max(1) ** 2
        assert abs(mx.mean() - theory.scale_moment(m)) <= 4 * mx.std() / math.sqrt(len(mx))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(20000, 16, generator=g, dtype=torch.float64).float() * 3.0
    for Q, bits in ((127, 8), (7, 4)):
        for sr in (False, True):
            u = torch.rand(x.shape, generator=g) if sr else None
            m, se = _mean_se(((_rows(x, Q, u) - x).double() ** 2).mean(-1))
            want = theory.quantised_rounding_variance(3.0, 16, bits, stochastic=sr)
            assert abs(m - want) <= 3 * se and 3 * se < 0.03 * want, (bits, sr, m, want, se)


def test_t31_one_rounding_of_the_finished_additive_state():
    n, d, B = 1024, 32, 64
    K, V = _pairs(n, d, d, B, seed=1)
    S = K.transpose(1, 2) @ V
    for Q, bits, scope, x in ((127, 8, "row", S), (7, 4, "col", S.transpose(1, 2))):
        dev = ((_rows(x, Q) - x).double() ** 2).sum((1, 2)) / d
        m, se = _mean_se(dev)
        want = theory.quantised_final_error(n, d, d, bits, scope)
        assert abs(m - want) <= 3 * se and 3 * se < 0.03 * want, (scope, m, want, se)


def _run(memory, n, d, B, *, feedback, alpha=1.0, beta=1.0, Q=127, sr=False, seed=2):
    K, V = _pairs(n, d, d, B, seed=seed)
    g = torch.Generator().manual_seed(seed)
    F, S, r = torch.zeros(B, d, d), torch.zeros(B, d, d), torch.zeros(B, d, d)
    for t in range(n):
        k, v = K[:, t, :, None], V[:, t, None, :]
        if memory == "linear":
            F, S = F + k * v, S + k * v
        else:  # alpha (I - beta k^T k) S + beta k^T v; decay: beta = 0 in the erase, 1 in the write
            erase = 0.0 if memory == "decay" else beta
            F = alpha * F - erase * alpha * k * (k * F).sum(1, keepdim=True) + (beta if erase else 1.0) * k * v
            S = alpha * S - erase * alpha * k * (k * S).sum(1, keepdim=True) + (beta if erase else 1.0) * k * v
        x = S + r if feedback else S
        S = _rows(x, Q, torch.rand(x.shape, generator=g) if sr else None)
        if feedback:
            r = x - S
    return ((S - F).double() ** 2).sum((1, 2)) / d


@pytest.mark.slow
@pytest.mark.parametrize(
    "memory,feedback,alpha,beta,n,B,tol",
    [
        ("linear", False, 1.0, 1.0, 128, 64, 0.0),
        ("decay", False, 0.95, 1.0, 200, 64, 0.0),
        ("delta", False, 1.0, 1.0, 200, 72, 0.0),
        ("linear", True, 1.0, 1.0, 200, 64, 0.0),  # exactly T31 at every n
        ("delta", True, 1.0, 1.0, 200, 72, 0.0),
        ("delta", True, 1.0, 0.5, 200, 72, 0.0),
        ("gated_delta", True, 0.9, 1.0, 200, 72, 0.0),
    ],
)
def test_t32_every_write_with_and_without_feedback(memory, feedback, alpha, beta, n, B, tol):
    d = 32
    dev = _run(memory, n, d, B, feedback=feedback, alpha=alpha, beta=beta)
    m, se = _mean_se(dev)
    want = theory.quantised_step_error(n, d, d, 8, "row", feedback=feedback, memory=memory, alpha=alpha, beta=beta)
    assert abs(m - want) <= 3 * se + tol * want and 3 * se < 0.03 * want, (m, want, se)
    if feedback and memory == "linear":
        assert want == pytest.approx(theory.quantised_final_error(n, d, d, 8, "row"), rel=1e-12)
    if feedback and memory != "linear":  # bounded: the same at 4 times the writes
        later = theory.quantised_step_error(4 * n, d, d, 8, "row", feedback=True, memory=memory, alpha=alpha, beta=beta)
        assert later == pytest.approx(want, rel=0.02)


def test_t33_crossover_solves_its_equation_and_is_measured_there():
    d = 32
    for bits, sr in ((4, True), (4, False), (8, True)):
        n = float(theory.quantised_crossover(d, d, bits, "row", stochastic=sr))
        A = theory.quantised_rounding_variance(1.0, d, bits, stochastic=sr)
        assert A * n * (n + 1) / 2 == pytest.approx(n - 1, rel=1e-9)  # uniform errors' deviation = crosstalk
        assert abs(n * A / 2 - 1) < 0.05  # about 2 / A
    n = round(float(theory.quantised_crossover(d, d, 4, "row", stochastic=True)))
    m, se = _mean_se(_run("linear", n, d, 48, feedback=False, Q=7, sr=True, seed=3) * d / (n - 1))
    assert abs(m - 1) <= 3 * se + 0.02, (m, se)  # about 2% below the crosstalk there (docs/precision.md)
    assert math.isinf(theory.quantised_crossover(d, d, 4, "row", ratio=1e-3))  # never reaches a tiny share


# A closed form 3% off failing its `capacity check` row: scripts/perturb_check.py covers every function of
# lacapacity.theory.__all__ (T31-T33 included), run by tests/check/test_check_cli.py.


def _tensor_scale(x, Q, u=None):
    """One symmetric scale per item of x [B, d, dv]: the item's largest magnitude over Q (from the definition)."""
    scale = x.abs().flatten(1).max(-1).values[:, None, None] / Q
    y = x / torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(y) if u is None else torch.floor(y + u)
    return q.clamp(-Q, Q) * scale


def _unit(g, *shape):
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


@pytest.mark.parametrize(
    "n,d,dv,alpha,B", [(30, 24, 16, 1.0, 2048), (300, 24, 16, 0.9, 2560), (100, 64, 64, 0.9, 1536)]
)
def test_t31_one_scale_per_tensor_follows_the_entries_tails(n, d, dv, alpha, B):
    """One int8 scale over a whole tensor: the form that takes the entries Gaussian was 8.7% low at n = 30 and 23%
    low at alpha = 0.9 (the entries heavy-tailed); the Edgeworth kappa holds within 3 s.e. of about 2%."""
    g = torch.Generator().manual_seed(5)
    K, V = _unit(g, B, n, d), _unit(g, B, n, dv)
    w = alpha ** torch.arange(n - 1, -1, -1, dtype=torch.float64)
    S = torch.einsum("t,btd,bte->bde", w, K, V)  # the finished float state
    m, se = _mean_se(((_tensor_scale(S, 127) - S) ** 2).sum((1, 2)) / d)
    memory = "linear" if alpha == 1 else "decay"
    want = theory.quantised_final_error(n, d, dv, 8, "tensor", memory=memory, alpha=alpha)
    assert abs(m - want) <= 3 * se and 3 * se < 0.02 * want, (m, want, se)  # a form 3% off fails


def _int4_rows(n, d, dv, alpha, B, seed):
    """int4 per row with stochastic rounding at every write, no feedback, in plain torch: the deviation per item."""
    g = torch.Generator().manual_seed(seed)
    F, S = torch.zeros(B, d, dv, dtype=torch.float64), torch.zeros(B, d, dv, dtype=torch.float64)
    for _ in range(n):
        inc = _unit(g, B, d)[:, :, None] * _unit(g, B, dv)[:, None, :]
        F, S = alpha * F + inc, _rows(alpha * S + inc, 7, torch.rand(B, d, dv, generator=g, dtype=torch.float64))
    return ((S - F) ** 2).sum((1, 2)) / d


@pytest.mark.slow
def test_t32_int4_every_write_follows_the_uniform_model():
    """int4 per row without feedback, stochastic rounding: each rounding's error uniform over the grid (the scale
    moves at every write). The on-grid model this replaced was 0.70-0.85 of the measurement. Decay 0.95 (d = 32,
    dv = 16): within 3 s.e. (about 2%); the additive memory at T33's crossover (104 writes, d = dv = 32): within
    3 s.e. + 3%, its stated accuracy there (docs/quantised-accuracy.md: 0.98-1.01)."""
    m, se = _mean_se(_int4_rows(150, 32, 16, 0.95, 512, seed=7))
    want = theory.quantised_step_error(150, 32, 16, 4, "row", memory="decay", alpha=0.95, stochastic=True)
    assert abs(m - want) <= 3 * se and 3 * se < 0.025 * want, (m, want, se)
    m, se = _mean_se(_int4_rows(104, 32, 32, 1.0, 96, seed=8))
    want = theory.quantised_step_error(104, 32, 32, 4, "row", stochastic=True)
    assert abs(m - want) <= 3 * se + 0.03 * want, (m, want, se)


def test_forms_warn_outside_their_measured_range():
    with pytest.warns(CapacityWarning, match="heavy-tailed"):
        theory.quantised_final_error(1000, 32, 32, 8, "tensor", memory="decay", alpha=0.8)
    with pytest.warns(CapacityWarning, match="crossover"):
        theory.quantised_step_error(400, 32, 32, 4, "row")
    with pytest.warns(CapacityWarning, match="a quarter of the state's own spread"):
        theory.quantised_step_error(800, 32, 32, 4, "row", memory="decay", alpha=0.99)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        theory.quantised_step_error(400, 32, 32, 4, "row", memory="decay", alpha=0.95, stochastic=True)
        theory.quantised_final_error(1000, 32, 32, 8, "tensor", memory="decay", alpha=0.9)
        theory.quantised_step_error(100, 32, 32, 4, "row")
