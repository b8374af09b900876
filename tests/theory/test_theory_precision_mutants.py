"""lacapacity.theory's precision closed forms (T14-T19) where tests/variants/test_precision.py does not reach: float32 states
(every increment spans many ulps, the uniform-error branch), the first writes (a zero state, the first grid points
of the crossover), arrays of (d, dv) and the defaults. Each against a simulation written here in numpy, a Monte
Carlo draw of the model's own assumptions, or an equation the result must solve."""

import math

import numpy as np
import pytest
import torch

from lacapacity import theory
from lacapacity.theory import precision

F8 = "float8_e4m3fn"


def _unit(rng, shape):
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _stochastic_f32(x, rng):
    """float64 -> float32 with stochastic rounding: the upper neighbour with probability (x - lo) / (hi - lo)."""
    r = x.astype(np.float32)
    lo = np.where(r > x, np.nextafter(r, np.float32(-np.inf)), r).astype(np.float64)
    hi = np.where(r > x, r, np.nextafter(r, np.float32(np.inf))).astype(np.float64)
    up = rng.random(x.shape) < (x - lo) / (hi - lo)
    return np.where(up, hi, lo)


@pytest.mark.slow
@pytest.mark.parametrize("stochastic", [False, True])
def test_t15_float32_state_against_a_float64_simulation(stochastic):
    """T15 for a float32 state (u = 2^-24): every increment spans millions of ulps, where each step's error is uniform
    on an ulp (variance q^2/12, q^2/6 stochastic), for the linear memory and the gated delta rule."""
    n, d, B = 192, 4, 2048
    rng = np.random.default_rng(0)
    K, V = _unit(rng, (n, B, d)), _unit(rng, (n, B, d))
    for memory, a, b in (("linear", 1.0, 0.0), ("gated_delta", 0.9, 0.5)):
        exact, stored = np.zeros((B, d, d)), np.zeros((B, d, d))
        for t in range(n):
            k, v = K[t][:, :, None], V[t][:, None, :]
            if memory == "linear":
                exact, new = exact + k * v, stored + k * v
            else:  # a S + b k^T (v - a k S)
                exact = a * exact + b * k * (v - a * np.swapaxes(k, 1, 2) @ exact)
                new = a * stored + b * k * (v - a * np.swapaxes(k, 1, 2) @ stored)
            stored = _stochastic_f32(new, rng) if stochastic else new.astype(np.float32).astype(np.float64)
        dev = ((stored - exact) ** 2).sum((1, 2)) / d  # a unit query's mean squared deviation
        m, se = dev.mean(), dev.std() / math.sqrt(B)
        want = theory.step_rounding_error(n, d, d, "float32", memory=memory, alpha=a, beta=b, stochastic=stochastic)
        assert abs(m - want) <= 3 * se and 3 * se < 0.05 * want, (memory, m, want, se)


def test_the_first_write_into_a_zero_state_against_float8_rounding():
    """T17 at n = 1: the state is exactly zero, so an entry of the first write is lost when |k_a v_b| is below half
    the smallest subnormal (2^-10 in float8_e4m3fn); counted here on 40,000 random unit pairs."""
    d, dv, B = 4, 4, 40_000
    rng = np.random.default_rng(1)
    z = np.abs(_unit(rng, (B, d))[:, :, None] * _unit(rng, (B, dv))[:, None, :])
    lost = (z < 2.0**-10).mean((1, 2))  # round-to-nearest (ties to even, a null set) gives 0 exactly there
    m, se = lost.mean(), lost.std() / math.sqrt(B)
    assert 0.005 < m < 0.02
    assert abs(theory.stall_fraction(1, d, dv, F8) - m) <= 3 * se + 2e-4
    assert theory.retained_fraction(1, d, dv, F8) == pytest.approx(1.0, abs=1e-4)  # kept: all but a sliver


