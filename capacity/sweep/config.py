"""A study: a grid of points (``Grid``) and its task's settings (``Recall``, ``Mqar``, ...), checked when built.

``Study.from_dict`` and ``Study.with_overrides`` (the command line's ``--set``) refuse unknown fields in one line that
lists the allowed ones.

>>> from lacapacity.sweep.config import Grid, Study
>>> s = Study("demo", "two variants", Grid(variant=("linear", "delta(beta=0.5)"), d=(16,), load=(0.5, 1, 2)))
>>> [v.label for v in s.grid.variant], s.grid.ns(16)
(['linear', 'delta(beta=0.5)'], [8, 16, 32])
>>> s.with_overrides(["d=32,64", "seed=0,1"]).grid.d
(32, 64)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, cast

from lacapacity import variants
from lacapacity.base import _random, _validate, labels
from lacapacity.base.labels import Spec
from lacapacity.errors import CapacityError

if TYPE_CHECKING:  # pragma: no cover
    from lacapacity.tasks import Config
    from lacapacity.variants import Variant

_T = TypeVar("_T")
# what a grid axis takes: one value or any iterable of them (a variant as a label, a dict {"name", "params"}, a
# Spec or a memory object; a number or a command-line word for the numeric axes)
_Axis: TypeAlias = "_T | Iterable[_T]"
_Label: TypeAlias = "str | Spec | Mapping[str, Any]"


DTYPES = ("float32", "bfloat16", "float16")
STATE_DTYPES = (
    "float32",
    "bfloat16",
    "float16",
    "float8_e4m3fn",
    "float8_e5m2",
)  # lacapacity.variants.precision.DTYPES
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*$")


def n_of(load: float, d: int) -> int:
    """Pairs written at ``load`` = n/d: max(1, round(load * d))."""
    return max(1, int(round(float(load) * int(d))))


def digest(payload: Any) -> str:  # any JSON-able value (default=str for the rest)
    """sha256 hex digest of the canonical JSON of ``payload``."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _list(name: str, value: Any) -> tuple[Any, ...]:  # a user's value, checked here
    if isinstance(value, (str, int, float, Spec, dict)) or variants.is_variant(value):
        value = [value]
    try:
        return tuple(value)
    except TypeError:
        raise CapacityError(f"{name} must be a list, got {value!r}") from None


def _number(name: str, v: object, whole: bool) -> int | float:
    """A grid number from a number or a command-line word; a whole number > 0 where ``whole``, a finite one > 0 else."""
    x = labels.scalar(v) if isinstance(v, str) else v
    if whole:
        return _validate.positive_int(name, x)
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        raise CapacityError(f"{name} must be a finite number > 0, got {x!r}")
    return float(x)


def _state_dtype(v: object) -> str:
    """A float format of STATE_DTYPES, or an integer one (int8, int4/row+ef, ...: lacapacity.variants.quantise), as its label."""
    from lacapacity.variants import quantise
    from lacapacity.variants.precision import _dtype

    name = str(v).strip()
    return _dtype(name) if quantise.is_quantised(name) else _validate.choice("state_dtype", name, STATE_DTYPES)


def _rounding(v: object) -> str:
    from lacapacity.variants.precision import Rounding

    return Rounding.parse(str(v)).label


# every grid axis: how its values are read, and its role. A point is one value of every axis; a cell is one value
# of every "cell" axis (one write pass measures a cell's loads or pair counts for all its seeds at once).
_AXES: dict[str, tuple[Callable[[Any], Any], Literal["cell", "curve", "seed"]]] = {  # (read a user's value, role)
    "variant": (
        lambda v: Spec(variants.label(v), (), v) if variants.is_variant(v) else Spec.parse(v, "variant"),
        "cell",
    ),
    "keys": (lambda v: Spec.parse(v, "keys"), "cell"),
    "feature": (lambda v: Spec.parse(v, "feature"), "cell"),
    "d": (lambda v: _number("d", v, True), "cell"),
    "load": (lambda v: _number("load", v, False), "curve"),
    "n": (lambda v: _number("n", v, True), "curve"),
    "seed": (lambda v: _random.check_seed("seed", labels.scalar(v) if isinstance(v, str) else v), "seed"),
    "dtype": (lambda v: _validate.choice("dtype", str(v), DTYPES), "cell"),
    "dv": (lambda v: _number("dv", v, True), "cell"),
    "state_dtype": (lambda v: _state_dtype(v), "cell"),
    "rounding": (lambda v: _rounding(v), "cell"),
    "heads": (lambda v: _number("heads", v, True), "cell"),
    "value_heads": (lambda v: _number("value_heads", v, True), "cell"),
}
CELL_AXES = tuple(name for name, (_, role) in _AXES.items() if role == "cell")


