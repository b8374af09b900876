"""The bill kind (T13): what a memory keeps and spends per decoded token after n writes, measured.

``measure(study, group, device)`` returns ``state_numel`` (numbers held per batch item) and ``decode_seconds`` (median
time of one decode step: write one pair, read one query) over ``n``.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
import xarray as xr

from capacity import keys as keys_mod
from capacity import values
from capacity.sweep.config import Study
from capacity.sweep.points import Group, build_variant
from capacity.sweep.recall import DTYPES

__all__ = ["measure", "variables"]


def variables(study: Study) -> dict[str, tuple[str, ...]]:
    """The variables a group's Dataset holds, with their dimensions."""
    return {"state_numel": ("n",), "decode_seconds": ("n",)}


def _numel(state) -> int:
    """Numbers a state holds: tensors counted, containers walked."""
    if isinstance(state, torch.Tensor):
        return state.numel()
    if isinstance(state, dict):
        return sum(_numel(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(_numel(v) for v in state)
    if hasattr(state, "__dict__"):
        return sum(_numel(v) for v in vars(state).values())
    return 0


def _clone(state):
    if isinstance(state, torch.Tensor):
        return state.clone()
    return copy.deepcopy(state)


def measure(study: Study, group: Group, device: torch.device) -> xr.Dataset:
    """After each n writes: the numbers the state holds per batch item, and the median time of one decode step.

    A decode step writes one new pair and reads one query (what a decoder does per token); it
    runs on a copy of the state so the next n starts from exactly n writes.
    """
    ns = list(study.grid.n)
    order = sorted(set(ns))
    reps = study.probe.repeats
    dtype = DTYPES[group.dtype]
    seed = study.grid.seed[0]
    var = build_variant(group.variant, group.feature)
    K = keys_mod.make(group.keys.name, order[-1] + reps, group.d, seed=seed, device=device, **group.keys.kwargs).to(
        dtype
    )  # [1, n_max + reps, d]
    V = values.make(study.probe.values, order[-1] + reps, group.dv, seed=seed, device=device).to(dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    state = var.init_state(1, group.d, group.dv, device=device)
    numel, seconds, written = {}, {}, 0
    for n in order:
        state = var.write(state, K[:, written:n], V[:, written:n])
        written = n
        numel[n] = _numel(state)
        trial = _clone(state)
        times = []
        for r in range(reps + 2):  # two warm-up steps
            k, v, q = (
                K[:, n + r % reps : n + r % reps + 1],
                V[:, n + r % reps : n + r % reps + 1],
                K[:, r % n : r % n + 1],
            )
            sync()
            t0 = time.perf_counter()
            trial = var.write(trial, k, v)
            var.read(trial, q)
            sync()
            times.append(time.perf_counter() - t0)
        seconds[n] = float(np.median(times[2:]))
    return xr.Dataset(
        {
            "state_numel": ("n", np.array([numel[n] for n in ns], dtype=np.int64)),
            "decode_seconds": ("n", np.array([seconds[n] for n in ns], dtype=np.float64)),
        },
        coords={"n": ns},
    )
