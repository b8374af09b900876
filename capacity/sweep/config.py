"""A study: a grid of points (``Grid``) and how each is measured (``Probe``), checked when built.

``Study.from_dict`` and ``Study.with_overrides`` (the command line's ``--set``) refuse unknown fields in one line that
lists the allowed ones.

>>> from capacity.sweep.config import Grid, Study
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
from dataclasses import dataclass, field

from capacity import __version__, _validate, labels, variants
from capacity.errors import CapacityError

__all__ = ["Spec", "Grid", "Probe", "Study", "build_variant", "n_of", "digest", "DTYPES", "STATE_DTYPES", "KINDS"]

DTYPES = ("float32", "bfloat16", "float16")
STATE_DTYPES = ("float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")  # capacity.precision.DTYPES
KINDS = {
    "recall": "write the pairs, read every stored key back at each n: the metrics of capacity.probe.recall",
    "bill": "measured state/cache size and per-token decode time after n writes",
    "mqar": "multi-query associative recall (capacity.mqar): n distinct keys of a vocabulary, some overwritten",
}
SEED_MAX = 2**63 - 1  # seeds are stored as int64
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*$")


def n_of(load: float, d: int) -> int:
    """Pairs written at ``load`` = n/d: max(1, round(load * d))."""
    return max(1, int(round(float(load) * int(d))))


def digest(payload) -> str:
    """sha256 hex digest of the canonical JSON of ``payload``."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _frozen(x):
    return tuple(_frozen(v) for v in x) if isinstance(x, (list, tuple)) else x


def _thawed(x):
    return [_thawed(v) for v in x] if isinstance(x, tuple) else x


@dataclass(frozen=True)
class Spec:
    """A registered name or import path ``module:attr`` with parameters, labelled ``name(k=v, ...)``.

    A variant given as an object keeps it in ``obj``; it reaches worker processes by pickling.
    """

    name: str
    params: tuple[tuple[str, object], ...] = ()
    obj: object = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, value, what: str) -> Spec:
        """From a Spec, a label, a dict ``{"name": ..., "params": {...}}`` or (variants) an object."""
        obj = None
        if isinstance(value, Spec):
            return value
        if isinstance(value, str):
            name, params = labels.parse(value)
        elif isinstance(value, dict) and set(value) <= {"name", "params"} and isinstance(value.get("params", {}), dict):
            name, params = str(value.get("name", "")), dict(value.get("params") or {})
        elif what == "variant" and variants.is_variant(value):
            (name, params), obj = labels.parse(variants.label(value)), value
        else:
            objects = ", a variant object" if what == "variant" else ""
            raise CapacityError(f"a {what} is a label like 'name' or 'name(k=v, ...)'{objects}; got {value!r}")
        if not name:
            raise CapacityError(f"a {what} needs a name, got {value!r}")
        return cls(name, tuple(sorted((k, _frozen(v)) for k, v in params.items())), obj)

    @property
    def kwargs(self) -> dict:
        return {k: _thawed(v) for k, v in self.params}

    @property
    def label(self) -> str:
        return labels.format(self.name, self.kwargs)

    def to_json(self) -> dict:
        return {"name": self.name, "params": self.kwargs}


def _list(name: str, value) -> tuple:
    if isinstance(value, (str, int, float, Spec, dict)) or variants.is_variant(value):
        value = [value]
    try:
        return tuple(value)
    except TypeError:
        raise CapacityError(f"{name} must be a list, got {value!r}") from None


def _load(v) -> float:
    x = labels.scalar(v) if isinstance(v, str) else v
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        raise CapacityError(f"load must be a finite number > 0, got {v!r}")
    return float(x)


def _seed(v) -> int:
    seed = _validate.positive_int("seed", v, minimum=0)
    if seed > SEED_MAX:
        raise CapacityError(f"seed must lie in 0..2^63-1 (stored as int64), got {seed}")
    return seed


# how each grid axis is read: specs, counts, numbers
_AXES = {
    "variant": lambda v: Spec.parse(v, "variant"),
    "keys": lambda v: Spec.parse(v, "keys"),
    "feature": lambda v: Spec.parse(v, "feature"),
    "d": lambda v: _validate.positive_int("d", v),
    "load": _load,
    "n": lambda v: _validate.positive_int("n", v),
    "seed": _seed,
    "dtype": lambda v: _validate.choice("dtype", str(v), DTYPES),
    "dv": lambda v: _validate.positive_int("dv", v),
    "state_dtype": lambda v: _validate.choice("state_dtype", str(v), STATE_DTYPES),
    "rounding": lambda v: _rounding(v),
    "heads": lambda v: _validate.positive_int("heads", v),
    "value_heads": lambda v: _validate.positive_int("value_heads", v),
}
_STRINGS = ("variant", "keys", "feature", "dtype", "state_dtype", "rounding")  # --set values kept as text