@dataclass(frozen=True)
class Grid:
    """The grid axes; every point is one (variant, keys, feature, d, load or n, seed, dtype, dv, state_dtype,
    rounding, heads, value_heads).

    ``variant``, ``keys`` (key families) and ``feature`` (feature maps handed to the variant; empty: no axis) are
    labels such as ``delta(beta=0.5)``; ``load`` (n/d) or ``n`` (pair counts), exactly one; ``seed``: the batch of
    one probe; ``dtype``: of keys and values; ``dv`` (empty: dv = d); ``state_dtype`` and ``rounding``: how the
    state is stored (``lacapacity.variants.precision``: float32 | bfloat16 | float16 | float8_e4m3fn | float8_e5m2, and
    step | final | chunk=C, optionally +stochastic); ``heads`` and ``value_heads`` (empty: as many as heads): the
    head layout (``lacapacity.variants.heads``).
    """

    # each axis as __post_init__ stores it (what the constructor takes: the __init__ below, for type checkers)
    variant: tuple[Spec, ...] = ("linear",)  # type: ignore[assignment]  # a label, read into a Spec
    keys: tuple[Spec, ...] = ("gaussian",)  # type: ignore[assignment]  # a label, read into a Spec
    feature: tuple[Spec, ...] = ()
    d: tuple[int, ...] = (64,)
    load: tuple[float, ...] = ()
    n: tuple[int, ...] = ()
    seed: tuple[int, ...] = (0,)
    dtype: tuple[str, ...] = ("float32",)
    dv: tuple[int, ...] = ()
    state_dtype: tuple[str, ...] = ("float32",)
    rounding: tuple[str, ...] = ("step",)
    heads: tuple[int, ...] = (1,)
    value_heads: tuple[int, ...] = ()

    if TYPE_CHECKING:  # pragma: no cover  # the dataclass's __init__ at run time; what it takes, for type checkers

        def __init__(
            self,
            variant: _Axis[_Label | Variant] = ...,
            keys: _Axis[_Label] = ...,
            feature: _Axis[_Label] = ...,
            d: _Axis[int | str] = ...,
            load: _Axis[float | str] = ...,
            n: _Axis[int | str] = ...,
            seed: _Axis[int | str] = ...,
            dtype: _Axis[str] = ...,
            dv: _Axis[int | str] = ...,
            state_dtype: _Axis[str] = ...,
            rounding: _Axis[str] = ...,
            heads: _Axis[int | str] = ...,
            value_heads: _Axis[int | str] = ...,
        ) -> None: ...

    def __post_init__(self) -> None:
        for name, (read, _) in _AXES.items():
            items = tuple(read(v) for v in _list(name, getattr(self, name)))
            seen = [x.label if isinstance(x, Spec) else x for x in items]
            dup = sorted({str(x) for x in seen if seen.count(x) > 1})
            if dup:
                raise CapacityError(f"{name} lists {', '.join(dup)} more than once; each grid value must be distinct")
            if not items and name in ("variant", "keys", "d", "seed", "dtype", "state_dtype", "rounding", "heads"):
                raise CapacityError(f"grid axis {name} must list at least one value")
            object.__setattr__(self, name, items)
        if bool(self.load) == bool(self.n):
            raise CapacityError("the grid takes exactly one of load (n/d values) or n (pair counts)")

    @property
    def curve(self) -> Literal["load", "n"]:
        """The axis one write pass covers: ``load`` or ``n``."""
        return "load" if self.load else "n"

    @property
    def curve_values(self) -> tuple[float, ...] | tuple[int, ...]:
        """The values along the curve axis: the loads n/d, or the pair counts n."""
        return self.load or self.n

    def ns(self, d: int) -> list[int]:
        """Pair counts along the curve axis at key dimension ``d``."""
        return [n_of(x, d) for x in self.load] if self.load else list(self.n)

    def values(self, axis: str) -> tuple[Any, ...]:  # the axis's own type (Spec, int, str), or (None,)
        """The values of a cell axis (``dv`` empty means dv = d and ``value_heads`` empty as many as ``heads``:
        ``(None,)``; no feature axis: ``(None,)``)."""
        return getattr(self, axis) or (None,)

    def to_json(self) -> dict[str, list[Any]]:
        """Axis -> its values, labels as ``Spec.to_json`` dicts: what ``Grid(**...)`` reads back."""
        return {k: [x.to_json() if isinstance(x, Spec) else x for x in getattr(self, k)] for k in _AXES}


