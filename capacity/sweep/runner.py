"""Run a study: check it, skip the groups already on disk, measure the rest, persist each, assemble the Dataset.

Every finished group is written to ``<out>/.sweep/<study>/<group hash>.json`` (atomically) before the progress bar
counts its points, so an interrupt (SIGINT, SIGTERM, SIGKILL) loses only the groups in flight; rerunning the same
command reuses every finished group that the current code would compute (``store.fingerprint``) and that passes its
checks, and measures the rest. The combined Dataset is always assembled from the persisted files, so a resumed run's
Dataset equals an uninterrupted run's. One run at a time works in a study's folder: a second run into the same
``out`` waits for the first (a file lock) and then reuses its groups.
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

from capacity import _validate, features, plugins
from capacity import keys as keys_mod
from capacity import variants as variants_mod
from capacity.errors import CapacityError
from capacity.sweep import executors
from capacity.sweep.assemble import assemble, provenance
from capacity.sweep.config import Grid, Probe, Study
from capacity.sweep.kinds import expectation
from capacity.sweep.points import check, check_memory, groups
from capacity.sweep.store import Store, atomic_netcdf, fingerprint

__all__ = ["run", "compare", "RunResult", "resolve_device"]

RATE = 3e10  # multiply-adds per second one CPU core sustained on the probe (main job, 2026-12-01; executor choice only)


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
    """Create ``path`` (a folder) if needed and prove it writable, or raise one line saying why not."""
    if path.exists() and not path.is_dir():
        raise CapacityError(f"{what} {path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test.{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise CapacityError(f"cannot write to {what} {path}: {exc.strerror or exc}") from None
    return path


@contextmanager
def _lock(folder: Path):
    """Hold the study folder's lock (``<folder>.lock``); a second run into the same folder waits for the first."""
    fh = open(folder.with_name(folder.name + ".lock"), "a+")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log(f"another run is writing {folder}; waiting for it to finish, then its groups are reused")
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield
    finally:
        fh.close()


def _plugin_objects(study: Study) -> list:
    """The user code a study runs: variant objects and the classes, families and maps named by path or entry point."""
    found = []
    for v in study.grid.variant:
        if v.obj is not None:
            found.append(v.obj)
        elif ":" in v.name:
            found.append(plugins.load_path(v.name))
        elif v.name not in variants_mod._REGISTRY:
            found.append(variants_mod._factory(v.name))
    for k in study.grid.keys:
        fam = keys_mod.family(k.name)
        if fam.draw.__module__ != keys_mod.__name__:
            found.append(fam.draw)
    for f in study.grid.feature:
        mp = features.get(f.name, **f.kwargs)
        if type(mp).__module__ != features.__name__:
            found.append(mp)
    return found


