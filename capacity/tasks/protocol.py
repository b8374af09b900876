"""The task protocol: what every kind of measurement (recall, mqar, needle, bill, ...) is, stated once.

A task is one folder ``capacity/tasks/<name>/`` whose ``task.py`` holds a ``Config`` (a frozen dataclass of the
task's own settings, built on ``Config`` below) and a ``Task`` subclass; ``lacapacity.tasks`` finds the folders. The engine
(``lacapacity.sweep``) knows tasks only through the members of ``Task``: every one is declared here, the abstract ones
must be written by each task, and nothing is read through ``getattr`` defaults.

The data a task measures is declared once, by ``Task.schema``: each variable's dimensions, dtype and attrs. The
probe's numbers (``Task.measure``: one ``Measured``, numpy arrays over ``(n, *dims)``, per ``Pass``), the store (which
checks a pass's arrays and a stored cell against the schema), the assembly of the study's Dataset and the figures all
read that declaration.

A config refuses, in one line, a field it does not have: a field of another task names that task
(``Recall(vocab=8)`` -> ``vocab applies to mqar studies only (kind=mqar)``).

>>> from lacapacity.tasks import TASKS
>>> {"recall", "mqar", "needle", "bill", "trained"} <= set(TASKS)  # a folder each, found (lacapacity.tasks)
True
>>> from lacapacity.tasks.mqar.task import Mqar
>>> Mqar(vocab=64).to_json()["vocab"], Mqar().kind
(64, 'mqar')
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar

from lacapacity.errors import CapacityError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch
    import xarray as xr
    from numpy.typing import NDArray

    from lacapacity.base.labels import Spec
    from lacapacity.variants import Variant


class _Checked(type):
    """The metaclass of task configs: unknown fields are refused in one line, naming the task that has them."""

    registry: ClassVar[dict[str, type[Config]]] = {}
    kind: str | None  # set by Config

    # typed Any: type checkers read a config's own __init__ (its dataclass fields), not this
    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if args:
            raise CapacityError(f"{cls.__name__} takes its settings by name, e.g. {cls.__name__}(...=...)")
        if cls.kind is not None:
            own = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # cls is a Config dataclass
            unknown = [k for k in kwargs if k not in own]
            if unknown:
                _refuse(cls.kind, unknown, own)
        return super().__call__(**kwargs)


def _refuse(kind: str, unknown: list[str], own: set[str]) -> None:
    owner = {f.name: k for k, c in _Checked.registry.items() if k != kind for f in dataclasses.fields(c)}
    misplaced = [name for name in unknown if name in owner]
    if misplaced:
        k = owner[misplaced[0]]
        verb = "applies" if len(misplaced) == 1 else "apply"
        raise CapacityError(f"{', '.join(misplaced)} {verb} to {k} studies only (kind={k})")
    raise CapacityError(
        f"unknown {kind} field(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(own)) or 'none'}"
    )


@dataclass(frozen=True)
class Config(metaclass=_Checked):
    """The settings of one task: subclass it as a frozen dataclass with ``kind`` set (``kind: ClassVar[str] = ...``).

    Lists are stored as tuples; ``to_json`` gives ``{"kind": ..., field: value}`` (tuples as lists)."""

    kind: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if kind is not None:
            _Checked.registry[kind] = cls

    def to_json(self) -> dict[str, Any]:
        """The settings as plain data, with ``kind`` naming the task (tuples as lists)."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in dataclasses.fields(self):
            x = getattr(self, f.name)
            out[f.name] = list(x) if isinstance(x, tuple) else x
        return out

    def replace(self, **changes: Any) -> Config:
        """A copy with ``changes`` (checked as a new config is)."""
        return type(self)(**{**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, **changes})

    @classmethod
    def settable(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]


def configs() -> dict[str, type[Config]]:
    """kind -> its Config class, for every task imported so far (``lacapacity.tasks`` imports the built-ins)."""
    return dict(_Checked.registry)


def config_class(kind: str) -> type[Config]:
    """The Config class of task ``kind``."""
    from lacapacity.tasks import get

    return get(kind).Config


@dataclass(frozen=True)
class Variable:
    """One variable of a task's results: its dimensions besides the curve axis (``n`` or ``load``) in order, its
    attrs (``long_name``, ``units``, ``description``), its numpy dtype as stored and assembled, and whether a measured
    value is always ``finite`` (a fraction of counts, a size, a time: a stored NaN or infinity is not reused)."""

    dims: tuple[str, ...]
    attrs: dict[str, Any]
    dtype: str = "float64"
    finite: bool = False


