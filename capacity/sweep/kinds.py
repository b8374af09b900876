"""The kinds of study, one module each (``recall``, ``bill``, ``mqar``), and ``measure(task)``, the function executors run.

A kind module has ``variables(study) -> {name: dims}`` (what one group's Dataset holds) and
``measure(study, group, device) -> xarray.Dataset``.
"""

from __future__ import annotations

import importlib

import torch
import xarray as xr

from capacity.sweep import bill, mqar, recall
from capacity.sweep.config import Study
from capacity.sweep.points import Group

__all__ = ["KINDS", "measure", "expectation"]

KINDS = {"recall": recall, "bill": bill, "mqar": mqar}


def measure(task: dict) -> xr.Dataset:
    """Run one group. ``task``: {"study": Study, "group": Group, "device": str, "threads": int | None, "imports": [...]}.

    ``imports`` are modules to import first (``--import``: plug-ins that register themselves). Returns a Dataset
    over the curve axis (``load`` or ``n``) and, for recall and mqar, ``seed`` (mqar: ``overwrite`` too).
    """
    if task.get("threads"):
        torch.set_num_threads(int(task["threads"]))
    for module in task.get("imports") or ():
        importlib.import_module(module)
    study, group = task["study"], task["group"]
    return KINDS[study.probe.kind].measure(study, group, torch.device(task["device"]))


def expectation(study: Study, group: Group):
    """A check of a stored group's Dataset: what is wrong with it (a short phrase), or None."""
    want = KINDS[study.probe.kind].variables(study)
    coords = {study.grid.curve: list(group.curve)}
    if study.probe.kind in ("recall", "mqar"):
        coords["seed"] = list(study.grid.seed)
    if study.probe.kind == "mqar":
        coords["overwrite"] = list(study.probe.overwrite)

    def check(ds: xr.Dataset) -> str | None:
        if sorted(ds.data_vars) != sorted(want):
            return f"it holds {', '.join(sorted(map(str, ds.data_vars))) or 'no variables'} instead of {', '.join(sorted(want))}"
        for name, values in coords.items():
            if name not in ds.coords or ds[name].values.tolist() != values:
                return f"its {name} coordinate differs from the study's"
        for name, dims in want.items():
            v = ds[name]
            if v.dims != dims or v.shape != tuple(len(coords[d]) for d in dims) or v.dtype.kind not in "fi":
                return f"its variable {name} has dims {v.dims}, shape {v.shape}, dtype {v.dtype}"
        return None

    return check
