"""The mqar kind: multi-query associative recall (``capacity.mqar``) at every n distinct keys and overwrite fraction.

A cell's Dataset holds the MQAR metrics over ``n``, ``overwrite`` and ``seed``; vocabulary, overwrite fractions and
distractors come from the probe settings. The assembled study adds T10's predicted accuracy.
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr

from capacity import mqar
from capacity.errors import CapacityError

__all__ = ["coords", "variables", "writes", "measure", "theory_vars", "attrs", "check", "PER_POINT"]

PER_POINT = False  # capacity.mqar writes each pass its own way: a cell is measured and reused whole
FINITE = ("accuracy",)  # a fraction of counts, never NaN when measured: a stored NaN is not reused (sweep.store)


def grid_rules(study) -> None:
    g = study.grid
    if g.curve != "n" or g.feature or len(g.dtype) > 1:
        raise CapacityError("an mqar study takes n (distinct keys written, not load), no feature maps and one dtype")


_NAMES = tuple(mqar.METRICS)


def coords(study) -> dict:
    return {"overwrite": list(study.probe.overwrite), "seed": list(study.grid.seed)}


def variables(study) -> dict[str, dict]:
    return {m: dict(zip(("long_name", "units", "description"), mqar.METRICS[m][:3])) for m in _NAMES}


def writes(study, ns) -> int:
    """Tokens one pass writes: the pairs, the overwrites of the largest fraction and the distractors."""
    p = study.probe
    return max(ns) + mqar._overwrites(max(ns), max(p.overwrite)) + p.distractors


def check(study) -> None:
    if max(study.grid.n) > study.probe.vocab:
        raise CapacityError(
            f"mqar writes n distinct keys of a vocabulary of {study.probe.vocab}: n = {max(study.grid.n)} is too many (raise vocab)"
        )


def measure(study, cell, memory, seeds, ns, device: torch.device) -> xr.Dataset:
    var, p = memory, study.probe
    parts = []
    for ow in p.overwrite:
        ds = mqar.mqar(
            var,
            vocab=p.vocab,
            pairs=sorted(set(ns)),
            d=cell.d,
            dv=cell.dv,
            keys=cell.keys.name,
            key_params=cell.keys.kwargs,
            overwrite=ow,
            distractors=p.distractors,
            batch=len(seeds),
            seed=seeds,
            device=device,
        )  # over (pairs, batch)
        parts.append({m: ds[m].sel(pairs=ns).transpose("pairs", "batch").values.astype(np.float64) for m in _NAMES})
    data = {m: (("n", "overwrite", "seed"), np.stack([part[m] for part in parts], axis=1)) for m in _NAMES}
    return xr.Dataset(data, coords={"n": ns, "overwrite": list(p.overwrite), "seed": list(seeds)})


def theory_vars(study, n, d, dv) -> dict:
    attrs = {
        "long_name": "predicted MQAR accuracy",
        "units": "fraction",
        "description": "T10 for random keys and values, decoded over the whole value vocabulary (additive memory, no overwrites)",
    }
    return {"accuracy_pred": (mqar.predicted_accuracy(n, d, dv, study.probe.vocab), attrs)}


def attrs(study) -> dict:
    return {"vocab": int(study.probe.vocab), "distractors": int(study.probe.distractors)}
