"""Stored-state precision (lacapacity.variants.precision) and its closed forms T14-T19, each against a simulation written here
in plain torch (rounding after every write by a cast, or by an integer bit trick for stochastic rounding)."""

import math

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.variants import precision
from lacapacity.variants.recurrent import TokenState
from lacapacity.variants.softmax import Cache

BF16 = torch.bfloat16


def _pairs(n, d, dv, B, seed=0):
    return keys.make("gaussian", n, d, batch=B, seed=seed), values.make("gaussian", n, dv, batch=B, seed=seed)


def _bf16(x):
    return x.to(BF16).float()


def _sr_bf16(x, g):
    """Stochastic rounding to bfloat16 by the bit trick: add 16 random low bits to the float32 pattern, truncate."""
    bits = x.contiguous().view(torch.int32)
    r = torch.randint(0, 1 << 16, x.shape, generator=g, dtype=torch.int32)
    return ((bits + r) & -65536).view(torch.float32)


def _mean_se(x):
    x = torch.as_tensor(x, dtype=torch.float64)
    return float(x.mean()), float(x.std() / math.sqrt(x.numel()))


# ---------------------------------------------------------------------------------------------- the wrapper


def test_rounding_specs_parse_and_bad_ones_are_one_line_errors():
    assert precision.Rounding.parse("step").label == "step"
    assert precision.Rounding.parse(" chunk = 64 ").chunk == 64
    assert precision.Rounding.parse("final+stochastic").stochastic
    for bad in ("chunk=0", "chunk=x", "steps", "step+random", 3):
        with pytest.raises(CapacityError, match="rounding must be step, final or chunk=C"):
            precision.Rounding.parse(bad)
    with pytest.raises(CapacityError, match="state_dtype must be one of float32, bfloat16"):
        precision.stored(variants.get("linear"), "float64")


def test_float32_and_one_head_leave_the_memory_itself():
    from lacapacity.variants import heads

    mem = variants.get("delta")
    assert precision.stored(mem, "float32", "step") is mem
    assert heads.split(mem, 1, 1) is mem


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"])
def test_round_to_nearest_is_the_cast_and_saturates(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 50, 7, generator=g) * 10
    info = torch.finfo(getattr(torch, dtype))
    big = 2 * info.max if 2 * info.max < 3e38 else math.inf  # beyond the format (inf beyond float32 too)
    x[0, 0, 0], x[0, 0, 1], x[0, 0, 2] = big, -big, float("nan")
    got = precision.round_(x.clone(), dtype)
    want = x.clamp(-info.max, info.max).to(getattr(torch, dtype)).float()
    assert torch.equal(got[~x.isnan()], want[~x.isnan()]) and got[0, 0, 2].isnan()
    assert got[0, 0, 0] == info.max and got[0, 0, 1] == -info.max


def _grid_of(dtype):
    """Every finite number of a 16- or 8-bit format, sorted (from all its bit patterns)."""
    tdt = getattr(torch, dtype)
    bits = (
        torch.arange(-(1 << 15), 1 << 15, dtype=torch.int16) if tdt.itemsize == 2 else torch.arange(256).to(torch.uint8)
    )
    grid = bits.view(tdt).float()
    return grid[torch.isfinite(grid)].unique()


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_stochastic_rounding_is_unbiased_and_lands_on_a_neighbour(dtype):
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(1, 64, generator=g) * 3 + 0.01) * torch.sign(torch.randn(1, 64, generator=g))
    draws = torch.stack([precision.round_(x.clone(), dtype, stochastic=True, seed=s) for s in range(800)])  # [S, 1, 64]
    grid = _grid_of(dtype)
    i = torch.searchsorted(grid, x.flatten(), right=True)
    lo, hi = grid[i - 1].view_as(x), grid[i].view_as(x)  # the two neighbours of each x in the format
    assert ((draws == lo) | (draws == hi)).all()
    p_up = ((x - lo) / (hi - lo)).double()  # unbiased: up with probability (x - lo) / (hi - lo)
    freq = (draws == hi).double().mean(0)
    se = (p_up * (1 - p_up) / draws.shape[0]).sqrt().clamp_min(1e-3)
    assert float(((freq - p_up) / se).abs().max()) < 4.5
    mean_err = (draws.double().mean(0) - x.double()) / (hi - lo).double()
    assert abs(float(mean_err.mean())) < 3 * 0.5 / math.sqrt(draws.shape[0] * x.numel())  # no bias overall
    rn = precision.round_(x.clone(), dtype)
    assert ((rn == lo) | (rn == hi)).all()
    assert torch.equal(rn, torch.where((x - lo) < (hi - x), lo, torch.where((x - lo) > (hi - x), hi, rn)))


