"""The argmax decode (lacapacity.tasks.decode) against the plain float32 decode and an exact (float64) one."""

import math

import pytest
import torch
from torch.overrides import TorchFunctionMode

from lacapacity import CapacityError, variants
from lacapacity.base._random import generator
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.tasks.decode import argmax_correct, score_error_bound, screen_precision, topk_correct

PRECISIONS = ("bfloat16", "float32")


def plain32(r, v):
    """The decode the probe used before: float32 scores, torch.argmax (first index wins a tie)."""
    r, v = r.float(), v.float()
    return ((r @ v.transpose(1, 2)).argmax(-1) == torch.arange(r.shape[1])).float()


def exact(r, v):
    """The same decode in float64: products of float32 numbers are exact there, sums err by dv 2^-53."""
    r, v = r.float().double(), v.float().double()
    return ((r @ v.transpose(1, 2)).argmax(-1) == torch.arange(r.shape[1])).float()


def memory_reads(variant, family, B, n, d, seed):
    """Reads of every stored key from a real memory at load n/d: many margins near zero."""
    K = keys.make(family, n, d, batch=B, seed=seed).float()
    V = values.make("gaussian", n, d, batch=B, seed=seed).float()
    var = variants.get(variant)
    S = var.write(var.init_state(B, d, d), K, V)
    return var.read(S, K).float(), V


def near_ties(B, c, dv, deltas, seed):
    """Read i sits between v_i and another value v_j: own score minus the other's = delta ||v_i - v_j||^2 / 2 ..."""
    g = generator(seed, "near-ties")
    v = torch.randn(B, c, dv, generator=g)
    v = v / v.norm(dim=-1, keepdim=True)
    j = torch.randperm(c, generator=g)
    j = torch.where(j == torch.arange(c), (j + 1) % c, j)  # a partner other than itself
    delta = torch.tensor(deltas)[torch.randint(len(deltas), (B, c), generator=g)]  # [B, c]
    vi, vj = v, v[:, j]
    r = (vi + vj) / 2 + delta[..., None] * (vi - vj)  # [B, c, dv]
    return r, v


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("B,c,dv", [(4, 300, 64), (1, 1, 8), (1, 7, 3), (2, 513, 16), (3, 64, 200)])
def test_random_inputs_match_the_float32_and_exact_decodes(precision, B, c, dv):
    g = generator(c * 1000 + dv, "decode-test")
    v = torch.randn(B, c, dv, generator=g)
    r = v + (c / dv) ** 0.5 * torch.randn(B, c, dv, generator=g)  # recall strictly between 0 and 1
    got = argmax_correct(r, v, precision=precision)
    assert got.dtype == torch.float32 and got.shape == (B, c)
    assert torch.equal(got, exact(r, v))
    assert torch.equal(got, plain32(r, v))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(
    "variant,family,load", [("linear", "gaussian", 8), ("delta", "gaussian", 3), ("linear", "orthogonal", 12)]
)
def test_memory_reads_match_at_every_block_size(precision, variant, family, load):
    d = 32
    r, v = memory_reads(variant, family, 3, load * d, d, seed=1)
    want = plain32(r, v)
    assert 0.05 < float(want.mean()) < 0.98  # margins on both sides of zero
    assert torch.equal(want, exact(r, v))
    for block in (7, 100, None):
        assert torch.equal(argmax_correct(r, v, block=block, precision=precision), want)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_near_ties_below_bfloat16_resolution(precision):
    # margins of 1e-3 .. 3e-5 of ||v||^2: bfloat16 (2^-8) cannot tell them apart, float32 can
    r, v = near_ties(4, 400, 64, [1e-3, -1e-3, 1e-4, -1e-4, 3e-5, -3e-5], seed=2)
    want = plain32(r, v)
    assert 0.3 < float(want.mean()) < 0.7
    assert torch.equal(want, exact(r, v))
    assert torch.equal(argmax_correct(r, v, precision=precision), want)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_ties_below_float32_resolution_are_decided_exactly(precision):
    # margins of 1e-7 .. 1e-9: float32 rounding decides the plain decode; ours is the float64 answer
    r, v = near_ties(2, 200, 48, [1e-7, -1e-7, 1e-9, -1e-9], seed=3)
    assert torch.equal(argmax_correct(r, v, precision=precision), exact(r, v))


@pytest.mark.parametrize("precision", PRECISIONS)
def test_exact_ties_go_to_the_first_index(precision):
    g = generator(4, "ties")
    B, c, dv = 2, 50, 16
    v = torch.randn(B, c, dv, generator=g)
    v = v / v.norm(dim=-1, keepdim=True)  # unit values: r_i = v_i scores 1 with v_i, less with any other
    v[:, 10] = v[:, 3]  # duplicate values: read 10 ties with the earlier 3 (wrong), read 3 with the later 10 (right)
    v[:, 20] = v[:, 40]  # read 40 ties with the earlier 20 (wrong), read 20 with the later 40 (right)
    r = v.clone()  # each read is its own value
    r[:, 30] = r[:, 31]  # duplicate reads: read 30 reads like read 31, and picks value 31
    want = torch.ones(B, c)
    want[:, [10, 40, 30]] = 0
    assert torch.equal(exact(r, v), want)
    assert torch.equal(plain32(r, v), want)
    assert torch.equal(argmax_correct(r, v, precision=precision), want)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_integer_inputs_with_many_exact_ties(precision):
    # small integers: every score is exact in bfloat16, float32 and float64, and ties are common
    g = generator(5, "int-ties")
    r = torch.randint(-2, 3, (3, 120, 4), generator=g).float()
    v = torch.randint(-2, 3, (3, 120, 4), generator=g).float()
    want = exact(r, v)
    assert torch.equal(plain32(r, v), want)
    assert torch.equal(argmax_correct(r, v, precision=precision), want)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_half_precision_inputs_decode_their_float32_values(dtype, precision):
    r, v = memory_reads("linear", "gaussian", 2, 256, 32, seed=6)
    r, v = r.to(dtype), v.to(dtype)
    assert torch.equal(argmax_correct(r, v, precision=precision), exact(r, v))
    assert torch.equal(argmax_correct(r, v, precision=precision), plain32(r, v))


