"""How close T31-T33's closed forms come to int8 and int4 states: the table of docs/quantised-accuracy.md.

The simulation here is written from the definitions of docs/precision.md ("Integer states"), not from the package: a
state of random unit keys and values (R^d, R^dv) in float64, one scale per group equal to the group's largest
magnitude over Q (127 int8, 7 int4), q = round(x / scale) half to even or floor(x / scale + U) (stochastic rounding),
clamped to [-Q, Q]; error feedback keeps r = Z - q and adds it before the next rounding. The deviation is
||S_q - S_float||_F^2 / d (a unit query's mean squared read error). Mean and standard error over the batch items;
predicted: the closed form of ``lacapacity.theory``; z = (measured - predicted) / SE.

Settings (what this 2-core machine allows in about 3 minutes): one rounding of the finished state with one scale per
tensor at d 16..128, dv 16..64, the additive memory at n 10..4096 and decay at alpha 0.9..0.999 (the final state
is n-independent past a few hundred writes: one n per alpha); the delta rule per tensor; rounding at every write,
int4 per row and per column without feedback up to T33's crossover, int8 per tensor with and without feedback;
T33's crossover at ratios 1/4, 1/2 and 1; fp8 (float8_e4m3fn, rounded from the format's definition) with the scales
the servers chose, once and at every write, inside the step form's range and past it (the rows at decay 0.999,
where it warns).

    .venv/bin/python scripts/quantised_accuracy.py                  # writes docs/quantised-accuracy.md
    .venv/bin/python scripts/quantised_accuracy.py --batch 32 --out -  # a smaller batch, to stdout
"""

from __future__ import annotations

import math
import os
import sys
import warnings

import numpy as np

from lacapacity import theory

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from precision_accuracy import page, run  # the sibling script: the page and the command line of both


def unit(rng, shape):
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def e4m3_spacing(y):
    """The spacing of float8_e4m3fn at y: 2^(e - 3) for |y| in [2^e, 2^(e + 1)), e >= -6; 2^-9 below 2^-6."""
    a = np.abs(y)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    return 2.0 ** (np.maximum(e, -6.0) - 3.0)


