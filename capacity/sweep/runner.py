"""Run a study: check it, reuse the groups on disk, measure the rest, persist each, assemble the Dataset.

Each finished group is saved (``store``) before it counts as done, so an interrupt loses only the groups in flight
and the same command resumes. The Dataset is always assembled from the saved files, so a resumed run's equals an
uninterrupted one's. A second run into the same ``out`` waits for the first (a file lock), then reuses its groups.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import xarray as xr

from capacity import _validate, executors, plugins
from capacity import keys as keys_mod
from capacity import variants as variants_mod
from capacity._files import atomic_netcdf, clean_stale
from capacity.errors import CapacityError
from capacity.provenance import fingerprint
from capacity.sweep.assemble import assemble, provenance
from capacity.sweep.config import Grid, Study
from capacity.sweep.kinds import expectation, measure
from capacity.sweep.points import check, check_memory, groups, user_code
from capacity.sweep.store import Store

__all__ = ["run", "compare", "RunResult", "resolve_device"]

SMALL = 1e9  # multiply-adds under which a group runs on one torch thread in this process (see _measure)
RATE = 3e10  # multiply-adds per second one CPU core sustained on the probe (main job, 2026-12-01; executor choice only)
LONG = 180.0  # seconds of estimated work above which a run says how long it will take before it starts


@dataclass
class RunResult:
    """What ``run`` produced: the saved file, the Dataset, and how many groups were measured now vs reused."""

    path: Path
    dataset: xr.Dataset
    measured: int
    reused: int


def resolve_device(device: str | None) -> torch.device:
    """``auto`` (or None): cuda when available, else cpu; otherwise the named device, checked."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return _validate.device(device)


def _log(msg: str) -> None:
    print(f"capacity: {msg}", file=sys.stderr, flush=True)