def _local_only(study: Study) -> str | None:
    """The label of a variant object whose class lives in ``__main__`` (workers cannot import it), or None."""
    for v in study.grid.variant:
        if v.obj is not None and type(v.obj).__module__ == "__main__":
            return v.label
    return None


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

    ``executor``: auto (the default: in this process when the work is small, local worker processes on a multi-core
    CPU when it pays, dask with a ``scheduler``), serial, processes or dask (``scheduler``: a Dask scheduler
    address; without one a local cluster of ``workers`` processes). ``quiet``: no progress bar and no log lines
    (errors only); ``verbose``: one log line per finished group; ``progress=False``: nothing at all.
    ``imports``: modules that workers import before they measure (plug-ins that register themselves on import).
    """
    if not isinstance(study, Study):
        raise CapacityError(
            f"sweep.run takes a capacity.sweep.Study (capacity.studies.get(name) for a named one), got {study!r}"
        )
    if out is None or not isinstance(out, (str, os.PathLike)):
        raise CapacityError(f"out must be a folder path, got {out!r}")
    dev = resolve_device(device)
    _validate.choice("executor", executor, executors.EXECUTORS)
    if workers is not None:
        workers = _validate.positive_int("workers", workers)
    if scheduler and executor not in ("auto", "dask"):
        raise CapacityError(f"scheduler applies to the dask executor only, not {executor!r}")
    imports = list(imports or ())
    plugins.import_modules(imports)
    check(study)
    local = _local_only(study)
    if local and executor in ("processes", "dask"):
        raise CapacityError(
            f"variant {local!r} is defined in __main__, which worker processes cannot import: move it into a module, or use executor='serial'"
        )
    out = _writable_folder(Path(out), "output folder")
    path = out / f"{study.name}.nc"
    if path.is_dir():
        raise CapacityError(f"the results path {path} is a folder; remove it or choose another --out")
    root = _writable_folder(out / ".sweep" / study.name, "store folder")
    store = Store(root)
    all_groups = groups(study)
    files = [v for k in study.grid.keys for v in k.kwargs.values() if isinstance(v, str) and os.path.isfile(v)]
    code = fingerprint(_plugin_objects(study), files)
    keyed = [(g, g.key(study, dev.type, code)) for g in all_groups]
    with _lock(root):
        store.clean()
        return _run_locked(
            study, keyed, store, path, dev, executor, scheduler, workers, quiet, verbose, progress, imports, local
        )


def _run_locked(
    study, keyed, store, path, dev, executor, scheduler, workers, quiet, verbose, progress, imports, local
) -> RunResult:
    todo, finished = [], {}
    for g, key in keyed:
        ds, why = store.load(key, expectation(study, g))
        if ds is not None:
            finished[key] = ds
            continue
        if why and progress:
            _log(f"stored group {g.variant.label} {g.keys.label} d={g.d} {why}; measuring it again")
        todo.append((g, key))
    work = sum(g.cost(study) for g, _ in todo) / RATE
    executor = executors.resolve(
        executor, str(dev), len(todo), scheduler, work_seconds=work, local_only=local is not None
    )
    parallel = 1 if executor == "serial" else (workers or executors._cores())
    check_memory(study, [g for g, _ in todo], dev, parallel=min(parallel, max(1, len(todo))))
    total = sum(g.points(study) for g, _ in keyed)
    done = total - sum(g.points(study) for g, _ in todo)
    if executor != "serial":  # largest first: better balance across workers
        todo.sort(key=lambda gk: -gk[0].cost(study))
    tasks = [
        (key, {"study": study, "group": g, "device": str(dev), "threads": None, "imports": imports}) for g, key in todo
    ]
    by_key = {key: g for g, key in todo}

    bar = None
    if progress and not quiet and not verbose:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=done, unit="pt", desc=study.name, file=sys.stderr, dynamic_ncols=True)
    elif progress and verbose:
        _log(
            f"{study.name}: {total} points in {len(keyed)} groups; {done} already done, {len(todo)} groups to measure on {dev} ({executor})"
        )
    start = time.perf_counter()
    measured = 0
    stream = executors.execute(executor, tasks, workers=workers, scheduler=scheduler)
    try:
        for key, ds in stream:
            try:
                store.save(key, ds)  # persisted before it counts as done
            except OSError as exc:
                raise CapacityError(
                    f"cannot save a finished group under {store.root}: {exc.strerror or exc}; {measured} groups of this run are saved, run the same command again once it is writable"
                ) from None
            measured += 1
            g = by_key[key]
            done += g.points(study)
            if bar is not None:
                bar.update(g.points(study))
            elif progress and verbose:
                _log(
                    f"{done}/{total} points; finished {g.variant.label} {g.keys.label} d={g.d}; {time.perf_counter() - start:.1f} s elapsed"
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
        if progress:
            _log(
                f"interrupted: {done} of {total} points are saved under {store.root}; run the same command again to resume"
            )
        raise
    finally:
        stream.close()
        if bar is not None:
            bar.close()

    results = []
    for g, key in keyed:  # all as persisted
        ds = finished.get(key)
        if ds is None:
            ds, why = store.load(key, expectation(study, g))
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


DEFAULT_D = (16, 32, 64, 128)
DEFAULT_LOAD = (1 / 8, 1 / 4, 1 / 2, 3 / 4, 1, 3 / 2, 2, 3, 4, 6, 8, 12, 16)


def compare(
    variants,
    *,
    d=DEFAULT_D,
    load=DEFAULT_LOAD,
    seeds=4,
    keys=("gaussian",),
    name: str = "compare",
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
    seeds = tuple(range(_validate.positive_int("seeds", seeds))) if isinstance(seeds, int) else tuple(seeds)
    study = Study(
        name,
        "memories compared on the same keys and values",
        Grid(
            variant=tuple(variants),
            keys=tuple(keys),
            d=tuple(d) if not isinstance(d, int) else (d,),
            load=tuple(load),
            seed=seeds,
        ),
        Probe(values="gaussian"),
    )
    return run(study, out=out, **run_kwargs)
