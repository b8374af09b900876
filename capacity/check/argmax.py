"""Rows of T10: argmax recall against the Gaussian bound and the refined prediction."""

from __future__ import annotations

from capacity import keys, metrics, probe, theory, values, variants
from capacity.check._rows import Check, ge


def _argmax(dev, seed, rows):
    """T10: argmax recall past d; the Gaussian prediction is conservative (see theory.argmax_recall)."""
    lin = variants.get("linear")
    for d in (32, 64):
        n = 4 * d
        K = keys.make("gaussian", n, d, batch=32, seed=seed, device=dev)
        V = values.make("gaussian", n, d, batch=32, seed=seed, device=dev)
        ds = probe.recall(lin, K, V, checkpoints=list(range(2, n + 1, 2)))
        rec = ds.recall.mean("batch")
        measured = float(rec.n[rec >= 0.9].max())
        predicted = theory.argmax_capacity(d, d, tau=0.9)
        ratio = measured / predicted
        rows.append(
            Check(
                "T10",
                f"d = dv = {d}: 90%-recall capacity / prediction, in [1, 1.6]",
                ratio,
                1.3,
                "in",
                0.3,
                bool(1.0 <= ratio <= 1.6),
            )
        )
        rows.append(
            ge("T10", f"d = dv = {d}: measured 90%-recall capacity > d (retrieval past d)", measured, d + 1, 0.0)
        )
        cap = float(metrics.capacity(ds.mean("batch"), metric="recall", threshold=0.9))
        ratio = cap / theory.argmax_capacity_refined(d, d, tau=0.9)
        what = f"d = dv = {d}: 90% capacity / refined prediction, in [0.9, 1.1]"
        rows.append(Check("T10", what, ratio, 1.0, "in", 0.1, bool(abs(ratio - 1.0) <= 0.1)))


GROUPS = [
    (("T10",), _argmax),
]
