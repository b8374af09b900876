"""Measured 90%-recall capacity of the linear memory against the T10 predictions.

Gaussian unit keys and values; the probe's ``recall`` at checkpoints around the refined
prediction, averaged over the batch; capacity = ``metrics.capacity(..., metric="recall",
threshold=0.9)``. Prints one JSON row per (d, dv) with the ratios measured / predicted for
``theory.argmax_capacity_refined`` and the Gaussian bound ``theory.argmax_capacity``.

    python benchmarks/theory_argmax.py [16x16 64x16 ...]     (default: all configurations)
"""

from __future__ import annotations

import json
import sys
import time

from capacity import keys, metrics, probe, theory, values, variants

CONFIGS = [(16, 16, 8), (32, 32, 8), (64, 64, 8), (128, 128, 4), (256, 256, 4),
           (16, 64, 8), (64, 16, 8), (32, 128, 8), (128, 32, 8), (256, 64, 4)]  # (d, dv, batch)
FACTORS = (0.75, 0.85, 0.92, 1.0, 1.08, 1.17, 1.3)  # checkpoints, relative to the refined prediction


def main(argv: list[str]) -> None:
    configs = [c for c in CONFIGS if not argv or f"{c[0]}x{c[1]}" in argv]
    for d, dv, batch in configs:
        start = time.time()
        refined, gaussian = theory.argmax_capacity_refined(d, dv), theory.argmax_capacity(d, dv)
        cps = sorted({max(2, round(refined * f)) for f in FACTORS})
        K = keys.make("gaussian", cps[-1], d, batch=batch, seed=1)
        V = values.make("gaussian", cps[-1], dv, batch=batch, seed=2)
        rec = probe.recall(variants.get("linear"), K, V, checkpoints=cps).mean("batch")
        measured = float(metrics.capacity(rec, metric="recall", threshold=0.9))
        row = {"d": d, "dv": dv, "batch": batch, "checkpoints": cps, "recall": rec.recall.values.round(4).tolist(),
               "measured": round(measured, 1), "refined": round(refined, 1), "gaussian": round(gaussian, 1),
               "ratio_refined": round(measured / refined, 3), "ratio_gaussian": round(measured / gaussian, 3),
               "seconds": round(time.time() - start, 1)}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
