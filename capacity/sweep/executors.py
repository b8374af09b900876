"""Executors: run the groups' measurements and yield each result as soon as it is finished.

Each executor is a generator ``(tasks) -> (key, Dataset)`` in completion order. Results travel
back to the calling process, which persists them (so a Dask cluster need not share a file
system with the client). Closing the generator (an interrupt) cancels what has not started.

- ``auto``: ``processes`` for CPU work on more than one core, else ``serial``;
- ``serial``: in this process, in order, with torch's own thread setting;
- ``processes``: a local pool of ``workers`` processes (spawned, torch threads split between
  them: one each on a 2-core machine, which also avoids the stalls of multi-threaded small
  ops when the machine is shared);
- ``dask``: a Dask distributed cluster, at ``scheduler`` (an address) or a local one with
  ``workers`` single-threaded worker processes.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Iterator

from capacity.errors import CapacityError
from capacity.sweep.points import measure

__all__ = ["EXECUTORS", "execute", "resolve"]

EXECUTORS = {
    "auto": "dask with --scheduler; else processes on a CPU with more than one core, serial otherwise (one GPU is best fed by one process)",
    "serial": "in this process, one group after another (torch's own thread setting)",
    "processes": "a pool of local worker processes (--workers, default: the CPU count)",
    "dask": "a Dask distributed cluster: --scheduler ADDRESS, or a local cluster of --workers processes",
}


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _serial(tasks, workers, scheduler) -> Iterator:
    for key, task in tasks:
        yield key, measure(task)


def _processes(tasks, workers, scheduler) -> Iterator:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    workers = workers or _cores()
    threads = max(1, _cores() // workers)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {pool.submit(measure, {**task, "threads": threads}): key for key, task in tasks}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _dask(tasks, workers, scheduler) -> Iterator:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise CapacityError("the dask executor needs dask[distributed]: pip install 'capacity[dask]'") from None
    cluster = None
    if scheduler:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise CapacityError(f"cannot reach the Dask scheduler at {scheduler!r}: {exc}") from None
        threads = None  # the cluster's own setting
    else:
        workers = workers or _cores()
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR)
        client = Client(cluster)
        threads = max(1, _cores() // workers)
    try:
        futures = {}
        for key, task in tasks:
            futures[client.submit(measure, {**task, "threads": threads}, key=f"capacity-group-{key}", pure=False)] = key
        for fut in as_completed(list(futures)):
            yield futures[fut], fut.result()
    finally:
        for fut in futures:
            fut.cancel()
        client.close()
        if cluster is not None:
            cluster.close()


_RUN = {"serial": _serial, "processes": _processes, "dask": _dask}


def resolve(name: str, device: str, groups: int, scheduler: str | None = None) -> str:
    """The executor ``auto`` stands for: dask given a scheduler, processes for CPU work on more than one core (and group), else serial."""
    from capacity import _validate

    _validate.choice("executor", name, EXECUTORS)
    if name != "auto":
        return name
    if scheduler:
        return "dask"
    return "processes" if device.startswith("cpu") and _cores() > 1 and groups > 1 else "serial"


def execute(name: str, tasks: list[tuple[str, dict]], *, workers: int | None = None, scheduler: str | None = None) -> Iterator:
    """Yield ``(key, Dataset)`` for every ``(key, task)`` as it finishes, on the named executor (not ``auto``)."""
    from capacity import _validate

    _validate.choice("executor", name, _RUN)
    if workers is not None:
        workers = _validate.positive_int("workers", workers)
    if scheduler and name != "dask":
        raise CapacityError(f"--scheduler applies to the dask executor only, not {name!r}")
    return _RUN[name](tasks, workers, scheduler)