@pytest.mark.parametrize("n", [2, 3, 5])
def test_stall_fraction_is_the_model_drawn_by_monte_carlo(n):
    """T17's model at the first writes, drawn here: entries S ~ N(0, (n - 1)/(d dv)) with the ulp q(S) of their
    binade, increments k_a v_b of random unit vectors; stall_fraction = P(|k_a v_b| < q(S)/2). The stored spread
    the function uses differs from (n - 1)/(d dv) by the rounding error's share (< 0.2% at these n)."""
    d, dv, N = 4, 4, 1_000_000
    rng = np.random.default_rng(2)
    S = rng.standard_normal(N) * math.sqrt((n - 1) / (d * dv))
    e = np.maximum(np.floor(np.log2(np.abs(S))), -6)  # float8_e4m3fn: p = 4, emin = -6
    q = 2.0 ** (e - 3)
    z = np.abs(_unit(rng, (N, d))[:, 0] * _unit(rng, (N, dv))[:, 0])
    hit = z < q / 2
    m, se = hit.mean(), hit.std() / math.sqrt(N)
    assert abs(theory.stall_fraction(n, d, dv, F8) - m) <= 3 * se + 2e-3, (n, m)


def test_stall_onset_inverts_stall_fraction_below_3_and_in_float32():
    """stall_onset solves stall_fraction(n) = fraction: at a fraction reached between the second and third write,
    and for a float32 state, whose onset (about 1/u^2 = 2.8e14) lies far above 200/u."""
    d, dv = 4, 4
    f = theory.stall_fraction(2.5, d, dv, F8)
    assert theory.stall_onset(d, dv, F8, fraction=f) == pytest.approx(2.5, rel=1e-6)
    u2 = theory.unit_roundoff("float32") ** 2
    n = theory.stall_onset(d, dv, "float32")
    assert 0.5 < n * u2 < 2.0
    assert theory.stall_fraction(n, d, dv, "float32") == pytest.approx(0.5, abs=1e-3)


def _ratio(n, d, dv, dtype, stochastic, n_max):
    """T15's deviation over the crosstalk (n - 1)/d at each n, from a trajectory evaluated to n_max."""
    n = np.asarray(n, dtype=np.float64)
    every = theory.step_rounding_error(np.append(n, n_max), d, dv, dtype, stochastic=stochastic)[:-1]
    return every * d / (n - 1)


def _log_log_root(n0, r0, n1, r1, ratio):
    return math.exp(math.log(n0) + (math.log(ratio) - math.log(r0)) * math.log(n1 / n0) / math.log(r1 / r0))


@pytest.mark.slow
def test_t16_crossover_is_the_first_crossing_interpolated_in_log_log():
    """T16 solves deviation / crosstalk = ratio: the first integer n past the crossing is found here by scanning T15
    (float8_e5m2 keeps it below 512, where the trajectory has every step), and the root is interpolated linearly in
    log n against log ratio between it and the step before; a crossing before the third write is the second write
    itself (no crosstalk before it)."""
    n_max = 1000
    ns = np.arange(2.0, 600.0)
    r = _ratio(ns, 4, 4, "float8_e5m2", True, n_max)
    i = int(np.nonzero(r >= 1.0)[0][0])
    want = _log_log_root(ns[i - 1], r[i - 1], ns[i], r[i], 1.0)
    got = theory.rounding_crossover(4, 4, "float8_e5m2", n_max=n_max)  # stochastic rounding by default
    assert got == pytest.approx(want, rel=1e-9) and 300 < got < 450
    # round-to-nearest, d = dv = 1: the ratio rises from n = 2; a crossing between the second and third write
    r2, r3 = _ratio([2.0, 3.0], 1, 1, "bfloat16", False, n_max)
    assert r3 > r2
    mid = math.sqrt(r2 * r3)
    got = theory.rounding_crossover(1, 1, "bfloat16", stochastic=False, ratio=mid, n_max=n_max)
    assert got == pytest.approx(_log_log_root(2.0, r2, 3.0, r3, mid), rel=1e-9) and 2 < got < 3
    # at or below the ratio of the second write: the crossing is n = 2
    assert theory.rounding_crossover(1, 1, "bfloat16", stochastic=False, ratio=r2, n_max=n_max) == 2.0
    assert theory.rounding_crossover(1, 1, "bfloat16", stochastic=False, ratio=0.5 * r2, n_max=n_max) == 2.0
    # stochastic rounding, d = dv = 4: the ratio dips after the second write; met exactly there, the crossing is n = 2
    r2, r3, r4 = _ratio([2.0, 3.0, 4.0], 4, 4, "float8_e5m2", True, n_max)
    assert r3 < r2 < r4
    assert theory.rounding_crossover(4, 4, "float8_e5m2", ratio=r2, n_max=n_max) == 2.0


