"""The trained study's numbers as docs/trained.md prints them: per memory and pairs, the trained accuracy (best over
the learning rates, mean over seeds, standard error), the best lr, and the two ceilings of the same memory.

    capacity run trained --out results            # the study (its estimate: about 11 minutes of one CPU core)
    python docs/scripts/trained_table.py results/trained.nc
"""

from __future__ import annotations

import sys

import numpy as np
import xarray as xr

from lacapacity.plots.theme import standard_error
from lacapacity.tasks.trained.task import best


def table(ds: xr.Dataset) -> str:
    ds = ds.squeeze("d") if "d" in ds.dims else ds
    lr = best(ds).lr_best
    rows = [
        "| memory | pairs | trained, best over lr (± SE) | best lr (per seed) | ceiling: random keys | ceiling: learned keys | gap to the higher ceiling |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in ds.variant.values:
        for n in ds.n.values:
            one = ds.sel(variant=v, n=n)
            acc, se = float(one.accuracy_best.mean()), float(standard_error(one.accuracy_best))
            rand, learned = float(one.ceiling_random.mean()), float(one.ceiling_learned.mean())
            lrs = ", ".join(f"{x:g}" for x in np.atleast_1d(lr.sel(variant=v, n=n).values))
            gap = max(rand, learned) - acc
            rows.append(f"| {v} | {int(n)} | {acc:.3f} ± {se:.3f} | {lrs} | {rand:.3f} | {learned:.3f} | {gap:+.3f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(xr.open_dataset(sys.argv[1] if len(sys.argv) > 1 else "results/trained.nc")))