def test_one_stored_pair_is_always_recalled():
    for precision in PRECISIONS:
        assert argmax_correct(
            torch.tensor([[[-1.0, 2.0]]]), torch.tensor([[[3.0, 0.5]]]), precision=precision
        ).tolist() == [[1.0]]


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_too_small_bound_gives_wrong_answers(precision):
    # with no rounding allowance the screen decides near ties on rounded scores: the fallback is what makes it exact
    deltas = [1e-4, -1e-4, 3e-5, -3e-5] if precision == "bfloat16" else [3e-8, -3e-8, 1e-8, -1e-8]
    r, v = near_ties(4, 400, 64, deltas, seed=7)
    want = exact(r, v)
    assert torch.equal(argmax_correct(r, v, precision=precision), want)
    wrong = argmax_correct(r, v, precision=precision, bound_scale=0.0)
    assert int((wrong != want).sum()) > 20


def test_the_bfloat16_bound_holds_for_the_matmul_it_describes():
    # |s_hat - s| <= e_i + u |s_hat| / (1 - u) for every score: the derivation, checked on this machine's matmul
    g = generator(8, "bound")
    for dv, scale in ((8, 1.0), (64, 1e-3), (256, 30.0)):
        r = scale * torch.randn(2, 200, dv, generator=g)
        v = torch.randn(2, 200, dv, generator=g) * torch.rand(2, 200, 1, generator=g)  # unequal norms
        s_hat = (r.bfloat16() @ v.bfloat16().transpose(1, 2)).double()
        s = r.double() @ v.double().transpose(1, 2)
        e = score_error_bound(r, v, "bfloat16")  # [B, c]
        err = (s_hat - s).abs()
        allowed = e[..., None] + 2.0**-8 * s_hat.abs() / (1 - 2.0**-8)
        assert bool((err <= allowed).all())
        assert float((err / allowed).max()) > 0.01  # not vacuous: the bound is within 100x of the worst error
        e32 = score_error_bound(r, v, "float32")
        err32 = ((r @ v.transpose(1, 2)).double() - s).abs()
        assert bool((err32 <= e32[..., None]).all())


def test_probe_recall_is_the_exact_decode_of_its_reads():
    d, n = 16, 160
    K = keys.make("gaussian", n, d, batch=2, seed=9)
    V = values.make("gaussian", n, d, batch=2, seed=9)
    var = variants.get("linear")
    ds = probe.recall(var, K, V, checkpoints=[n], per_query=True)
    r = var.read(var.write(var.init_state(2, d, d), K, V), K)
    assert torch.equal(torch.from_numpy(ds.recall_q.values[0]).float(), exact(r, V))
    assert math.isclose(float(ds.recall.mean()), float(exact(r, V).mean()), abs_tol=1e-6)


def test_bad_arguments_name_what_is_allowed():
    r = torch.zeros(1, 4, 3)
    with pytest.raises(CapacityError, match=r"r \[B, c, dv\] = \[1, 4, 3\] and v .* must have the same shape"):
        argmax_correct(r, torch.zeros(1, 5, 3))
    with pytest.raises(CapacityError, match="precision must be one of auto, bfloat16, float32"):
        argmax_correct(r, r, precision="fp8")
    with pytest.raises(CapacityError, match="block must be a whole number >= 1"):
        argmax_correct(r, r, block=0)
    with pytest.raises(CapacityError, match=r"bound_scale must lie in \[0, inf\)"):
        argmax_correct(r, r, bound_scale=-1)
    with pytest.raises(CapacityError, match="r must have 3 dimensions"):
        argmax_correct(torch.zeros(4, 3), r)
    assert screen_precision("cpu", "float32") == "float32"
    assert screen_precision("cpu") in PRECISIONS
    assert screen_precision("cpu", dv=16) == "float32"  # small reads: the float32 screen is as fast


@pytest.mark.parametrize("precision", PRECISIONS)
def test_near_ties_among_negative_scores(precision):
    """Every score negative: the rounding allowance of a negative best other score (its own branch) decides."""
    c = 64
    g = generator(12, "negative-ties")
    deltas = torch.tensor([1e-3, -1e-3, 1e-4, -1e-4, 3e-5, -3e-5, 2e-3, -2e-3])
    delta = deltas[torch.randint(len(deltas), (3, c), generator=g)]  # [B, c]
    v = torch.eye(c).expand(3, c, c).contiguous()  # value l is e_l: read i's score with value l is r_i[l]
    r = -torch.ones(3, c, c) + torch.diag_embed(delta)  # own score -1 + delta, every other -1
    want = exact(r, v)
    assert torch.equal(want, (delta > 0).float())
    assert torch.equal(argmax_correct(r, v, precision=precision), want)
    r0 = torch.diag_embed(delta)  # every other score exactly 0
    assert torch.equal(argmax_correct(r0, v, precision=precision), (delta > 0).float())