def _fields(cls: type[Any]) -> list[str]:  # a dataclass
    return [f.name for f in dataclasses.fields(cls)]


def _known(what: str, given: Iterable[str], allowed: list[str]) -> None:
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise CapacityError(f"unknown {what} field(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")


def _task_rules(study: Study) -> None:
    """What a study of its task must be: the task's own grid rules (``check_grid``), and no optional grid axis set
    away from its default that belongs to other tasks alone (their ``grid_axes``)."""
    from lacapacity.tasks import TASKS
    from lacapacity.tasks import get as tasks_get

    task = tasks_get(cast(str, study.task.kind))  # cast: a study's task has a kind (Study.__post_init__)
    task.check_grid(study)
    defaults = {f.name: f.default for f in dataclasses.fields(study.grid)}
    for name, other in TASKS.items():
        axes = other.grid_axes
        if name != task.name and any(a not in task.grid_axes and getattr(study.grid, a) != defaults[a] for a in axes):
            listed = f"{', '.join(axes[:-1])} and {axes[-1]}" if len(axes) > 1 else axes[0]
            raise CapacityError(f"{listed} apply to {name} studies only (kind={name})")


def _recall() -> Config:
    from lacapacity.tasks import Recall

    return Recall()


@dataclass(frozen=True)
class Study:
    """A named grid with its task's settings (``task``: a ``lacapacity.tasks.Config`` such as ``Recall(...)``,
    ``Mqar(...)``, ``Needle(...)`` or ``Bill(...)``) and the options it asks of its figures (``figures``: figure
    name -> keyword arguments, e.g. ``{"frontier": {"published": True}}``; recorded with the results, read by
    ``lacapacity.plots.render``)."""

    name: str
    description: str
    grid: Grid = field(default_factory=Grid)
    task: Config = field(default_factory=_recall)
    figures: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # Any: a figure's own keyword values

    def __post_init__(self) -> None:
        from lacapacity.tasks import Config

        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise CapacityError(
                f"a study name is letters, digits, '.', '_' and '-' (it names files under the output folder), got {self.name!r}"
            )
        if not isinstance(self.grid, Grid) or not isinstance(self.task, Config) or self.task.kind is None:
            raise CapacityError(
                "Study takes grid=Grid(...) and task=Recall(...) (or Mqar, Needle, Bill: lacapacity.tasks)"
            )
        shaped = isinstance(self.figures, Mapping) and all(
            isinstance(k, str) and isinstance(v, Mapping) and all(isinstance(o, str) for o in v)
            for k, v in self.figures.items()
        )
        if not shaped:
            raise CapacityError(
                f"a study's figures map a figure's name to its options, e.g. {{'frontier': {{'published': True}}}}, got {self.figures!r}"
            )
        _task_rules(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Study:
        """From ``{"name", "description", "grid": {...}, "task": {"kind": ..., ...}}``; unknown fields are an error."""
        from lacapacity.tasks.protocol import config_class

        if not isinstance(data, dict):
            raise CapacityError(f"a study configuration is a dict, got {type(data).__name__}")
        grid, task = data.get("grid", {}), dict(data.get("task", {}))
        _known("study", data, _fields(cls))
        _known("grid", grid, _fields(Grid))
        config = config_class(str(task.pop("kind", "recall")))
        name, description = str(data.get("name", "")), str(data.get("description", ""))
        return cls(name, description, Grid(**grid), config(**task), data.get("figures", {}))

    def to_json(self) -> dict[str, Any]:
        """The study as plain data (name, description, grid, task settings, and the figures' options where set): what
        ``Study.from_dict`` reads."""
        out = {
            "name": self.name,
            "description": self.description,
            "grid": self.grid.to_json(),
            "task": self.task.to_json(),
        }
        if self.figures:  # recorded only where a study asks its figures for something
            out["figures"] = {k: dict(v) for k, v in self.figures.items()}
        return out

    def settable(self) -> list[str]:
        """The keys ``with_overrides`` applies to this study: every grid field, ``kind`` and its task's fields."""
        return _fields(Grid) + ["kind"] + self.task.settable()

    @staticmethod
    def settable_keys() -> list[str]:
        """Every key ``--set`` takes: the grid's fields, ``kind``, and every task's fields in ``TASKS`` order (a
        field of another task than the study's is refused by its task's config, naming that task)."""
        from lacapacity.tasks import TASKS

        out = _fields(Grid) + ["kind"]
        for task in TASKS.values():
            out += [f for f in task.Config.settable() if f not in out]
        return out

    def with_overrides(self, assignments: str | Sequence[str | tuple[str, Any]] | Mapping[str, Any] | None) -> Study:
        """A copy with assignments applied: ``key=value`` strings (a list of them, or one), or a dict ``{key: value}``.

        In a string, grid axes take comma-separated lists (``variant=linear,delta(beta=0.5)``, ``load=1/8,1,16``)
        and task fields one value (``values=orthonormal``), read as the command line's ``--set`` (``labels.split``;
        the grid then reads each value). In a dict, a string value reads the same way; other values are taken as they
        are (a list for a grid axis, or one value), e.g. ``{"d": 16}``, ``{"d": [16, 32]}``,
        ``{"variant": "delta(beta=0.5)"}``. Setting ``n`` clears ``load`` and the other way round; ``kind`` changes
        the task (the fields it shares with the old one are kept).

        >>> s = Study("demo", "", Grid(load=(1,)))
        >>> s.with_overrides("d=16").grid.d, s.with_overrides({"d": [16, 32], "seed": 1}).grid.seed
        ((16,), (1,))
        """
        from lacapacity.tasks.protocol import config_class

        grid = {f: getattr(self.grid, f) for f in _fields(Grid)}
        task = {f: getattr(self.task, f) for f in self.task.settable()}
        kind = self.task.kind
        if isinstance(assignments, str):
            assignments = [assignments]
        elif isinstance(assignments, dict):
            assignments = [(str(k), v) for k, v in assignments.items()]
        elif assignments is not None and not isinstance(assignments, (list, tuple)):
            raise CapacityError(
                f"with_overrides takes 'key=value' strings (one, or a list of them) or a dict {{key: value}}, got {assignments!r}"
            )
        known = self.settable_keys() + self.task.settable()
        for item in assignments or ():
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
                key, value = item
            else:
                key, eq, value = (s.strip() for s in item.partition("=")) if isinstance(item, str) else ("", "", "")
                if not eq:
                    raise CapacityError(f"--set takes key=value, got {item!r}; keys: {', '.join(self.settable())}")
            if key not in known:
                _known("--set", [key], self.settable())
            if isinstance(value, str):
                value = tuple(labels.split(value)) if key in grid else labels.scalar(value)
            if key in grid:
                grid[key] = value
                if key in ("load", "n"):
                    grid["n" if key == "load" else "load"] = ()
            elif key == "kind":
                kind = str(value)
            else:
                task[key] = value
        config = config_class(cast(str, kind))  # cast: a study's task has a kind (Study.__post_init__)
        if kind != self.task.kind:  # a new task keeps the fields it shares with the old one
            task = {k: v for k, v in task.items() if k in config.settable() or k not in self.task.settable()}
        return Study(self.name, self.description, Grid(**grid), config(**task), self.figures)

    def config_hash(self) -> str:
        """A hash of the configuration (recorded in result files; reuse is decided per cell, ``plan.Plan.identity``)."""
        return digest(self.to_json())