def test_t16_crossover_over_an_array_of_dimensions():
    """Each (d, dv) of an array gets its own crossover: one beyond n_max (inf) or at the second write does not stop
    the ones after it."""
    n_max = 300
    got = theory.rounding_crossover([4, 1], [4, 1], "float8_e5m2", n_max=n_max)
    assert math.isinf(got[0]) and got[1] == theory.rounding_crossover(1, 1, "float8_e5m2", n_max=n_max)
    assert 100 < got[1] < n_max
    r2 = float(_ratio([2.0], 1, 1, "bfloat16", True, n_max)[0])
    ratio = 1.05 * r2  # d = 1 crosses after its second write; d = 4 (1.6e-5 at n = 2) at it
    got = theory.rounding_crossover([4, 1], [4, 1], "bfloat16", ratio=ratio, n_max=n_max)
    assert got[0] == 2.0
    assert got[1] == theory.rounding_crossover(1, 1, "bfloat16", ratio=ratio, n_max=n_max)
    assert 2 < got[1] < 5


def test_step_rounding_error_over_arrays_of_dimensions():
    """Arrays of d, or of dv, with n: each entry is the scalar call with every option passed on."""
    opts = dict(memory="gated_delta", alpha=0.9, beta=0.7, stochastic=True)
    n = np.array([30.0, 60.0])
    for d, dv in (([4, 1], 4), (4, [4, 1])):
        got = theory.step_rounding_error(n, d, dv, F8, **opts)
        each = [
            theory.step_rounding_error(nn, dd, vv, F8, **opts) for nn, dd, vv in zip(n, *np.broadcast_arrays(d, dv))
        ]
        assert got.tolist() == pytest.approx(each, rel=1e-12, abs=0.0)
        # the second entry's dimension matters: a call that drops it or takes the first entry's would show
        assert abs(each[1] / theory.step_rounding_error(n[1], 4, 4, F8, **opts) - 1) > 0.01


@pytest.mark.parametrize("name", ["step_rounding_error", "final_rounding_error"])
def test_decay_and_delta_defaults_are_alpha_1_and_beta_1(name):
    """The decay memory at its default alpha = 1 is the linear memory; the delta rule's default beta is 1."""
    f = getattr(theory, name)
    assert f(100, 4, 4, F8, memory="decay") == pytest.approx(f(100, 4, 4, F8), rel=1e-12)
    assert f(100, 4, 4, F8, memory="delta") == pytest.approx(f(100, 4, 4, F8, memory="delta", beta=1.0), rel=1e-12)
    assert f(100, 4, 4, F8, memory="delta") != pytest.approx(f(100, 4, 4, F8, memory="delta", beta=0.5), rel=0.01)


def test_t15_delta_rule_with_a_small_beta_against_a_float8_simulation():
    """T15 for the delta rule at beta = 0.1 in float8_e4m3fn: the increments b k^T (v - k S) are a tenth of the
    state's entries, so round-to-nearest loses part of each (E[delta e] < 0), which slows the stored state's growth
    and so its ulps. Simulated here with a cast to float8 after every write; the model takes the entries Gaussian,
    which holds to 3% here (the tolerance: 5%)."""
    n, d, b, B = 100, 4, 0.1, 4000
    g = torch.Generator().manual_seed(3)
    K = torch.nn.functional.normalize(torch.randn(n, B, d, generator=g, dtype=torch.float64), dim=-1)
    V = torch.nn.functional.normalize(torch.randn(n, B, d, generator=g, dtype=torch.float64), dim=-1)
    exact, stored = torch.zeros(B, d, d, dtype=torch.float64), torch.zeros(B, d, d, dtype=torch.float64)
    for t in range(n):
        k, v = K[t][:, :, None], V[t][:, None, :]
        exact = exact + b * k * (v - k.transpose(1, 2) @ exact)
        stored = (stored + b * k * (v - k.transpose(1, 2) @ stored)).to(torch.float8_e4m3fn).double()
    dev = ((stored - exact) ** 2).sum((1, 2)) / d
    m, se = float(dev.mean()), float(dev.std() / math.sqrt(B))
    want = theory.step_rounding_error(n, d, d, F8, memory="delta", beta=b)
    assert abs(m - want) <= 3 * se + 0.05 * want and 3 * se < 0.03 * want, (m, want, se)