def test_non_finite_reads_and_values_are_decoded_not_rejected():
    g = generator(13, "nan")
    r, v = torch.randn(2, 6, 4, generator=g), torch.randn(2, 6, 4, generator=g)
    r[0, 2] = float("nan")  # a NaN read: its scores are NaN, and the float64 argmax decides (as the exact decode)
    v[1, 5] = float("inf")
    for precision in PRECISIONS:
        assert torch.equal(argmax_correct(r, v, precision=precision), exact(r, v))
    with pytest.raises(CapacityError, match=r"^v must have 3 dimensions, got shape \(6, 4\)$"):
        argmax_correct(r, v[0])
    with pytest.raises(CapacityError, match="^v must be a torch.Tensor"):
        argmax_correct(r, v.numpy())


def _bound(r, v, precision, u_in=0.0):
    """score_error_bound's formula (its docstring), computed here in float64 from the same float32 inputs."""
    dv = r.shape[-1]
    u = 2.0**-23
    gamma = lambda k: k * u / (1 - k * u)
    grow = 1 + 2 * gamma(dv + 2)
    norm = lambda x: x.float().norm(dim=-1).double() * grow  # [B, c]: float32 norms, enlarged by their rounding
    vmax = norm(v).amax(-1, keepdim=True)
    if precision == "bfloat16":
        r_hi, v_hi = r.bfloat16().float(), v.bfloat16().float()
        e = norm(r_hi) * norm(v - v_hi).amax(-1, keepdim=True) + norm(r - r_hi) * vmax
        e = e + gamma(dv) * norm(r_hi) * norm(v_hi).amax(-1, keepdim=True)
    else:
        e = (u_in * (2 + u_in) * (1 + gamma(dv)) + gamma(dv)) * norm(r) * vmax
    return e + dv * 2.0**-120


@pytest.mark.parametrize("precision", PRECISIONS)
def test_score_error_bound_is_its_formula(precision, monkeypatch):
    g = generator(16, "bound-formula")
    r = torch.randn(3, 50, 24, generator=g) * torch.rand(3, 50, 1, generator=g)  # unequal norms per read
    v = torch.randn(3, 50, 24, generator=g) * torch.rand(3, 50, 1, generator=g) * 3
    got = score_error_bound(r, v, precision)
    assert got.dtype == torch.float64 and got.shape == (3, 50)
    assert torch.allclose(got, _bound(r, v, precision), rtol=1e-12, atol=0)
    if precision == "float32":  # with the float32 matmul allowed to round its inputs to bfloat16
        monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "medium")
        assert torch.allclose(score_error_bound(r, v, precision), _bound(r, v, precision, 2.0**-8), rtol=1e-12, atol=0)
    with pytest.raises(CapacityError, match=r"^precision must be 'bfloat16' or 'float32', got 'fp8'$"):
        score_error_bound(r, v, "fp8")


def test_gamma_k_is_highams_bound():
    from lacapacity.tasks import decode

    assert decode._gamma_k(10, 0.01) == pytest.approx(0.1 / 0.9, rel=1e-15)
    assert decode._gamma_k(99, 0.01) == pytest.approx(0.99 / 0.01, rel=1e-9)
    assert decode._gamma_k(100, 0.01) == math.inf and decode._gamma_k(150, 0.01) == math.inf


def test_one_read_left_for_the_float64_stage():
    """Per batch item exactly one read whose margin (1e-9 of |v|^2) float32 cannot resolve: it reaches float64 alone."""
    r, v = near_ties(3, 40, 32, [0.2], seed=14)  # clear margins
    tie_r, tie_v = near_ties(3, 40, 32, [1e-9], seed=15)  # right by 1e-9: only float64 sees it
    r[:, 7], v = tie_r[:, 7], v.clone()
    v[:, 7] = tie_v[:, 7]
    partner = ((tie_r[:, 7:8] @ tie_v.transpose(1, 2))[:, 0] - (tie_r[:, 7] * tie_v[:, 7]).sum(-1, keepdim=True)).abs()
    partner[:, 7] = float("inf")  # not its own value
    j = partner.argmin(-1)  # the value read 7 nearly ties with: copy it in, at the same index
    for b in range(3):
        v[b, j[b]] = tie_v[b, j[b]]
    want = exact(r, v)
    assert want[:, 7].sum() >= 2  # right in exact arithmetic (float32 inputs move a 1e-9 margin either way)
    for precision in PRECISIONS:
        assert torch.equal(argmax_correct(r, v, precision=precision), want)


def test_float32_input_rounding_allowance(monkeypatch):
    """What a "float32" matmul may round its inputs to: nothing, TF32 (2^-11) or bfloat16 (2^-8), per device and setting."""
    from types import SimpleNamespace

    from lacapacity.tasks import decode

    cpu, cuda = torch.device("cpu"), torch.device("cuda")  # device objects: no GPU needed
    for tf32, precision, on_cuda, on_cpu in (
        (False, "highest", 0.0, 0.0),
        (True, "highest", 2.0**-11, 0.0),
        (False, "high", 2.0**-11, 2.0**-8),
        (True, "medium", 2.0**-8, 2.0**-8),
        (False, "medium", 2.0**-8, 2.0**-8),
    ):
        monkeypatch.setattr(torch.backends.cuda, "matmul", SimpleNamespace(allow_tf32=tf32))
        monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda p=precision: p)
        assert (decode._float32_input_unit(cuda), decode._float32_input_unit(cpu)) == (on_cuda, on_cpu)


