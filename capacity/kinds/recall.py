"""The recall kind: write the pairs of every seed in one batched pass, read every stored key back at each n.

A cell's Dataset holds the probe's means (``capacity.probe.METRICS``) over ``n`` and ``seed``, and with
``key_stats`` the statistics of ``capacity.keys.describe``; the assembled study adds the closed forms T5-T10.
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr

from capacity import keys as keys_mod
from capacity import probe, theory, values

__all__ = ["coords", "variables", "writes", "measure", "theory_vars", "PER_POINT", "TORCH_DTYPES"]

PER_POINT = True
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
    """A cell's dimensions besides n."""
    return {"seed": list(study.grid.seed)}


def variables(study) -> dict[str, dict]:
    """The variables a cell's Dataset holds, with their attrs."""
    names = {m: meta for m, meta in probe.METRICS.items() if m != "recall" or study.probe.decode}
    if study.probe.key_stats:
        names.update(_STATS)
    return {m: dict(zip(_ATTRS, meta)) for m, meta in names.items()}


def writes(study, ns) -> int:
    """Pairs one pass writes."""
    return max(ns)


def measure(study, cell, memory, seeds, ns, device: torch.device) -> xr.Dataset:
    """Draw keys and values for every seed at once, write them, read back at every n.

    Every point's numbers depend on its cell, seed and n alone: families whose prefixes are draws are drawn once at
    the largest n (the others at each n), orthonormal values always as dv rows (their prefixes are then the same
    for every n), and the probe writes in fixed blocks (``probe.BLOCK``).
    """
    fam, dtype = keys_mod.family(cell.keys.name), TORCH_DTYPES[cell.dtype]
    draw = dict(batch=len(seeds), seed=seeds, device=device)
    width = cell.dv if study.probe.values == "orthonormal" else max(ns)
    V = values.make(study.probe.values, width, cell.dv, **draw).to(dtype)  # [S, >= n_max, dv]
    make_keys = lambda n: keys_mod.make(cell.keys.name, n, cell.d, **draw, **cell.keys.kwargs).to(dtype)  # [S, n, d]
    passes = [sorted(set(ns))] if fam.iid_rows else [[n] for n in sorted(set(ns))]  # else a fresh tight frame per n
    rows, attrs = {}, {}
    for at in passes:
        K = make_keys(max(at))
        cv = probe.measure(memory, K, V[:, : max(at)], checkpoints=at, decode=study.probe.decode)
        for i, n in enumerate(cv.checkpoints):
            rows[n] = {m: x[i] for m, x in cv.metrics.items()}  # [S] each
            if study.probe.key_stats:
                stats = keys_mod.describe(K[:, :n].float())
                rows[n].update({s: stats[s].values for s in _STATS})
        if cv.feature_dim is not None:
            attrs["feature_dim"] = int(cv.feature_dim)
    order = sorted(set(ns))
    data = {m: (("n", "seed"), np.stack([rows[n][m] for n in order]).astype(np.float64)) for m in variables(study)}
    return xr.Dataset(data, coords={"n": order, "seed": list(seeds)}, attrs=attrs)


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
