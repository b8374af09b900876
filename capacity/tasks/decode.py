"""Argmax decode of reads against stored values: which reads pick their own value.

>>> import torch
>>> from lacapacity.tasks.decode import argmax_correct
>>> v = torch.eye(4)[None]                      # [1, 4, 4] four stored values
>>> r = v + 0.1 * torch.ones(1, 4, 4)           # [1, 4, 4] reads near their own value
>>> r[0, 3] = v[0, 1]                           # read 3 lands on value 1
>>> argmax_correct(r, v).tolist()
[[1.0, 1.0, 1.0, 0.0]]

Read i is correct when its own score r_i . v_i is the largest of r_i . v_l over the c stored
values l, ties going to the first index (as ``torch.argmax``): a tie with an earlier value
counts as wrong, a tie with a later one as right.

The scores cost up to 2 c^2 dv flops. They are first computed in a cheap precision (bfloat16 where
the hardware multiplies it natively and dv is large enough: CUDA, or a CPU with AVX-512 BF16 or
AMX; else float32), and each read's margin (own score minus its best other score) is compared
with a rigorous bound on the rounding error of its scores (``score_error_bound``, used with a
factor 2 of margin). A read whose margin clears the bound is decided; the others are screened
again in float32 (a bound of about dv 2^-23 ||r_i|| max_l ||v_l||), and the few left after that
are scored in float64. The answer is therefore the decode in exact arithmetic (up to float64
rounding, dv 2^-53 relative), whatever precision screened it. It equals the plain float32
decode ``(r @ v^T).argmax(-1) == arange(c)`` except where that one's answer is decided by
float32 rounding (a margin within about dv 2^-24 ||r_i|| ||v_l||, or an exact tie that the
float32 matmul's blocking splits).

The screen scores the values in up to 8 parts of at least 512 values. A read that a value scored
so far surely beats (that value's score, less the bound, above the own score) is wrong whatever
the later values score, and is scored no further: reads past capacity, most of them wrong, cost
a fraction of the c^2 scores, and a read that is right is scored against every value.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import torch

from lacapacity.base import _validate
from lacapacity.errors import CapacityError

_PRECISIONS = ("auto", "bfloat16", "float32")
_CPU_BF16_MIN_DV = 128  # measured: see screen_precision
_FALLBACK_ROWS = 1 << 22  # float64 scores per fallback chunk (rows x c)
_WIDTH, _MAX_PARTS = 512, 8  # the screen scores the values in at most 8 parts of at least 512


@functools.lru_cache(maxsize=1)
def _cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AVX-512 BF16 or AMX-BF16), from /proc/cpuinfo (Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


def screen_precision(device: torch.device | str, precision: str = "auto", dv: int | None = None) -> str:
    """The precision the scores are screened in on ``device``: ``"bfloat16"`` or ``"float32"``.

    ``"auto"``: bfloat16 on CUDA, and on CPUs with native bfloat16 (AVX-512 BF16 or AMX) for reads
    of ``dv`` >= 128 numbers (below that the float32 screen was as fast or faster on an AMD EPYC
    with AVX-512 BF16; see benchmarks/README.md); else float32.
    """
    if precision not in _PRECISIONS:
        raise CapacityError(f"precision must be one of {', '.join(_PRECISIONS)}, got {precision!r}")
    if precision != "auto":
        return precision
    dev = torch.device(device)
    if dev.type == "cuda" or (dev.type == "cpu" and _cpu_has_bf16() and (dv is None or dv >= _CPU_BF16_MIN_DV)):
        return "bfloat16"
    return "float32"


def _gamma_k(k: int, u: float) -> float:
    """Higham's gamma_k = k u / (1 - k u): relative error bound of a k-term sum in unit roundoff u."""
    return math.inf if k * u >= 1 else k * u / (1 - k * u)


_U_BF16 = 2.0**-8  # unit roundoff of bfloat16 (8 significant bits), round to nearest
_U_SUM = 2.0**-23  # unit of the float32 sums: twice float32's 2^-24, so that truncating accumulators are covered
_TINY = 2.0**-120  # per term: covers products and partial sums flushed to zero below 2^-126