def test_every_floating_tensor_of_a_state_is_rounded():
    class Pair:  # a user memory whose state is a tuple of two tensors
        name = "pair"

        def init_state(self, batch, d, dv, *, device=None):
            return (torch.zeros(batch, d, dv), torch.zeros(batch, d))

        def write(self, state, k, v):
            return (state[0] + k.transpose(1, 2) @ v, state[1] + k.sum(1))

        def read(self, state, q):
            return q @ state[0]

        def state_numel(self, d, dv):
            return d * dv + d

    K, V = _pairs(20, 8, 4, 2)
    for mem in (Pair(), variants.get("lsq"), variants.get("decay", alpha=("uniform", 0.9, 1.0), seed=1)):
        st = precision.stored(mem, "bfloat16", "step").write(
            precision.stored(mem, "bfloat16").init_state(2, 8, 4), K, V
        )
        tensors = precision.state_tensors(st)
        assert len(tensors) == {"pair": 2, "lsq": 2, "decay": 1}[mem.name]
        assert all(torch.equal(_bf16(t), t) for t in tensors)
        assert isinstance(st.inner, TokenState) or mem.name != "decay"
    cache = precision.stored(variants.get("softmax"), "float8_e4m3fn").init_state(1, 4, 2)
    assert isinstance(cache.inner, Cache)


@pytest.mark.parametrize("label", ["linear", "decay(alpha=0.9)", "delta(beta=0.7)", "gated_delta(alpha=0.9, beta=0.5)"])
@pytest.mark.parametrize("rounding", ["step", "step+stochastic"])
def test_the_fast_token_loop_equals_writing_through_the_memory(label, rounding):
    K, V = _pairs(150, 16, 8, 3)
    fast = precision.stored(variants.resolve(label), "bfloat16", rounding, seed=4)
    slow = precision.stored(variants.resolve(label), "bfloat16", rounding, seed=4)
    slow._fast = None
    assert fast._fast is not None
    a = fast.write(fast.init_state(3, 16, 8), K, V).inner
    b = slow.write(slow.init_state(3, 16, 8), K, V).inner
    if label in ("linear", "decay(alpha=0.9)"):  # the kernels' own operations, bit for bit
        assert torch.equal(a, b)
    else:  # the delta rule's k S is summed in another order: a last-bit difference can round the other way
        assert float((a != b).double().mean()) < 0.05 and float((a - b).abs().max()) <= 2**-6 * float(b.abs().max())
    alone = precision.stored(variants.resolve(label), "bfloat16", rounding, seed=4)
    if rounding == "step":  # each item is computed by itself: the same bits alone as in its batch
        assert torch.equal(alone.write(alone.init_state(1, 16, 8), K[1:2], V[1:2]).inner, a[1:2])


