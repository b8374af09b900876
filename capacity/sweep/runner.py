"""Run a study: check it, reuse the points on disk, measure the rest, persist each pass, assemble the Dataset.

Each finished pass is merged into its cell's file (``store``) before it counts as done, so an interrupt loses only
the passes in flight and the same command resumes. The Dataset is assembled from the points exactly as saved (each
cell's file is read once, before measuring; JSON keeps every float64), so a resumed run's equals an uninterrupted
one's. A second run into the same ``out`` waits for the first (a file lock),
then reuses its points.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import xarray as xr

from lacapacity import variants as variants_mod
from lacapacity.base import _files, _validate, plugins
from lacapacity.base._progress import Progress
from lacapacity.base._progress import log as _log
from lacapacity.errors import CapacityError, CapacityWarning
from lacapacity.sweep import executors, provenance
from lacapacity.sweep import store as store_mod
from lacapacity.sweep.assemble import assemble, split
from lacapacity.sweep.config import Grid, Study
from lacapacity.sweep.jobs import READ_FILES, Job, check, check_memory, measure, prepare
from lacapacity.sweep.plan import Plan
from lacapacity.sweep.store import Store, declared
from lacapacity.tasks import _resume
from lacapacity.variants import coincide

if TYPE_CHECKING:  # pragma: no cover
    from lacapacity.sweep.store import Points
    from lacapacity.tasks.protocol import Cell, Pass
    from lacapacity.variants import Variant


SMALL = 1e9  # multiply-adds under which a pass runs on one torch thread in this process (see _measure)
RATE = 3e10  # multiply-adds per second one CPU core sustained on the probe (main job, 2026-12-01; executor choice only)


@dataclass
class RunResult:
    """What ``run`` produced: the saved file, the Dataset, and how many points were measured now (in how many
    passes) and how many were reused."""

    path: Path
    dataset: xr.Dataset
    measured: int
    reused: int
    passes: int = 0


def run(
    study: Study,
    *,
    out: str | os.PathLike[str] = "results",
    device: str | None = "auto",
    executor: str = "auto",
    scheduler: str | None = None,
    workers: int | None = None,
    quiet: bool = False,
    verbose: bool = False,
    progress: bool = True,
    imports: Sequence[str] = (),
) -> RunResult:
    """Run (or resume) ``study`` and save its Dataset to ``<out>/<study.name>.nc``.

    ``executor``: auto, serial, processes or dask (``lacapacity.sweep.EXECUTORS``; ``scheduler``: a Dask scheduler
    address, else a local cluster of ``workers`` processes). ``quiet``: errors only; ``verbose``: a log line per
    finished pass and a summary; ``progress=False``: nothing at all. ``imports``: modules every worker imports first
    (plug-ins that register themselves on import).
    """
    if not isinstance(study, Study):
        raise CapacityError(
            f"sweep.run takes a lacapacity.sweep.Study (lacapacity.studies.get(name) for a named one), got {study!r}"
        )
    if out is None or not isinstance(out, (str, os.PathLike)):
        raise CapacityError(f"out must be a folder path, got {out!r}")
    dev = _validate.device(device, auto=True)
    _validate.choice("executor", executor, executors.EXECUTORS)
    workers = None if workers is None else _validate.positive_int("workers", workers)
    if scheduler and executor not in ("auto", "dask"):
        raise CapacityError(f"scheduler applies to the dask executor only, not {executor!r}")
    imports = list(imports or ())
    plugins.import_modules(imports)
    check(study, dev)
    if executors.bootstrapping():  # a worker importing a script that starts this sweep outside its main guard
        raise CapacityError(
            "this sweep was started while a worker process imported the script; put the script's work under if __name__ == '__main__':"
        )
    local = executors.main_only([v.obj for v in study.grid.variant if v.obj is not None], executor)
    script = executors.unguarded_script()
    if script is not None and (executor == "processes" or executor == "dask" and not scheduler):
        raise CapacityError(
            f"{script} starts a sweep outside if __name__ == '__main__':, and each worker process of the {executor} executor imports the script again (it would start the sweep too): put the script's work under that guard, or use executor='serial'"
        )
    local = local or script is not None  # auto: such a script runs in this process
    if executor in ("processes", "dask"):  # objects of the grid travel to the workers by pickle
        bad = executors.unpicklable([v.obj for v in study.grid.variant if v.obj is not None])
        if bad is not None:
            raise CapacityError(
                f"variant {type(bad[0]).__name__!r} cannot be sent to worker processes ({bad[1]}): give it only attributes pickle can copy, or use executor='serial'"
            )
    elif (
        executor == "auto"
        and not local
        and executors.unpicklable([v.obj for v in study.grid.variant if v.obj is not None])
    ):
        local = True  # auto: it runs in this process
    path = _files.writable_folder(Path(out), "output folder") / f"{study.name}.nc"
    _files.clean_stale(path.parent)  # the temporary files of a result write that was killed
    if path.is_dir():
        raise CapacityError(f"the results path {path} is a folder; remove it or choose another --out")
    store = Store(_files.writable_folder(Path(out) / ".sweep" / study.name, "store folder"))
    plan = Plan(study, dev, imports)
    names, coords = list(plan.schema.variables), plan.coords
    expect = declared(plan.schema, coords)
    log = (lambda msg: None) if not progress or quiet else _log
    with _files.lock(
        store.root, lambda: log(f"another run is writing {store.root}; waiting for it, then its points are reused")
    ):
        store.clean()
        stored = {}
        for c in plan.cells:
            points, attrs, why = store.load(plan.keys[c], names, coords, expect)
            stored[c] = (points, attrs)
            if why:
                log(
                    f"stored points of {plan.labels[c.variant]} {c.keys.label} d={c.d} {why}; measuring them again ({store.path(plan.keys[c])})"
                )
                if store.path(plan.keys[c]).is_dir():  # a folder in the way of the cell's file: moved aside
                    store.set_aside(plan.keys[c])
        todo = plan.passes({c: set(p) for c, (p, _) in stored.items()})
        work = sum(plan.seconds(p, RATE) for p in todo)
        drawing = sum(plan.draw_seconds(p) for p in todo)
        training = sum(  # a task's own work beyond writing and reading (the trained task's training)
            plan.task.seconds(p) for p in todo
        )
        work += training
        edited = provenance.edited(plan.user_modules()) if todo and executor != "serial" else []
        if edited and executor != "auto":  # the workers would measure the file, this process keyed what it holds
            raise CapacityError(
                f"module {edited[0]} was edited after this process imported it: worker processes would measure the "
                f"file as it is now, while the points stored and reused are keyed by the code this process runs; "
                f"reload it (importlib.reload, or a new Python session), or use executor='serial'"
            )
        local = local or bool(edited)  # auto: measured in this process, by the code it keys
        executor = executors.resolve(
            executor, str(dev), len(todo), scheduler, work_seconds=work + drawing, local_only=bool(local)
        )
        parallel = 1 if executor == "serial" else (workers or executors.cores())
        peak = check_memory(plan, todo, parallel=min(parallel, max(1, len(todo))))
        long = work + drawing > executors.LONG or peak > executors.LARGE
        if progress and long:  # after every check: only work that will run is announced
            executors.announce(study.name, work, drawing, min(parallel, max(1, len(todo))), training, peak)
        if executor != "serial":  # largest first: better balance across workers
            todo.sort(key=lambda p: -plan.work(p))
        total = sum(len(study.grid.seed) * len(set(study.grid.ns(c.d))) for c in plan.cells)
        if todo:  # after every check, before it measures: ``capacity store --prune`` keeps the cells if it is cut short
            store.start(list(plan.keys.values()))
        measured = _measure(
            plan, store, stored, todo, total, executor, scheduler, workers, imports, progress, quiet, verbose
        )
        results = []
        for c in plan.cells:  # each cell's points as persisted: read from its file above, or saved by _measure
            points, attrs = stored[c]
            if any((s, n) not in points for s in study.grid.seed for n in study.grid.ns(c.d)):
                raise CapacityError(
                    f"measured points of {plan.labels[c.variant]} {c.keys.label} d={c.d} are missing from {store.root}; run the same command again"
                )
            results.append((c, points, attrs))
            _resume.discard(store.checkpoints(plan.keys[c]))  # every point of the cell is stored
        store.record(study.name, list(plan.keys.values()))
    run_info = {"device": str(dev), "executor": executor, "scheduler": scheduler, "workers": workers}
    memories = {plan.labels[v]: plan.object(v) for v in study.grid.variant}
    attrs = provenance.record(study.to_json(), memories, libraries=plan.libraries, device=str(dev), run=run_info)
    ds = assemble(study, plan, results, attrs=attrs)
    try:
        _files.atomic_netcdf(ds, path)
    except OSError as exc:
        raise CapacityError(
            f"cannot write {path}: {exc.strerror or exc}; the measured points are saved under {store.root}, run the same command again"
        ) from None
    if progress and not quiet:
        _log(f"saved {path} ({total} points: {measured} measured in {len(todo)} passes, {total - measured} reused)")
    return RunResult(path, ds, measured, total - measured, len(todo))


def _measure(
    plan: Plan,
    store: Store,
    stored: dict[Cell, tuple[Points, dict[str, Any]]],
    todo: list[Pass[Any]],
    total: int,
    executor: str,
    scheduler: str | None,
    workers: int | None,
    imports: list[str],
    progress: bool,
    quiet: bool,
    verbose: bool,
) -> int:
    """Measure the passes ``todo`` on ``executor``, merging each into its cell's file as it arrives; returns the
    number of new points."""
    study = plan.study
    count: Callable[[Pass[Any]], int] = lambda p: len(p.seeds) * len(set(p.ns))
    where: Callable[[Pass[Any]], str] = lambda p: f"{plan.labels[p.cell.variant]} {p.cell.keys.label} d={p.cell.d}"
    done = total - sum(count(p) for p in todo)
    start = f"{study.name}: {total} points; {done} already stored, {len(todo)} passes to measure ({executor})"
    bar = Progress(study.name, total, done, show=progress and not quiet, verbose=verbose, start=start)
    # in this process on a CPU, small passes run on one torch thread: their many small ops only wait for the others
    one, measured = executor == "serial" and plan.device.type == "cpu", 0
    by_key = {f"{plan.keys[p.cell][:16]}-{i}": p for i, p in enumerate(todo)}  # unique on a shared scheduler too
    bundles: dict[
        tuple[Any, ...], list[tuple[str, Pass[Any], int | None]]
    ] = {}  # the passes that differ only in their memory draw the same: one job
    for k, p in by_key.items():
        same = tuple((a, v) for a, v in p.cell.items() if a not in ("variant", "feature"))
        bundles.setdefault((same, p.seeds, p.ns), []).append((k, p, 1 if one and plan.work(p) < SMALL else None))
    # each cell's checkpoint folder, by its key, as an absolute path below one this process makes: a worker that does
    # not share this file system finds no such folder and saves no checkpoint (lacapacity.tasks._resume.point)
    folders = {k: str(store.checkpoints(plan.keys[p.cell]).absolute()) for k, p in by_key.items()}
    saved = store.checkpoints()  # removed below while empty, whatever ends the run
    with contextlib.suppress(OSError):  # a store that cannot hold checkpoints: the points are saved as they end
        saved.mkdir(exist_ok=True)
    jobs = [
        (ps[0][0], Job(imports=imports, passes=ps, checkpoints={k: folders[k] for k, *_ in ps}))
        for ps in bundles.values()
    ]
    variables = {v: np.dtype(var.dtype).str for v, var in plan.schema.variables.items()}  # as split() checked
    stream = executors.execute(executor, measure, jobs, workers=workers, scheduler=scheduler, meanwhile=prepare)
    try:
        for k, got in ((k, got) for _, done in stream for k, got in done):
            p = by_key[k]
            points, attrs = stored[p.cell]
            points.update(split(got, plan.schema, study.task.kind, p.seeds, p.ns))  # checked against the schema
            read = json.loads(got.attrs.pop(READ_FILES, "{}"))  # files the memory read (checked on reuse)
            attrs.update(got.attrs)
            if read:
                attrs[store_mod.READ_FILES] = {**attrs.get(store_mod.READ_FILES, {}), **read}
            try:  # persisted before it counts as done
                store.save(plan.keys[p.cell], points, attrs, variables, plan.coords)
            except OSError as exc:
                raise CapacityError(
                    f"cannot save measured points under {store.root}: {exc.strerror or exc}; {measured} points of this run are saved, run the same command again once it is writable"
                ) from None
            _resume.discard(folders[k], [(s, n) for s in p.seeds for n in p.ns])  # the points are stored
            measured += count(p)
            bar.advance(count(p), where(p))
    except executors.WorkerLost as exc:
        raise CapacityError(
            f"{exc} while measuring {where(by_key[exc.key])}; {bar.done} of {total} points are saved under {store.root}; run the same command again to resume"
        ) from None
    except KeyboardInterrupt:
        bar.close(
            f"interrupted: {bar.done} of {total} points are saved under {store.root}; run the same command again to resume"
        )
        raise
    finally:
        stream.close()
        bar.close()
        _resume.tidy(saved)  # the workers are done: the folders no point left a checkpoint in
    return measured


DEFAULT_D = (16, 32, 64, 128)
DEFAULT_LOAD = (1 / 8, 1 / 4, 1 / 2, 3 / 4, 1, 3 / 2, 2, 3, 4, 6, 8, 12, 16)


def compare(
    variants: str | Variant | Sequence[str | Variant],
    *,
    d: int | Sequence[int] = DEFAULT_D,
    load: float | Sequence[float] = DEFAULT_LOAD,
    seeds: int | Sequence[int] = 4,
    keys: str | Sequence[str] = ("gaussian",),
    name: str = "compare",
    out: str | os.PathLike[str] = "results",
    **run_kwargs: Any,  # run's keywords
) -> RunResult:
    """Measure several memories on the same keys and values into one Dataset (resumable like every sweep).

    ``variants``: names, labels, import paths ``module:Class(k=v)`` or variant objects, e.g.
    ``["linear", "delta", "mypkg.memories:Longhorn(beta=0.5)"]``; ``seeds``: how many (0..seeds-1) or a list.
    The other keywords go to ``run``. Draw its overlay figures with ``lacapacity.plots.render(result.dataset, out=...)``.

    Memories given under different names that are the same memory at their parameters (``gated_delta``, ``kda`` and
    ``gdn2`` at their defaults) are named in one ``CapacityWarning`` line each group, before the run: they read a
    fixed probe alike at the grid's two smallest d (``lacapacity.variants.coincide``), so their curves coincide.
    """
    if isinstance(variants, (str, bytes)) or variants_mod.is_variant(variants):
        variants = [variants]
    seeds = tuple(range(_validate.positive_int("seeds", seeds))) if isinstance(seeds, int) else seeds
    listed = cast("Sequence[str | Variant]", variants)  # cast: one memory or label was put in a list above
    grid = Grid(variant=tuple(listed), keys=keys, d=d, load=load, seed=seeds)  # one value or a list: Grid checks
    # at most d = 2048 (the probe's keys: 2 x 2d x d floats), before the run's own size check: a huge d is refused there
    at = [x for x in sorted(grid.d)[:2] if x <= 2048] if len(grid.variant) > 1 else []
    for group, worst in coincide.same([(s.label, variants_mod.build(s)) for s in grid.variant], at) if at else []:
        warnings.warn(coincide.sentence(group, worst, at), CapacityWarning, stacklevel=2)
    return run(Study(name, "memories compared on the same keys and values", grid), out=out, **run_kwargs)
