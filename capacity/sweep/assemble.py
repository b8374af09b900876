"""The study's Dataset (docs/results-schema.md) from its groups' Datasets, with theory and provenance.

Each group's points become rows of a flat ``point`` dimension labelled by their grid coordinates; xarray's
``concat`` joins them and ``unstack`` lays them out on the grid, which is then put in the study's order.
"""

from __future__ import annotations

import datetime
import json

import numpy as np
import xarray as xr

from capacity.provenance import git_commit, versions
from capacity.sweep.config import Study, build_variant, n_of
from capacity.sweep.kinds import KINDS

__all__ = ["assemble", "provenance"]

_COORD_ATTRS = {
    "d": {"long_name": "key dimension", "units": "dimensions"},
    "load": {"long_name": "load n/d", "units": "1"},
    "n": {"long_name": "pairs written", "units": "pairs"},
    "dv": {"long_name": "value dimension", "units": "dimensions"},
}


def _cell(study: Study, group) -> dict:
    """The grid coordinates a group's points share, for the dimensions the study's Dataset has."""
    g, cell = study.grid, {"variant": group.variant.label}
    if study.probe.kind != "bill":  # one key family: a scalar coordinate
        cell["key_family"] = group.keys.label
    if g.feature:
        cell["feature"] = group.feature.label
    cell["d"] = group.d
    if len(g.dtype) > 1:
        cell["dtype"] = group.dtype
    if len(g.dv) > 1:
        cell["dv"] = group.dv
    for axis in _PRECISION:
        if len(getattr(g, axis)) > 1:
            cell[axis] = getattr(group, axis)
    if len(g.heads) > 1:
        cell["heads"] = group.heads
    if len(g.value_heads) > 1:
        cell["value_heads"] = group.value_heads
    return cell


_PRECISION = ("state_dtype", "rounding")
_LAST = ("dtype", "dv", "state_dtype", "rounding", "heads", "value_heads")  # dimensions after the curve axis


def assemble(study: Study, results: list, *, attrs: dict) -> xr.Dataset:
    """One Dataset over the study's grid from every ``(group, Dataset)`` (in any order), plus theory variables."""
    g, kind, curve = study.grid, KINDS[study.probe.kind], study.grid.curve
    rows, feature_dim = [], {}
    for group, ds in results:
        cell = _cell(study, group)
        size = ds.sizes[curve]
        flat = ds.rename({curve: "point"}).assign_coords(
            {curve: ("point", ds[curve].values), **{k: ("point", [v] * size) for k, v in cell.items()}}
        )
        rows.append(flat)
        if group.feature is not None and "feature_dim" in ds.attrs:
            feature_dim[(group.feature.label, group.d)] = int(ds.attrs["feature_dim"])
    order = {"variant": [v.label for v in g.variant], "key_family": [k.label for k in g.keys]}
    order.update(feature=[f.label for f in g.feature], d=list(g.d), dtype=list(g.dtype), dv=list(g.dv))
    order.update(state_dtype=list(g.state_dtype), rounding=list(g.rounding))
    layouts = g.layouts()
    order.update(heads=sorted({h for h, _ in layouts}), value_heads=sorted({hv for _, hv in layouts}))
    order[curve] = list(g.curve_values)
    dims = [k for k in ("variant", "key_family", "feature", "d", *_LAST) if k in rows[0].coords]
    dims.insert(dims.index("d") + 1, curve)
    out = xr.concat(rows, "point", combine_attrs="drop").set_index(point=dims).unstack("point")
    out = out.reindex({k: order[k] for k in dims})  # unstack sorts; the study's order
    extra = list(kind.coords(study))
    out = out.transpose(*[k for k in dims if k not in _LAST], *extra, *[k for k in _LAST if k in dims])
    for name, meta in kind.variables(study).items():
        out[name].attrs = meta

    # coordinates over the grid: what each variant is, n or load, dv, dtype, feature dimensions
    built = [build_variant(v, g.feature[0] if g.feature and v.obj is None else None) for v in g.variant]
    for flag, desc in (
        ("additive", "the write is S += k^T v and the read q S: T5, T7 and T10 apply"),
        ("linear_read", "the read is linear in a fixed-size state: the rank bound T8 applies"),
    ):
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
    if study.probe.kind == "recall":  # how the state is stored and laid out (capacity.precision, capacity.heads)
        described = {
            "state_dtype": "dtype the state is stored in (capacity.precision; float32: as computed)",
            "rounding": "when the stored state is rounded: step, final or chunk=C (+stochastic)",
            "heads": "key heads H, each of d/H dimensions normalised on its own (capacity.heads)",
            "value_heads": "value heads HV, each of dv/HV dimensions",
        }
        for axis in _PRECISION:
            if len(getattr(g, axis)) == 1:
                out.coords[axis] = ((), getattr(g, axis)[0], {"description": described[axis]})
            else:
                out[axis].attrs = {"description": described[axis]}
        for axis in ("heads", "value_heads"):
            if axis in out.dims:
                out[axis].attrs = {"description": described[axis]}
            elif axis == "value_heads" and not g.value_heads and "heads" in out.dims:  # as many as key heads
                out.coords["value_heads"] = ("heads", list(g.heads), {"description": described[axis] + " (= heads)"})
            else:
                out.coords[axis] = ((), layouts[0][0 if axis == "heads" else 1], {"description": described[axis]})
    if study.probe.kind == "bill":
        out.coords.update({"key_family": ((), g.keys[0].label), "seed": ((), g.seed[0])})
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
    for name, (values, meta) in kind.theory_vars(study, n.values, d.values, dv.values).items():
        out[name] = (n.dims, np.broadcast_to(values, n.shape).copy(), meta)
    out.attrs = {**attrs, **(kind.attrs(study) if hasattr(kind, "attrs") else {})}
    return out


def provenance(study: Study, *, device: str, run: dict) -> dict:
    """The attrs every study Dataset carries (docs/results-schema.md)."""
    return {
        "study": study.name,
        "description": study.description,
        "config": json.dumps({**study.to_json(), "run": run}, sort_keys=True),
        "config_hash": study.config_hash(device.split(":")[0]),
        "versions": json.dumps(versions(), sort_keys=True),
        "device": device,
        "git_commit": git_commit(),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
