"""The bill task (T13): what a memory keeps and spends per decoded token after n writes, measured.

A cell's Dataset holds ``state_numel`` (numbers held per batch item) and ``decode_seconds`` (median time of one
decode step: write one pair, read one query) over ``n``; the assembled study adds T13's counts.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from lacapacity import theory
from lacapacity.base import _validate
from lacapacity.errors import CapacityError, user_code
from lacapacity.inputs import keys as keys_mod
from lacapacity.inputs import values
from lacapacity.tasks.protocol import Config, Measured, Pass, Schema, StudyView, Task, Variable
from lacapacity.tasks.recall.task import TORCH_DTYPES, check_values, check_values_fit
from lacapacity.variants import declares
from lacapacity.variants._guard import guard

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr
    from numpy.typing import NDArray


@dataclass(frozen=True)
class Bill(Config):
    """How the bill task measures each point: ``values`` (the value family) and ``repeats`` (timed decode steps)."""

    kind: ClassVar[str] = "bill"
    values: str = "gaussian"
    repeats: int = 20

    def __post_init__(self) -> None:
        check_values(self.values)
        object.__setattr__(self, "repeats", _validate.positive_int("repeats", self.repeats))


_THEORY = {
    "softmax_cache": "T13: n (d + dv) numbers cached by softmax attention",
    "linear_state": "T13: d dv numbers in the linear-attention state",
    "softmax_decode_flops": "T13: 2 n (d + dv) flops per decoded token for softmax attention",
    "linear_decode_flops": "T13: 4 d dv flops per decoded token for linear attention",
}
_VARIABLES = {
    "state_numel": Variable(
        ("seed",),
        {
            "long_name": "numbers kept per head",
            "units": "numbers",
            "description": "measured: elements of every tensor in the state after n writes, per batch item",
        },
        dtype="int64",
        finite=True,
    ),
    "decode_seconds": Variable(
        ("seed",),
        {
            "long_name": "decode time per token",
            "units": "s",
            "description": "measured: median time of one decode step (write one pair, read one query) after n writes",
        },
        finite=True,
    ),
}


def _numel(state: object, skip: tuple[str, ...] = ()) -> int:
    """Numbers a state holds: tensors counted, containers walked (the dataclass fields named in ``skip``, the
    memory's ``Declares.bookkeeping`` such as a token counter, not counted)."""
    if isinstance(state, torch.Tensor):
        return state.numel()
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return sum(_numel(getattr(state, f.name), skip) for f in dataclasses.fields(state) if f.name not in skip)
    if isinstance(state, (list, tuple, dict)) or hasattr(state, "__dict__"):
        items = (
            state.values()
            if isinstance(state, dict)
            else state
            if isinstance(state, (list, tuple))
            else vars(state).values()
        )
        return sum(_numel(v, skip) for v in items)
    return 0


class BillTask(Task[Bill]):
    """Measured state or cache size and per-token decode time after n writes."""

    name = "bill"
    description = "measured state/cache size and per-token decode time after n writes"
    Config = Bill
    per_point = False  # timings: a cell is measured and reused whole
    key_axis = False  # one key family: a scalar coordinate
    grid_axes = ()
    closed_forms = dict.fromkeys(_THEORY, theory.bill)  # one function of (n, d, dv) gives the four counts, by name

    def check_grid(self, study: StudyView[Bill]) -> None:
        g = study.grid
        if g.curve != "n" or len(g.keys) != 1 or len(g.seed) != 1:
            raise CapacityError("a bill study takes n (pair counts, not load), one key family and one seed")

    def check(self, study: StudyView[Bill]) -> None:
        check_values_fit(study)

    def schema(self, study: StudyView[Bill]) -> Schema:
        scalars = {"key_family": study.grid.keys[0].label, "seed": study.grid.seed[0]}
        return Schema({"seed": list(study.grid.seed)}, dict(_VARIABLES), scalars=scalars)

    def writes(self, study: StudyView[Bill], ns: list[int]) -> int:
        return max(ns) + study.task.repeats

    def measure(self, run: Pass[Bill]) -> Measured:
        """After each n writes: the numbers the state holds, and the median time of one decode step on a copy of it."""
        study, cell, device = run.study, run.cell, run.device
        reps, seed = study.task.repeats, run.seeds[0]
        order, dtype, var = sorted(set(run.ns)), TORCH_DTYPES[cell.dtype], run.memory
        total = order[-1] + reps
        K = keys_mod.make(cell.keys.name, total, cell.d, seed=seed, device=device, **cell.keys.kwargs).to(
            dtype
        )  # [1, T, d]
        V = values.make(study.task.values, total, cell.dv, seed=seed, device=device).to(dtype)  # [1, T, dv]
        sync: Callable[[], None] = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        mem = guard(var)  # the timed steps call the memory itself, inside one user_code block (no overhead per step)
        state, numel, seconds, written = mem.init_state(1, cell.d, cell.dv, device=device), {}, {}, 0
        for n in order:
            state, written = mem.write(state, K[:, written:n], V[:, written:n]), n
            grown = declares.numel(mem, state)  # None for a fixed state: its tensors are counted
            numel[n] = grown if grown is not None else _numel(state, declares.declared(mem).bookkeeping)
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
        return Measured(
            {
                "state_numel": np.array([[numel[n]] for n in order], dtype=np.int64),  # [n, seed]
                "decode_seconds": np.array([[seconds[n]] for n in order], dtype=np.float64),
            }
        )

    def theory(
        self, study: StudyView[Bill], n: NDArray[np.int64], d: NDArray[np.int64], dv: NDArray[np.int64]
    ) -> dict[str, tuple[float | NDArray[Any], dict[str, Any]]]:
        forms = self.closed_forms  # each count by name from its function's counts
        return {name: (forms[name](n, d, dv)[name], {"description": desc}) for name, desc in _THEORY.items()}

    def attrs(self, study: StudyView[Bill]) -> dict[str, Any]:
        """``break_even_n``: T13's n at which softmax's cache equals the linear state, at each d."""
        g = study.grid
        n = theory.break_even_n(np.asarray(g.d), np.asarray(g.dv[0]) if g.dv else None, measure="cache")
        return {"break_even_n": np.atleast_1d(n).astype(np.float64)}

    def figures(self, ds: xr.Dataset) -> list[str]:
        return ["bill"]
