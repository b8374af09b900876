"""The needle kind: ``capacity.needle`` at every n (tokens per sequence), haystack and depth.

A cell's Dataset holds the needle metrics over ``n``, ``haystack``, ``depth`` and ``seed`` (``recall`` also over
``candidates``); each seed is one sequence per (n, haystack, depth), the same sequences for every variant.
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr

from capacity import needle
from capacity.errors import CapacityError

__all__ = [
    "coords",
    "extra_coords",
    "variables",
    "var_dims",
    "writes",
    "measure",
    "theory_vars",
    "attrs",
    "check",
    "PER_POINT",
]

PER_POINT = False  # capacity.needle measures every n and depth of a pass together: a cell is measured whole
FIELDS = ("haystack", "depth", "needles", "candidates")  # probe fields of this kind alone
KEY_AXIS = False  # haystacks, not key families


def grid_rules(study) -> None:
    g = study.grid
    if g.curve != "n" or g.feature or len(g.dtype) > 1 or [k.label for k in g.keys] != ["gaussian"]:
        raise CapacityError(
            "a needle study takes n (tokens per sequence, not load), no feature maps, one dtype and the default keys (its haystacks are the probe's haystack list)"
        )


_ATTRS = ("long_name", "units", "description")


def coords(study) -> dict:
    p = study.probe
    return {"haystack": list(p.haystack), "depth": list(p.depth), "seed": list(study.grid.seed)}


def extra_coords(study) -> dict:
    return {"candidates": list(study.probe.candidates)}


def variables(study) -> dict[str, dict]:
    return {m: dict(zip(_ATTRS, meta)) for m, meta in needle.METRICS.items()}


def var_dims(study) -> dict[str, tuple]:
    return {"recall": ("haystack", "depth", "seed", "candidates")}


def writes(study, ns) -> int:
    """Tokens one pass writes per seed: every depth is its own sequence of the longest n."""
    return max(ns) * len(study.probe.depth)


def check(study) -> None:
    p, g = study.probe, study.grid
    if p.needles > min(g.n):
        raise CapacityError(f"needles = {p.needles} do not fit in a haystack of n = {min(g.n)} tokens")
    if "text" in p.haystack:
        for d in g.d:
            if d > 384:
                raise CapacityError(f"the text haystack has keys of 384 numbers; d must be <= 384, got {d}")
        from capacity import pretrained

        pretrained.model_dir()  # the model is installed (one line saying how otherwise)


def measure(study, cell, memory, seeds, ns, device: torch.device) -> xr.Dataset:
    var, p = memory, study.probe
    parts = []
    for kind in p.haystack:
        nums = needle.measure(
            var,
            kind=kind,
            lengths=ns,
            depths=list(p.depth),
            d=cell.d,
            dv=cell.dv,
            needles=p.needles,
            candidates=list(p.candidates),
            seeds=seeds,
            device=device,
        )  # [n, depth, seed] (recall: [n, depth, seed, candidates])
        parts.append(nums)
    data = {}
    for m in needle.METRICS:
        x = np.stack([part[m] for part in parts], axis=1).astype(np.float64)  # [n, haystack, depth, seed(, C)]
        data[m] = (("n", *var_dims(study).get(m, ("haystack", "depth", "seed"))), x)
    return xr.Dataset(data, coords={"n": list(ns), **coords(study), "seed": list(seeds), **extra_coords(study)})


def theory_vars(study, n, d, dv) -> dict:
    return {}


def attrs(study) -> dict:
    return {"needles": int(study.probe.needles), "repeat_period": 24, "text_layer": 2, "text_held_out": needle.HELD_OUT}
