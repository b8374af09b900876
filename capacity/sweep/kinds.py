"""The kinds of study, one module each (``recall``, ``bill``, ``mqar``), and ``measure(task)``, what ``capacity.executors`` runs.

A kind module has ``ONE_PASS`` (every n in one write pass whatever the keys), ``coords(study)`` (a group's
dimensions besides the curve axis), ``variables(study)`` (name -> attrs), ``writes(study, ns)`` (pairs one pass
writes), ``measure(study, group, device) -> Dataset`` and ``theory_vars(study, n, d, dv)`` (closed forms for the
assembled study); optionally ``check(study)`` and ``attrs(study)`` (attrs of the assembled Dataset).
"""

from __future__ import annotations

import importlib

import torch
import xarray as xr

from capacity.sweep import bill, mqar, recall

__all__ = ["KINDS", "measure", "expectation"]

KINDS = {"recall": recall, "bill": bill, "mqar": mqar}


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
    extra = getattr(kind, "extra_dims", lambda s: {})(study)  # {variable: {dim: values}} (recall_at over k)

    def check(ds: xr.Dataset) -> str | None:
        if sorted(map(str, ds.data_vars)) != want:
            return (
                f"it holds {', '.join(sorted(map(str, ds.data_vars))) or 'no variables'} instead of {', '.join(want)}"
            )
        for name, values in [*coords.items(), *[kv for dims in extra.values() for kv in dims.items()]]:
            if name not in ds.coords or ds[name].values.tolist() != values:
                return f"its {name} coordinate differs from the study's"
        for name in want:
            v = ds[name]
            dims = {**coords, **extra.get(name, {})}
            if v.dims != tuple(dims) or v.shape != tuple(map(len, dims.values())) or v.dtype.kind not in "fi":
                return f"its variable {name} has dims {v.dims}, shape {v.shape}, dtype {v.dtype}"
        return None

    return check
