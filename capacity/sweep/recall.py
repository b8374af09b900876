"""The recall kind: write the pairs of every seed in one batched pass, read every stored key back at each n.

A group's Dataset holds the probe's means (``capacity.probe.METRICS``) over the curve axis and ``seed``, and with
``key_stats`` the statistics of ``capacity.keys.describe``; the assembled study adds the closed forms T5-T10.
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr

from capacity import heads as heads_mod
from capacity import keys as keys_mod
from capacity import precision, probe, theory, values
from capacity.sweep.config import build_variant

__all__ = ["coords", "variables", "writes", "measure", "theory_vars", "ONE_PASS", "TORCH_DTYPES"]

ONE_PASS = False  # key families whose prefixes are not draws of the family need a write pass per n
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_ATTRS = ("long_name", "units", "description")
_STATS = {
    "mean_sq_coherence": (
        "mean squared coherence",
        "1",
        "mean over pairs i != j of (k_i . k_j)^2 (1/d for random keys, T7)",
    ),
    "max_coherence": ("max coherence", "1", "max over pairs i != j of |k_i . k_j| (never below the T6 Welch bound)"),
    "frame_potential_ratio": ("frame potential / (n^2/d)", "1", "||K^T K||_F^2 / (n^2/d); 1 iff a tight frame (T5)"),
    "effective_rank": ("effective rank", "dimensions", "participation ratio (tr K^T K)^2 / ||K^T K||_F^2"),
}
_THEORY = {  # name: (function of n and d, units)
    "frame_bound": (theory.frame_bound, "value units^2"),
    "welch_bound": (theory.welch_bound, "1"),
    "random_keys_error": (theory.random_keys_error, "value units^2"),
    "rank_bound": (theory.rank_bound, "value units^2"),
    "optimal_gain_error": (theory.optimal_gain_error, "value units^2"),
}


def coords(study) -> dict:
    """A group's dimensions besides the curve axis."""
    return {"seed": list(study.grid.seed)}


def variables(study) -> dict[str, dict]:
    """The variables a group's Dataset holds, with their attrs."""
    names = {m: meta for m, meta in probe.METRICS.items() if m != "recall" or study.probe.decode}
    if study.probe.queries:  # standard errors of the sampled means
        for m in list(names):
            ln, u, _ = names[m]
            names[f"{m}_se"] = (
                f"standard error of the {ln}",
                u,
                f"standard error of {m} over its sample of {study.probe.queries} queries (0 where every pair was read)",
            )
    if study.probe.key_stats:
        names.update(_STATS)
    return {m: dict(zip(_ATTRS, meta)) for m, meta in names.items()}


def writes(study, ns) -> int:
    """Pairs one pass writes."""
    return max(ns)


def measure(study, group, device: torch.device) -> xr.Dataset:
    """Draw keys and values for every seed at once, write them, read back at every n of the group."""
    fam, seeds, ns = keys_mod.family(group.keys.name), list(study.grid.seed), group.ns(study)
    dtype, var, decode = TORCH_DTYPES[group.dtype], build_variant(group.variant, group.feature), study.probe.decode
    # the state as stored (float32: the memory itself), then the head layout (one head: the memory itself)
    var = precision.stored(var, group.state_dtype, group.rounding, seed=seeds)
    var = heads_mod.split(var, group.heads, group.value_heads)
    queries = study.probe.queries or None
    draw = dict(batch=len(seeds), seed=seeds, device=device)
    V = values.make(study.probe.values, max(ns), group.dv, **draw).to(dtype)  # [S, n_max, dv]; prefixes are draws too
    make_keys = lambda n: keys_mod.make(group.keys.name, n, group.d, **draw, **group.keys.kwargs).to(dtype)  # [S, n, d]
    passes = [sorted(set(ns))] if fam.iid_rows else [[n] for n in sorted(set(ns))]  # else a fresh tight frame per n
    rows, attrs = {}, {}
    for at in passes:
        K = make_keys(max(at))
        cv = probe.measure(var, K, V[:, : max(at)], checkpoints=at, decode=decode, queries=queries)
        for i, n in enumerate(cv.checkpoints):
            rows[n] = {m: x[i] for m, x in cv.metrics.items()}  # [S] each
            rows[n].update({f"{m}_se": x[i] for m, x in cv.se.items()})
            if study.probe.key_stats:
                stats = keys_mod.describe(K[:, :n].float())
                rows[n].update({s: stats[s].values for s in _STATS})
        if cv.feature_dim is not None:
            attrs["feature_dim"] = int(cv.feature_dim)
    data = {
        m: ((study.grid.curve, "seed"), np.stack([rows[n][m] for n in ns]).astype(np.float64)) for m in variables(study)
    }
    return xr.Dataset(data, coords={study.grid.curve: list(group.curve), "seed": seeds}, attrs=attrs)


def theory_vars(study, n, d, dv) -> dict:
    """T5-T9 from n and d, T10 from n, d and dv (arrays that broadcast)."""
    out = {
        name: (fn(n, d), {"units": units, "description": fn.__doc__.split("\n")[0]})
        for name, (fn, units) in _THEORY.items()
    }
    out["argmax_recall_pred"] = (
        theory.argmax_recall(n, d, dv),
        {
            "long_name": "predicted argmax recall",
            "units": "fraction",
            "description": theory.argmax_recall.__doc__.split("\n")[0],
        },
    )
    return out