def quant(x, Q, scope, u=None, fp8=False):
    """x [B, d, dv] rounded with one scale per ``scope`` group (tensor, row, col, or cN: N consecutive columns):
    amax / Q; whole numbers, or for ``fp8`` float8_e4m3fn numbers (Q the target the largest maps to)."""
    if scope == "tensor":
        M = np.abs(x).reshape(x.shape[0], -1).max(-1)[:, None, None]
    elif scope == "row":
        M = np.abs(x).max(-1, keepdims=True)
    elif scope == "col":
        M = np.abs(x).max(-2, keepdims=True)
    else:  # cN: a d x N tile
        B, d, dv = x.shape
        N = int(scope[1:])
        M = np.repeat(np.abs(x).reshape(B, d, dv // N, N).max((1, 3))[:, None, :], N, axis=-1)
    sc = M / Q
    y = np.clip(x / np.where(sc > 0, sc, 1.0), -Q, Q)
    step = e4m3_spacing(y) if fp8 else 1.0
    q = (np.round(y / step) if u is None else np.floor(y / step + u)) * step
    return np.clip(q, -Q, Q) * sc


def final(n, d, dv, Q, alpha, B, seed, stochastic=False, scope="tensor", fp8=False):
    """Per item: the finished state sum_t alpha^(n - t) k_t^T v_t rounded once (terms below 1e-10 left out)."""
    rng = np.random.default_rng(seed)
    nn = n if alpha == 1 else min(n, math.ceil(math.log(1e-10) / math.log(alpha)))
    F = np.zeros((B, d, dv))
    for lo in range(0, nn, 128):
        m = min(128, nn - lo)
        w = alpha ** (nn - 1 - np.arange(lo, lo + m, dtype=np.float64))
        F += np.einsum("t,btd,bte->bde", w, unit(rng, (B, m, d)), unit(rng, (B, m, dv)))
    u = rng.random(F.shape) if stochastic else None
    return ((quant(F, Q, scope, u, fp8) - F) ** 2).sum((1, 2)) / d


def delta_final(n, d, dv, Q, B, seed):
    """The delta rule (beta = 1): S <- S - k^T (k S) + k^T v in float64, rounded once per tensor at the end."""
    rng = np.random.default_rng(seed)
    F = np.zeros((B, d, dv))
    for _ in range(n):
        k, v = unit(rng, (B, d)), unit(rng, (B, dv))
        F += k[:, :, None] * (v - np.einsum("bd,bde->be", k, F))[:, None, :]
    return ((quant(F, Q, "tensor") - F) ** 2).sum((1, 2)) / d


def step(ns, d, dv, Q, scope, alpha, B, seed, stochastic=False, feedback=False, fp8=False):
    """Per item at each n of ``ns``: the state rounded after every write (``feedback``: error feedback)."""
    rng = np.random.default_rng(seed)
    F = np.zeros((B, d, dv))
    S, r, out = np.zeros_like(F), np.zeros_like(F), {}
    for s in range(1, max(ns) + 1):
        inc = unit(rng, (B, d))[:, :, None] * unit(rng, (B, dv))[:, None, :]
        F = alpha * F + inc
        Z = alpha * S + inc + r
        S = quant(Z, Q, scope, rng.random(F.shape) if stochastic else None, fp8)
        if feedback:
            r = Z - S
        if s in ns:
            out[s] = ((S - F) ** 2).sum((1, 2)) / d
    return out


def _row(rows, form, setting, x, predicted):
    m, se = float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(len(x)))
    p = float(predicted)
    rows.append((form, setting, m, se, p, m / p, (m - p) / se))


def _memory(alpha):
    return ("linear", 1.0) if alpha == 1 else ("decay", alpha)


def per_tensor_final(rows, B, seed):
    for (d, dv), ns in (
        ((16, 16), (10, 30, 1000)),
        ((24, 16), (30, 100, 400)),
        ((64, 32), (30, 4096)),
        ((128, 64), (30, 100, 1000)),
    ):
        for n in ns:
            b = B if d * dv <= 2048 or n <= 1000 else B // 4
            got = final(n, d, dv, 127, 1.0, b, seed)
            _row(
                rows,
                "quantised_final_error",
                f"linear int8/tensor final, d = {d}, dv = {dv}, n = {n}",
                got,
                theory.quantised_final_error(n, d, dv, 8, "tensor"),
            )
    for d, dv in ((16, 16), (24, 16), (64, 64), (128, 64)):
        for alpha in (0.9, 0.95, 0.99):
            got = final(2000, d, dv, 127, alpha, B, seed)
            want = theory.quantised_final_error(2000, d, dv, 8, "tensor", memory="decay", alpha=alpha)
            _row(
                rows,
                "quantised_final_error",
                f"decay alpha = {alpha} int8/tensor final, d = {d}, dv = {dv}, n = 2000",
                got,
                want,
            )
    for d, dv in ((24, 16), (64, 32)):
        got = final(65536, d, dv, 127, 0.999, B // 2, seed)
        want = theory.quantised_final_error(65536, d, dv, 8, "tensor", memory="decay", alpha=0.999)
        _row(
            rows,
            "quantised_final_error",
            f"decay alpha = 0.999 int8/tensor final, d = {d}, dv = {dv}, n = 65536",
            got,
            want,
        )
    got = final(1000, 24, 16, 127, 0.9, B, seed, stochastic=True)
    want = theory.quantised_final_error(1000, 24, 16, 8, "tensor", memory="decay", alpha=0.9, stochastic=True)
    _row(
        rows,
        "quantised_final_error",
        "decay alpha = 0.9 int8/tensor final+stochastic, d = 24, dv = 16, n = 1000",
        got,
        want,
    )
    for d, dv, n in ((24, 16, 100), (32, 32, 300)):
        got = delta_final(n, d, dv, 127, B // 2, seed)
        _row(
            rows,
            "quantised_final_error",
            f"delta int8/tensor final, d = {d}, dv = {dv}, n = {n}",
            got,
            theory.quantised_final_error(n, d, dv, 8, "tensor", memory="delta"),
        )


def int4_step(rows, B, seed):
    for d, dv, scope, alpha, sr in (
        (32, 32, "row", 1.0, False),
        (32, 32, "row", 1.0, True),
        (16, 64, "row", 1.0, False),
        (64, 16, "col", 1.0, True),
        (128, 64, "row", 1.0, True),
        (32, 16, "row", 0.95, True),
        (32, 32, "row", 0.99, False),
    ):
        mem, a = _memory(alpha)
        n_star = float(theory.quantised_crossover(d, dv, 4, scope, stochastic=sr))
        ns = sorted({max(2, round(f * n_star)) for f in (0.05, 0.25, 0.5, 1.0)}) if alpha == 1 else [20, 100, 400]
        got = step(set(ns), d, dv, 7, scope, alpha, B if d * dv <= 2048 else B // 4, seed, stochastic=sr)
        how = "step+stochastic" if sr else "step"
        for n in ns:
            want = theory.quantised_step_error(n, d, dv, 4, scope, memory=mem, alpha=a, stochastic=sr)
            _row(
                rows,
                "quantised_step_error",
                f"{mem}{'' if a == 1 else f' alpha = {a}'} int4/{scope} {how}, d = {d}, dv = {dv}, n = {n}",
                got[n],
                want,
            )


def int8_tensor_step(rows, B, seed):
    for d, dv, alpha, fb, ns in (
        (24, 16, 1.0, False, (30, 100, 400)),
        (24, 16, 0.9, True, (30, 300)),
        (64, 32, 0.99, True, (300,)),
        (24, 16, 0.9, False, (300,)),
    ):
        mem, a = _memory(alpha)
        got = step(set(ns), d, dv, 127, "tensor", alpha, B, seed, feedback=fb)
        for n in ns:
            want = theory.quantised_step_error(n, d, dv, 8, "tensor", feedback=fb, memory=mem, alpha=a)
            label = f"{mem}{'' if a == 1 else f' alpha = {a}'} int8/tensor{'+ef' if fb else ''} step, d = {d}, dv = {dv}, n = {n}"
            _row(rows, "quantised_step_error", label, got[n], want)


def crossover(rows, B, seed):
    """T33: the additive memory's deviation / (ratio times the crosstalk) at n*(ratio), int4 without feedback."""
    for d, dv, scope, sr in (
        (32, 32, "row", True),
        (32, 32, "row", False),
        (32, 32, "col", True),
        (64, 32, "col", True),
    ):
        ns = {}
        for r in (0.25, 0.5, 1.0):
            ns[r] = round(float(theory.quantised_crossover(d, dv, 4, scope, stochastic=sr, ratio=r)))
        got = step(set(ns.values()), d, dv, 7, scope, 1.0, B, seed, stochastic=sr)
        how = "step+stochastic" if sr else "step"
        for r, n in ns.items():
            label = f"linear int4/{scope} {how}, d = {d}, dv = {dv}: deviation / ({r} crosstalk) at n* = {n}"
            _row(rows, "quantised_crossover", label, got[n] * d / (n - 1) / r, 1.0)


def _fp8_scope(scope, T):
    """The closed forms' scope, group and target of this script's fp8 scope (col, tensor, c32) at target T."""
    kw = {"scope": "cols", "group": 32} if scope == "c32" else {"scope": scope}
    return {**kw, "target": None if T == 448 else T}


def fp8_scaled(rows, B, seed):
    """fp8 with scales: vLLM #52962 (a scale per column, the engine's (head, dim) row, stochastic rounding) and
    SGLang #40706 (a scale per 32-column tile, amax / 240, round to nearest), once and at every write."""
    for scope, T, sr, mem, a, n, d, dv in (
        ("col", 448.0, False, "linear", 1.0, 1000, 64, 64),
        ("col", 448.0, True, "linear", 1.0, 1000, 64, 64),
        ("c32", 240.0, False, "decay", 0.9, 300, 128, 64),
        ("c32", 240.0, True, "decay", 0.99, 1000, 32, 64),
        ("tensor", 448.0, False, "linear", 1.0, 100, 24, 16),
        ("tensor", 240.0, False, "decay", 0.95, 300, 16, 16),
    ):
        got = final(n, d, dv, T, a, B, seed, stochastic=sr, scope=scope, fp8=True)
        want = theory.quantised_final_error(n, d, dv, "fp8", **_fp8_scope(scope, T), memory=mem, alpha=a, stochastic=sr)
        what = f"{mem}{'' if a == 1 else f' alpha = {a}'} fp8/{scope}{'' if T == 448 else '@240'} final{'+stochastic' if sr else ''}"
        _row(rows, "quantised_final_error", f"{what}, d = {d}, dv = {dv}, n = {n}", got, want)
    for scope, T, sr, fb, mem, a, ns, d, dv in (
        ("col", 448.0, True, False, "linear", 1.0, (10, 100, 250), 32, 32),
        ("col", 448.0, True, False, "decay", 0.9, (300,), 128, 64),
        ("col", 448.0, True, False, "decay", 0.99, (300,), 128, 64),
        ("col", 448.0, True, False, "decay", 0.999, (2000,), 32, 32),
        ("c32", 240.0, False, False, "linear", 1.0, (10, 100, 250), 32, 32),
        ("c32", 240.0, False, False, "decay", 0.9, (300,), 128, 64),
        ("c32", 240.0, False, False, "decay", 0.99, (300,), 128, 64),
        ("c32", 240.0, False, False, "decay", 0.999, (2000,), 32, 32),
        ("c32", 240.0, False, True, "decay", 0.99, (300,), 32, 64),
        ("col", 448.0, False, False, "decay", 0.95, (300,), 16, 64),
    ):
        b = B if d * dv <= 2048 else B // 4
        got = step(set(ns), d, dv, T, scope, a, b, seed, stochastic=sr, feedback=fb, fp8=True)
        for n in ns:
            form = _fp8_scope(scope, T)
            want = theory.quantised_step_error(n, d, dv, "fp8", **form, memory=mem, alpha=a, stochastic=sr, feedback=fb)
            fmt = f"fp8/{scope}{'' if T == 448 else '@240'}{'+ef' if fb else ''}"
            what = f"{mem}{'' if a == 1 else f' alpha = {a}'} {fmt} step{'+stochastic' if sr else ''}"
            _row(rows, "quantised_step_error", f"{what}, d = {d}, dv = {dv}, n = {n}", got[n], want)


def table(rows, *, seconds: float, B: int, seed: int) -> str:
    about = (
        "Measured: mean and standard error over the batch items of a numpy simulation written from the formats' "
        "definitions (not the package's code); predicted: the closed form of `lacapacity.theory`; z = (measured - "
        "predicted) / SE. Where a setting lies outside a form's stated range the form warns (CapacityWarning)."
    )
    title, library = "Integer-state forms against an independent simulation", f"numpy {np.__version__}"
    return page(rows, "quantised_accuracy.py", title, library, about, seconds=seconds, B=B, seed=seed)


def main(argv=None) -> int:
    only = "per_tensor_final,int4_step,int8_tensor_step,crossover,fp8_scaled"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the settings outside a form's range are in the table on purpose
        return run(
            argv, doc=__doc__, batch=128, out="docs/quantised-accuracy.md", only=only, forms=globals(), table=table
        )


if __name__ == "__main__":
    sys.exit(main())
