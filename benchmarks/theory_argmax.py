"""Measured 90%-recall capacity of the linear memory against the T10 predictions.

Gaussian unit keys and values; the probe's ``recall`` at checkpoints around the refined
prediction, averaged over the batch; capacity = ``metrics.capacity(..., metric="recall",
threshold=0.9)``. Prints one JSON row per (d, dv) with the ratios measured / predicted for
``theory.argmax_capacity_refined`` and the Gaussian bound ``theory.argmax_capacity``.

    python benchmarks/theory_argmax.py [16x16 64x16 ...]     (default: all configurations)
    python benchmarks/theory_argmax.py --tau 0.5 0.99 --batch 16 32x32 64x16 16x64
"""

from __future__ import annotations

import argparse
import json
import time

from lacapacity import theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import metrics, probe

CONFIGS = [
    (16, 16, 8),
    (32, 32, 8),
    (64, 64, 8),
    (128, 128, 4),
    (256, 256, 4),
    (16, 64, 8),
    (64, 16, 8),
    (32, 128, 8),
    (128, 32, 8),
    (256, 64, 4),
]  # (d, dv, batch)
FACTORS = (0.75, 0.85, 0.92, 1.0, 1.08, 1.17, 1.3)  # checkpoints, relative to the refined prediction
WIDE = (0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.35)  # for tau != 0.9


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*", help="d x dv, e.g. 64x16 (default: all)")
    ap.add_argument("--tau", type=float, nargs="+", default=[0.9])
    ap.add_argument("--batch", type=int, default=None, help="override the batch of every configuration")
    args = ap.parse_args(argv)
    configs = [c for c in CONFIGS if not args.configs or f"{c[0]}x{c[1]}" in args.configs]
    for (d, dv, batch), tau in ((c, t) for c in configs for t in args.tau):
        batch = args.batch or batch
        start = time.time()
        refined, gaussian = theory.argmax_capacity_refined(d, dv, tau), theory.argmax_capacity(d, dv, tau)
        cps = sorted({max(2, round(refined * f)) for f in (FACTORS if tau == 0.9 else WIDE)})
        K = keys.make("gaussian", cps[-1], d, batch=batch, seed=1)
        V = values.make("gaussian", cps[-1], dv, batch=batch, seed=2)
        rec = probe.recall(variants.get("linear"), K, V, checkpoints=cps).mean("batch")
        measured = float(metrics.capacity(rec, metric="recall", threshold=tau))
        row = {
            "d": d,
            "dv": dv,
            "tau": tau,
            "batch": batch,
            "checkpoints": cps,
            "recall": rec.recall.values.round(4).tolist(),
            "measured": round(measured, 1),
            "refined": round(refined, 1),
            "gaussian": round(gaussian, 1),
            "ratio_refined": round(measured / refined, 3),
            "ratio_gaussian": round(measured / gaussian, 3),
            "seconds": round(time.time() - start, 1),
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
