"""Typed study configuration: a grid of points plus probe settings, validated on construction.

A study is ``Study(name, description, grid=Grid(...), probe=Probe(...))``. Building one from a
dict (``Study.from_dict``) or overriding fields from the command line (``study.with_overrides``)
rejects unknown fields with a CapacityError that lists the allowed ones; values are checked
before any work starts (variants are built, key families and their parameters looked up).

>>> from capacity.sweep.config import Grid, Probe, Study
>>> s = Study("demo", "two variants", Grid(variant=("linear", "delta(beta=0.5)"), keys=("gaussian",), d=(16,), load=(0.5, 1, 2)))
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

__all__ = ["Spec", "Grid", "Probe", "Study", "n_of", "DTYPES", "KINDS"]

DTYPES = ("float32", "bfloat16", "float16")
KINDS = {
    "recall": "write the pairs, read every stored key back at each n: the metrics of capacity.probe.recall",
    "bill": "measured state/cache size and per-token decode time after n writes",
    "mqar": "multi-query associative recall (capacity.mqar): n distinct keys of a vocabulary, some overwritten",
}

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*$")
SEED_MAX = 2**63 - 1  # seeds are stored as int64 in the results


def n_of(load: float, d: int) -> int:
    """Pairs written at ``load`` = n/d: max(1, round(load * d)) (the schema's rule)."""
    return max(1, int(round(float(load) * int(d))))


def _frozen(x):
    """Lists as tuples, recursively, so that parameters can be hashed."""
    return tuple(_frozen(v) for v in x) if isinstance(x, (list, tuple)) else x


def _thawed(x):
    return [_thawed(v) for v in x] if isinstance(x, tuple) else x


@dataclass(frozen=True)
class Spec:
    """A named thing with parameters (a variant, key family or feature map), labelled ``name(k=v, ...)``.

    ``name`` is a registered name or an import path ``module:attr``. A variant given as an object keeps it in
    ``obj`` (it travels to worker processes by pickling, which imports its class by module path).
    """

    name: str
    params: tuple[tuple[str, object], ...] = ()
    obj: object = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, value, what: str) -> Spec:
        """From a Spec, a label ``name(k=v, ...)``, a dict ``{"name": ..., "params": {...}}`` or (variants) an object."""
        if isinstance(value, Spec):
            return value
        if isinstance(value, dict):
            unknown = sorted(set(value) - {"name", "params"})
            if unknown or "name" not in value or not isinstance(value.get("params") or {}, dict):
                raise CapacityError(
                    f"a {what} is a label like 'name(k=v)' or a dict with fields name, params; got {value!r}"
                )
            name, params = str(value["name"]), dict(value.get("params") or {})
        elif isinstance(value, str):
            name, params = labels.parse(value)
        elif what == "variant" and variants.is_variant(value):
            name, params = labels.parse(variants.label(value))
            return cls(name, tuple(sorted((k, _frozen(v)) for k, v in params.items())), value)
        else:
            objects = ", a variant object" if what == "variant" else ""
            raise CapacityError(f"a {what} is a label like 'name' or 'name(k=v, ...)'{objects}; got {value!r}")
        return cls(name, tuple(sorted((k, _frozen(v)) for k, v in params.items())))

    @property
    def kwargs(self) -> dict:
        return {k: _thawed(v) for k, v in self.params}

    @property
    def label(self) -> str:
        return labels.format(self.name, self.kwargs)

    def to_json(self) -> dict:
        return {"name": self.name, "params": self.kwargs}


def _tuple(name: str, value) -> tuple:
    if isinstance(value, (str, int, float, Spec, dict)) or variants.is_variant(value):
        value = [value]
    try:
        return tuple(value)
    except TypeError:
        raise CapacityError(f"{name} must be a list, got {value!r}") from None


def _unique(name: str, items) -> None:
    seen = [x.label if isinstance(x, Spec) else x for x in items]
    dup = sorted({str(x) for x in seen if seen.count(x) > 1})
    if dup:
        raise CapacityError(f"{name} lists {', '.join(dup)} more than once; each grid value must be distinct")


