"""The study's Dataset (docs/results-schema.md) from its cells' stored points, with theory and provenance.

Each cell's points become rows of a flat ``point`` dimension labelled by their grid coordinates; xarray's ``concat``
joins them and ``unstack`` lays them out on the grid, which is then put in the study's order.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from capacity.sweep.config import Study, n_of

__all__ = ["assemble", "cell_dataset", "split"]

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


def split(ds: xr.Dataset, schema) -> dict:
    """A pass's Dataset over (n, ...) as points ``{(seed, n): {variable: array over its dims but n and seed}}``
    (``schema``: the task's ``Schema``), by numpy indexing (xarray's ``sel`` per point took 40% of the main job)."""
    arrays = {}  # variable -> (array over (n, [seed], its own dims), whether it has a seed axis)
    for v in ds.data_vars:
        seeded = "seed" in ds[v].dims
        order = ["n", *(["seed"] if seeded else []), *[d for d in schema.dims_of(v) if d != "seed"]]
        arrays[v] = (ds[v].transpose(*order).values, seeded)
    return {
        (int(s), int(n)): {v: x[j, i, ...] if seeded else x[j, ...] for v, (x, seeded) in arrays.items()}
        for i, s in enumerate(ds.seed.values.tolist())
        for j, n in enumerate(ds.n.values.tolist())
    }


def cell_dataset(study: Study, schema, cell, points: dict) -> xr.Dataset:
    """A cell's Dataset over (curve, ...) from its points ``{(seed, n): {variable: array}}`` (``schema``: the task's
    ``Schema`` of the study, as the plan made it once)."""
    curve, g = study.grid.curve, study.grid
    coords = {**schema.dims, **schema.extra}
    data = {}
    for var, v in schema.variables.items():
        own = v.dims
        rows = []
        for n in cell.ns(study):
            per_seed = [points[s, n][var] for s in g.seed]
            rows.append(np.stack(per_seed, axis=own.index("seed")) if "seed" in own else per_seed[0])
        data[var] = ((curve, *own), np.stack(rows))
    return xr.Dataset(data, coords={curve: list(g.curve_values), **coords})


def _cell(study: Study, task, cell, label: str) -> dict:
    """The grid coordinates a cell's points share, for the dimensions the study's Dataset has."""
    g, out = study.grid, {"variant": label}
    if task.key_axis:  # bill: one key family, a scalar; needle: haystacks
        out["key_family"] = cell.keys.label
    if g.feature:
        out["feature"] = cell.feature.label
    out["d"] = cell.d
    for axis in _LAST:
        if len(getattr(g, axis)) > 1:
            out[axis] = getattr(cell, axis)
    return out


_LAST = ("dtype", "dv", "state_dtype", "rounding", "heads", "value_heads")  # cell axes after the seed


def assemble(study: Study, plan, results: list, *, attrs: dict) -> xr.Dataset:
    """One Dataset over the study's grid from every ``(cell, Dataset, cell attrs)``, plus theory variables."""
    g, task, schema, curve = study.grid, plan.task, plan.schema, study.grid.curve
    rows, feature_dim = [], {}
    for cell, ds, cell_attrs in results:
        labels = _cell(study, task, cell, plan.labels[cell.variant])
        size = ds.sizes[curve]
        flat = ds.rename({curve: "point"}).assign_coords(
            {curve: ("point", ds[curve].values), **{k: ("point", [v] * size) for k, v in labels.items()}}
        )
        rows.append(flat)
        if cell.feature is not None and "feature_dim" in cell_attrs:
            feature_dim[(cell.feature.label, cell.d)] = int(cell_attrs["feature_dim"])
    order = {"variant": [plan.labels[v] for v in g.variant], "key_family": [k.label for k in g.keys]}
    order.update(feature=[f.label for f in g.feature], d=list(g.d), dtype=list(g.dtype), dv=list(g.dv))
    order.update({axis: list(getattr(g, axis)) for axis in ("state_dtype", "rounding", "heads", "value_heads")})
    order[curve] = list(g.curve_values)
    dims = [k for k in ("variant", "key_family", "feature", "d", *_LAST) if k in rows[0].coords]
    dims.insert(dims.index("d") + 1, curve)
    out = xr.concat(rows, "point", combine_attrs="drop").set_index(point=dims).unstack("point")
    out = out.reindex({k: order[k] for k in dims})  # unstack sorts; the study's order
    scalars = schema.scalars  # e.g. bill's one key family and seed
    extra = [k for k in schema.dims if k not in scalars] + list(schema.extra)
    out = out.isel(seed=0, drop=True) if "seed" in scalars else out
    out = out.transpose(
        *[k for k in dims if k not in _LAST], *extra, ..., *[k for k in _LAST if k in dims]
    )  # ...: a variable's own dimension (recall_at's k) after the seed
    for name, v in schema.variables.items():
        out[name].attrs = v.attrs
    out = out.assign_coords(schema.coords)

    # coordinates over the grid: what each variant is, n or load, dv, dtype, feature dimensions
    built = [plan.object(v) for v in g.variant]
    for flag, desc in _FLAGS.items():
        out.coords[flag] = (
            "variant",
            np.array([getattr(b, flag, False) is True for b in built]),
            {"description": desc},
        )
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
