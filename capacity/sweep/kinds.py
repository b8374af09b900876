"""The kinds of study, one module each (``recall``, ``bill``, ``mqar``, ``needle``), and ``measure(task)``, what ``capacity.executors`` runs.

A kind module has ``ONE_PASS`` (every n in one write pass whatever the keys), ``coords(study)`` (a group's
dimensions besides the curve axis), ``variables(study)`` (name -> attrs), ``writes(study, ns)`` (pairs one pass
writes), ``measure(study, group, device) -> Dataset`` and ``theory_vars(study, n, d, dv)`` (closed forms for the
assembled study); optionally ``check(study)``, ``attrs(study)`` (attrs of the assembled Dataset),
``extra_coords(study)`` (dimensions only some variables have, e.g. recall's ``age``) and ``var_dims(study)``
(name -> the dimensions of such a variable besides the curve axis).
"""

from __future__ import annotations

import importlib

import torch
import xarray as xr

from capacity.sweep import bill, mqar, needle, recall

__all__ = ["KINDS", "measure", "expectation"]

KINDS = {"recall": recall, "bill": bill, "mqar": mqar, "needle": needle}


def measure(task: dict) -> xr.Dataset:
    """Run one group. ``task``: {"study", "group", "device": str, "imports": [module, ...], "threads": int | None}.

    ``imports`` are imported first (``--import``: plug-ins that register themselves on import); ``threads``: torch
    threads for this group only (None: leave the setting alone).
    """
    for module in task.get("imports") or ():
        importlib.import_module(module)
    study, threads, before = task["study"], task.get("threads"), torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return KINDS[study.probe.kind].measure(study, task["group"], torch.device(task["device"]))
    finally:
        torch.set_num_threads(before)


def expectation(study, group):
    """A check of a stored group's Dataset: what is wrong with it (a short phrase), or None."""
    kind = KINDS[study.probe.kind]
    want = sorted(kind.variables(study))
    coords = {study.grid.curve: list(group.curve), **kind.coords(study)}
    extra = getattr(kind, "extra_coords", lambda s: {})(study)
    dims = getattr(kind, "var_dims", lambda s: {})(study)
    every = {**coords, **extra}

    def check(ds: xr.Dataset) -> str | None:
        if sorted(map(str, ds.data_vars)) != want:
            return (
                f"it holds {', '.join(sorted(map(str, ds.data_vars))) or 'no variables'} instead of {', '.join(want)}"
            )
        for name, values in every.items():
            if name not in ds.coords or ds[name].values.tolist() != values:
                return f"its {name} coordinate differs from the study's"
        for name in want:
            v = ds[name]
            shape = (study.grid.curve, *dims[name]) if name in dims else tuple(coords)
            if v.dims != shape or v.shape != tuple(len(every[k]) for k in shape) or v.dtype.kind not in "fi":
                return f"its variable {name} has dims {v.dims}, shape {v.shape}, dtype {v.dtype}"
        return None

    return check
