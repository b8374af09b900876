"""The mqar task: multi-query associative recall (``lacapacity.mqar``) at every n distinct keys and overwrite fraction.

A cell's Dataset holds the MQAR metrics over ``n``, ``overwrite`` and ``seed``; vocabulary, overwrite fractions and
distractors come from the task's settings. The assembled study adds T10's predicted accuracy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from lacapacity import theory
from lacapacity.base import _validate, labels
from lacapacity.errors import CapacityError
from lacapacity.tasks.mqar import probe as mqar
from lacapacity.tasks.protocol import Config, Measured, Pass, Schema, StudyView, Task, Variable

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr
    from numpy.typing import NDArray


_ATTRS = ("long_name", "units", "description")


@dataclass(frozen=True)
class Mqar(Config):
    """How the mqar task measures each point: ``vocab`` (keys and values are drawn from a vocabulary of this many),
    ``overwrite`` (fractions of the keys written again, an axis) and ``distractors`` (tokens written after the
    pairs that are never queried)."""

    kind: ClassVar[str] = "mqar"
    vocab: int = 1024
    overwrite: tuple[float, ...] = (0.0,)
    distractors: int = 0

    def __post_init__(self) -> None:
        put: Callable[[str, object], None] = lambda name, value: object.__setattr__(self, name, value)
        put("vocab", _validate.positive_int("vocab", self.vocab, minimum=2))
        put("distractors", _validate.positive_int("distractors", self.distractors, minimum=0))
        ows = labels.split(self.overwrite) if isinstance(self.overwrite, str) else self.overwrite
        ows = (ows,) if isinstance(ows, (int, float)) else tuple(ows)
        scalar: Callable[[object], object] = lambda x: labels.scalar(x) if isinstance(x, str) else x
        put("overwrite", tuple(_validate.in_range("overwrite", scalar(x), 0.0, 1.0) for x in ows))
        if not self.overwrite or len(set(self.overwrite)) != len(self.overwrite):
            raise CapacityError(f"overwrite must list distinct fractions in [0, 1], got {self.overwrite!r}")


class MqarTask(Task[Mqar]):
    """Multi-query associative recall: n distinct keys of a vocabulary, some overwritten, each queried once."""

    name = "mqar"
    description = "multi-query associative recall (lacapacity.mqar): n distinct keys of a vocabulary, some overwritten"
    Config = Mqar
    per_point = False  # lacapacity.mqar writes each pass its own way: a cell is measured and reused whole
    key_axis = True
    grid_axes = ()
    closed_forms = {"accuracy_pred": theory.vocab_argmax_recall}  # of (n, d, dv, vocab)

    def check_grid(self, study: StudyView[Mqar]) -> None:
        g = study.grid
        if g.curve != "n" or g.feature or len(g.dtype) > 1:
            raise CapacityError(
                "an mqar study takes n (distinct keys written, not load), no feature maps and one dtype"
            )

    def check(self, study: StudyView[Mqar]) -> None:
        if max(study.grid.n) > study.task.vocab:
            raise CapacityError(
                f"mqar writes n distinct keys of a vocabulary of {study.task.vocab}: n = {max(study.grid.n)} is too many (raise vocab)"
            )

    def schema(self, study: StudyView[Mqar]) -> Schema:
        dims: dict[str, list[Any]] = {"overwrite": list(study.task.overwrite), "seed": list(study.grid.seed)}
        variables = {
            m: Variable(tuple(dims), dict(zip(_ATTRS, meta[:3])), finite=m == "accuracy")
            for m, meta in mqar.METRICS.items()
        }  # accuracy: a fraction of counts, never NaN when measured
        return Schema(dims, variables)

    def writes(self, study: StudyView[Mqar], ns: list[int]) -> int:
        """Tokens one pass writes: the pairs, the overwrites of the largest fraction and the distractors."""
        p = study.task
        return max(ns) + mqar._overwrites(max(ns), max(p.overwrite)) + p.distractors

    def measure(self, run: Pass[Mqar]) -> Measured:
        p, order, cell, seeds = run.study.task, sorted(set(run.ns)), run.cell, list(run.seeds)
        shape = (len(order), len(p.overwrite), len(seeds))
        arrays = {m: np.empty(shape, dtype=np.float64) for m in mqar.METRICS}  # the pass's, over (n, overwrite, seed)
        for j, ow in enumerate(p.overwrite):
            out, _ = mqar.measure(
                run.memory,
                vocab=p.vocab,
                pairs=order,
                d=cell.d,
                dv=cell.dv,
                keys=cell.keys.name,
                key_params=cell.keys.kwargs,
                overwrite=ow,
                distractors=p.distractors,
                batch=len(seeds),
                seed=seeds,
                device=run.device,
            )  # each metric over (pairs, seed), pairs increasing: the ns of the pass
            for m in mqar.METRICS:
                arrays[m][:, j] = out[m]
        return Measured(arrays)

    def theory(
        self, study: StudyView[Mqar], n: NDArray[np.int64], d: NDArray[np.int64], dv: NDArray[np.int64]
    ) -> dict[str, tuple[float | NDArray[Any], dict[str, Any]]]:
        attrs = {
            "long_name": "predicted MQAR accuracy",
            "units": "fraction",
            "description": "T10 for random keys and values, decoded over the whole value vocabulary (additive memory, no overwrites)",
        }
        return {"accuracy_pred": (self.closed_forms["accuracy_pred"](n, d, dv, study.task.vocab), attrs)}

    def attrs(self, study: StudyView[Mqar]) -> dict[str, Any]:
        return {"vocab": int(study.task.vocab), "distractors": int(study.task.distractors)}

    def figures(self, ds: xr.Dataset) -> list[str]:
        return ["mqar"]  # this folder's own (figures.py)