def test_screen_precision_follows_the_device_and_dv(monkeypatch):
    from lacapacity.tasks import decode

    assert screen_precision(torch.device("cuda"), "auto") == "bfloat16"  # a device object needs no GPU
    assert screen_precision("cuda", "auto", dv=8) == "bfloat16"
    monkeypatch.setattr(decode, "_cpu_has_bf16", lambda: True)
    assert screen_precision("cpu", "auto", dv=128) == "bfloat16"
    assert screen_precision("cpu", "auto", dv=127) == "float32"
    assert screen_precision("cpu", "auto") == "bfloat16"
    assert screen_precision("meta", "auto", dv=128) == "float32"  # neither CUDA nor a CPU
    monkeypatch.setattr(decode, "_cpu_has_bf16", lambda: False)
    assert screen_precision("cpu", "auto", dv=4096) == "float32"
    assert screen_precision("cpu", "bfloat16") == "bfloat16"


@pytest.mark.requires_cuda
@pytest.mark.parametrize("precision", PRECISIONS)
def test_cuda_screens_match_the_exact_decode(precision):
    for r, v in (
        memory_reads("linear", "gaussian", 4, 2048, 128, seed=10),
        near_ties(4, 1000, 64, [1e-4, -1e-4, 1e-7, -1e-7], seed=11),
    ):
        got = argmax_correct(r.cuda(), v.cuda(), precision=precision).cpu()
        assert torch.equal(got, exact(r, v))


def test_products_below_float32s_normal_range_are_decided_exactly():
    """Products below 2^-126 round on float32's subnormal grid (step q = 2^-149), far coarser than any relative bound:
    read 0's float32 scores are (2q, q) against exact (1.2q, 1.4q), read 1 is the same read; dv 2^-120 per read sends
    both to the float64 stage."""
    q = 2.0**-149
    r = torch.full((1, 2, 2), 2.0**-75)
    v = torch.tensor([[[0.6 * 2.0**-74, 0.6 * 2.0**-74], [1.4 * 2.0**-74, 0.0]]])
    s32 = r @ v.transpose(1, 2)
    assert ((r * v).sum(-1) / q).tolist() == [[2.0, 1.0]] and (s32[0, 0] / q).tolist() == [2.0, 1.0]
    assert torch.allclose((r.double() @ v.double().transpose(1, 2))[0, 0] / q, torch.tensor([1.2, 1.4]).double())
    want = exact(r, v)
    assert want.tolist() == [[0.0, 1.0]] and plain32(r, v).tolist() == [[1.0, 0.0]]  # float32 rounding flips both
    for precision in PRECISIONS:
        assert torch.equal(argmax_correct(r, v, precision=precision), want)
    assert topk_correct(r, v, [1, 2]).tolist() == [[[0.0, 1.0], [1.0, 1.0]]]


def test_a_large_bound_scale_keeps_the_decode_exact():
    """bound_scale = 1000: the allowance for the bfloat16 output's rounding, 1000 x 2^-8 of a score, is capped at 1/2
    (beyond 1 the interval around a score would turn over). Small integers are exact in bfloat16, so the input
    rounding terms of the bound are 0 and the output allowance decides."""
    g = generator(17, "int-large-scale")
    v = torch.randint(-3, 4, (2, 80, 6), generator=g).float()
    r = 2 * v + torch.randint(-3, 4, (2, 80, 6), generator=g).float()
    assert float((r @ v.transpose(1, 2)).abs().max()) <= 256  # every score is exact in bfloat16 too
    want = exact(r, v)
    assert 0.2 < float(want.mean()) < 0.8
    for precision in PRECISIONS:
        assert torch.equal(argmax_correct(r, v, precision=precision, bound_scale=1000.0), want)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_exact_ties_reach_the_tie_rule_with_no_rounding_allowance(precision):
    """Small integers score exactly in every precision, so even bound_scale = 0 decides them exactly: an exact tie
    is neither surely right nor surely wrong, and the float64 stage gives it to the first index."""
    g = generator(18, "int-ties-no-bound")
    v = torch.eye(8)[torch.randint(8, (2, 60), generator=g)]  # [2, 60, 8] unit values e_k: many duplicates
    v = v * (2 * torch.randint(2, (2, 60, 1), generator=g) - 1).float()  # and -e_k
    r = v.clone()  # own score 1; 1 with every duplicate, else 0 or -1: right exactly at a value's first copy
    want = exact(r, v)
    s = r @ v.transpose(1, 2)
    own = torch.diagonal(s, dim1=1, dim2=2).clone()
    s[:, torch.arange(60), torch.arange(60)] = -math.inf
    tied = own == s.amax(-1)  # the own score ties with the best other one
    assert int((tied & (want == 1)).sum()) > 5 and int((tied & (want == 0)).sum()) > 5  # ties won and lost
    assert torch.equal(argmax_correct(r, v, precision=precision, bound_scale=0.0), want)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_the_float64_stage_in_chunks_of_one_read(precision, monkeypatch):
    """_FALLBACK_ROWS = c: the undecided reads go to the later stages one at a time, and every one is decoded."""
    from lacapacity.tasks import decode

    r, v = near_ties(2, 50, 16, [1e-4, -1e-4, 1e-9, -1e-9], seed=19)  # undecided by bfloat16; half of them by float32
    want = exact(r, v)
    monkeypatch.setattr(decode, "_FALLBACK_ROWS", 50)
    assert torch.equal(argmax_correct(r, v, precision=precision), want)
    ranks = torch.tensor([1, 2, 50])
    assert torch.equal(topk_correct(r, v, ranks.tolist()), (_rank(r, v)[..., None] < ranks).float())


