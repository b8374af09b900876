"""The recall kind: write the pairs of every seed in one batched pass, read every stored key back at each n.

``measure(study, group, device)`` returns the probe's means over the curve axis and ``seed`` (and the key statistics
of ``capacity.keys.describe`` with ``key_stats``).
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr

from capacity import keys as keys_mod
from capacity import probe, values
from capacity.sweep.config import Study
from capacity.sweep.points import Group, build_variant

__all__ = ["measure", "variables", "STAT_VARS", "DTYPES"]

STAT_VARS = ("mean_sq_coherence", "max_coherence", "frame_potential_ratio", "effective_rank")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def variables(study: Study) -> dict[str, tuple[str, ...]]:
    """The variables a group's Dataset holds, with their dimensions."""
    dims = (study.grid.curve, "seed")
    names = [m for m in probe.METRICS if m != "recall" or study.probe.decode] + (
        list(STAT_VARS) if study.probe.key_stats else []
    )
    return {m: dims for m in names}


def measure(study: Study, group: Group, device: torch.device) -> xr.Dataset:
    grid = study.grid
    fam = keys_mod.family(group.keys.name)
    seeds = list(grid.seed)
    ns = group.ns(study)
    uniq = sorted(set(ns))
    dtype = DTYPES[group.dtype]
    var = build_variant(group.variant, group.feature)
    draw = dict(batch=len(seeds), seed=seeds, device=device)
    V = values.make(study.probe.values, max(uniq), group.dv, **draw).to(dtype)  # [S, n_max, dv]; prefixes are draws too
    by_n: dict[int, dict[str, np.ndarray]] = {}
    feature_dim = None

    def collect(cv: probe.Curves, K: torch.Tensor | None, at: list[int]):
        nonlocal feature_dim
        feature_dim = cv.feature_dim
        where = {c: i for i, c in enumerate(cv.checkpoints)}
        for n in at:
            row = {m: x[where[n]] for m, x in cv.metrics.items()}  # [S] each
            if study.probe.key_stats:
                stats = keys_mod.describe(K[:, :n].float())
                row.update({s: stats[s].values for s in STAT_VARS})
            by_n[n] = row

    if fam.iid_rows:  # one write pass; every n is a checkpoint
        K = keys_mod.make(group.keys.name, max(uniq), group.d, **draw, **group.keys.kwargs).to(dtype)  # [S, n_max, d]
        collect(probe.measure(var, K, V, checkpoints=uniq, decode=study.probe.decode), K, uniq)
    else:  # a fresh draw (and write pass) per n
        for n in uniq:
            K = keys_mod.make(group.keys.name, n, group.d, **draw, **group.keys.kwargs).to(dtype)  # [S, n, d]
            collect(probe.measure(var, K, V[:, :n], checkpoints=[n], decode=study.probe.decode), K, [n])
    names = [m for m in probe.METRICS if m != "recall" or study.probe.decode] + (
        list(STAT_VARS) if study.probe.key_stats else []
    )
    curve = grid.curve
    data = {m: ((curve, "seed"), np.stack([by_n[n][m] for n in ns]).astype(np.float64)) for m in names}
    attrs = {}
    if feature_dim is not None:
        attrs["feature_dim"] = int(feature_dim)
    return xr.Dataset(data, coords={curve: list(group.curve), "seed": seeds}, attrs=attrs)