def _float32_input_unit(device: torch.device) -> float:
    """Relative rounding of each input inside a "float32" matmul: 0, or TF32's 2^-11 / bfloat16's 2^-8 where torch allows them."""
    if device.type == "cuda" and (
        torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"
    ):
        return 2.0**-8 if torch.get_float32_matmul_precision() == "medium" else 2.0**-11
    if device.type != "cuda" and torch.get_float32_matmul_precision() != "highest":
        return 2.0**-8
    return 0.0


def score_error_bound(r: torch.Tensor, v: torch.Tensor, precision: str) -> torch.Tensor:
    """e_i with |s_il - s'_il| <= e_i for every value l: the screen's error on read i's scores; float64 ``[B, c]``.

    s_il = r_i . v_l exactly; s'_il is the float32 sum the matmul forms in ``precision`` before any
    rounding of its output (see ``argmax_correct`` for the output's rounding). r, v: float32
    ``[B, c, dv]``. With gamma_k = k u / (1 - k u) and u = 2^-23 for float32 sums (twice float32's
    unit roundoff, so that accumulators which truncate, like tensor cores, are covered):

    - ``"bfloat16"``: the matmul multiplies r_hi = bf16(r) and v_hi = bf16(v); the products are exact
      in float32 (8 x 8 significant bits) and their sum of dv terms errs by at most
      gamma_dv sum_k |r_hi,k v_hi,k| <= gamma_dv ||r_hi|| ||v_hi||. What the input rounding dropped
      is r . v_l - r_hi . v_hi,l = r_hi . v_lo,l + r_lo . v_l with r_lo = r - r_hi, v_lo = v - v_hi
      (exact in float32), at most ||r_hi|| ||v_lo,l|| + ||r_lo|| ||v_l|| (Cauchy-Schwarz): the norms
      of the actual remainders, maximised over l.
    - ``"float32"``: r_hi = r and v_hi = v, up to the input rounding torch allows in float32
      matmuls (TF32's u_in = 2^-11 on CUDA, bfloat16's 2^-8 where the float32 matmul precision is
      lowered): (u_in (2 + u_in) (1 + gamma_dv) + gamma_dv) ||r|| ||v||.

    The norms are computed in float32 and enlarged by their own rounding bound (1 + 2 gamma_(dv+2));
    dv 2^-120 per read covers products below float32's normal range (flushed to zero).
    """
    dv = r.shape[-1]
    g = _gamma_k(dv, _U_SUM)
    grow = 1 + 2 * _gamma_k(dv + 2, _U_SUM)  # a float32 norm times this is >= the exact norm

    def norm(x: torch.Tensor) -> torch.Tensor:  # [B, c, dv] -> [B, c] float64 upper bound of the row norms
        norms: torch.Tensor = x.float().norm(dim=-1)  # annotated: torch leaves Tensor.norm untyped
        return norms.double() * grow

    vmax = norm(v).amax(-1, keepdim=True)  # [B, 1]
    if precision == "bfloat16":
        r_hi, v_hi = r.bfloat16().float(), v.bfloat16().float()
        rh = norm(r_hi)  # [B, c]
        v_lo_max = norm(v - v_hi).amax(-1, keepdim=True)  # [B, 1]
        e = rh * v_lo_max + norm(r - r_hi) * vmax + g * rh * norm(v_hi).amax(-1, keepdim=True)
    elif precision == "float32":
        u_in = _float32_input_unit(r.device)
        e = (u_in * (2 + u_in) * (1 + g) + g) * norm(r) * vmax
    else:
        raise CapacityError(f"precision must be 'bfloat16' or 'float32', got {precision!r}")
    return e + dv * _TINY