def _rank(r, v):
    """Own-value rank in float64: larger scores, and equal ones at a smaller index, come first."""
    s = r.float().double() @ v.float().double().transpose(1, 2)  # [B, c, c]
    own = torch.diagonal(s, dim1=1, dim2=2)[..., None]
    earlier = torch.arange(s.shape[-1])[None, :] < torch.arange(s.shape[-1])[:, None]  # l < i
    return ((s > own) | ((s == own) & earlier)).sum(-1)


def test_the_screen_matmul_switches_off_reduced_precision_sums_on_cuda(monkeypatch):
    """On CUDA the screen's product runs with bfloat16 split-K reductions in reduced precision off, and the user's
    setting comes back afterwards (a CUDA-typed input and torch's flag namespace stand in for the GPU)."""
    from types import SimpleNamespace

    from lacapacity.tasks import decode

    flags = SimpleNamespace(allow_bf16_reduced_precision_reduction=True)
    monkeypatch.setattr(torch.backends.cuda, "matmul", flags)
    seen = []

    class CudaTyped:
        device = torch.device("cuda")  # a device object: no GPU needed

        def __init__(self, x):
            self.x = x

        def __matmul__(self, b):
            seen.append(flags.allow_bf16_reduced_precision_reduction)
            return self.x @ b

    a, b = torch.randn(3, 4), torch.randn(4, 5)
    for before in (True, False):
        flags.allow_bf16_reduced_precision_reduction = before
        assert torch.equal(decode._screen_matmul(CudaTyped(a), b), a @ b)
        assert seen.pop() is False and flags.allow_bf16_reduced_precision_reduction is before
    flags.allow_bf16_reduced_precision_reduction = True
    assert torch.equal(decode._screen_matmul(a, b), a @ b)  # on the CPU: a plain product, the flag untouched
    assert flags.allow_bf16_reduced_precision_reduction is True


def test_topk_bad_arguments_name_what_is_allowed():
    r = torch.zeros(1, 4, 3)
    with pytest.raises(
        CapacityError, match=r"^r \[B, c, dv\] = \[1, 4, 3\] and v \[B, c, dv\] = \[1, 5, 3\] must have"
    ):
        topk_correct(r, torch.zeros(1, 5, 3), 1)
    with pytest.raises(CapacityError, match=r"^r must have 3 dimensions, got shape \(4, 3\)$"):
        topk_correct(r[0], r, 1)
    with pytest.raises(CapacityError, match=r"^v must have 3 dimensions, got shape \(4, 3\)$"):
        topk_correct(r, r[0], 1)
    with pytest.raises(CapacityError, match="^block must be a whole number >= 1"):
        topk_correct(r, r, 1, block=0)


def test_topk_decodes_non_finite_reads_and_values():
    """A NaN read or an infinite value is decoded, not rejected: its rank counts the values l whose score compares
    larger (or equal at l < i) under IEEE rules, as the float64 brute force does."""
    g = generator(20, "topk-nan")
    r, v = torch.randn(2, 6, 4, generator=g), torch.randn(2, 6, 4, generator=g)
    r[0, 2] = float("nan")
    v[1, 5] = float("inf")
    ranks = torch.tensor([1, 2, 6])
    assert torch.equal(topk_correct(r, v, ranks.tolist()), (_rank(r, v)[..., None] < ranks).float())


def test_topk_near_ties_below_float32_resolution_with_equal_norms():
    """Values of one norm (sign flips of one vector), reads between two of them with margins of 1e-9: float32 rounding
    decides the plain ranking, the own score's allowance is what separates the bound from zero (every read has the
    largest value norm), and the answer is the float64 ranking."""
    g = generator(21, "topk-equal-norms")
    w = torch.randn(32, generator=g)
    v = w * (2 * torch.randint(2, (2, 60, 32), generator=g) - 1).float()  # [2, 60, 32], all norms exactly equal
    j = (torch.arange(60) + 1) % 60
    delta = torch.tensor([1e-9, -1e-9])[torch.randint(2, (2, 60), generator=g)]
    r = (v + v[:, j]) / 2 + delta[..., None] * (v - v[:, j])
    assert torch.unique(v.norm(dim=-1)).numel() == 1
    ranks = torch.tensor([1, 2, 3])
    want = (_rank(r, v)[..., None] < ranks).float()
    assert 0.2 < float(want[..., 0].mean()) < 0.8
    assert int((plain32(r, v) != want[..., 0]).sum()) > 10  # the float32 argmax gets many of them wrong
    assert torch.equal(topk_correct(r, v, ranks.tolist()), want)