def test_step_rounding_matches_a_token_by_token_simulation():
    """Done when: the bfloat16 step curve of the linear memory at d = 32 agrees with an independent simulation."""
    n, d, B = 2048, 32, 8
    K, V = _pairs(n, d, d, B, seed=3)
    cps = [64, 256, 1024, 2048]
    ds = probe.recall(precision.stored(variants.get("linear"), "bfloat16", "step"), K, V, checkpoints=cps)
    S, sim = torch.zeros(B, d, d), []
    for t in range(n):
        S = _bf16(S + K[:, t, :, None] * V[:, t, None, :])
        if t + 1 in cps:
            r = K[:, : t + 1] @ S
            sim.append(((r - V[:, : t + 1]) ** 2).sum(-1).mean(-1))
    sim = torch.stack(sim).double()  # [C, B]
    got = torch.as_tensor(ds.mse.values)
    for c in range(len(cps)):
        m_got, se = _mean_se(got[c])
        m_sim, _ = _mean_se(sim[c])
        assert abs(m_got - m_sim) <= se  # within its standard error (the same draws: the curves coincide)
    assert float((got - sim).abs().max() / sim.abs().max()) < 1e-3
    ref = probe.recall(variants.get("linear"), K, V, checkpoints=cps)
    assert not np.array_equal(ref.mse.values, ds.mse.values)  # and bfloat16 is not float32


def test_chunks_are_rounded_at_their_ends_and_final_only_for_reads():
    K, V = _pairs(40, 8, 8, 2)
    mem = precision.stored(variants.get("linear"), "bfloat16", "chunk=16")
    st = mem.init_state(2, 8, 8)
    for a, b in ((0, 10), (10, 16), (16, 40)):
        st = mem.write(st, K[:, a:b], V[:, a:b])
        if b % 16 == 0:
            assert torch.equal(_bf16(st.inner), st.inner)
    full = K[:, :32].transpose(1, 2) @ V[:, :32]
    assert not torch.equal(_bf16(st.inner), st.inner)  # 8 float32 writes after the last stored chunk
    one = precision.stored(variants.get("linear"), "bfloat16", "chunk=1")
    step = precision.stored(variants.get("linear"), "bfloat16", "step")
    step._fast = None
    assert torch.equal(one.write(one.init_state(2, 8, 8), K, V).inner, step.write(step.init_state(2, 8, 8), K, V).inner)
    fin = precision.stored(variants.get("linear"), "bfloat16", "final")
    st = fin.write(fin.init_state(2, 8, 8), K, V)
    S = K.transpose(1, 2) @ V
    assert torch.allclose(st.inner, S, atol=1e-5)  # kept in float32
    assert torch.equal(fin.read(st, K), K @ _bf16(st.inner))
    del full


def test_stochastic_draws_depend_on_neither_the_batch_nor_the_chunking():
    K, V = _pairs(100, 8, 8, 3, seed=2)
    mem = precision.stored(variants.get("delta"), "bfloat16", "step+stochastic", seed=[5, 6, 7])
    whole = mem.write(mem.init_state(3, 8, 8), K, V).inner
    st = mem.init_state(3, 8, 8)
    for a, b in ((0, 7), (7, 70), (70, 100)):
        st = mem.write(st, K[:, a:b], V[:, a:b])
    assert torch.equal(st.inner, whole)
    alone = precision.stored(variants.get("delta"), "bfloat16", "step+stochastic", seed=6)
    assert torch.equal(alone.write(alone.init_state(1, 8, 8), K[1:2], V[1:2]).inner, whole[1:2])


def test_state_bytes_counts_every_tensor_at_the_dtype():
    d, dv = 16, 8
    assert precision.state_bytes(variants.get("linear"), d, dv, "bfloat16") == d * dv * 2
    assert precision.state_bytes(variants.get("lsq"), d, dv, "float32") == (d * d + d * dv) * 4
    assert precision.state_bytes(variants.get("softmax"), d, dv, "float8_e4m3fn", n=10) == 10 * (d + dv)
    lin = variants.get("linear", feature="elu1", normalize_read=True)
    assert precision.state_bytes(lin, d, dv, "float16") == d * (dv + 1) * 2
    assert precision.stored(variants.get("lsq"), "bfloat16").state_bytes(d, dv) == (d * d + d * dv) * 2
    with pytest.raises(CapacityError, match="needs n"):
        precision.state_bytes(variants.get("softmax"), d, dv)

    class Declared:  # a memory that says what it keeps (a float32 matrix and a bfloat16 second state, say)
        name = "declared"

        def init_state(self, batch, d, dv, *, device=None):
            return torch.zeros(batch, d, dv)

        def write(self, state, k, v):
            return state

        def read(self, state, q):
            return q @ state

        def state_numel(self, d, dv):
            return d * dv

        def state_bytes(self, d, dv, dtype):
            return 4 * d * dv + 2 * d

    assert precision.state_bytes(Declared(), d, dv, "bfloat16") == 4 * d * dv + 2 * d