@dataclass(frozen=True)
class Schema:
    """What a study of a task holds, declared once.

    ``dims``: a cell's dimensions besides the curve axis, in order, with their values (``seed`` among them);
    ``extra``: dimensions only some variables have (recall's ``age``, ``k``); ``variables``: name -> ``Variable``;
    ``coords``: coordinates the assembled Dataset adds, name -> ``(dims, values, attrs)``; ``scalars``: dimensions the
    assembled Dataset holds as scalar coordinates (bill's one key family and seed)."""

    # a dimension's values are numbers or labels, each dimension's of one kind
    dims: Mapping[str, Sequence[Any]]
    variables: dict[str, Variable]
    extra: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    coords: Mapping[str, tuple[str | tuple[str, ...], Any, Mapping[str, Any]]] = field(default_factory=dict)
    scalars: dict[str, Any] = field(default_factory=dict)


@dataclass
class Measured:
    """What one pass measured, as numpy arrays: ``values``, variable name -> array over ``("n", *variable.dims)``,
    with n the pass's pair counts in increasing order, seed the pass's seeds in the order given and every other
    dimension the schema's values in order, each array of its declared dtype; ``attrs``, what the cell's file keeps
    beside the points (recall's ``feature_dim``). The engine checks it against the schema, cuts it into points
    without copying and saves them; the study's Dataset is filled from the points."""

    values: dict[str, NDArray[Any]]  # each of its variable's declared dtype
    attrs: dict[str, Any] = field(default_factory=dict)


# What the engine hands a task, as the task reads it: lacapacity.sweep's Grid and Study are these views (the engine is
# a layer above the tasks, so the protocol names what it needs instead of importing them); a cell and a pass are
# plain values, defined here (``Cell``, ``Pass``) and built by the engine.