@dataclass(frozen=True)
class Grid:
    """The grid axes. Every point is one (variant, keys, feature, d, load or n, seed, dtype, dv).

    - ``variant``: variant specs (registry names with parameters), e.g. ``delta(beta=0.5)``;
    - ``keys``: key-family specs, e.g. ``correlated(rho=0.5)``;
    - ``feature``: feature-map specs passed to the variant as ``feature=name, **params``
      (empty: no feature axis);
    - ``d``: key dimensions; ``load``: n/d values, or ``n``: pair counts (exactly one of the two);
    - ``seed``: seeds of keys and values (the batch of one probe);
    - ``dtype``: input dtypes of keys and values (the state is float32 whatever they are);
    - ``dv``: value dimensions (empty: dv = d).
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

    def __post_init__(self):
        def put(name, value):
            object.__setattr__(self, name, value)

        for name in ("variant", "keys", "feature"):
            put(name, tuple(Spec.parse(v, name) for v in _tuple(name, getattr(self, name))))
        put("d", tuple(_validate.positive_int("d", v) for v in _tuple("d", self.d)))
        put("n", tuple(_validate.positive_int("n", v) for v in _tuple("n", self.n)))
        put("load", tuple(_positive_float("load", v) for v in _tuple("load", self.load)))
        put("seed", tuple(_seed(v) for v in _tuple("seed", self.seed)))
        put("dv", tuple(_validate.positive_int("dv", v) for v in _tuple("dv", self.dv)))
        put("dtype", tuple(_validate.choice("dtype", str(v), DTYPES) for v in _tuple("dtype", self.dtype)))
        for name in ("variant", "keys", "d", "seed", "dtype"):
            if not getattr(self, name):
                raise CapacityError(f"grid axis {name} must list at least one value")
        if bool(self.load) == bool(self.n):
            raise CapacityError("the grid takes exactly one of load (n/d values) or n (pair counts)")
        for name in ("variant", "keys", "feature", "d", "load", "n", "seed", "dtype", "dv"):
            _unique(name, getattr(self, name))

    @property
    def curve(self) -> str:
        """The axis a probe reads in one pass: ``load`` or ``n``."""
        return "load" if self.load else "n"

    @property
    def curve_values(self) -> tuple:
        """The values along the curve axis (loads or pair counts)."""
        return self.load or self.n

    def ns(self, d: int) -> list[int]:
        """Pair counts along the curve axis at key dimension ``d``."""
        return [n_of(x, d) for x in self.load] if self.load else list(self.n)

    def dvs(self, d: int) -> tuple[int, ...]:
        return self.dv if self.dv else (d,)

    def to_json(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = [x.to_json() for x in v] if f.name in ("variant", "keys", "feature") else list(v)
        return out


def _positive_float(name, v) -> float:
    if isinstance(v, str):
        v = labels.scalar(v)
    if isinstance(v, bool):
        raise CapacityError(f"{name} must be a finite number > 0, got {v!r}")
    x = _validate.in_range(name, v, 0.0, float("inf"), low_open=True)
    if not math.isfinite(x):
        raise CapacityError(f"{name} must be a finite number > 0, got {v!r}")
    return x


def _seed(v) -> int:
    seed = _validate.positive_int("seed", v, minimum=0)
    if seed > SEED_MAX:
        raise CapacityError(f"seed must lie in 0..2^63-1 (stored as int64), got {seed}")
    return seed


@dataclass(frozen=True)
class Probe:
    """How each point is measured.

    - ``kind``: ``recall`` (the recall probe's metrics) or ``bill`` (state size and decode time);
    - ``values``: the value family (``gaussian`` unit rows, or ``orthonormal`` with n <= dv);
    - ``key_stats``: also store ``capacity.keys.describe`` statistics of the keys at every point;
    - ``decode``: measure argmax recall (the ``recall`` variable; it costs c^2 dv per checkpoint,
      most of a large probe's work); false leaves the other five metrics;
    - ``repeats``: timed decode steps per point (bill);
    - ``vocab``, ``overwrite`` (fractions of the keys written again, an axis), ``distractors``: the MQAR task (mqar).
    """

    kind: str = "recall"
    values: str = "gaussian"
    key_stats: bool = False
    decode: bool = True
    repeats: int = 20
    vocab: int = 1024
    overwrite: tuple = (0.0,)
    distractors: int = 0

    def __post_init__(self):
        from capacity import values

        _validate.choice("probe kind", self.kind, KINDS)
        _validate.choice("value family", self.values, values.available())
        for name in ("key_stats", "decode"):
            if not isinstance(getattr(self, name), bool):
                raise CapacityError(f"{name} must be true or false, got {getattr(self, name)!r}")
        object.__setattr__(self, "repeats", _validate.positive_int("repeats", self.repeats))
        object.__setattr__(self, "vocab", _validate.positive_int("vocab", self.vocab, minimum=2))
        object.__setattr__(self, "distractors", _validate.positive_int("distractors", self.distractors, minimum=0))
        ows = labels.split(self.overwrite) if isinstance(self.overwrite, str) else _tuple("overwrite", self.overwrite)
        object.__setattr__(
            self,
            "overwrite",
            tuple(
                _validate.in_range("overwrite", labels.scalar(x) if isinstance(x, str) else x, 0.0, 1.0) for x in ows
            ),
        )
        if not self.overwrite or len(set(self.overwrite)) != len(self.overwrite):
            raise CapacityError(f"overwrite must list distinct fractions in [0, 1], got {self.overwrite!r}")

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["overwrite"] = list(self.overwrite)
        return out


def _fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _check_fields(what: str, given, allowed: list[str]) -> None:
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
        if self.probe.kind == "bill":
            if self.grid.curve != "n" or len(self.grid.keys) != 1 or len(self.grid.seed) != 1:
                raise CapacityError("a bill study takes n (pair counts, not load), one key family and one seed")
        if self.probe.kind == "mqar" and (self.grid.curve != "n" or self.grid.feature or len(self.grid.dtype) > 1):
            raise CapacityError(
                "an mqar study takes n (distinct keys written, not load), no feature maps and one dtype"
            )
            if self.probe.key_stats:
                raise CapacityError("key_stats applies to recall studies only")

    # ------------------------------------------------------------ dict / command-line forms

    @classmethod
    def from_dict(cls, data: dict) -> Study:
        """From ``{"name", "description", "grid": {...}, "probe": {...}}``; unknown fields are an error."""
        if not isinstance(data, dict):
            raise CapacityError(f"a study configuration is a dict, got {type(data).__name__}")
        _check_fields("study", data, _fields(cls))
        grid = data.get("grid", {})
        probe = data.get("probe", {})
        _check_fields("grid", grid, _fields(Grid))
        _check_fields("probe", probe, _fields(Probe))
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

        Grid axes take lists (``variant=linear,delta(beta=0.5)``, ``load=1/8,1,16``); probe fields
        one value (``values=orthonormal``). Setting ``n`` clears ``load`` and the other way round.
        """
        grid = {f: getattr(self.grid, f) for f in _fields(Grid)}
        probe = {f: getattr(self.probe, f) for f in _fields(Probe)}
        allowed = self.settable()
        for item in assignments or ():
            key, eq, value = str(item).partition("=")
            key = key.strip()
            if not eq:
                raise CapacityError(f"--set takes key=value, got {item!r}; keys: {', '.join(allowed)}")
            _check_fields("--set", [key], allowed)
            if key in grid:
                parts = labels.split(value)
                grid[key] = tuple(
                    parts if key in ("variant", "keys", "feature", "dtype") else [labels.scalar(p) for p in parts]
                )
                if key in ("load", "n"):
                    grid["n" if key == "load" else "load"] = ()
            else:
                probe[key] = labels.scalar(value)
        return Study(self.name, self.description, Grid(**grid), Probe(**probe))

    # ------------------------------------------------------------ identity

    def hash_payload(self, device: str) -> dict:
        """What determines the numbers: the grid, the probe, the device type and the package version."""
        return {
            "study": self.name,
            "grid": self.grid.to_json(),
            "probe": self.probe.to_json(),
            "device": device,
            "capacity": __version__,
        }

    def config_hash(self, device: str) -> str:
        return digest(self.hash_payload(device))


def digest(payload) -> str:
    """sha256 hex digest of the canonical JSON of ``payload``."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
