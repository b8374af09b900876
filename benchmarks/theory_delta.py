"""The delta-rule closed form (theory.delta_rule_error, T12) against the probe's measured mse.

Grid: d in 16..256, n/d in 1/8..16, beta in (0, 1]; unit keys and values (``gaussian``), one
batch of independent draws per (d, beta). Prints, per beta, the largest relative error and the
largest |z| (z = (measured mean - predicted) / standard error) over the grid, and how many
points miss both 3 standard errors and 5% relative.

    python benchmarks/theory_delta.py [--batch 32] [--dv 16]
"""

from __future__ import annotations

import argparse

import numpy as np

from lacapacity import theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe

DS = (16, 32, 64, 128, 256)
LOADS = (1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8, 16)
BETAS = (0.1, 0.3, 0.5, 0.8, 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dv", type=int, default=16)
    args = ap.parse_args()
    head = ("beta", "max rel. err", "at (d, n)", "max |z|", "at (d, n)", "points", "missed")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (5, 12, 11, 8, 11, 6, 6))))
    for beta in BETAS:
        rel, zs, where = [], [], []
        for d in DS:
            cps = sorted({max(1, round(f * d)) for f in LOADS})
            K = keys.make("gaussian", cps[-1], d, batch=args.batch, seed=10 + d)
            V = values.make("gaussian", cps[-1], args.dv, batch=args.batch, seed=20 + d)
            ds = probe.recall(variants.get("delta", beta=beta), K, V, checkpoints=cps, decode=False)
            mse = ds.mse.values  # [n, batch]
            mean, se = mse.mean(1), mse.std(1, ddof=1) / np.sqrt(args.batch)
            pred = theory.delta_rule_error(np.asarray(cps), d, beta=beta)
            rel += list(np.abs(mean - pred) / pred)
            zs += list(np.abs(mean - pred) / se)
            where += [(d, c) for c in cps]
        wz, wr = int(np.argmax(zs)), int(np.argmax(rel))
        missed = sum(z > 3 and r > 0.05 for z, r in zip(zs, rel))
        print(f"{beta:5.2f} {rel[wr]:12.4f} {where[wr]!s:>11} {zs[wz]:8.2f} {where[wz]!s:>11} {len(zs):6} {missed:6}")


if __name__ == "__main__":
    main()
