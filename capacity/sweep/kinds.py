"""The kinds of study, one module each (``recall``, ``bill``, ``mqar``), and ``measure(task)``, what ``capacity.executors`` runs.

A kind module has ``PER_POINT`` (a point's numbers depend only on its cell, seed and n, so points are stored and
reused one by one), ``coords(study)`` (a cell's dimensions besides n: ``seed`` and the kind's own),
``variables(study)`` (name -> attrs), ``writes(study, ns)`` (pairs one pass writes),
``measure(study, cell, memory, seeds, ns, device) -> Dataset`` over (n, *coords) and
``theory_vars(study, n, d, dv)`` (closed forms for the assembled study); optionally ``check(study)`` and
``attrs(study)`` (attrs of the assembled Dataset).
"""

from __future__ import annotations

import importlib

import torch
import xarray as xr

from capacity.sweep import bill, mqar, recall

__all__ = ["KINDS", "measure"]

KINDS = {"recall": recall, "bill": bill, "mqar": mqar}


def measure(task: dict) -> xr.Dataset:
    """Run one pass. ``task``: {"study", "pass", "memory": the object, "device": str, "imports": [module, ...],
    "threads": int | None}.

    ``imports`` are imported first (``--import``: plug-ins that register themselves on import); ``threads``: torch
    threads for this pass only (None: leave the setting alone).
    """
    for module in task.get("imports") or ():
        importlib.import_module(module)
    study, p, threads, before = task["study"], task["pass"], task.get("threads"), torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        kind = KINDS[study.probe.kind]
        return kind.measure(study, p.cell, task["memory"], list(p.seeds), list(p.ns), torch.device(task["device"]))
    finally:
        torch.set_num_threads(before)