class _Products(TorchFunctionMode):
    """Records every matrix product by dtype: a [B, m, dv] @ [B, dv, w] product scores B m reads against w values."""

    def __init__(self):
        super().__init__()
        self.calls = []  # (dtype, reads, values) per product

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.__matmul__, torch.matmul, torch.Tensor.matmul):
            self.calls.append(
                (str(args[0].dtype).removeprefix("torch."), args[0].shape[:-1].numel(), args[1].shape[-1])
            )
        return func(*args, **(kwargs or {}))


def _calls(fn, *args, **kwargs):
    with _Products() as products:
        fn(*args, **kwargs)
    return products.calls


def _rows(fn, *args, **kwargs):
    """Reads scored per dtype (a read scored against the values in parts counts once per part)."""
    rows = {}
    for dtype, n, _ in _calls(fn, *args, **kwargs):
        rows[dtype] = rows.get(dtype, 0) + n
    return rows


def _scores(fn, *args, **kwargs):
    """Scores (read, value products) computed per dtype."""
    out = {}
    for dtype, n, w in _calls(fn, *args, **kwargs):
        out[dtype] = out.get(dtype, 0) + n * w
    return out


def test_the_screens_score_every_read_once_and_leave_few_to_the_later_stages(monkeypatch):
    """The cost the module docstring states: the screen scores every read once (2 c^2 dv flops per batch item, in
    the screening dtype); after a bfloat16 screen a minority of reads is scored again in float32, and only reads
    whose margin float32 cannot resolve are scored in float64 (none of these random reads; about the half of the
    near ties whose margin is 1e-9)."""
    from lacapacity.tasks import decode

    g = generator(22, "stages")
    B, c, dv = 4, 300, 64
    v = torch.randn(B, c, dv, generator=g)
    r = v + (c / dv) ** 0.5 * torch.randn(B, c, dv, generator=g)  # margins spread over the scores' scale
    bf = _rows(argmax_correct, r, v, precision="bfloat16")
    assert bf.keys() == {"bfloat16", "float32"} and bf["bfloat16"] == B * c and bf["float32"] <= B * c // 4
    assert _rows(argmax_correct, r, v, precision="float32") == {"float32": B * c}
    assert _rows(topk_correct, r, v, [1, 5]) == {"float32": B * c}
    monkeypatch.setattr(decode, "_cpu_has_bf16", lambda: True)  # "auto" on such a CPU: float32 below dv = 128
    assert _rows(argmax_correct, r, v) == {"float32": B * c}
    assert _rows(argmax_correct, r[..., :32], v[..., :32]) == {"float32": B * c}

    r, v = near_ties(2, 100, 32, [1e-4, -1e-4, 1e-9, -1e-9], seed=23)  # 1e-4: bfloat16 cannot, float32 can
    s = r.double() @ v.double().transpose(1, 2)
    gap = (s - torch.diagonal(s, dim1=1, dim2=2)[..., None]).abs()
    gap[:, torch.arange(100), torch.arange(100)] = math.inf
    fine = int((gap.amin(-1) < 1e-5).sum())  # reads with a near tie within 100x of float32 resolution
    assert 60 < fine < 140
    bf = _rows(argmax_correct, r, v, precision="bfloat16")
    assert bf["bfloat16"] == 200 and bf["float32"] <= 200 and 0 < bf["float64"] <= fine
    f32 = _rows(argmax_correct, r, v, precision="float32")
    assert f32["float32"] == 200 and 0 < f32["float64"] <= fine and f32.keys() == {"float32", "float64"}
    tk = _rows(topk_correct, r, v, [1, 5])
    assert tk["float32"] == 200 and 0 < tk["float64"] <= fine and tk.keys() == {"float32", "float64"}

    # reads of a sample of the pairs (``own``): the same stages, each read screened once, few left to float64
    g = generator(24, "stages-own")
    v = torch.randn(B, c, dv, generator=g)
    own = torch.randint(c, (120,), generator=g)
    r = v[:, own] + (c / dv) ** 0.5 * torch.randn(B, 120, dv, generator=g)
    rows = _rows(argmax_correct, r, v, own=own, precision="float32")
    assert rows["float32"] == B * 120 and rows.get("float64", 0) <= 4  # the own score left out of the screen's best


