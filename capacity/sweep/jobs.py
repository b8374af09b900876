"""The sweep's units of work: ``measure(job)`` (what ``lacapacity.sweep.executors`` runs, in this process or a worker),
the checks made before any work (``check``, ``check_memory``) and ``prepare`` (imports made while workers measure).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, cast

import torch

from lacapacity import variants
from lacapacity.base import _opened, _validate, plugins
from lacapacity.errors import CapacityError
from lacapacity.inputs import keys as keys_mod
from lacapacity.sweep import provenance
from lacapacity.tasks import Measured, _resume, _shared, probe
from lacapacity.tasks import get as tasks_get
from lacapacity.variants import heads as heads_mod

if TYPE_CHECKING:  # pragma: no cover
    from lacapacity.sweep.config import Study
    from lacapacity.sweep.plan import Plan
    from lacapacity.tasks import Mqar, Task
    from lacapacity.tasks.protocol import Pass
    from lacapacity.variants import Variant


READ_FILES = "capacity_read_files"  # a pass's attr: JSON {path: sha256} of the files the memory read while measured


class Job(TypedDict):
    """What ``measure`` takes: the modules to import first, the passes of one study, each ``(key, pass, torch
    threads or None)``, and the folder of each pass's checkpoints by its key (``lacapacity.tasks._resume``)."""

    imports: list[str]
    passes: list[tuple[str, Pass[Any], int | None]]
    checkpoints: dict[str, str]


def measure(job: Job) -> list[tuple[str, Measured]]:
    """Run the passes of one job: ``[(key, Measured), ...]`` in their order. ``job``: {"imports": [module, ...],
    "passes": [(key, pass, threads), ...]}, the passes of one study (``lacapacity.tasks.protocol.Pass``).

    ``imports`` are imported first (``--import``: plug-ins that register themselves on import); ``threads``: torch
    threads for that pass only (None: leave the setting alone). The passes share their draws (``_shared``): the
    sweep gives one job the passes that differ only in their memory.
    """
    plugins.import_modules(job.get("imports"))  # a module that fails is one line, here and in every worker
    before, out = torch.get_num_threads(), []
    with _shared.shared():
        for key, p, threads in job["passes"]:
            task = tasks_get(cast(str, p.study.task.kind))  # cast: a study's task has a kind (Study.__post_init__)
            if threads:
                torch.set_num_threads(threads)
            try:
                with _opened.recording() as opened, _resume.checkpoints((job.get("checkpoints") or {}).get(key)):
                    got = task.measure(p)  # files the memory reads: sweep.store checks them on reuse
                if opened and isinstance(got, Measured):
                    got.attrs[READ_FILES] = json.dumps(provenance.files(opened), sort_keys=True)
                out.append((key, got))
            finally:
                torch.set_num_threads(before)
    return out


def prepare() -> None:
    """Import what assembling a study needs later (scipy, for the closed forms): the sweep calls it while its
    workers measure, so that the import is off the critical path."""
    from lacapacity.theory import _common

    _common._scipy()


def check(study: Study, device: torch.device | None = None) -> None:
    """Check every name and parameter before any work, cheaply: variants are built (not run), the largest pass of
    each is estimated against ``device``'s free memory (before any key is drawn: a fingerprint at a huge d would
    allocate first), key families check their parameters on two keys (learned keys optimise nothing), sizes are
    compared."""
    g = study.grid
    task = tasks_get(cast(str, study.task.kind))  # cast: as in measure
    for v in g.variant:
        for f in g.feature or (None,):
            obj = variants.build(v, f)
            if device is not None:
                for d in g.d:
                    _fits(study, task, obj, v.label, d, device)
    for k in g.keys:
        fam = keys_mod.family(k.name)
        for d in g.d:
            fam.validate(d, k.kwargs)
            if k.name == "simplex" and max(g.ns(d)) > d + 1:
                raise CapacityError(
                    f"simplex keys exist for n <= d + 1; the grid asks for n = {max(g.ns(d))} at d = {d}"
                )
    for d in g.d:
        for dv in g.dv or (d,):
            for h in g.heads:
                for hv in g.value_heads or (h,):
                    heads_mod.check_layout(d, dv, h, hv)
    task.check(study)


def _peak(study: Study, task: Task[Any], memory: Variant, seeds: int, ns: list[int], d: int, dv: int) -> int:
    """Estimated peak bytes of one pass (``probe.peak_bytes`` and the task's ``extra_bytes``)."""
    T = task.writes(study, ns)
    return probe.peak_bytes(memory, seeds, T, d, dv, task.key_stats(study)) + task.extra_bytes(study, d, max(ns), seeds)


def _refuse(
    study: Study, task: Task[Any], what: str, ns: list[int], need: int, have: int, device: str, parallel: int
) -> None:
    gib: Callable[[float], str] = lambda b: f"{b / 2**30:.1f} GiB"
    at_once = f" ({parallel} passes at once)" if parallel > 1 else ""
    n, T = max(ns), task.writes(study, ns)
    tokens = f", {T} tokens written" if T != n else ""
    mqar = cast("Mqar", study.task)  # read only when the kind is mqar: its config is Mqar
    fewer = " (or fewer distractors)" if study.task.kind == "mqar" and mqar.distractors else ""
    sized = ", batch, vocabulary" if study.task.kind == "trained" else ""
    raise CapacityError(
        f"the largest pass ({what}, n up to {n}{tokens}) needs about {gib(need)}{at_once} but {device} has "
        f"{gib(have)} available; use a smaller d{sized}, load or fewer seeds{fewer}"
    )


def _fits(study: Study, task: Task[Any], memory: Variant, label: str, d: int, device: torch.device) -> None:
    """Refuse, in one line, a memory whose largest pass at ``d`` (every seed, every n) cannot fit in memory."""
    have = _validate.available_bytes(device)
    ns = study.grid.ns(d)
    dvs = study.grid.dv or (d,)
    need = max(_peak(study, task, memory, len(study.grid.seed), ns, d, dv) for dv in dvs)
    if have is not None and need > 0.9 * have:
        _refuse(study, task, f"{label}, d = {d}", ns, need, have, device.type, 1)


def check_memory(plan: Plan, passes: Sequence[Pass[Any]], parallel: int = 1) -> int:
    """Refuse, in one line, a run whose largest pass (times the passes run at once) cannot fit in memory
    (``plan``: a ``lacapacity.sweep.plan.Plan``; ``passes``: its passes to run); else return that estimate in bytes."""
    if not passes:
        return 0
    study, task = plan.study, tasks_get(cast(str, plan.study.task.kind))  # cast: as in measure
    peak: Callable[[Pass[Any]], int] = lambda p: _peak(
        study, task, p.memory, len(p.seeds), list(p.ns), p.cell.d, p.cell.dv
    )
    need, at = max((peak(p), i) for i, p in enumerate(passes))
    worst, need, have = passes[at], need * parallel, _validate.available_bytes(plan.device)
    if have is not None and need > 0.9 * have:
        what = f"{plan.memory(worst.cell).label}, {worst.cell.keys.label}, d = {worst.cell.d}"
        _refuse(study, task, what, list(worst.ns), need, have, plan.device.type, parallel)
    return need