def _writable_folder(path: Path, what: str) -> Path:
    """Create ``path`` if needed and prove it writable, or raise one line saying why not."""
    if path.exists() and not path.is_dir():
        raise CapacityError(f"{what} {path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / f".write-test.{os.getpid()}").write_bytes(b"")
        (path / f".write-test.{os.getpid()}").unlink()
    except OSError as exc:
        raise CapacityError(f"cannot write to {what} {path}: {exc.strerror or exc}") from None
    return path


@contextmanager
def _lock(folder: Path):
    """Hold ``<folder>.lock``; a second run into the same folder waits for the first."""
    with open(folder.with_name(folder.name + ".lock"), "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log(f"another run is writing {folder}; waiting for it to finish, then its groups are reused")
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def run(
    study: Study,
    *,
    out="results",
    device: str | None = "auto",
    executor: str = "auto",
    scheduler: str | None = None,
    workers: int | None = None,
    quiet: bool = False,
    verbose: bool = False,
    progress: bool = True,
    imports=(),
) -> RunResult:
    """Run (or resume) ``study`` and save its Dataset to ``<out>/<study.name>.nc``.

    ``executor``: auto, serial, processes or dask (``capacity.sweep.EXECUTORS``; ``scheduler``: a Dask scheduler
    address, else a local cluster of ``workers`` processes). ``quiet``: errors only; ``verbose``: a log line per
    finished group; ``progress=False``: nothing at all. ``imports``: modules every worker imports first (plug-ins
    that register themselves on import).
    """
    if not isinstance(study, Study):
        raise CapacityError(
            f"sweep.run takes a capacity.sweep.Study (capacity.studies.get(name) for a named one), got {study!r}"
        )
    if out is None or not isinstance(out, (str, os.PathLike)):
        raise CapacityError(f"out must be a folder path, got {out!r}")
    dev = resolve_device(device)
    _validate.choice("executor", executor, executors.EXECUTORS)
    workers = None if workers is None else _validate.positive_int("workers", workers)
    if scheduler and executor not in ("auto", "dask"):
        raise CapacityError(f"scheduler applies to the dask executor only, not {executor!r}")
    imports = list(imports or ())
    plugins.import_modules(imports)
    check(study)
    local = next(
        (v.label for v in study.grid.variant if v.obj is not None and type(v.obj).__module__ == "__main__"), None
    )
    if local and executor in ("processes", "dask"):
        raise CapacityError(
            f"variant {local!r} is defined in __main__, which worker processes cannot import: move it into a module, or use executor='serial'"
        )
    path = _writable_folder(Path(out), "output folder") / f"{study.name}.nc"
    clean_stale(path.parent)  # the temporary files of a result write that was killed
    if path.is_dir():
        raise CapacityError(f"the results path {path} is a folder; remove it or choose another --out")
    store = Store(_writable_folder(Path(out) / ".sweep" / study.name, "store folder"))
    files = [v for k in study.grid.keys for v in k.kwargs.values() if isinstance(v, str) and os.path.isfile(v)]
    code = fingerprint(user_code(study), files)
    keyed = [(g, g.key(study, dev.type, code)) for g in groups(study)]
    log = (lambda msg: None) if not progress or quiet else _log
    with _lock(store.root):
        store.clean()
        todo, finished = [], {}
        for g, key in keyed:
            finished[key], why = store.load(key, expectation(study, g))
            if finished[key] is None:
                todo.append((g, key))
                if why:
                    log(f"stored group {g.variant.label} {g.keys.label} d={g.d} {why}; measuring it again")
        work = sum(g.cost(study) for g, _ in todo) / RATE
        drawing = sum(_draw_seconds(study, g) for g, _ in todo)
        executor = executors.resolve(
            executor, str(dev), len(todo), scheduler, work_seconds=work + drawing, local_only=bool(local)
        )
        parallel = 1 if executor == "serial" else (workers or executors._cores())
        check_memory(study, [g for g, _ in todo], dev, parallel=min(parallel, max(1, len(todo))))
        if progress and work + drawing > LONG:  # after every check: only work that will run is announced
            _announce(study, work, drawing, min(parallel, max(1, len(todo))))
        if executor != "serial":  # largest first: better balance across workers
            todo.sort(key=lambda gk: -gk[0].cost(study))
        task = {"study": study, "device": str(dev), "imports": imports}
        total = sum(g.points(study) for g, _ in keyed)
        measured = _measure(
            study, todo, total, len(keyed), store, executor, scheduler, workers, task, progress, quiet, verbose
        )
        results = []
        for g, key in keyed:  # as persisted
            ds, why = (finished[key], None) if finished[key] is not None else store.load(key, expectation(study, g))
            if ds is None:
                raise CapacityError(
                    f"a finished group vanished from {store.root} or changed while this run worked ({why}); run the same command again"
                )
            results.append((g, ds))
    run_info = {"device": str(dev), "executor": executor, "scheduler": scheduler, "workers": workers}
    ds = assemble(study, results, attrs=provenance(study, device=str(dev), run=run_info))
    try:
        atomic_netcdf(ds, path)
    except OSError as exc:
        raise CapacityError(
            f"cannot write {path}: {exc.strerror or exc}; the measured groups are saved under {store.root}, run the same command again"
        ) from None
    if progress and verbose:
        _log(f"saved {path} ({total} points; {measured} groups measured, {len(keyed) - len(todo)} reused)")
    return RunResult(path, ds, measured, len(keyed) - len(todo))


def _draw_seconds(study: Study, g) -> float:
    """Estimated seconds of the key draws of group ``g`` (families with a ``cost``: learned keys optimise)."""
    fam = keys_mod.family(g.keys.name)
    if fam.cost is None:
        return 0.0
    ns = sorted(set(g.ns(study)))
    draws = ns[-1:] if fam.iid_rows else ns  # one draw per pass (recall.measure)
    return sum(fam.cost(len(study.grid.seed), n, g.d, **g.keys.kwargs) for n in draws)


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f} {unit}" if seconds / size >= 10 else f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} seconds"


def _announce(study: Study, work: float, drawing: float, parallel: int) -> None:
    """One line before long work starts, under --quiet too: the estimate, and what most of it is."""
    most = "optimising the learned keys" if drawing > work else "writing and reading the pairs"
    wall = f", about {_duration((work + drawing) / parallel)} on {parallel} workers" if parallel > 1 else ""
    _log(
        f"{study.name}: estimated work about {_duration(work + drawing)} of one CPU core{wall}, most of it "
        f"{most}; starting now (Ctrl-C stops it, finished groups are kept)"
    )


def _measure(study, todo, total, n_groups, store, executor, scheduler, workers, task, progress, quiet, verbose) -> int:
    """Measure the groups ``todo`` on ``executor``, saving each as it arrives; returns how many were measured."""
    done = total - sum(g.points(study) for g, _ in todo)
    by_key, show = {key: g for g, key in todo}, progress and not quiet
    bar = None
    if show and not verbose:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=done, unit="pt", desc=study.name, file=sys.stderr, dynamic_ncols=True)
    elif show:
        _log(
            f"{study.name}: {total} points in {n_groups} groups; {done} already done, {len(todo)} groups to measure ({executor})"
        )
    start, measured = time.perf_counter(), 0
    # in this process on a CPU, small groups run on one torch thread: their many small ops only wait for the others
    one = executor == "serial" and task["device"].startswith("cpu")
    tasks = [(k, {**task, "group": g, "threads": 1 if one and g.cost(study) < SMALL else None}) for g, k in todo]
    stream = executors.execute(executor, measure, tasks, workers=workers, scheduler=scheduler)
    try:
        for key, ds in stream:
            try:
                store.save(key, ds)  # persisted before it counts as done
            except OSError as exc:
                raise CapacityError(
                    f"cannot save a finished group under {store.root}: {exc.strerror or exc}; {measured} groups of this run are saved, run the same command again once it is writable"
                ) from None
            g, measured = by_key[key], measured + 1
            done += g.points(study)
            if bar is not None:
                bar.update(g.points(study))
            elif show:
                _log(
                    f"{done}/{total} points; finished {g.variant.label} {g.keys.label} d={g.d}; {time.perf_counter() - start:.1f} s"
                )
    except executors.WorkerLost as exc:
        g = by_key[exc.key]
        raise CapacityError(
            f"{exc} while measuring {g.variant.label} {g.keys.label} d={g.d}; {done} of {total} points are saved under {store.root}; run the same command again to resume"
        ) from None
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
            bar = None
        if show or verbose:
            _log(
                f"interrupted: {done} of {total} points are saved under {store.root}; run the same command again to resume"
            )
        raise
    finally:
        stream.close()
        if bar is not None:
            bar.close()
    return measured


