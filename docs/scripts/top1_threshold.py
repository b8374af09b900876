"""Top-1 against list-wise recall of the additive memory against n / d^2, beside the sharp top-1 threshold of Barnfield,
Kim, Nichani, Lee and Lu (2026, arXiv 2605.05189): docs/figures/top1-threshold.png and the numbers of docs/theory.md.

The paper's memory is hetero-associative: a d x d matrix that superposes the outer products of n (key, target) pairs,
both isotropic Gaussian, read by the key and decoded by the target with the largest inner product (top-1), or by
whether the right target is among the strongest candidates (list-wise). That is the `linear` memory here (S = sum_i
k_i^T v_i, dv = d) read by the probe's exact argmax decode: the pairs below are drawn as the paper draws them,
k, v ~ N(0, I_d / d) (not normalised), and written and read through `lacapacity.probe.recall`. Top-1 recall is the
probe's `recall` (the share of pairs whose own value scores highest); list-wise recall is `recall_at` with a list of
k = ceil(RHO n) candidates, a fixed share of the n stored values. The paper proves that top-1 needs d^2 of order
n log n (with a conjectured sharp threshold d^2 = 2 n ln n) and that list-wise retrieval needs d^2 of order n only.

    python docs/scripts/top1_threshold.py [--out docs/figures]     # about a minute on 2 cores
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from pathlib import Path

import numpy as np
import torch

from lacapacity import probe, variants
from lacapacity.plots import theme
from lacapacity.plots.save import save

D = (16, 32, 64)
BATCH = {16: 64, 32: 16, 64: 4}  # batch items per d: about the same number of reads at every d
LOADS = 2.0 ** np.arange(-6.0, 0.01, 0.5)  # n / d^2 from 1/64 to 1
RHO = 0.05  # list-wise: the right value among the top 5% of the n stored values
MIN_K = 3  # list-wise recall is drawn where the list holds at least 3 values (n > 40): below, the list is top-1


def pairs(n: int, d: int, batch: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The paper's isotropic Gaussian pairs: keys and values ``[batch, n, d]``, entries N(0, 1/d)."""
    g = torch.Generator().manual_seed(seed)
    K = torch.randn(batch, n, d, generator=g) / math.sqrt(d)
    V = torch.randn(batch, n, d, generator=g) / math.sqrt(d)
    return K, V


def listwise_k(n: int) -> int:
    """The candidate list of list-wise recall: ceil(RHO n) values."""
    return max(1, math.ceil(RHO * n))


def threshold(d: int) -> float:
    """n* with d^2 = 2 n* ln n* (the conjectured sharp top-1 threshold), by bisection."""
    lo, hi = 2.0, float(d * d)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if 2 * mid * math.log(mid) < d * d else (lo, mid)
    return 0.5 * (lo + hi)


def measure(d: int, batch: int, seed: int = 0, loads=LOADS) -> dict:
    """Top-1 and list-wise recall of the linear memory at n = load d^2: {"n": [C], "top1": [C, B], "listwise": [C, B]}."""
    ns = sorted({max(2, round(x * d * d)) for x in loads})
    K, V = pairs(ns[-1], d, batch, seed)
    ks = sorted({listwise_k(n) for n in ns})
    ds = probe.recall(variants.get("linear"), K, V, checkpoints=ns, top_k=ks)
    listwise = np.stack([ds.recall_at.sel(n=n, k=listwise_k(n)).values for n in ns])
    return {"n": np.asarray(ns), "top1": ds.recall.values, "listwise": listwise}


def figure(results: dict):
    """Three panels: top-1 recall and list-wise recall against n / d^2 (the threshold of each d marked), and top-1
    recall against 2 n ln n / d^2, where the conjectured threshold is 1 for every d."""
    colors = theme.palette([f"d = {d}" for d in results])
    with theme.style():
        fig, axes = theme.figure(1, 3, sharey=True)
        for d, r in results.items():
            c, x = colors[f"d = {d}"], r["n"] / d**2
            listed = np.asarray([listwise_k(int(n)) >= MIN_K for n in r["n"]])
            for ax, y, xs in (
                (axes[0, 0], r["top1"], x),
                (axes[0, 1], r["listwise"][listed], x[listed]),
                (axes[0, 2], r["top1"], 2 * r["n"] * np.log(r["n"]) / d**2),
            ):
                m, se = y.mean(1), y.std(1, ddof=1) / math.sqrt(y.shape[1])
                ax.fill_between(xs, m - 2 * se, m + 2 * se, color=c, alpha=0.2, lw=0)
                ax.plot(xs, m, marker="o", ms=3, lw=1.5, color=c, label=f"d = {d}")
            star = threshold(d) / d**2
            axes[0, 0].axvline(
                star, color=c, ls="--", lw=1.0, label=f"d^2 = 2 n ln n at d = {d} (n = {threshold(d):.0f})"
            )
        axes[0, 2].axvline(1.0, color="0.2", ls="--", lw=1.0, label="d^2 = 2 n ln n (any d)")
        axes[0, 0].set_title("top-1 recall")
        axes[0, 1].set_title(f"list-wise recall: own value in the top {RHO:.0%} of n")
        axes[0, 2].set_title("top-1 recall, rescaled")
        for ax in axes[0, :2]:
            theme.log2_x(ax)
            ax.set_xlabel("n / d^2")
        axes[0, 2].set_xscale("log", base=2)
        axes[0, 2].set_xlabel("2 n ln n / d^2")
        axes[0, 0].set_ylabel("recall (mean over pairs)")
        axes[0, 0].set_ylim(-0.02, 1.02)
        theme.legend(fig, axes)
        theme.note(
            fig,
            "Additive memory S = sum k^T v (d x d), keys and values N(0, I/d) as in Barnfield et al. 2026 (arXiv "
            "2605.05189), exact argmax decode against all n stored values. Top-1 falls near the conjectured d^2 = "
            "2 n ln n (dashed), at a load n / d^2 that shrinks as d grows; list-wise recall falls at one load for "
            f"every d (d^2 of order n; drawn where the list holds {MIN_K} values or more). Lines: mean over the pairs "
            "of all batch items; bands: 2 standard errors over the batch items.",
        )
    return theme.finish(fig, "top1-threshold")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "figures"))
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}")
    t0 = time.time()
    results = {d: measure(d, BATCH[d], seed=d) for d in D}
    print(f"## measured in {time.time() - t0:.0f} s; recall (mean over batch items) at n / d^2")
    print(
        "| d | n* (d^2 = 2 n ln n) | n* / d^2 | top-1 at n*/2 | top-1 at n* | top-1 at 2 n* | list-wise at n/d^2 = 1/4, 1/2, 1 |"
    )
    print("|---|---|---|---|---|---|---|")
    for d, r in results.items():
        star = threshold(d)
        top = [float(np.interp(np.log(f * star), np.log(r["n"]), r["top1"].mean(1))) for f in (0.5, 1.0, 2.0)]
        lw = [float(np.interp(np.log(x * d * d), np.log(r["n"]), r["listwise"].mean(1))) for x in (0.25, 0.5, 1.0)]
        print(
            f"| {d} | {star:.1f} | {star / d**2:.3f} | "
            + " | ".join(f"{t:.3f}" for t in top)
            + " | "
            + ", ".join(f"{x:.3f}" for x in lw)
            + " |"
        )
    paths = save(figure(results), args.out, "top1-threshold")
    for p in paths:
        if p.suffix == ".pdf":
            p.unlink()
    print("figure:", ", ".join(str(p) for p in paths if p.suffix == ".png"))


if __name__ == "__main__":
    main()