def _rounding(v) -> str:
    from capacity.precision import Rounding

    return Rounding.parse(str(v)).label


@dataclass(frozen=True)
class Grid:
    """The grid axes; every point is one (variant, keys, feature, d, load or n, seed, dtype, dv, state_dtype,
    rounding, heads, value_heads).

    ``variant``, ``keys`` (key families) and ``feature`` (feature maps handed to the variant; empty: no axis) are
    labels such as ``delta(beta=0.5)``; ``load`` (n/d) or ``n`` (pair counts), exactly one; ``seed``: the batch of
    one probe; ``dtype``: of keys and values; ``dv`` (empty: dv = d); ``state_dtype`` and ``rounding``: how the
    state is stored (``capacity.precision``: float32 | bfloat16 | float16 | float8_e4m3fn | float8_e5m2, and
    step | final | chunk=C, optionally +stochastic); ``heads`` and ``value_heads`` (empty: as many as heads): the
    head layout (``capacity.heads``).
    """

    variant: tuple = ("linear",)
    keys: tuple = ("gaussian",)
    feature: tuple = ()
    d: tuple = (64,)
    load: tuple = ()
    n: tuple = ()
    seed: tuple = (0,)
    dtype: tuple = ("float32",)
    dv: tuple = ()
    state_dtype: tuple = ("float32",)
    rounding: tuple = ("step",)
    heads: tuple = (1,)
    value_heads: tuple = ()

    def __post_init__(self):
        for name, read in _AXES.items():
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
    def curve(self) -> str:
        """The axis one write pass covers: ``load`` or ``n``."""
        return "load" if self.load else "n"

    @property
    def curve_values(self) -> tuple:
        return self.load or self.n

    def ns(self, d: int) -> list[int]:
        """Pair counts along the curve axis at key dimension ``d``."""
        return [n_of(x, d) for x in self.load] if self.load else list(self.n)

    def dvs(self, d: int) -> tuple[int, ...]:
        return self.dv or (d,)

    def layouts(self) -> list[tuple[int, int]]:
        """(heads, value_heads) pairs of the grid (value_heads empty: each heads with as many value heads)."""
        return [(h, hv) for h in self.heads for hv in (self.value_heads or (h,))]

    def to_json(self) -> dict:
        return {k: [x.to_json() if isinstance(x, Spec) else x for x in getattr(self, k)] for k in _AXES}


@dataclass(frozen=True)
class Probe:
    """How each point is measured.

    ``kind``: one of ``KINDS``; ``values``: the value family; ``key_stats``: also store ``capacity.keys.describe``
    statistics; ``decode``: measure argmax recall (c^2 dv per checkpoint, most of a large probe's work);
    ``repeats``: timed decode steps per point (bill); ``vocab``, ``overwrite`` (fractions of the keys written
    again, an axis) and ``distractors``: the MQAR task; ``queries``: read a fixed seeded sample of this many stored
    pairs at each n (0: all; ``capacity.probe.recall``'s ``queries``), with standard errors as ``<metric>_se``.
    """

    kind: str = "recall"
    values: str = "gaussian"
    key_stats: bool = False
    decode: bool = True
    repeats: int = 20
    vocab: int = 1024
    overwrite: tuple = (0.0,)
    distractors: int = 0
    queries: int = 0

    def __post_init__(self):
        from capacity import values

        _validate.choice("probe kind", self.kind, KINDS)
        _validate.choice("value family", self.values, values.available())
        for name in ("key_stats", "decode"):
            if not isinstance(getattr(self, name), bool):
                raise CapacityError(f"{name} must be true or false, got {getattr(self, name)!r}")
        put = lambda name, value: object.__setattr__(self, name, value)
        put("repeats", _validate.positive_int("repeats", self.repeats))
        put("vocab", _validate.positive_int("vocab", self.vocab, minimum=2))
        put("distractors", _validate.positive_int("distractors", self.distractors, minimum=0))
        put("queries", _validate.positive_int("queries", self.queries, minimum=0))
        ows = labels.split(self.overwrite) if isinstance(self.overwrite, str) else _list("overwrite", self.overwrite)
        scalar = lambda x: labels.scalar(x) if isinstance(x, str) else x
        put("overwrite", tuple(_validate.in_range("overwrite", scalar(x), 0.0, 1.0) for x in ows))
        if not self.overwrite or len(set(self.overwrite)) != len(self.overwrite):
            raise CapacityError(f"overwrite must list distinct fractions in [0, 1], got {self.overwrite!r}")

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "overwrite": list(self.overwrite)}