def test_the_default_block_holds_about_2_to_the_24_scores():
    """The screen takes B x block <= 2^24 / c reads at a time: 4200 reads of 4200 values go in blocks of
    2^24 // 4200 = 3994 reads and the remaining 206, each first against the first part of 525 values (4200 / 8);
    4 x 300 reads: one product of 300 reads and all 300 values per batch item."""
    g = generator(24, "block")
    v = torch.randn(1, 4200, 4, generator=g)
    calls = _calls(argmax_correct, v + torch.randn(1, 4200, 4, generator=g), v, precision="float32")
    firsts = [n for _, n, w in calls if w == 525]
    assert firsts[0] == 3994 and 206 in firsts and all(n * w <= 3994 * 525 for _, n, w in calls)
    assert sum(n * w for dtype, n, w in calls if dtype == "float32") <= 4200 * 4200
    v = torch.randn(4, 300, 8, generator=g)
    assert _calls(argmax_correct, v, v, precision="float32") == [("float32", 300, 300)] * 4


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_read_surely_beaten_early_is_scored_no_further(precision):
    """c = 2048 values in 4 parts of 512. Reads 0-599 sit near their own value (right); reads 600-1199 near a value
    of the first part (wrong, settled by the first part); reads 1200-2047 lean to their own value but a value of the
    last part beats them (0.7 v_i + 0.8 v_j: their own score, about 0.7, leads the others, below 0.35, through three
    parts and loses to v_j's 0.8 in the last). The answer is the float64 brute force, and the screen computes exactly
    512 x (2048 + 3 x (2048 - 600)) scores: the reads beaten in the first part are not scored again, all the others
    (the late-beaten ones too) against every value."""
    g = generator(27, "early-exit")
    c, dv = 2048, 256
    v = torch.randn(1, c, dv, generator=g)
    v = v / v.norm(dim=-1, keepdim=True)
    i = torch.arange(c)
    j = torch.where(i < 1200, (i * 7) % 512, 1536 + (i * 5) % 512)  # the rival: in the first or the last part
    j = torch.where(j == i, 1536 + (j + 1) % 512, j)
    r = v + 0.05 * torch.randn(1, c, dv, generator=g) / dv**0.5  # reads 0-599: their own value
    r[0, 600:1200] = v[0, j[600:1200]] + 0.05 * torch.randn(600, dv, generator=g) / dv**0.5
    r[0, 1200:] = 0.7 * v[0, 1200:] + 0.8 * v[0, j[1200:]]
    want = (_rank(r, v) == 0).float()
    assert torch.equal(want[0, :600], torch.ones(600)) and float(want[0, 600:].sum()) == 0
    assert torch.equal(argmax_correct(r, v, precision=precision), want)
    # every margin is clear: nothing reaches a later stage (an own score left in a part's scores would send its read)
    assert _scores(argmax_correct, r, v, precision=precision) == {precision: 512 * (c + 3 * (c - 600))}


def _led_then_beaten(c, dv, late, seed):
    """Reads [1, c, dv] against unit values: read i sits on value j(i) of the first part (beaten there), except the
    reads in ``late``, which lean to their own value (0.7 v_i) and lose to one of the last part (0.8 v_j)."""
    g = generator(seed, "led-then-beaten")
    v = torch.randn(1, c, dv, generator=g)
    v = v / v.norm(dim=-1, keepdim=True)
    i = torch.arange(c)
    j = torch.where(i % 512 == (i * 7) % 512, (i * 7 + 1) % 512, (i * 7) % 512)  # a rival in the first part
    r = v[:, j] + 0.05 * torch.randn(1, c, dv, generator=g) / dv**0.5
    for k in late:
        r[0, k] = 0.7 * v[0, k] + 0.8 * v[0, c - 1 - k % 7]
    return r, v


@pytest.mark.parametrize("precision", PRECISIONS)
def test_the_last_read_left_is_scored_to_the_end(precision):
    """c = 1024 in 2 parts: every read but read 0 is beaten by a value of the first part; read 0 leads the first part
    and loses in the second. It is scored against both parts (512 x (1024 + 1) scores) and is wrong."""
    r, v = _led_then_beaten(1024, 256, [0], seed=28)
    want = (_rank(r, v) == 0).float()
    assert float(want.sum()) == 0
    assert torch.equal(argmax_correct(r, v, precision=precision), want)
    assert _scores(argmax_correct, r, v, precision=precision) == {precision: 512 * (1024 + 1)}


@pytest.mark.parametrize("precision", PRECISIONS)
def test_reads_all_beaten_in_the_first_part_cost_one_part(precision):
    """Every read of c = 1024 beaten in the first part of 512 values: the answer (all wrong) after 512 x 1024 scores;
    with 2 batch items, for each."""
    r, v = _led_then_beaten(1024, 64, [], seed=29)
    r, v = torch.cat([r, r.flip(-1)]), torch.cat([v, v.flip(-1)])  # [2, 1024, 64]
    assert torch.equal(argmax_correct(r, v, precision=precision), torch.zeros(2, 1024))
    assert _scores(argmax_correct, r, v, precision=precision) == {precision: 2 * 512 * 1024}


@pytest.mark.parametrize("precision", PRECISIONS)
def test_reads_right_in_every_part_are_decided_by_the_screen(precision):
    """c = 1024 reads near their own values, in two blocks of 512 reads (block=512) and two parts of 512 values: the
    own score is left out of each part where it lies (the diagonals of the four score blocks), so every read is
    decided by the screen, right, with c^2 scores and no later stage."""
    g = generator(30, "right-everywhere")
    v = torch.randn(1, 1024, 64, generator=g)
    v = v / v.norm(dim=-1, keepdim=True)
    r = v + 0.05 * torch.randn(1, 1024, 64, generator=g) / 8
    for block in (None, 512, 300):
        assert torch.equal(argmax_correct(r, v, precision=precision, block=block), torch.ones(1, 1024))
        assert _scores(argmax_correct, r, v, precision=precision, block=block) == {precision: 1024 * 1024}


@pytest.mark.parametrize("precision", PRECISIONS)
def test_clear_margins_among_negative_scores_are_decided_by_the_screens(precision):
    """Every score negative and margins of 1e-2 (the allowance is about 1e-4): the rounding allowance of a negative
    best other score keeps it an upper bound without widening it, and no read reaches float64."""
    c = 64
    g = generator(25, "negative-margins")
    delta = torch.tensor([1e-2, -1e-2, 3e-2, -3e-2])[torch.randint(4, (3, c), generator=g)]  # [B, c]
    v = torch.eye(c).expand(3, c, c).contiguous()  # value l is e_l: read i's score with value l is r_i[l]
    r = -torch.ones(3, c, c) + torch.diag_embed(delta)  # own score -1 + delta, every other -1
    assert torch.equal(argmax_correct(r, v, precision=precision), (delta > 0).float())
    rows = _rows(argmax_correct, r, v, precision=precision)
    assert rows[precision] == 3 * c and "float64" not in rows


