"""Executors: run the groups' measurements and yield each result as soon as it is finished.

Each executor is a generator ``(tasks) -> (key, Dataset)`` in completion order. Results travel
back to the calling process, which persists them (so a Dask cluster need not share a file
system with the client). Closing the generator (an interrupt) cancels what has not started.

- ``auto``: ``processes`` for CPU work on more than one core when the work is worth a pool's start-up, else ``serial``;
- ``serial``: in this process, in order, with torch's own thread setting;
- ``processes``: a local pool of ``workers`` processes (spawned, torch threads split between
  them: one each on a 2-core machine, which also avoids the stalls of multi-threaded small
  ops when the machine is shared). On Linux each worker asks the kernel to kill it when its
  parent dies (``PR_SET_PDEATHSIG``), so no worker outlives a run ended by kill -9; a worker
  that dies ends the run with ``WorkerLost`` naming the group;
- ``dask``: a Dask distributed cluster, at ``scheduler`` (an address) or a local one with
  ``workers`` single-threaded worker processes.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import Iterator

from capacity.errors import CapacityError
from capacity.sweep.kinds import measure

__all__ = ["EXECUTORS", "execute", "resolve", "WorkerLost"]


class WorkerLost(CapacityError):
    """A worker process died (killed, or out of memory) while it measured ``key``."""

    def __init__(self, key: str, detail: str):
        super().__init__(detail)
        self.key = key


def _die_with_parent() -> None:
    """Worker initializer: ask Linux to SIGKILL this process when its parent dies (no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass
        if os.getppid() == 1:  # the parent died before the request took effect
            os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides


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
    from concurrent.futures.process import BrokenProcessPool

    workers = min(workers or _cores(), max(1, len(tasks)))
    threads = max(1, _cores() // workers)
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_die_with_parent
    )
    clean = False
    try:
        futures = {pool.submit(measure, {**task, "threads": threads}): key for key, task in tasks}
        for fut in as_completed(futures):
            try:
                result = fut.result()
            except BrokenProcessPool:
                raise WorkerLost(futures[fut], "a worker process died (killed by a signal, or out of memory)") from None
            yield futures[fut], result
        clean = True
    finally:
        if clean:
            pool.shutdown(wait=True)
        else:  # interrupted or failed: stop the workers now instead of letting them finish their groups
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.kill()
            pool.shutdown(wait=True, cancel_futures=True)


def _watch(pid: int) -> None:
    """In a local Dask nanny: once process ``pid`` (the run) is gone, kill this nanny's worker and the nanny."""
    import threading
    import time

    def loop():
        while True:
            time.sleep(0.5)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                for child in multiprocessing.active_children():
                    child.kill()
                os._exit(1)
            except PermissionError:
                pass

    threading.Thread(target=loop, daemon=True, name="capacity-watchdog").start()


def _nanny_plugin():
    from distributed.diagnostics.plugin import NannyPlugin

    class Watchdog(NannyPlugin):
        """Kills a local cluster's nanny and its worker when the run that started them is gone (kill -9 included)."""

        restart = True

        def __init__(self, pid: int):
            self.pid = pid

        def setup(self, nanny):
            _watch(self.pid)

    return Watchdog


def _Watchdog(pid: int):
    return _nanny_plugin()(pid)


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
        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
        )
        client = Client(cluster)
        client.register_plugin(
            _Watchdog(os.getpid()), name="capacity-watchdog"
        )  # the local cluster dies with this process
        threads = max(1, _cores() // workers)
    futures = {}
    try:
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


POOL_SECONDS = 3.0  # about what spawning a pool of workers costs (each imports torch) before its first result


def resolve(
    name: str,
    device: str,
    groups: int,
    scheduler: str | None = None,
    *,
    work_seconds: float | None = None,
    local_only: bool = False,
) -> str:
    """The executor ``auto`` stands for: dask given a scheduler; processes for CPU work on more than one core when
    the estimated work (``work_seconds``) is worth a pool's start-up, else serial. ``local_only``: the study holds
    objects that worker processes cannot import (defined in ``__main__``), so it runs in this process."""
    from capacity import _validate

    _validate.choice("executor", name, EXECUTORS)
    if name != "auto":
        return name
    if scheduler:
        return "dask"
    if local_only or not device.startswith("cpu") or _cores() < 2 or groups < 2:
        return "serial"
    if work_seconds is not None and work_seconds < 2 * POOL_SECONDS:
        return "serial"
    return "processes"


def execute(
    name: str, tasks: list[tuple[str, dict]], *, workers: int | None = None, scheduler: str | None = None
) -> Iterator:
    """Yield ``(key, Dataset)`` for every ``(key, task)`` as it finishes, on the named executor (not ``auto``)."""
    from capacity import _validate

    _validate.choice("executor", name, _RUN)
    if workers is not None:
        workers = _validate.positive_int("workers", workers)
    if scheduler and name != "dask":
        raise CapacityError(f"--scheduler applies to the dask executor only, not {name!r}")
    return _RUN[name](tasks, workers, scheduler)