def _screen_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b with float32 accumulation: on CUDA, bfloat16 split-K reductions in reduced precision are switched off."""
    if a.device.type != "cuda":
        return a @ b
    mm = torch.backends.cuda.matmul
    old = mm.allow_bf16_reduced_precision_reduction
    mm.allow_bf16_reduced_precision_reduction = False
    try:
        return a @ b
    finally:
        mm.allow_bf16_reduced_precision_reduction = old


def _classify(
    other: torch.Tensor, own: torch.Tensor, e: torch.Tensor, u_out: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(sure right, sure wrong) from the best other screened score ``other``, own scores and error bounds (same shape).

    The screened scores were rounded to a format of unit roundoff ``u_out`` after the sum (0: not
    rounded): rounding is monotone, so the unrounded best other lies in [lo(other), hi(other)].
    A read that is neither is undecided. Sure wrong holds for the best other of any subset of the
    other values too (the best of all of them is at least as large): the screen stops there.
    """
    other = other.double()
    pos = other >= 0
    hi = torch.where(pos, other / (1 - u_out), other / (1 + u_out))
    lo = torch.where(pos, other / (1 + u_out), other / (1 - u_out))
    right = own > hi + e  # every exact other score is below the exact own score
    wrong = (lo - e > own) & torch.isfinite(other)  # the best other's exact score beats the own one
    return right, wrong