def test_the_screen_decides_exactly_the_reads_outside_twice_the_derived_bound():
    """Margins placed at 0.5, 0.75, 1.25 and 2 times the float32 screen's allowance e_i = 2 (bound_i + own_i), with
    bound_i the derived bound (_bound: score_error_bound's formula) and own_i = gamma_dv ||r_i|| ||v_i|| (the own
    score's rounding, norms enlarged as in the bound): the reads within e_i, and only they, are scored again in
    float64, by argmax_correct and by topk_correct at k = 1."""
    g = generator(26, "allowance")
    B, c, dv = 2, 40, 32
    v = torch.randn(B, c, dv, generator=g)
    v = 3 * v / v.norm(dim=-1, keepdim=True)  # norm 3: the own allowance is not the bound's by accident of scale
    vj = v[:, (torch.arange(c) + 1) % c]  # each read's rival
    t = torch.tensor([0.5, -0.5, 0.75, -0.75, 1.25, -1.25, 2.0, -2.0]).repeat(B, c // 8)  # [B, c] margin / e_i

    def allowance(r):
        u = 2.0**-23
        grow = 1 + 2 * (dv + 2) * u / (1 - (dv + 2) * u)
        own = dv * u / (1 - dv * u) * grow**2 * r.norm(dim=-1).double() * v.norm(dim=-1).double() + dv * 2.0**-120
        return 2 * (_bound(r, v, "float32") + own)  # [B, c]

    mid = (v + vj) / 2
    delta = t * allowance(mid) / (v - vj).double().norm(dim=-1) ** 2  # margin r_i . (v_i - v_j) = delta |v_i - v_j|^2
    r = (mid + delta[..., None].float() * (v - vj)).float()
    s = (r @ v.transpose(1, 2)).double()  # the float32 scores the screen sees
    own = (r * v).sum(-1).double()
    s[:, torch.arange(c), torch.arange(c)] = -math.inf
    ratio = (own - s.amax(-1)) / allowance(r)  # [B, c]
    assert float((ratio - t).abs().max()) < 0.05  # the margins sit where they were placed (up to float32 rounding)
    within = int((ratio.abs() <= 1).sum())
    assert within == B * c // 2
    assert _rows(argmax_correct, r, v, precision="float32") == {"float32": B * c, "float64": within}
    assert _rows(topk_correct, r, v, [1]) == {"float32": B * c, "float64": within}


def exact_own(r, v, own):
    """The float64 decode of reads whose own values are ``own`` (first index wins a tie)."""
    r, v = r.float().double(), v.float().double()
    return ((r @ v.transpose(1, 2)).argmax(-1) == own).float()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_reads_of_some_pairs_decode_against_every_stored_value(precision):
    """``own``: reads of a sample of the pairs (repeats, any order), each scored against all c values: the exact
    decode, near ties and exact ties included, through every stage (c > 512: the screen scores values in parts)."""
    B, c, dv = 2, 1100, 16
    r_all, v = near_ties(B, c, dv, [2.0**-30, 2.0**-12, 0.3, -0.3, -(2.0**-12)], seed=5)
    v[:, 700] = v[:, 20]  # an exact tie: a read of pair 700 (or 20) that is v_20 itself goes to index 20
    r_all[:, 700] = v[:, 20]
    r_all[:, 20] = v[:, 20]
    g = generator(9, "own-sample")
    own = torch.cat([torch.tensor([700, 20, 700]), torch.randint(c, (297,), generator=g)])  # [m]
    r = r_all[:, own].clone()
    p = torch.arange(3, 40)  # reads that sit on the value stored at their own position p, not on their own value
    r[:, p] = v[:, p] + 0.5 * v[:, own[p]]
    got = argmax_correct(r, v, own=own, precision=precision)
    assert got[:, 3:40].sum() == 0  # value p beats the own value: every one is wrong
    assert got.shape == (B, 300) and got.dtype == torch.float32
    assert torch.equal(got, exact_own(r, v, own))
    assert got[:, 0].tolist() == [0.0, 0.0] and got[:, 1].tolist() == [1.0, 1.0]  # ties: the first index
    assert 0 < float(got[:, 40:].mean()) < 1
    # the same reads in the stored order give what the full decode gives for those pairs
    full = argmax_correct(r_all, v, precision=precision)
    assert torch.equal(got[:, 40:], full[:, own[40:]])


def test_own_is_checked():
    v = torch.randn(1, 10, 4)
    r = torch.randn(1, 3, 4)
    for bad, what in [
        (torch.tensor([0, 1]), "long tensor [m]"),
        (torch.tensor([0.0, 1.0, 2.0]), "torch.float32 [3]"),
        (torch.tensor([0, 1, 10]), "indices 0..10"),
        ([0, 1, 2], "got list"),
    ]:
        with pytest.raises(CapacityError, match="own must") as err:
            argmax_correct(r, v, own=bad)
        assert what in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(CapacityError, match="must have the same shape"):
        argmax_correct(r, v)