@pytest.mark.parametrize("stochastic", [False, True])
def test_a_step_whose_increments_span_many_ulps_has_the_uniform_error(stochastic):
    """One step's rounding variance (precision._step_stats) when every increment spans >= 1e4 ulps: the error is
    uniform on an ulp, E q^2/12 (E q^2/6 stochastic), which is T14's rounding_variance of the stored entries. The
    increments' scale is swept so that the ulp of the entries' main binade (|S| in [1, 2), q = 2^-23 in float32) falls
    on the first cells of the increment table (1e-4 of the increments' rms, 1/4 for d = dv = 4) and past them."""
    sigma, first = 1.4, 2.0**-23 / (1e-4 / 4)
    scales = np.concatenate([first / np.geomspace(1.0, 1.0155, 6), first * np.array([1.01, 1 / 1.03, 1 / 1.5])])
    var, _ = precision._step_stats(np.full(len(scales), sigma), scales, 4, 4, "float32", stochastic)
    want = theory.rounding_variance(sigma, "float32", stochastic=stochastic)
    assert var.tolist() == pytest.approx([want] * len(scales), rel=1e-3, abs=0.0)


def _every_write(n, d, dv, dtype, memory="linear", a=1.0, b=1.0, stochastic=False):
    """T15's recursion run write by write (no grid): the float32 state's second moment m_s = c m_(s-1) + (b^2 or 1),
    the increments' scale b sqrt(1 + a^2 m_(s-1) / d) for the delta rules, the stored entries N(0, m_s/(d dv) +
    V_(s-1) + 2 C_(s-1)); each step's rounding variance w and covariance E[delta e] from precision._step_stats;
    V_s = c V_(s-1) + w_s, C_s = c C_(s-1) + cov_s. Returns dv V_n."""
    delta = memory in ("delta", "gated_delta")
    c = a * a * (1 - (2 * b - b * b) / d) if delta else a * a
    m_prev, V, C = 0.0, 0.0, 0.0
    for _ in range(n):
        m = c * m_prev + (b * b if delta else 1.0)
        scale = b * math.sqrt(1 + a * a * m_prev / d) if delta else 1.0
        spread = m / (d * dv) + V + 2 * C
        w, cov = precision._step_stats(np.array([math.sqrt(spread)]), np.array([scale]), d, dv, dtype, stochastic)
        V, C, m_prev = c * V + w[0], c * C + cov[0], m
    return dv * V


@pytest.mark.parametrize(
    "memory,a,b,stochastic",
    [
        ("linear", 1.0, 1.0, False),
        ("linear", 1.0, 1.0, True),
        ("delta", 1.0, 0.1, False),
        ("gated_delta", 0.95, 0.1, False),
    ],
)
def test_t15_trajectory_is_its_recursion_run_write_by_write(memory, a, b, stochastic):
    """Up to 512 writes the trajectory has every step: its fixed point is the recursion run in order (to 1e-6)."""
    n = 100
    want = _every_write(n, 4, 4, F8, memory, a, b, stochastic)
    got = theory.step_rounding_error(n, 4, 4, F8, memory=memory, alpha=a, beta=b, stochastic=stochastic)
    assert got == pytest.approx(want, rel=1e-6, abs=0.0)


def test_t15_past_512_writes_the_geometric_grid_sums_every_step():
    """Past 512 writes the trajectory steps geometrically (ratio 1.005) and averages each gap's end points; against
    every step summed (stochastic rounding: no covariance; the error's share of the spread by three passes of the
    fixed point) it agrees to 1e-3 at n = 3000 (3e-4 measured)."""
    n, d, dv = 3000, 4, 4
    s = np.arange(1.0, n + 1)
    V = np.zeros(n)
    for _ in range(4):
        before = np.concatenate([[0.0], V[:-1]])
        w, _ = precision._step_stats(np.sqrt(s / (d * dv) + before), np.ones(n), d, dv, "bfloat16", True)
        V = np.cumsum(w)
    got = theory.step_rounding_error(n, d, dv, "bfloat16", stochastic=True)
    assert got == pytest.approx(dv * V[-1], rel=1e-3, abs=0.0)


