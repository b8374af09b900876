"""The study's Dataset (docs/results-schema.md) from its cells' stored points, with theory and provenance.

A pass's ``Measured`` arrays are checked against the task's schema and cut into points (``split``: views, no copy);
the study's arrays are allocated once over the grid and each cell's points are put in place (``assemble``), so a
number goes from the probe's numpy array to JSON in its cell's file to the study's array, nothing in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import EllipsisType
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from lacapacity.errors import CapacityError
from lacapacity.sweep.config import Study, n_of
from lacapacity.variants import declares

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import NDArray

    from lacapacity.sweep.plan import Plan
    from lacapacity.sweep.store import Points
    from lacapacity.tasks import Measured, Schema
    from lacapacity.tasks.protocol import Cell


_FLAGS = {
    "additive": "the write is S += k^T v and the read q S: T5, T7 and T10 apply",
    "linear_read": "the read is linear in a fixed-size state: the rank bound T8 applies",
}
_COORD_ATTRS = {
    "d": {"long_name": "key dimension", "units": "dimensions"},
    "load": {"long_name": "load n/d", "units": "1"},
    "n": {"long_name": "pairs written", "units": "pairs"},
    "dv": {"long_name": "value dimension", "units": "dimensions"},
}


def split(measured: Measured, schema: Schema, task: str | None, seeds: Sequence[int], ns: Sequence[int]) -> Points:
    """A pass's ``Measured`` (``lacapacity.tasks.protocol``) as points ``{(seed, n): {variable: array over its dims but
    seed}}`` (views of its arrays), after checking it against ``schema`` (the task's ``Schema``): every variable, no
    other, each of its declared dtype and of shape ``(len(ns), *its dims)``. ``task``: the kind, for the message."""
    order = sorted(set(ns))
    got = getattr(measured, "values", None)
    if not isinstance(got, dict):
        raise CapacityError(
            f"task {task!r}: measure() must return a lacapacity.tasks.Measured, got {type(measured).__name__}"
        )
    if sorted(got) != sorted(schema.variables):
        raise CapacityError(
            f"task {task!r}: measure() gave {', '.join(sorted(got)) or 'no variables'}; its schema declares {', '.join(sorted(schema.variables))}"
        )
    sizes = {**{k: len(v) for k, v in {**schema.dims, **schema.extra}.items()}, "seed": len(seeds)}
    points: Points = {(int(s), int(n)): {} for s in seeds for n in order}
    for name, var in schema.variables.items():
        x, shape = got[name], (len(order), *(sizes[d] for d in var.dims))
        if not isinstance(x, np.ndarray) or x.shape != shape or x.dtype != np.dtype(var.dtype):
            have = f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
            raise CapacityError(
                f"task {task!r}: measure() gave {name} as {have}; its schema declares {np.dtype(var.dtype)} {shape} over (n, {', '.join(var.dims)})"
            )
        at = var.dims.index("seed") if "seed" in var.dims else None
        for j, n in enumerate(order):
            for i, s in enumerate(seeds):  # basic indexing: a view
                # the index as a local: mypy reads x[(j, *...)] as Python 3.11's x[j, *...]
                view: tuple[int | slice, ...] = (j,) if at is None else (j, *[slice(None)] * at, i)
                points[int(s), int(n)][name] = x[view]
    return points


_LAST = ("dtype", "dv", "state_dtype", "rounding", "heads", "value_heads")  # cell axes after the seed


def assemble(
    study: Study, plan: Plan, results: list[tuple[Cell, Points, dict[str, Any]]], *, attrs: dict[str, Any]
) -> xr.Dataset:
    """One Dataset over the study's grid from every ``(cell, points, cell attrs)`` (points ``{(seed, n): {variable:
    array}}``, every seed and n of the cell), plus theory variables. Each variable is one array, allocated once and
    filled cell by cell, over ``(variant, [key_family], [feature], d, curve, *its own dims, *the cell axes with
    more than one value)``; a scalar dimension of the schema (bill's seed) is held at its one value."""
    g, task, schema, curve = study.grid, plan.task, plan.schema, study.grid.curve
    scalars = schema.scalars  # e.g. bill's one key family and seed
    grid: dict[str, list[Any]] = {
        "variant": [plan.labels[v] for v in g.variant]
    }  # the grid's dimensions, in order, with their values
    if task.key_axis:  # bill: one key family, a scalar; needle: haystacks
        grid["key_family"] = [k.label for k in g.keys]
    if g.feature:
        grid["feature"] = [f.label for f in g.feature]
    grid.update(d=list(g.d), **{curve: list(g.curve_values)})
    last = {axis: list(getattr(g, axis)) for axis in _LAST if len(getattr(g, axis)) > 1}
    own = {**schema.dims, **schema.extra}
    kept = [k for k in (*schema.dims, *schema.extra) if k not in scalars]  # a variable's own dims, in this order
    arrays: dict[str, tuple[list[str], NDArray[Any]]] = {}
    layout: dict[str, tuple[list[str], tuple[str, ...]]] = {}
    for name, v in schema.variables.items():
        stray = [k for k in v.dims if k not in own]
        if stray:
            raise CapacityError(
                f"task {task.name!r}: variable {name} has dimension(s) {stray} its schema does not declare"
            )
        dims = [k for k in kept if k in v.dims]
        layout[name] = (dims, v.dims)
        shape = [len(x) for x in grid.values()] + [len(own[k]) for k in dims] + [len(x) for x in last.values()]
        arrays[name] = ([*grid, *dims, *last], np.empty(shape, dtype=np.dtype(v.dtype)))
    index: dict[str, list[Any]] = {
        "variant": list(g.variant),
        "key_family": list(g.keys),
        "feature": list(g.feature),
        "d": list(g.d),
    }
    index.update({axis: list(getattr(g, axis)) for axis in last})
    feature_dim: dict[tuple[str, int], int] = {}
    for cell, points, cell_attrs in results:
        at = tuple(index[k].index(getattr(cell, "keys" if k == "key_family" else k)) for k in grid if k != curve)
        tail = tuple(index[k].index(getattr(cell, k)) for k in last)
        ns = study.grid.ns(cell.d)
        for name, (dims, declared) in layout.items():
            seeded = "seed" in declared
            rows = [
                np.stack([points[s, n][name] for s in g.seed], axis=declared.index("seed"))
                if seeded
                else points[g.seed[0], n][name]
                for n in ns
            ]
            block, held = np.stack(rows), list(declared)  # over (curve, *held)
            for k in [k for k in held if k not in dims]:  # a scalar dimension (bill's seed): its one value
                block, held = np.take(block, 0, axis=1 + held.index(k)), [h for h in held if h != k]
            block = block.transpose(0, *(1 + held.index(k) for k in dims))
            place: tuple[int | slice | EllipsisType, ...] = (*at, slice(None), ..., *tail)  # a local: as in split
            arrays[name][1][place] = block
        if cell.feature is not None and "feature_dim" in cell_attrs:
            feature_dim[(cell.feature.label, cell.d)] = int(cell_attrs["feature_dim"])
    out: xr.Dataset = xr.Dataset(
        {name: (dims, x, schema.variables[name].attrs) for name, (dims, x) in arrays.items()},
        coords={**grid, **last, **{k: own[k] for k in kept}},
    )
    out = out.assign_coords(schema.coords)

    # coordinates over the grid: what each variant is, n or load, dv, dtype, feature dimensions
    said = [declares.declared(plan.object(v)) for v in g.variant]
    for flag, got in (("additive", [x.additive for x in said]), ("linear_read", [x.linear_read for x in said])):
        out.coords[flag] = ("variant", np.array([x is True for x in got]), {"description": _FLAGS[flag]})
    d = xr.DataArray(np.asarray(g.d), dims="d")
    x = xr.DataArray(np.asarray(g.curve_values), dims=curve)
    if curve == "load":
        n = xr.DataArray([[n_of(v, dd) for v in g.load] for dd in g.d], dims=("d", "load"))
        out.coords["n"] = n.assign_attrs(_COORD_ATTRS["n"], description="max(1, round(load * d))")
    else:
        n = (x + 0 * d).transpose("d", "n")
        out.coords["load"] = (n / d).assign_attrs(_COORD_ATTRS["load"])
    for name in ("d", curve):
        out[name].attrs = _COORD_ATTRS[name]
    if not g.dv:
        dv = d
        out.coords["dv"] = d.assign_attrs(_COORD_ATTRS["dv"], description="dv = d")
    else:
        dv = xr.DataArray(np.asarray(g.dv), dims="dv") if len(g.dv) > 1 else xr.DataArray(g.dv[0])
        out.coords["dv"] = dv.assign_attrs(_COORD_ATTRS["dv"])
    if len(g.dtype) == 1:
        out.coords["dtype"] = ((), g.dtype[0], {"description": "dtype of keys and values"})
    out.coords.update({k: ((), v) for k, v in scalars.items()})
    if g.feature:
        fd = [[feature_dim.get((f.label, dd), -1) for dd in g.d] for f in g.feature]
        desc = "dimension of phi(k) as the variant reports it (-1: not reported)"
        out.coords["feature_dim"] = (
            ("feature", "d"),
            np.array(fd),
            {"long_name": "feature dimension", "units": "dimensions", "description": desc},
        )

    # closed forms over (d, curve) [+ dv]
    n, d, dv = xr.broadcast(n, d, dv)
    for name, (values, meta) in task.theory(study, n.values, d.values, dv.values).items():
        out[name] = (n.dims, np.broadcast_to(values, n.shape).copy(), meta)
    out.attrs = {**attrs, **task.attrs(study)}
    return out
