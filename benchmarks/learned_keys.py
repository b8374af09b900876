"""Learned keys: how close Adam gets to the bounds through each variant, and what a point costs.

A benchmark, not a test: one point per row (d = 64), wall time measured here. Usage:

    python benchmarks/learned_keys.py [--steps 300] [--n 128 600] [--out results/learned.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from lacapacity import theory
from lacapacity.tasks import learned

ROWS = [
    ("linear", {}, False),
    ("linear", {}, True),
    ("decay", {}, False),
    ("gla", {}, False),
    ("delta", {}, False),
    ("gated_delta", {}, False),
    ("kda", {}, False),
    ("softmax", {"scale": 8.0}, False),
]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--n", type=int, nargs="+", default=[128, 600])
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    d = args.d
    out = {
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads",
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__,
        "rows": [],
    }
    print(f"{'variant':22} {'n':>5} {'steps':>5} {'start':>8} {'learned':>8} {'T5':>7} {'T8':>7} {'seconds':>8}")
    for n in args.n:
        for name, params, gain in ROWS:
            from lacapacity import variants

            mem = variants.get(name, **params)
            t0 = time.perf_counter()
            res = learned.optimise(n=n, d=d, variant=mem, gain=gain, steps=args.steps, seed=0)
            secs = time.perf_counter() - t0
            label = name + (", gain" if gain else "") + (f" (beta = {params['beta']:g})" if params else "")
            row = {
                "variant": label,
                "n": n,
                "d": d,
                "steps": args.steps,
                "start_mse": float(res.history[0]),
                "learned_mse": float(res.mse[0]),
                "frame_bound": theory.frame_bound(n, d),
                "rank_bound": theory.rank_bound(n, d),
                "seconds": secs,
            }
            out["rows"].append(row)
            print(
                f"{label:22} {n:5d} {args.steps:5d} {row['start_mse']:8.3f} {row['learned_mse']:8.3f} {row['frame_bound']:7.3f} {row['rank_bound']:7.3f} {secs:8.1f}"
            )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
