"""The needle task: ``lacapacity.tasks.needle.probe`` at every n (tokens per sequence), haystack and depth.

A cell's Dataset holds the needle metrics over ``n``, ``haystack``, ``depth`` and ``seed`` (``recall`` also over
``candidates``); each seed is one sequence per (n, haystack, depth), the same sequences for every variant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from lacapacity.base import _validate, labels
from lacapacity.errors import CapacityError
from lacapacity.tasks.needle import probe as needle
from lacapacity.tasks.protocol import Config, Measured, Pass, Schema, StudyView, Task, Variable

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr
    from numpy.typing import NDArray


_ATTRS = ("long_name", "units", "description")


def _items(x: str | float | Iterable[Any]) -> Sequence[Any]:  # a list from a word, else a tuple
    return labels.split(x) if isinstance(x, str) else ((x,) if isinstance(x, (int, float)) else tuple(x))


@dataclass(frozen=True)
class Needle(Config):
    """How the needle task measures each point: ``haystack`` (an axis: random, repeat, text), ``depth`` (an axis of
    needle depths in [0, 1]), ``needles`` (pairs written together at the depth) and ``candidates`` (an axis of how
    many values an answer is decoded among)."""

    kind: ClassVar[str] = "needle"
    haystack: tuple[str, ...] = ("random",)
    depth: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    needles: int = 1
    candidates: tuple[float, ...] = (1024.0,)

    def __post_init__(self) -> None:
        put: Callable[[str, object], None] = lambda name, value: object.__setattr__(self, name, value)
        scalar: Callable[[object], object] = lambda x: labels.scalar(x) if isinstance(x, str) else x
        put(
            "haystack",
            tuple(_validate.choice("haystack", str(h).strip(), needle.HAYSTACKS) for h in _items(self.haystack)),
        )
        put(
            "depth", tuple(float(x) for x in needle._floats("depth", [scalar(x) for x in _items(self.depth)], 0.0, 1.0))
        )
        put("candidates", tuple(needle._candidates([scalar(x) for x in _items(self.candidates)])))
        put("needles", _validate.positive_int("needles", self.needles))
        if not self.haystack or len(set(self.haystack)) != len(self.haystack):
            raise CapacityError(
                f"haystack must list distinct haystacks of {', '.join(needle.HAYSTACKS)}, got {self.haystack!r}"
            )


class NeedleTask(Task[Needle]):
    """Needles among n haystack tokens, read after them: recall against n and depth."""

    name = "needle"
    description = (
        "needles among n haystack tokens, read after them (lacapacity.tasks.needle.probe): recall against n and depth"
    )
    Config = Needle
    per_point = False  # the needle probe measures every n and depth of a pass together: a cell is measured whole
    key_axis = False  # haystacks, not key families
    grid_axes = ()

    def check_grid(self, study: StudyView[Needle]) -> None:
        g = study.grid
        if g.curve != "n" or g.feature or len(g.dtype) > 1 or [k.label for k in g.keys] != ["gaussian"]:
            raise CapacityError(
                "a needle study takes n (tokens per sequence, not load), no feature maps, one dtype and the default keys (its haystacks are the probe's haystack list)"
            )

    def check(self, study: StudyView[Needle]) -> None:
        p, g = study.task, study.grid
        if p.needles > min(g.n):
            raise CapacityError(f"needles = {p.needles} do not fit in a haystack of n = {min(g.n)} tokens")
        if "text" in p.haystack:
            for d in g.d:
                if d > 384:
                    raise CapacityError(f"the text haystack has keys of 384 numbers; d must be <= 384, got {d}")
            from lacapacity.inputs import pretrained

            pretrained.model_dir()  # the model is installed (one line saying how otherwise)

    def schema(self, study: StudyView[Needle]) -> Schema:
        p = study.task
        dims: dict[str, list[Any]] = {
            "haystack": list(p.haystack),
            "depth": list(p.depth),
            "seed": list(study.grid.seed),
        }
        own = {"recall": ("haystack", "depth", "seed", "candidates")}
        variables = {
            m: Variable(own.get(m, tuple(dims)), dict(zip(_ATTRS, meta))) for m, meta in needle.METRICS.items()
        }
        return Schema(dims, variables, extra={"candidates": list(p.candidates)})

    def writes(self, study: StudyView[Needle], ns: list[int]) -> int:
        """Tokens one pass writes per seed: every depth is its own sequence of the longest n."""
        return max(ns) * len(study.task.depth)

    def measure(self, run: Pass[Needle]) -> Measured:
        p, cell, schema, parts = run.study.task, run.cell, self.schema(run.study), []
        for kind in p.haystack:
            nums = needle.measure(
                run.memory,
                kind=kind,
                lengths=list(run.ns),
                depths=list(p.depth),
                d=cell.d,
                dv=cell.dv,
                needles=p.needles,
                candidates=list(p.candidates),
                seeds=list(run.seeds),
                device=run.device,
            )  # [n, depth, seed] (recall: [n, depth, seed, candidates])
            parts.append(nums)
        # each [n, haystack, depth, seed(, candidates)]
        return Measured(
            {m: np.stack([part[m] for part in parts], axis=1).astype(v.dtype) for m, v in schema.variables.items()}
        )

    def theory(
        self, study: StudyView[Needle], n: NDArray[np.int64], d: NDArray[np.int64], dv: NDArray[np.int64]
    ) -> dict[str, tuple[float | NDArray[Any], dict[str, Any]]]:
        return {}  # no closed form for a needle among a haystack's interference (docs/needle.md)

    def attrs(self, study: StudyView[Needle]) -> dict[str, Any]:
        return {
            "needles": int(study.task.needles),
            "repeat_period": 24,
            "text_layer": 2,
            "text_held_out": needle.HELD_OUT,
        }

    def figures(self, ds: xr.Dataset) -> list[str]:
        return ["needle", "needle-depth"]
