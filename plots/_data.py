"""Reading result Datasets (docs/results-schema.md): checks that name what is missing, and tidy tables."""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import xarray as xr

from lacapacity import tasks, variants
from lacapacity.base import labels
from lacapacity.errors import CapacityError
from lacapacity.tasks import metrics
from lacapacity.tasks.metrics import HIGHER_IS_BETTER
from lacapacity.variants.declares import Declares, declared

GRID_DIMS = ("variant", "key_family", "d", "load", "seed")
MAX_PANELS = 6  # panels along one side of a figure; more values on that axis are thinned (docs/plots.md)
LABEL_AXES = (
    "variant",
    "key_family",
    "feature",
    "dtype",
    "state_dtype",
    "rounding",
    "haystack",
)  # coordinates that hold labels; every other one holds numbers

T = TypeVar("T")
XR = TypeVar("XR", xr.Dataset, xr.DataArray)
# a coordinate's values as Python scalars: numbers or labels, whichever the results file holds (or None, ``levels``)
Level = Any
# a label's parameters (lacapacity.base.labels): literals of any kind (numbers, strings, lists, None)
Params = dict[str, Any]


def require(
    ds: object,
    what: str,
    *,
    variables: Sequence[str] = (),
    coords: Sequence[str] = (),
    dims: Sequence[str] = (),
    allowed: Sequence[str] = GRID_DIMS,
) -> xr.Dataset:
    """Raise CapacityError (one line) unless ``ds`` is a non-empty Dataset with what ``what`` needs.

    ``allowed``: the dimensions the figure draws or pools (seeds); a variable with any other
    dimension is refused rather than silently averaged over it.
    """
    if not isinstance(ds, xr.Dataset):
        raise CapacityError(f"the {what} figure needs an xarray.Dataset, got {type(ds).__name__}")
    if len(ds.data_vars) == 0:
        raise CapacityError(
            f"the Dataset is empty (no variables); the {what} figure needs {', '.join(variables) or 'data'}"
        )
    has = ", ".join(map(str, ds.data_vars))
    for kind, wanted, present, needs in (
        ("variable", variables, set(ds.data_vars), f"{', '.join(variables)} (the Dataset has {has})"),
        ("coordinate", coords, {*ds.coords, *ds.data_vars}, ", ".join(coords)),
        ("dimension", dims, set(ds.dims), f"dimensions {', '.join(dims)}"),
    ):
        missing = [x for x in wanted if x not in present]
        if missing:
            listed = ", ".join(map(repr, missing))
            plural = "s" if len(missing) > 1 else ""
            raise CapacityError(f"missing {kind}{plural} {listed}; the {what} figure needs {needs}")
    for name in (*variables, *coords, *dims):  # numbers where the figure computes with them (a file may hold text)
        if name in ds.variables and name not in LABEL_AXES and ds[name].dtype.kind not in "biuf":
            raise CapacityError(
                f"{'variable' if name in ds.data_vars else 'coordinate'} {name!r} holds {ds[name].dtype} values, not "
                f"numbers; the {what} figure needs numbers there"
            )
    empty = [d for d, size in ds.sizes.items() if size == 0]
    if empty:
        raise CapacityError(f"the Dataset is empty: dimension {empty[0]!r} has length 0")
    for v in variables:
        extra = [x for x in ds[v].dims if x not in allowed]
        if extra:
            raise CapacityError(
                f"variable {v!r} has dimension{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}, which the {what} figure does not draw (it draws {', '.join(allowed)}); select one value first, e.g. ds.sel({extra[0]}=...)"
            )
        if not np.isfinite(np.asarray(ds[v].values, dtype=float)).any():
            raise CapacityError(f"the Dataset is empty: variable {v!r} holds no finite value")
    return ds


def dv_of(ds: xr.Dataset, d: object) -> int:
    """The value dimension at key dimension ``d``: the scalar coord ``dv``, or its entry along ``d``."""
    if "dv" not in ds.coords and "dv" not in ds.data_vars:
        raise CapacityError("missing coordinate 'dv' (value dimension); the theory lines need it")
    dv = ds["dv"]
    if dv.ndim == 0:
        return int(dv)
    if dv.dims == ("d",):
        return int(dv.sel(d=d))
    raise CapacityError(f"coordinate 'dv' must be a scalar or lie along 'd', got dims {dv.dims}")


def levels(ds: xr.Dataset, dim: str) -> list[Level]:
    """The coordinate values along ``dim`` (``[None]`` where the Dataset has no such dimension)."""
    if dim not in ds.dims:
        return [None]
    return [x.item() if hasattr(x, "item") else x for x in ds[dim].values]