DEFAULT_D = (16, 32, 64, 128)
DEFAULT_LOAD = (1 / 8, 1 / 4, 1 / 2, 3 / 4, 1, 3 / 2, 2, 3, 4, 6, 8, 12, 16)


def compare(
    variants,
    *,
    d=DEFAULT_D,
    load=DEFAULT_LOAD,
    seeds=4,
    keys=("gaussian",),
    name="compare",
    out="results",
    **run_kwargs,
) -> RunResult:
    """Measure several memories on the same keys and values into one Dataset (resumable like every sweep).

    ``variants``: names, labels, import paths ``module:Class(k=v)`` or variant objects, e.g.
    ``["linear", "delta", "mypkg.memories:Longhorn(beta=0.5)"]``; ``seeds``: how many (0..seeds-1) or a list.
    The other keywords go to ``run``. Draw its overlay figures with ``capacity.plots.render(result.dataset, out=...)``.
    """
    if isinstance(variants, (str, bytes)) or variants_mod.is_variant(variants):
        variants = [variants]
    seeds = tuple(range(_validate.positive_int("seeds", seeds))) if isinstance(seeds, int) else seeds
    grid = Grid(variant=tuple(variants), keys=keys, d=d, load=load, seed=seeds)  # one value or a list: Grid checks
    return run(Study(name, "memories compared on the same keys and values", grid), out=out, **run_kwargs)