def _fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _known(what: str, given, allowed: list[str]) -> None:
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise CapacityError(f"unknown {what} field(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")


@dataclass(frozen=True)
class Study:
    """A named grid with probe settings. ``config_hash`` identifies the numbers it produces."""

    name: str
    description: str
    grid: Grid = field(default_factory=Grid)
    probe: Probe = field(default_factory=Probe)

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise CapacityError(
                f"a study name is letters, digits, '.', '_' and '-' (it names files under the output folder), got {self.name!r}"
            )
        if not isinstance(self.grid, Grid) or not isinstance(self.probe, Probe):
            raise CapacityError("Study takes grid=Grid(...) and probe=Probe(...)")
        g, kind = self.grid, self.probe.kind
        if kind == "bill" and (g.curve != "n" or len(g.keys) != 1 or len(g.seed) != 1):
            raise CapacityError("a bill study takes n (pair counts, not load), one key family and one seed")
        if kind == "mqar" and (g.curve != "n" or g.feature or len(g.dtype) > 1):
            raise CapacityError(
                "an mqar study takes n (distinct keys written, not load), no feature maps and one dtype"
            )
        if kind != "recall" and self.probe.key_stats:
            raise CapacityError("key_stats applies to recall studies only")
        if kind != "recall" and (
            g.state_dtype != ("float32",) or g.heads != (1,) or g.value_heads or self.probe.queries
        ):
            raise CapacityError("state_dtype, rounding, heads, value_heads and queries apply to recall studies only")
        if self.probe.queries and self.probe.key_stats:
            raise CapacityError("key_stats describes every stored key; it does not combine with queries")

    @classmethod
    def from_dict(cls, data: dict) -> Study:
        """From ``{"name", "description", "grid": {...}, "probe": {...}}``; unknown fields are an error."""
        if not isinstance(data, dict):
            raise CapacityError(f"a study configuration is a dict, got {type(data).__name__}")
        grid, probe = data.get("grid", {}), data.get("probe", {})
        _known("study", data, _fields(cls))
        _known("grid", grid, _fields(Grid))
        _known("probe", probe, _fields(Probe))
        return cls(str(data.get("name", "")), str(data.get("description", "")), Grid(**grid), Probe(**probe))

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "grid": self.grid.to_json(),
            "probe": self.probe.to_json(),
        }

    @staticmethod
    def settable() -> list[str]:
        """The keys ``with_overrides`` accepts: every grid field and every probe field."""
        return _fields(Grid) + _fields(Probe)

    def with_overrides(self, assignments) -> Study:
        """A copy with ``key=value`` assignments applied (lists comma-separated, e.g. ``d=16,32``).

        Grid axes take lists (``variant=linear,delta(beta=0.5)``, ``load=1/8,1,16``); probe fields one value
        (``values=orthonormal``). Setting ``n`` clears ``load`` and the other way round.
        """
        grid = {f: getattr(self.grid, f) for f in _fields(Grid)}
        probe = {f: getattr(self.probe, f) for f in _fields(Probe)}
        for item in assignments or ():
            key, eq, value = (s.strip() for s in str(item).partition("="))
            if not eq:
                raise CapacityError(f"--set takes key=value, got {item!r}; keys: {', '.join(self.settable())}")
            _known("--set", [key], self.settable())
            if key in grid:
                parts = labels.split(value)
                grid[key] = tuple(parts if key in _STRINGS else map(labels.scalar, parts))
                if key in ("load", "n"):
                    grid["n" if key == "load" else "load"] = ()
            else:
                probe[key] = labels.scalar(value)
        return Study(self.name, self.description, Grid(**grid), Probe(**probe))

    def hash_payload(self, device: str) -> dict:
        """What determines the numbers: the grid, the probe, the device type and the package version."""
        g, p = self.grid.to_json(), self.probe.to_json()
        return {"study": self.name, "grid": g, "probe": p, "device": device, "capacity": __version__}

    def config_hash(self, device: str) -> str:
        return digest(self.hash_payload(device))


def build_variant(variant: Spec, feature: Spec | None = None):
    """The variant a spec names (registered name, import path, or the object itself), with its feature map."""
    if variant.obj is not None:
        if feature is not None:
            raise CapacityError(
                f"variant {variant.label!r} is an object; feature maps go to registered variants (feature={feature.label!r})"
            )
        return variant.obj
    kwargs = variant.kwargs
    if feature is not None:
        clash = sorted(set(kwargs) & (set(feature.kwargs) | {"feature"}))
        if clash:
            raise CapacityError(
                f"variant {variant.label!r} and feature map {feature.label!r} both set {', '.join(clash)}"
            )
        kwargs = {**kwargs, "feature": feature.name, **feature.kwargs}
    return variants.resolve(variant.name, **kwargs)