def test_one_write_rounded_at_every_step_is_one_rounding():
    """After one write into a zero state, rounding after every write (T15) is one rounding of the finished state
    (T14), to the increment table's resolution (1e-3: its cells against the uniform error)."""
    for stochastic in (False, True):
        step = theory.step_rounding_error(1, 4, 4, "bfloat16", stochastic=stochastic)
        once = theory.final_rounding_error(1, 4, 4, "bfloat16", stochastic=stochastic)
        assert step == pytest.approx(once, rel=1e-2, abs=0.0)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_t14_one_rounding_of_tiny_numbers(dtype):
    """T14 for sigma = 1e-15 (2^-50), still normal in bfloat16 and float32 (down to 1.2e-38): the ulps are those of
    binades 50 below 1, counted from 40 below the smallest sigma. Against the cast of 200,000 Gaussian numbers."""
    sigma = 1e-15
    x = torch.randn(200_000, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * sigma
    e = (x.to(getattr(torch, dtype)).double() - x) ** 2
    m, se = float(e.mean()), float(e.std() / math.sqrt(e.numel()))
    want = theory.rounding_variance(sigma, dtype)
    assert abs(m - want) <= 4 * se and 4 * se < 0.03 * want, (m, want, se)


@pytest.mark.slow
def test_one_step_of_round_to_nearest_is_its_model_drawn_by_monte_carlo():
    """One step's rounding error (precision._step_stats) in the model it states, drawn here: stored entries S ~ N(0,
    sigma^2) whose ulp q(S) is that of their binade (the lowest normal one below it), increments delta = scale k_a
    v_b of about an ulp (float8_e4m3fn, scale 0.3), rounded onto S's grid: e = q round(delta / q) - delta. Its
    variance and E[delta e] (negative: round-to-nearest loses part of the increments) against 4,000,000 draws (to
    4 s.e., 30% of E[delta e]). A float8 cast of S + delta agrees on the variance to 2%, but its E[delta e], 0.3% of
    E delta^2, is set by the writes that cross a binade's edge, which the model leaves out."""
    sigma, scale, d, N = 0.5, 0.3, 4, 4_000_000
    rng = np.random.default_rng(5)
    S = rng.standard_normal(N) * sigma
    q = 2.0 ** (np.maximum(np.floor(np.log2(np.abs(S))), -6) - 3)  # float8_e4m3fn: p = 4, emin = -6
    delta = scale * _unit(rng, (N, d))[:, 0] * _unit(rng, (N, d))[:, 0]
    e = q * np.round(delta / q) - delta
    var, cov = precision._step_stats(np.array([sigma]), np.array([scale]), d, d, F8, False)
    se = (delta * e).std() / math.sqrt(N)
    assert float(var[0]) == pytest.approx(float((e**2).mean()), rel=0.01)
    assert abs(float(cov[0]) - (delta * e).mean()) <= 4 * se and 4 * se < 0.3 * abs(float(cov[0]))


@pytest.mark.parametrize("name", ["step_rounding_error", "final_rounding_error"])
def test_alpha_is_read_only_by_the_decaying_memories(name):
    """The linear memory and the delta rule do not decay: an alpha passed with them changes nothing."""
    f = getattr(theory, name)
    assert f(50, 4, 4, F8, alpha=0.5) == f(50, 4, 4, F8)
    assert f(50, 4, 4, F8, memory="delta", alpha=0.5, beta=0.7) == f(50, 4, 4, F8, memory="delta", beta=0.7)
    assert f(50, 4, 4, F8, memory="decay", alpha=0.5) != pytest.approx(f(50, 4, 4, F8), rel=0.01)


def test_torch_dtypes_name_their_formats():
    """A torch dtype names the same format as its name: u = 2^-p, p the significand bits with the implicit one."""
    for dtype, p in ((torch.float32, 24), (torch.bfloat16, 8), (torch.float16, 11), (torch.float8_e4m3fn, 4)):
        assert theory.unit_roundoff(dtype) == theory.unit_roundoff(str(dtype).removeprefix("torch.")) == 2.0**-p
    assert theory.unit_roundoff(torch.float8_e5m2) == 2.0**-3