# ---------------------------------------------------------------------------------------------- the closed forms


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_t14_one_rounding_of_gaussian_numbers(dtype):
    g = torch.Generator().manual_seed(0)
    for sigma in (0.003, 0.7, 5.0):
        x = torch.randn(400_000, generator=g, dtype=torch.float64).float() * sigma
        e = (x.to(getattr(torch, dtype)).float() - x).double() ** 2
        m, se = _mean_se(e)
        assert abs(m - theory.rounding_variance(sigma, dtype)) <= 4 * se


def test_t14_final_rounding_of_the_additive_state():
    n, d, B = 1024, 32, 96
    K, V = _pairs(n, d, d, B, seed=1)
    S = K.transpose(1, 2) @ V
    dev = ((_bf16(S) - S).double() ** 2).sum((1, 2)) / d  # a unit query's mean squared deviation
    m, se = _mean_se(dev)
    want = theory.final_rounding_error(n, d, d, "bfloat16")
    assert abs(m - want) <= 3 * se and 3 * se < 0.03 * want
    assert abs(want / (theory.unit_roundoff("bfloat16") ** 2 * n / d) - 0.18) < 0.01  # about 0.18 u^2 n / d


def test_t15_step_rounding_round_to_nearest_and_stochastic():
    n, d, B = 1024, 32, 48
    K, V = _pairs(n, d, d, B, seed=2)
    g = torch.Generator().manual_seed(9)
    S32, S_rn, S_sr = torch.zeros(B, d, d), torch.zeros(B, d, d), torch.zeros(B, d, d)
    for t in range(n):
        inc = K[:, t, :, None] * V[:, t, None, :]
        S32 += inc
        S_rn = _bf16(S_rn + inc)
        S_sr = _sr_bf16(S_sr + inc, g)
    for S, sr in ((S_rn, False), (S_sr, True)):
        m, se = _mean_se(((S - S32).double() ** 2).sum((1, 2)) / d)
        want = theory.step_rounding_error(n, d, d, "bfloat16", stochastic=sr)
        assert abs(m - want) <= 3 * se and 3 * se < 0.05 * want, (sr, m, want, se)
    u2 = theory.unit_roundoff("bfloat16") ** 2  # before the stall: about 0.18 u^2 n^2 / (2 d) (0.36 stochastic)
    assert 0.85 < theory.step_rounding_error(256, d, d, "bfloat16") / (0.18 * u2 * 256**2 / (2 * d)) < 1.15


def test_t16_crossover_solves_its_equation_and_corrects_12_over_u2():
    d = 32
    u2 = theory.unit_roundoff("bfloat16") ** 2
    n = float(theory.rounding_crossover(d, d, "bfloat16", stochastic=True))
    assert abs(theory.step_rounding_error(n, d, d, "bfloat16", stochastic=True) * d / (n - 1) - 1) < 0.01
    assert 5 < n * u2 < 9  # about 7/u^2, not 12/u^2
    assert math.isinf(theory.rounding_crossover(d, d, "bfloat16", stochastic=False))  # round-to-nearest never
    n64 = float(theory.rounding_crossover(d, d, "bfloat16", stochastic=False, ratio=1 / 64))
    assert abs(theory.step_rounding_error(n64, d, d, "bfloat16") * d / (n64 - 1) * 64 - 1) < 0.01