def _inputs(
    r: torch.Tensor, v: torch.Tensor, block: int | None, target: torch.Tensor | None = None
) -> tuple[int, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The decodes' checked inputs: (block, r32, v32, target, own, own_err).

    r32: float32 ``[B, m, dv]``, v32: float32 ``[B, c, dv]``; target: read j's own value, long ``[m]`` (``arange(c)``
    when not given: then m = c); own: the own scores r_j . v_target(j) as float32 sums, widened to float64 ``[B, m]``;
    own_err: their rounding bound, |own - r_j . v_target(j)| <= gamma_dv ||r_j|| ||v_target(j)|| (norms enlarged by
    their own rounding), plus dv 2^-120 for products flushed to zero ``[B, m]``; block: reads scored at a time.
    """
    _validate.tensor("r", r, ndim=3, finite=False)  # NaN reads end in the float64 stage; no device sync here
    _validate.tensor("v", v, ndim=3, finite=False)
    if target is None and r.shape != v.shape:
        raise CapacityError(
            f"r [B, c, dv] = {list(r.shape)} and v [B, c, dv] = {list(v.shape)} must have the same shape"
        )
    if r.device != v.device:
        raise CapacityError(f"r and v must be on one device, got {r.device} and {v.device}")
    B, c, dv = v.shape
    if target is None:
        target = torch.arange(c, device=r.device)
    elif (
        not isinstance(target, torch.Tensor)
        or target.dtype != torch.long
        or tuple(target.shape) != (r.shape[1],)
        or (r.shape[0], r.shape[2]) != (B, dv)
    ):
        got = f"{target.dtype} {list(target.shape)}" if isinstance(target, torch.Tensor) else type(target).__name__
        raise CapacityError(
            f"own must be a long tensor [m] (read j's own value among the c stored) for r [B, m, dv] = {list(r.shape)} and v [B, c, dv] = {list(v.shape)}, got {got}"
        )
    elif target.numel() and (int(target.min()) < 0 or int(target.max()) >= c):
        raise CapacityError(
            f"own must index the c = {c} stored values, got indices {int(target.min())}..{int(target.max())}"
        )
    block = max(1, (1 << 24) // (B * c)) if block is None else _validate.positive_int("block", block)
    r32, v32 = r.float(), v.float()  # [B, m, dv], [B, c, dv]
    mine = v32[:, target]  # [B, m, dv]
    own = (r32 * mine).sum(-1).double()  # [B, m]
    own_err = _gamma_k(dv, _U_SUM) * (1 + 2 * _gamma_k(dv + 2, _U_SUM)) ** 2
    own_err = own_err * r32.norm(dim=-1).double() * mine.norm(dim=-1).double() + dv * _TINY  # [B, m]
    return block, r32, v32, target, own, own_err


def argmax_correct(
    r: torch.Tensor,
    v: torch.Tensor,
    *,
    own: torch.Tensor | None = None,
    block: int | None = None,
    precision: str = "auto",
    bound_scale: float = 2.0,
) -> torch.Tensor:
    """1.0 where read i has its largest score with its own value v_i, else 0.0; float32 ``[B, c]`` (``[B, m]``).

    ``r``: reads ``[B, c, dv]``; ``v``: the stored values ``[B, c, dv]`` (row i is read i's own
    value); any floating dtype, scored from their float32 values. ``own``: for reads of some of the
    pairs only (a sample), r is ``[B, m, dv]`` and ``own`` (long ``[m]``) says which stored value is
    read j's own; each read is still scored against all c values. ``block``: reads scored at a
    time (a score block holds at most block x c numbers; default about 16M numbers / B).
    ``precision``: ``"auto"`` (see ``screen_precision``), ``"bfloat16"`` or ``"float32"``: the
    precision of the first screen; the result does not depend on it. ``bound_scale``: the
    screens use ``bound_scale`` times the derived rounding-error bounds (``score_error_bound``
    and the output's unit roundoff); the default 2 leaves a factor 2 of margin. Below 1 the
    answer may be wrong (only tests should do that).

    The screen scores one batch item at a time, the values in parts (see the module docstring: a
    read surely beaten by a value of an early part is not scored against the later ones). Reads a
    bfloat16 screen cannot decide are screened again in float32 (tight bound), and the few left
    after that are scored in float64.
    """
    # own scores summed on their own, and their rounding bound (added to every bound below)
    block, r32, v32, target, own, own_err = _inputs(r, v, block, own)
    (B, c, dv), m = v.shape, r.shape[1]
    prec = screen_precision(r.device, precision, dv)
    scale = _validate.in_range("bound_scale", bound_scale, 0.0, math.inf, high_open=True)
    diagonal = m == c and own is None  # read i's own value is value i: its scores lie on a diagonal
    idx = torch.arange(m, device=r.device)
    correct = torch.zeros(B, m, dtype=torch.bool, device=r.device)
    unsure = torch.zeros(B, m, dtype=torch.bool, device=r.device)
    # stage 1: every read, in blocks, in the screening precision
    e = scale * (score_error_bound(r32, v32, prec) + own_err)  # [B, c]
    u_out = min(0.5, scale * _U_BF16) if prec == "bfloat16" else 0.0
    sdt = torch.bfloat16 if prec == "bfloat16" else torch.float32
    rs, vs = r32.to(sdt), v32.to(sdt)  # [B, c, dv] each
    width = max(_WIDTH, -(-c // _MAX_PARTS))  # values scored at a time, while reads keep being decided
    for b in range(B):
        for start in range(0, m, block):
            stop = min(m, start + block)
            alive = idx[start:stop]  # reads of this block not yet decided
            best = torch.full((stop - start,), -math.inf, device=r.device)  # best other screened score so far
            for j0 in range(0, c, width):
                j1 = min(c, j0 + width)
                whole = alive.numel() == stop - start  # no read decided yet
                s = _screen_matmul(rs[b, start:stop] if whole else rs[b, alive], vs[b, j0:j1].T)  # [m, w]
                if whole and diagonal:
                    s.diagonal(start - j0).fill_(-math.inf)  # leave out the own score (summed on its own)
                else:
                    at = target[alive]
                    mine = ((at >= j0) & (at < j1)).nonzero().flatten()
                    s[mine, at[mine] - j0] = -math.inf
                best = torch.maximum(best, s.amax(-1).float())
                if j1 < c:  # reads another value surely beats are wrong: the later values cannot change that
                    _, wrong = _classify(best, own[b, alive], e[b, alive], u_out)
                    if bool(wrong.any()):
                        alive, best = alive[~wrong], best[~wrong]
                        if alive.numel() == 0:
                            break
            right, wrong = _classify(best, own[b, alive], e[b, alive], u_out)
            correct[b, alive] = right
            unsure[b, alive] = ~(right | wrong)
    if not bool(unsure.any()):
        return correct.float()
    # stage 2 (after a bfloat16 screen): the undecided reads in float32; stage 3: what is left, in float64
    e32 = scale * (score_error_bound(r32, v32, "float32") + own_err) if prec == "bfloat16" else None  # [B, c]
    step = max(1, _FALLBACK_ROWS // c)
    for b in range(B):
        rows = unsure[b].nonzero().flatten()
        for i in range(0, rows.numel(), step):
            q = rows[i : i + step]  # [m] undecided reads of batch item b
            if e32 is not None:
                s = r32[b, q] @ v32[b].T  # [m, c]
                s[torch.arange(q.numel(), device=r.device), target[q]] = -math.inf
                right, wrong = _classify(s.amax(-1), own[b, q], e32[b, q], 0.0)
                correct[b, q] = right
                q = q[~(right | wrong)]
                if q.numel() == 0:
                    continue
            s64 = r32[b, q].double() @ v32[b].double().T  # [m, c]; products exact, sums to dv 2^-53
            correct[b, q] = s64.argmax(-1) == target[q]
    return correct.float()


def _ks(k: int | Sequence[int]) -> list[int]:
    ks = [k] if isinstance(k, int) and not isinstance(k, bool) else list(k) if isinstance(k, (list, tuple)) else None
    if not ks or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in ks) or len(set(ks)) != len(ks):
        raise CapacityError(f"k must be a whole number >= 1 or a list of distinct ones, got {k!r}")
    return ks


def topk_correct(r: torch.Tensor, v: torch.Tensor, k: int | Sequence[int], *, block: int | None = None) -> torch.Tensor:
    """1.0 where read i's own value v_i is among the top k of its scores r_i . v_l, else 0.0; float32 ``[B, c, K]``.

    ``r``, ``v``: as in ``argmax_correct`` (``[B, c, dv]``, row i is read i's own value); ``k``: a whole number or a
    list of K distinct ones. The rank of the own value is the number of values l with a larger score, plus the
    values l < i with an equal one (ties go to the first index, as in ``argmax_correct``, so that k = 1 gives its
    answer); read i is correct at k when that count is below k. The decode is exact: the float32 scores are
    screened with ``score_error_bound`` (a factor 2 of margin), and a read whose count the screen cannot settle at
    some k is scored again in float64.
    """
    ks = _ks(k)
    block, r32, v32, _, own, own_err = _inputs(r, v, block)
    B, c = r.shape[:2]
    e = 2.0 * (score_error_bound(r32, v32, "float32") + own_err)  # [B, c]
    kt = torch.tensor(ks, device=r.device)  # [K]
    idx = torch.arange(c, device=r.device)
    correct = torch.zeros(B, c, len(ks), dtype=torch.bool, device=r.device)
    unsure = torch.zeros(B, c, dtype=torch.bool, device=r.device)
    vt = v32.transpose(1, 2)
    for start in range(0, c, block):
        stop = min(c, start + block)
        s = (r32[:, start:stop] @ vt).double()  # [B, blk, c]
        s[:, idx[: stop - start], idx[start:stop]] = -math.inf  # the own score is summed on its own
        o, err = own[:, start:stop, None], e[:, start:stop, None]
        above = (s > o + err).sum(-1)  # surely ranked before the own value
        band = ((s >= o - err) & (s <= o + err)).sum(-1)  # undecided: within the rounding bound
        sure_right = above[..., None] + band[..., None] < kt  # [B, blk, K]
        sure_wrong = above[..., None] >= kt
        correct[:, start:stop] = sure_right
        unsure[:, start:stop] = (~(sure_right | sure_wrong)).any(-1)
    if bool(unsure.any()):
        step = max(1, _FALLBACK_ROWS // c)
        for b in range(B):
            rows = unsure[b].nonzero().flatten()
            for i in range(0, rows.numel(), step):
                q = rows[i : i + step]  # [m]
                s64 = r32[b, q].double() @ v32[b].double().T  # [m, c]
                mine = s64.gather(1, q[:, None])  # [m, 1]
                before = (s64 > mine) | ((s64 == mine) & (idx[None, :] < q[:, None]))
                correct[b, q] = before.sum(-1)[:, None] < kt
    return correct.float()
