"""The mqar kind: multi-query associative recall (``capacity.mqar``) for every n distinct keys and overwrite fraction.

``measure(study, group, device)`` returns the MQAR metrics over ``n`` (distinct keys written), ``overwrite`` and
``seed``; the vocabulary, overwrite fractions and distractors come from the study's probe settings.
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr

from capacity import mqar
from capacity.sweep.config import Study
from capacity.sweep.points import Group, build_variant

__all__ = ["measure", "variables", "METRICS"]

METRICS = ("accuracy", "mse", "stale", "overwritten_accuracy")


def variables(study: Study) -> dict[str, tuple[str, ...]]:
    """The variables a group's Dataset holds, with their dimensions."""
    return {m: ("n", "overwrite", "seed") for m in METRICS}


def measure(study: Study, group: Group, device: torch.device) -> xr.Dataset:
    var = build_variant(group.variant, None)
    seeds = list(study.grid.seed)
    ns = group.ns(study)
    parts = []
    for ow in study.probe.overwrite:
        ds = mqar.mqar(
            var,
            vocab=study.probe.vocab,
            pairs=sorted(set(ns)),
            d=group.d,
            dv=group.dv,
            keys=group.keys.name,
            key_params=group.keys.kwargs,
            overwrite=ow,
            distractors=study.probe.distractors,
            batch=len(seeds),
            seed=seeds,
            device=device,
        )  # over (pairs, batch)
        parts.append({m: ds[m].sel(pairs=ns).transpose("pairs", "batch").values.astype(np.float64) for m in METRICS})
    data = {m: (("n", "overwrite", "seed"), np.stack([p[m] for p in parts], axis=1)) for m in METRICS}
    return xr.Dataset(data, coords={"n": list(group.curve), "overwrite": list(study.probe.overwrite), "seed": seeds})
