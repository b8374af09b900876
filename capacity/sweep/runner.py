"""Run a study: skip the groups already on disk, measure the rest, persist each, assemble the Dataset.

Every finished group is written to ``<out>/.sweep/<study>/<group hash>.json`` (atomically)
before the progress bar counts its points, so an interrupt (SIGINT, SIGKILL) loses only the
groups in flight; rerunning the same command reuses every finished group and measures the
rest. The combined Dataset is always assembled from the persisted files, so a resumed run's
Dataset equals an uninterrupted run's.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import xarray as xr

from capacity import _validate
from capacity.sweep import executors
from capacity.sweep.assemble import assemble, provenance
from capacity.sweep.config import Study
from capacity.sweep.points import check, groups
from capacity.sweep.store import Store, atomic_netcdf

__all__ = ["run", "RunResult", "resolve_device"]


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
    print(f"capacity run: {msg}", file=sys.stderr, flush=True)


def run(
    study: Study,
    *,
    out="results",
    device: str | None = "auto",
    executor: str = "serial",
    scheduler: str | None = None,
    workers: int | None = None,
    quiet: bool = False,
    progress: bool = True,
) -> RunResult:
    """Run (or resume) ``study`` and save its Dataset to ``<out>/<study.name>.nc``.

    ``executor``: serial (default), auto (processes on a multi-core CPU, else serial), processes or dask
    (``scheduler``: a Dask scheduler address; without one a local cluster of ``workers``
    processes). ``quiet``: one log line per finished group
    instead of a progress bar; ``progress=False``: neither.
    """
    dev = resolve_device(device)
    dev_type = dev.type
    _validate.choice("executor", executor, executors.EXECUTORS)
    if workers is not None:
        workers = _validate.positive_int("workers", workers)
    check(study)
    out = Path(out)
    store = Store(out / ".sweep" / study.name)
    store.clean()
    study_json = study.to_json()
    todo, keyed, finished = [], [], {}
    for g in groups(study):
        key = g.key(study, dev_type)
        keyed.append((g, key))
        ds = store.load(key)
        if ds is None:
            todo.append((g, key))
        else:
            finished[key] = ds
    executor = executors.resolve(executor, str(dev), len(todo), scheduler)
    total = sum(g.points(study) for g, _ in keyed)
    done = total - sum(g.points(study) for g, _ in todo)
    if executor != "serial":  # largest first: better balance across workers
        todo.sort(key=lambda gk: -gk[0].cost(study))
    tasks = [(key, {"study": study_json, "group": g.to_json(), "device": str(dev), "threads": None}) for g, key in todo]
    by_key = dict((key, g) for g, key in todo)

    bar = None
    if progress and not quiet:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=done, unit="pt", desc=study.name, file=sys.stderr, dynamic_ncols=True)
    elif progress:
        _log(f"{study.name}: {total} points in {len(keyed)} groups; {done} already done, {len(todo)} groups to measure on {dev} ({executor})")
    start = time.perf_counter()
    stream = executors.execute(executor, tasks, workers=workers, scheduler=scheduler)
    try:
        for key, ds in stream:
            store.save(key, ds)  # persisted before it counts as done
            g = by_key[key]
            done += g.points(study)
            if bar is not None:
                bar.update(g.points(study))
            elif progress:
                el = time.perf_counter() - start
                _log(f"{done}/{total} points; finished {g.variant.label} {g.keys.label} d={g.d}; {el:.1f} s elapsed")
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
            bar = None
        _log(f"interrupted: {done} of {total} points are saved under {store.root}; run the same command again to resume")
        raise
    finally:
        stream.close()
        if bar is not None:
            bar.close()

    results = [(g, finished[key] if key in finished else store.load(key)) for g, key in keyed]  # all as persisted
    missing = [g for g, ds in results if ds is None]
    if missing:  # pragma: no cover - only if the store was changed under us
        raise RuntimeError(f"{len(missing)} finished groups vanished from {store.root}")
    run_info = {"device": str(dev), "executor": executor, "scheduler": scheduler, "workers": workers}
    ds = assemble(study, results, attrs=provenance(study, device=str(dev), run=run_info))
    path = out / f"{study.name}.nc"
    atomic_netcdf(ds, path)
    if progress and quiet:
        _log(f"saved {path} ({total} points; {len(todo)} groups measured, {len(keyed) - len(todo)} reused)")
    return RunResult(path, ds, len(todo), len(keyed) - len(todo))