def thin(values: Iterable[T], limit: int) -> list[T]:
    """At most ``limit`` of ``values``, spread over them: numbers evenly on a log scale (positive) or a linear one,
    the smallest and the largest always kept; labels evenly by position. All of them when there are few enough."""
    values = list(values)
    if len(values) <= limit:
        return values
    try:
        x = np.asarray(values, dtype=float)
        numeric = bool(np.all(np.isfinite(x)))
    except (TypeError, ValueError):
        numeric = False
    if numeric:
        order = np.argsort(x)
        xs = x[order]
        targets = np.geomspace(xs[0], xs[-1], limit) if xs[0] > 0 else np.linspace(xs[0], xs[-1], limit)
        picked = {int(order[int(np.argmin(np.abs(xs - t)))]) for t in targets}
        for t in np.linspace(xs[0], xs[-1], 4 * limit):  # ties at one value: fill up with the nearest others
            if len(picked) >= limit:
                break
            picked.add(int(order[int(np.argmin(np.abs(xs - t)))]))
        return [values[i] for i in sorted(picked, key=lambda i: x[i])]
    idx = np.unique(np.round(np.linspace(0, len(values) - 1, limit)).astype(int))
    return [values[i] for i in idx]


def panels(ds: xr.Dataset, dim: str, limit: int = MAX_PANELS) -> tuple[list[Level], str]:
    """The values of ``dim`` that get a panel (``thin`` to ``limit``) and a sentence for the figure's note saying
    which were shown when some were left out ('' when all are shown). The results file keeps every value."""
    values = levels(ds, dim)
    shown = thin(values, limit)
    if len(shown) == len(values):
        return values, ""
    listed = ", ".join(str(v) for v in shown)
    return shown, (
        f"Panels for {len(shown)} of the {len(values)} values of {dim} ({dim} = {listed}); the results file holds all."
    )


def sel(ds: XR, **where: object) -> XR:
    """``ds.sel`` that ignores ``None`` selections (a facet over a dimension the Dataset lacks)."""
    out: XR = ds.sel({k: v for k, v in where.items() if v is not None})  # xarray's Self: Any under 3.10
    return out


def tidy(da: xr.DataArray, name: Hashable | None = None) -> pd.DataFrame:
    """A long table of ``da`` (one row per element, NaNs dropped), with its coords as columns."""
    name = name or da.name or "value"
    df = da.rename(name).to_dataframe().reset_index()
    return df[np.isfinite(df[name].astype(float))]


def families(ds: xr.Dataset) -> list[str]:
    """The key families' labels in the Dataset's order (none where it has no ``key_family`` dimension)."""
    return [str(k) for k in levels(ds, "key_family") if k is not None]


def by_family(da: xr.DataArray, name: str) -> pd.DataFrame:
    """``tidy(da, name)`` with a ``key_family`` column to draw a curve per family by ("unknown" where ``da`` has no
    such dimension)."""
    df = tidy(da, name)
    if "key_family" not in df:
        df["key_family"] = "unknown"
    return df


def undetermined(ds: xr.Dataset, metric: str, threshold: float, dim: str = "load") -> dict[str, int]:
    """Count the capacities ``metrics.capacity`` leaves NaN, by reason: beyond the grid, below it, no data."""
    n, y = xr.broadcast(ds.coords["n"].astype(float), ds[metric])
    why = xr.apply_ufunc(
        metrics.undetermined_reason,
        y,
        n,
        input_core_dims=[[dim], [dim]],
        kwargs={"threshold": float(threshold), "higher": metric in HIGHER_IS_BETTER},
        vectorize=True,
        output_dtypes=[int],
    )
    w = np.asarray(why.values).ravel()
    return {
        "beyond": int((w == 1).sum()),
        "below": int((w == 2).sum()),
        "missing": int((w == 3).sum()),
        "total": int(w.size),
    }


def undetermined_note(counts: dict[str, int], criterion: str) -> str | None:
    """One sentence on the capacities not drawn, or None when every one was determined."""
    parts = []
    if counts["beyond"]:
        parts.append(f"{counts['beyond']} still met it at the largest n measured (capacity beyond the grid)")
    if counts["below"]:
        parts.append(f"{counts['below']} failed it already at the smallest n (capacity below the grid)")
    if counts["missing"]:
        parts.append(f"{counts['missing']} had no finite measurement")
    if not parts:
        return None
    k = counts["beyond"] + counts["below"] + counts["missing"]
    return f"{criterion}: {k} of {counts['total']} runs not drawn: " + "; ".join(parts) + "."


def reads(ds: xr.Dataset, variant: object) -> tuple[bool, bool]:
    """(additive, linear_read) of ``variant`` in ``ds``: whether T5/T7/T10 and whether T8 apply to its curves.

    From the coordinates ``additive`` and ``linear_read`` the sweep writes; for a Dataset without them, from the
    variant the label names (unknown labels: neither). A Dataset without a variant axis is taken as additive.
    """
    if variant is None:
        return True, True
    if "additive" in ds.coords and "variant" in ds["additive"].dims:
        return bool(ds["additive"].sel(variant=variant)), bool(ds["linear_read"].sel(variant=variant))
    try:
        said = declared(variants.resolve(str(variant)))
    except CapacityError:
        return False, False
    return said.additive is True, said.linear_read is True


