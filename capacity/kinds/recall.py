"""The recall kind: write the pairs of every seed in one batched pass, read every stored key back at each n.

A cell's Dataset holds the probe's means (``capacity.probe.METRICS``) over ``n`` and ``seed``, with ``key_stats``
the statistics of ``capacity.keys.describe``, and with ``age_bins`` each metric per age bin (``<metric>_age`` over
``n``, ``seed`` and ``age``; ``pairs_age`` over ``n`` and ``age``); the assembled study adds the closed forms T5-T10.
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr

from capacity import heads, precision, probe, theory, values
from capacity import keys as keys_mod
from capacity.errors import CapacityError
from capacity.kinds._shared import drawn

__all__ = [
    "coords",
    "extra_coords",
    "coord_vars",
    "variables",
    "var_dims",
    "age_edges",
    "writes",
    "measure",
    "theory_vars",
    "PER_POINT",
    "TORCH_DTYPES",
]

PER_POINT = True
# fractions of counts, never NaN when measured: a stored NaN is not reused (sweep.store)
FINITE = ("recall", "recall_at")
FIELDS = ("key_stats", "age_bins", "top_k", "queries")  # probe fields of this kind alone
GRID_AXES = ("state_dtype", "rounding", "heads", "value_heads")  # grid axes of this kind alone
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


def grid_rules(study) -> None:
    """``queries`` reads a sample: it does not combine with what describes or bins every stored pair."""
    p = study.probe
    if p.queries and (p.key_stats or p.age_bins or p.top_k):
        raise CapacityError(
            "queries reads a sample of the stored pairs; it does not combine with key_stats, age_bins or top_k"
        )


def coords(study) -> dict:
    """A cell's dimensions besides n."""
    return {"seed": list(study.grid.seed)}


def age_edges(study) -> list[int]:
    """The age bins of an ``age_bins`` study: geometric (``probe.age_edges``) up to its largest n."""
    return probe.age_edges(max(max(study.grid.ns(d)) for d in study.grid.d))


def extra_coords(study) -> dict:
    """Dimensions only some variables have: ``age`` (the first age of each bin) with ``age_bins``, ``k`` (the
    candidate list lengths of recall@k) with ``top_k``."""
    out = {"age": age_edges(study)[:-1]} if study.probe.age_bins else {}
    return {**out, "k": list(study.probe.top_k)} if study.probe.top_k else out


_LAYOUT = {
    "state_dtype": "dtype the state is stored in (capacity.precision; float32: as computed)",
    "rounding": "when the stored state is rounded: step, final or chunk=C (+stochastic)",
    "heads": "key heads H, each of d/H dimensions normalised on its own (capacity.heads)",
    "value_heads": "value heads HV, each of dv/HV dimensions",
}


def coord_vars(study) -> dict:
    """Coordinates the assembled Dataset adds: how the state is stored and laid out (a dimension where the grid
    lists several values, else a scalar), and with ``age_bins`` each age bin's end."""
    g, out = study.grid, {}
    for axis, desc in _LAYOUT.items():
        values = getattr(g, axis)
        if axis == "value_heads" and not values:  # as many as key heads
            axis_of, values, desc = ("heads",), g.heads, desc + " (= heads)"
        else:
            axis_of = (axis,)
        out[axis] = (
            (axis_of, list(values), {"description": desc})
            if len(values) > 1
            else ((), values[0], {"description": desc})
        )
    if study.probe.age_bins:
        edges = age_edges(study)
        out["age"] = ("age", edges[:-1], {"long_name": "pair age", "units": "writes"})
        out["age_end"] = ("age", edges[1:], {"long_name": "end of the age bin", "units": "writes"})
    return out


def variables(study) -> dict[str, dict]:
    """The variables a cell's Dataset holds, with their attrs."""
    metrics = {m: meta for m, meta in probe.METRICS.items() if m != "recall" or study.probe.decode}
    names = dict(metrics)
    if study.probe.key_stats:
        names.update(_STATS)
    if study.probe.top_k:
        names["recall_at"] = probe.RECALL_AT
    if study.probe.queries:  # standard errors of the sampled means
        names.update({f"{m}_se": probe.se_meta(m, study.probe.queries) for m in metrics})
    if study.probe.age_bins:
        names.update({probe.PER_AGE[m]: probe.age_meta(m) for m in metrics})
        names["pairs_age"] = probe.PAIRS_AGE
    return {m: dict(zip(_ATTRS, meta)) for m, meta in names.items()}


def var_dims(study) -> dict[str, tuple]:
    """Each variable's dimensions besides the curve axis (those not listed: ``coords(study)``'s)."""
    out = {"recall_at": ("seed", "k")} if study.probe.top_k else {}
    if study.probe.age_bins:
        out.update({probe.PER_AGE[m]: ("seed", "age") for m in probe.METRICS if m != "recall" or study.probe.decode})
        out["pairs_age"] = ("age",)
    return out


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
    # the state as stored (float32: the memory itself), then the head layout (one head: the memory itself)
    memory = precision.stored(memory, cell.state_dtype, cell.rounding, seed=list(seeds))
    memory = heads.split(memory, cell.heads, cell.value_heads)
    draw = dict(batch=len(seeds), seed=seeds, device=device)
    width = cell.dv if study.probe.values == "orthonormal" else max(ns)
    V = drawn(values.make, study.probe.values, width, cell.dv, **draw).to(dtype)  # [S, >= n_max, dv]
    make_keys = lambda n: drawn(keys_mod.make, cell.keys.name, n, cell.d, **draw, **cell.keys.kwargs).to(dtype)
    passes = [sorted(set(ns))] if fam.iid_rows else [[n] for n in sorted(set(ns))]  # else a fresh tight frame per n
    edges = age_edges(study) if study.probe.age_bins else None
    rows, attrs = {}, {}
    for at in passes:
        K = make_keys(max(at))
        cv = probe.measure(
            memory,
            K,
            V[:, : max(at)],
            checkpoints=at,
            decode=study.probe.decode,
            age_bins=edges,
            top_k=study.probe.top_k or None,
            queries=study.probe.queries or None,
        )
        for i, n in enumerate(cv.checkpoints):
            rows[n] = {m: x[i] for m, x in cv.metrics.items()}  # [S] each
            rows[n].update({f"{m}_se": x[i] for m, x in cv.se.items()})
            for m, x in cv.per_age.items():
                rows[n][probe.PER_AGE[m]] = x[i]  # [S, A]
            if edges is not None:
                age = np.arange(n)
                rows[n]["pairs_age"] = np.array([((age >= a) & (age < b)).sum() for a, b in zip(edges, edges[1:])])
            if study.probe.key_stats:
                stats = keys_mod.describe(K[:, :n].float())
                rows[n].update({s: stats[s].values for s in _STATS})
        if cv.feature_dim is not None:
            attrs["feature_dim"] = int(cv.feature_dim)
    order, dims = sorted(set(ns)), var_dims(study)
    data = {
        m: (("n", *dims.get(m, ("seed",))), np.stack([rows[n][m] for n in order]).astype(np.float64))
        for m in variables(study)
    }
    coords = {"n": order, "seed": list(seeds), **extra_coords(study)}
    return xr.Dataset(data, coords=coords, attrs=attrs)


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
