"""The bill kind (T13): what a memory keeps and spends per decoded token after n writes, measured.

A cell's Dataset holds ``state_numel`` (numbers held per batch item) and ``decode_seconds`` (median time of one
decode step: write one pair, read one query) over ``n``; the assembled study adds T13's counts.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
import xarray as xr

from capacity import _validate, theory, values
from capacity import keys as keys_mod
from capacity.errors import CapacityError, user_code
from capacity.kinds.recall import TORCH_DTYPES
from capacity.variants._guard import guard

__all__ = ["coords", "variables", "writes", "measure", "theory_vars", "attrs", "PER_POINT"]

PER_POINT = False  # timings: a cell is measured and reused whole
DTYPES = {"state_numel": "int64"}  # stored values: float64 but these (sweep.store.declared)
FINITE = ("state_numel", "decode_seconds")  # never NaN or infinite when measured: a stored one is not reused
KEY_AXIS = False  # one key family: a scalar coordinate (scalar_coords)


def scalar_coords(study) -> dict:
    """The assembled Dataset's scalar coordinates: the study's one key family and one seed."""
    return {"key_family": study.grid.keys[0].label, "seed": study.grid.seed[0]}


def grid_rules(study) -> None:
    g = study.grid
    if g.curve != "n" or len(g.keys) != 1 or len(g.seed) != 1:
        raise CapacityError("a bill study takes n (pair counts, not load), one key family and one seed")


_THEORY = {
    "softmax_cache": "T13: n (d + dv) numbers cached by softmax attention",
    "linear_state": "T13: d dv numbers in the linear-attention state",
    "softmax_decode_flops": "T13: 2 n (d + dv) flops per decoded token for softmax attention",
    "linear_decode_flops": "T13: 4 d dv flops per decoded token for linear attention",
}


def coords(study) -> dict:
    """A cell's dimensions besides ``n``: its one seed."""
    return {"seed": list(study.grid.seed)}


def variables(study) -> dict[str, dict]:
    return {
        "state_numel": {
            "long_name": "numbers kept per head",
            "units": "numbers",
            "description": "measured: elements of every tensor in the state after n writes, per batch item",
        },
        "decode_seconds": {
            "long_name": "decode time per token",
            "units": "s",
            "description": "measured: median time of one decode step (write one pair, read one query) after n writes",
        },
    }


def writes(study, ns) -> int:
    return max(ns) + study.probe.repeats


def _numel(state) -> int:
    """Numbers a state holds: tensors counted, containers walked."""
    if isinstance(state, torch.Tensor):
        return state.numel()
    if isinstance(state, (list, tuple, dict)) or hasattr(state, "__dict__"):
        items = (
            state.values()
            if isinstance(state, dict)
            else state
            if isinstance(state, (list, tuple))
            else vars(state).values()
        )
        return sum(_numel(v) for v in items)
    return 0


def measure(study, cell, memory, seeds, ns, device: torch.device) -> xr.Dataset:
    """After each n writes: the numbers the state holds, and the median time of one decode step on a copy of it."""
    reps, seed = study.probe.repeats, seeds[0]
    order, dtype, var = sorted(set(ns)), TORCH_DTYPES[cell.dtype], memory
    total = order[-1] + reps
    K = keys_mod.make(cell.keys.name, total, cell.d, seed=seed, device=device, **cell.keys.kwargs).to(
        dtype
    )  # [1, T, d]
    V = values.make(study.probe.values, total, cell.dv, seed=seed, device=device).to(dtype)  # [1, T, dv]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    mem = guard(var)  # the timed steps call the memory itself, inside one user_code block (no overhead per step)
    state, numel, seconds, written = mem.init_state(1, cell.d, cell.dv, device=device), {}, {}, 0
    for n in order:
        state, written = mem.write(state, K[:, written:n], V[:, written:n]), n
        numel[n] = _numel(state)
        trial = state.clone() if isinstance(state, torch.Tensor) else copy.deepcopy(state)
        times = []
        with user_code(mem.who, "in a timed write() or read()", passthrough=_validate.is_alloc_failure):
            for r in range(reps + 2):  # two warm-up steps
                i, q = n + r % reps, r % n
                sync()
                t0 = time.perf_counter()
                trial = var.write(trial, K[:, i : i + 1], V[:, i : i + 1])
                var.read(trial, K[:, q : q + 1])
                sync()
                times.append(time.perf_counter() - t0)
        seconds[n] = float(np.median(times[2:]))
    data = {
        "state_numel": (("n", "seed"), np.array([[numel[n]] for n in order], dtype=np.int64)),
        "decode_seconds": (("n", "seed"), np.array([[seconds[n]] for n in order], dtype=np.float64)),
    }
    return xr.Dataset(data, coords={"n": order, "seed": [seed]})


def theory_vars(study, n, d, dv) -> dict:
    b = theory.bill(n, d, dv)
    return {name: (b[name], {"description": desc}) for name, desc in _THEORY.items()}


def attrs(study) -> dict:
    """``break_even_n``: T13's n at which softmax's cache equals the linear state, at each d."""
    g = study.grid
    n = theory.break_even_n(np.asarray(g.d), np.asarray(g.dv[0]) if g.dv else None, measure="cache")
    return {"break_even_n": np.atleast_1d(n).astype(np.float64)}