@functools.lru_cache(maxsize=256)
def _rebuilt(path: str, params: str) -> Declares | None:
    """What the built-in memory of class ``path`` (``module:Class``) with the JSON ``params`` declares, or None where
    it cannot be rebuilt here (each record is built once per process)."""
    module, _, name = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
        return declared(cls(**json.loads(params)))
    except (ImportError, AttributeError, CapacityError, TypeError, ValueError):
        return None


def memory(ds: xr.Dataset, variant: object) -> tuple[Declares, Params] | None:
    """(what it declares, every parameter) of the built-in memory labelled ``variant``, as the results carry it: a
    figure draws a closed form for the family the memory declares (``Declares.form``), with the constants its
    parameters give, and never decides by a name.

    A sweep's Dataset records each memory's class and all its parameters, defaults included (``attrs["memories"]``):
    that record is read and the memory rebuilt from it, so no figure copies a memory's defaults or parses its label.
    A Dataset made outside the sweep (``probe.recall``, by hand) has no record: the memory is then built from its
    label by the registry, which fills in every default. None for a memory that is not a built-in (no closed form is
    drawn for it) or that cannot be rebuilt here.
    """
    if variant is None:
        return None
    try:
        recorded = json.loads(ds.attrs["memories"]) if "memories" in ds.attrs else None
    except (ValueError, TypeError):
        recorded = None
    if recorded is not None:
        entry = recorded.get(str(variant))
        if not isinstance(entry, dict) or not str(entry.get("class", "")).startswith("lacapacity.variants."):
            return None
        params = dict(entry.get("params", {}))
        said = _rebuilt(str(entry["class"]), json.dumps(params, sort_keys=True))
        return None if said is None else (said, params)
    try:
        built = variants.resolve(str(variant))
    except CapacityError:
        return None
    if not type(built).__module__.startswith("lacapacity.variants."):
        return None
    return declared(built), variants.params(built)


def family(ds: xr.Dataset, variant: object) -> str | None:
    """The closed-form family the built-in memory labelled ``variant`` declares (``Declares.form``), or None."""
    found = memory(ds, variant)
    return None if found is None else found[0].form


def spec(ds: xr.Dataset, axis: str, label: object) -> tuple[str, Params]:
    """(name, parameters) of the key family (``axis="keys"``) or feature map (``axis="feature"``) labelled ``label``
    in ``ds``, as the results carry it: the study's configuration (``attrs["config"]``) lists each with its name and
    parameters, so no figure parses a label. A Dataset made outside the sweep has no configuration: its label is read
    by the label grammar (``lacapacity.base.labels``), the one the study's ``--set`` reads."""
    try:
        grid = json.loads(ds.attrs["config"])["grid"] if "config" in ds.attrs else {}
        entries = grid.get(axis, []) if isinstance(grid, dict) else []
    except (ValueError, TypeError, KeyError):
        entries = []
    for entry in entries:
        if isinstance(entry, dict) and labels.format(entry.get("name", ""), entry.get("params", {})) == str(label):
            return str(entry["name"]), dict(entry.get("params", {}))
    try:
        return labels.parse(str(label))
    except CapacityError:
        return str(label), {}


def delta_beta(ds: xr.Dataset, variant: object) -> float | None:
    """The constant beta of a plain delta rule (unit keys, no gate, no feature map), whose exact mean error for random
    keys is ``theory.delta_rule_error``; None for any other memory."""
    found = memory(ds, variant)
    if found is None:
        return None
    said, params = found
    beta = params.get("beta")
    plain = said.form == "delta" and params.get("normalize", True) is True and params.get("feature") is None
    if not plain or isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 < beta < 2:
        return None
    return float(beta)


def task_of(ds: xr.Dataset) -> tasks.Task[Any]:
    """The task whose results ``ds`` holds: the kind its configuration records (``ds.attrs["config"]``, written by
    the sweep), else recall, the default kind (a Dataset of ``lacapacity.probe.recall``, or built by hand)."""
    config = ds.attrs.get("config")
    kind = "recall"
    if config is not None:
        try:
            recorded = json.loads(str(config))
        except ValueError:
            raise CapacityError("the Dataset's attrs['config'] is not JSON (it was edited, or is not ours)") from None
        task = recorded.get("task") if isinstance(recorded, dict) else None
        kind = str(task.get("kind", kind)) if isinstance(task, dict) else kind
    return tasks.get(kind)


def closed_form(ds: xr.Dataset, name: str) -> Callable[..., Any]:
    """The function of ``lacapacity.theory`` that the task of ``ds`` (``task_of``) stores the closed-form variable
    ``name`` by (``Task.closed_forms``): what a figure evaluates where it draws that closed form on a finer grid than
    the stored one, so that the line and the stored variable are one function's."""
    task = task_of(ds)
    if name not in task.closed_forms:
        known = ", ".join(task.closed_forms) or "none"
        raise CapacityError(f"task {task.name!r} stores no closed form {name!r} (its closed forms: {known})")
    return task.closed_forms[name]