class GridView(Protocol):
    """A study's grid (``lacapacity.sweep.config.Grid``): every axis's values, read; ``curve``, the axis one write pass
    covers; ``ns(d)``, the pair counts along it at key dimension ``d``."""

    @property
    def variant(self) -> tuple[Spec, ...]: ...
    @property
    def keys(self) -> tuple[Spec, ...]: ...
    @property
    def feature(self) -> tuple[Spec, ...]: ...
    @property
    def d(self) -> tuple[int, ...]: ...
    @property
    def load(self) -> tuple[float, ...]: ...
    @property
    def n(self) -> tuple[int, ...]: ...
    @property
    def seed(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> tuple[str, ...]: ...
    @property
    def dv(self) -> tuple[int, ...]: ...
    @property
    def state_dtype(self) -> tuple[str, ...]: ...
    @property
    def rounding(self) -> tuple[str, ...]: ...
    @property
    def heads(self) -> tuple[int, ...]: ...
    @property
    def value_heads(self) -> tuple[int, ...]: ...
    @property
    def curve(self) -> Literal["load", "n"]: ...
    def ns(self, d: int) -> list[int]: ...


C = TypeVar("C", bound="Config")
C_co = TypeVar("C_co", bound="Config", covariant=True)


class StudyView(Protocol[C_co]):
    """A study (``lacapacity.sweep.config.Study``) as a task reads it: its name, grid and task settings (``C_co``,
    the task's ``Config``)."""

    @property
    def name(self) -> str: ...
    @property
    def grid(self) -> GridView: ...
    @property
    def task(self) -> C_co: ...


@dataclass(frozen=True)
class Cell:
    """One cell of a study: one value of every cell axis (``lacapacity.sweep.config.CELL_AXES``, in this order).

    ``variant``, ``keys``: the memory and key family, as labelled specs; ``feature``: the feature map handed to the
    memory (None: the grid has no feature axis); ``d``, ``dv``: key and value dimensions (``dv`` resolved: d where
    the grid leaves it empty); ``dtype``: of keys and values; ``state_dtype``, ``rounding``: how the state is stored;
    ``heads``, ``value_heads``: the head layout (``value_heads`` resolved: heads where the grid leaves it empty)."""

    variant: Spec
    keys: Spec
    feature: Spec | None
    d: int
    dtype: str
    dv: int
    state_dtype: str
    rounding: str
    heads: int
    value_heads: int

    def items(self) -> tuple[tuple[str, Any], ...]:
        """``((axis, value), ...)`` in axis order."""
        return tuple((f.name, getattr(self, f.name)) for f in dataclasses.fields(self))


@dataclass(frozen=True, eq=False)  # a unit of work: equal to itself only, hashed by identity (its memory is no value)
class Pass(Generic[C]):
    """One write pass, as the engine hands it to ``Task.measure`` (and ``Task.seconds``): what to measure, on what.

    ``study``: the study (its ``task``, typed as the task's ``Config`` C, and its grid); ``cell``: the cell measured
    (``Cell``); ``memory``: the cell's memory, built with its feature map (a ``lacapacity.variants.Variant``);
    ``seeds``: the seeds of the pass, in the order its arrays hold them (one batch item each); ``ns``: the pair counts
    read (an ``n`` axis's values, or a load's at ``cell.d``), distinct and increasing; ``device``: where to write and read. The
    engine plans passes, names the cell's numbers by their cell, and measures each pass once."""

    study: StudyView[C]
    cell: Cell
    memory: Variant
    seeds: tuple[int, ...]
    ns: tuple[int, ...]
    device: torch.device


class Task(abc.ABC, Generic[C]):
    """One kind of measurement. Subclasses set the class attributes and write the abstract methods; a subclass names
    its settings class as the type argument (``class MqarTask(Task[Mqar])``), so that ``study.task`` is typed.

    ``name``: the kind (``study.task.kind``); ``description``: one line for ``capacity list``; ``Config``: its
    settings class; ``per_point``: a point's numbers depend only on its cell, seed and n (points are stored and
    reused one by one; else a cell is measured and stored whole); ``key_axis``: the study's Dataset has a
    ``key_family`` dimension; ``grid_axes``: the grid axes beyond the common ones that this task takes (of
    ``lacapacity.sweep.Grid``'s ``state_dtype``, ``rounding``, ``heads``, ``value_heads``); ``closed_forms``: the
    function of ``lacapacity.theory`` each closed-form variable it stores is computed by (``theory`` evaluates them on
    the grid; a figure reads the stored variable, or evaluates the function named here on a finer grid, never a
    closed form of its own). ``figures(ds)`` names the figures drawn for its results."""

    name: ClassVar[str]
    description: ClassVar[str]
    Config: ClassVar[type[Config]]
    per_point: ClassVar[bool]
    key_axis: ClassVar[bool]
    grid_axes: ClassVar[tuple[str, ...]]
    closed_forms: ClassVar[Mapping[str, Callable[..., Any]]] = {}  # stored variable -> its function of theory
    pass_per_n: ClassVar[bool] = (
        False  # a per-point task whose passes are long: one pass per n and seed (parallel, resumable)
    )

    @abc.abstractmethod
    def check_grid(self, study: StudyView[C]) -> None:
        """Refuse, in one line, a grid this task cannot measure (called when the study is built)."""

    @abc.abstractmethod
    def check(self, study: StudyView[C]) -> None:
        """Cheap checks before any work (sizes, installed models): one line per fault."""

    @abc.abstractmethod
    def schema(self, study: StudyView[C]) -> Schema:
        """The study's dimensions and variables."""

    @abc.abstractmethod
    def writes(self, study: StudyView[C], ns: list[int]) -> int:
        """Tokens one pass writes per batch item, for the pair counts ``ns`` (sizes memory estimates)."""

    @abc.abstractmethod
    def measure(self, run: Pass[C]) -> Measured:
        """One pass: every variable of the schema over ``(n, *its dims)`` for the pass's pair counts ``run.ns`` and
        seeds ``run.seeds`` (see ``Measured``)."""

    @abc.abstractmethod
    def theory(
        self, study: StudyView[C], n: NDArray[np.int64], d: NDArray[np.int64], dv: NDArray[np.int64]
    ) -> dict[str, tuple[float | NDArray[Any], dict[str, Any]]]:
        """Closed-form variables over the study's grid: name -> (array broadcast over n, d and dv, attrs)."""

    @abc.abstractmethod
    def attrs(self, study: StudyView[C]) -> dict[str, Any]:
        """Attrs of the assembled Dataset (settings a reader needs, beyond the study's configuration)."""

    @abc.abstractmethod
    def figures(self, ds: xr.Dataset) -> list[str]:
        """The figures that fit ``ds``, this task's results (whatever its study is called, however it was cut), in
        the order they are drawn: names of ``lacapacity.plots.FIGURES`` or of the ``FIGURES`` of the module
        ``figures`` in this task's own folder. ``lacapacity.plots.render`` draws them; none: nothing fits."""

    def queries(self, study: StudyView[C]) -> int:
        """Reads per pair count (0: every stored pair); schedules and estimates passes."""
        return 0

    def seconds(self, run: Pass[C]) -> float:
        """Estimated seconds of the pass ``run`` on one CPU core beyond the writes and reads the engine counts itself (a
        task that trains, say); the run's estimate before it starts adds them. 0: nothing beyond them. Asked after
        the run checked that its largest pass fits in memory (``jobs.check``), so a task may time a small part of
        its work here."""
        return 0.0

    def key_stats(self, study: StudyView[C]) -> bool:
        """Whether a pass also describes its keys (their Gram matrix: a memory estimate's term)."""
        return False

    def extra_bytes(self, study: StudyView[C], d: int, n: int, seeds: int) -> int:
        """Bytes a pass of ``seeds`` seeds and up to ``n`` pairs at key dimension ``d`` allocates beyond the probe's
        writes and reads (``lacapacity.tasks.probe.peak_bytes``): a task that trains, its models and optimiser. Part
        of the estimate checked before any work. 0: nothing beyond them."""
        return 0