@pytest.mark.slow
def test_t17_stall_fraction_and_kept_part_against_a_simulation():
    n, d, B, extra = 16384, 16, 24, 24
    K, V = _pairs(n + extra, d, d, B, seed=4)
    S = torch.zeros(B, d, d)
    for t in range(n):
        S = _bf16(S + K[:, t, :, None] * V[:, t, None, :])
    lost, kept = [], []
    for t in range(n, n + extra):
        inc = K[:, t, :, None] * V[:, t, None, :]
        new = _bf16(S + inc)
        lost.append(((new - S) == 0).double().mean((1, 2)))
        kept.append(((new - S) * inc).double().sum((1, 2)) / (inc.double() ** 2).sum((1, 2)))
        S = new
    at = n + extra / 2 + 0.5
    m, se = _mean_se(torch.stack(lost).mean(0))
    assert abs(m - theory.stall_fraction(at, d, d, "bfloat16")) <= 3 * se + 0.005
    m, se = _mean_se(torch.stack(kept).mean(0))
    assert abs(m - theory.retained_fraction(at, d, d, "bfloat16")) <= 3 * se + 0.002
    onset = theory.stall_onset(d, d, "bfloat16")
    assert abs(theory.stall_fraction(onset, d, d, "bfloat16") - 0.5) < 1e-3
    assert 0.5 < onset * theory.unit_roundoff("bfloat16") ** 2 < 1.0


@pytest.mark.parametrize("memory", ["decay", "delta"])
def test_t18_t19_bounded_errors_of_decay_and_the_delta_rule(memory):
    n, d, B, a = 400, 32, 48, 0.95
    K, V = _pairs(n, d, d, B, seed=5)
    S32, S = torch.zeros(B, d, d), torch.zeros(B, d, d)
    for t in range(n):
        k, v = K[:, t, :, None], V[:, t, None, :]
        if memory == "decay":
            S32, S = a * S32 + k * v, _bf16(a * S + k * v)
        else:  # S + k^T (v - k S), beta = 1
            S32 = S32 + k * (v - k.transpose(1, 2) @ S32)
            S = _bf16(S + k * (v - k.transpose(1, 2) @ S))
    m, se = _mean_se(((S - S32).double() ** 2).sum((1, 2)) / d)
    want = (
        theory.decay_rounding_floor(d, d, "bfloat16", a)
        if memory == "decay"
        else theory.delta_rounding_floor(d, d, "bfloat16", beta=1.0)
    )
    assert abs(m - want) <= 3 * se and 3 * se < 0.05 * want, (m, want, se)
    u2 = theory.unit_roundoff("bfloat16") ** 2
    approx = 0.18 * u2 / (d * (1 - a * a) ** 2) if memory == "decay" else 0.18 * u2 * d
    assert 0.8 < want / approx < 1.2


# ---------------------------------------------------------------------------------------------- the check rows


# Each row of T14-T20 fails when the closed form it names is 3% off: tests/check/test_check_cli.py's
# test_every_closed_form_3_percent_off_fails_a_row, which perturbs every closed form on the full check's cache.


# ---------------------------------------------------------------------------------------------- check_variant


def test_check_variant_accepts_low_precision_states():
    from lacapacity import check_variant

    class Bf16Linear:  # a user memory that keeps its state in bfloat16 tensors
        name = "bf16-linear"

        def init_state(self, batch, d, dv, *, device=None):
            return torch.zeros(batch, d, dv, dtype=BF16, device=device)

        def write(self, state, k, v):
            return (state.float() + k.float().transpose(1, 2) @ v.float()).to(BF16)

        def read(self, state, q):
            return q.float() @ state.float()

        def state_numel(self, d, dv):
            return d * dv

    report = check_variant(Bf16Linear())
    row = next(r for r in report.results if r.check == "shape and dtype")
    assert row.status == "pass" and "bfloat16; 256 bytes" in row.detail, row.detail
    for mem in (
        precision.stored(variants.get("delta"), "bfloat16", "step"),
        precision.stored(variants.get("lsq"), "float16", "chunk=4"),
    ):
        report = check_variant(mem)
        assert report.passed, str(report)
