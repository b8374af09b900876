"""Run one function over many tasks, in this process, in local worker processes or on a Dask cluster.

``execute(name, fn, tasks)`` yields ``(key, fn(task))`` for every ``(key, task)`` as each finishes. ``fn`` and the
tasks travel by pickle; results come back to the calling process (so a Dask cluster need not share its file
system). Closing the generator (an interrupt) cancels what has not started and stops the workers. The sweeps
(``lacapacity.sweep``) run their groups this way.

- ``serial``: in this process, in order;
- ``processes``: local worker processes (torch threads split between them). Each is forked from a fork server that
  imported torch, numpy and xarray once (``PRELOAD``; where the platform has no fork server, each is spawned and
  imports them itself); none outlives the run, kill -9 included (each watches the run's process); a worker that
  dies ends the run with ``WorkerLost`` naming the group;
- ``dask``: a Dask distributed cluster at ``scheduler``, or a local one of ``workers`` single-threaded processes
  (their nannies run in this process; each worker exits when its nanny is gone, kill -9 included; the cluster's
  scratch folder is removed afterwards). Every wait on a scheduler is bounded by Dask's ``distributed.comm.timeouts.connect`` (``connect_timeout``): one that
  does not answer, or has no worker, within it is one line naming the address;
- ``auto``: dask given a scheduler; processes for CPU work on more than one core when the estimated work is worth a
  pool's start-up; serial otherwise.

>>> dict(execute("serial", abs, [("a", -1), ("b", 2)]))
{'a': 1, 'b': 2}
"""

from __future__ import annotations

import ast
import ctypes
import logging
import multiprocessing
import os
import pickle
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import CancelledError
from typing import Any, TypeVar

from lacapacity.base import _validate
from lacapacity.errors import CapacityError, one_line

_T = TypeVar("_T")  # a task
_R = TypeVar("_R")  # its result


EXECUTORS = {
    "auto": "dask with --scheduler; else processes on a CPU with more than one core when the work is worth a pool's start-up, serial otherwise",
    "serial": "in this process, one group after another (torch's own thread setting)",
    "processes": "a pool of local worker processes (--workers, default: the CPU count)",
    "dask": "a Dask distributed cluster: --scheduler ADDRESS, or a local cluster of --workers processes",
}
POOL_SECONDS = 3.0  # about what starting a pool costs before its first result (the fork server imports torch)
PRELOAD = ("torch", "numpy", "xarray")  # what the fork server imports once for every worker: third-party libraries only


class WorkerLost(CapacityError):
    """A worker process died (killed, or out of memory) while it measured ``key``."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(detail)
        self.key = key


LONG = 60.0  # seconds of estimated work above which a run says how long it will take before it starts
LARGE = 2**30  # bytes of estimated memory above which it says so too


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f} {unit}" if seconds / size >= 10 else f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} seconds"


def announce(name: str, work: float, drawing: float, parallel: int, training: float = 0.0, memory: float = 0.0) -> None:
    """One line on stderr before long or large work starts, under --quiet too: the estimate (``work`` seconds of
    writing and reading, ``training`` of them spent training models, ``drawing`` seconds of key draws, on one core;
    ``memory``: peak bytes of the passes run at once), and what most of it is."""
    most = "optimising the learned keys" if drawing > work else "writing and reading the pairs"
    most = "training the models" if training > max(drawing, work - training) else most
    wall = f", about {_duration((work + drawing) / parallel)} on {parallel} workers" if parallel > 1 else ""
    size = f" and about {memory / 2**30:.1f} GiB of memory" if memory > LARGE else ""
    print(
        f"capacity: {name}: estimated work about {_duration(work + drawing)} of one CPU core{wall}{size}, most of "
        f"it {most}; starting now (Ctrl-C stops it, finished points are kept)",
        file=sys.stderr,
        flush=True,
    )


def cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# What the math libraries read once, as they load: the size of their thread pools, and whether a thread with nothing to
# do sleeps (PASSIVE) or spins for a while first (OpenMP's default), keeping a core busy that the other workers, or
# the other jobs of a shared machine, need: the main job took 88.8 s with spinning threads and 25.1 s without, on the
# 2-core VM at load average 14 (2026-12-07).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def threads_per_worker(workers: int) -> int:
    """Torch threads for each of ``workers`` processes that share this process's cores: cores // workers, at least
    1, so that the workers never ask for more threads than there are cores."""
    return max(1, cores() // workers)


def thread_environment(threads: int) -> dict[str, str]:
    """The environment a worker's math libraries must see before they load: ``threads`` threads each, idle threads
    asleep."""
    return {**dict.fromkeys(THREAD_VARIABLES, str(threads)), "OMP_WAIT_POLICY": "PASSIVE"}


def _threaded(fn: Callable[[_T], _R], task: _T, threads: int | None) -> _R:
    """In a worker: ``fn(task)`` on ``threads`` torch threads (its share of the cores)."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    return fn(task)


class _Sealed:
    """``fn(task)`` on ``threads`` threads, sent to a Dask worker as bytes that run it when unpickled there
    (``pickle.loads`` is the task). A worker that cannot import a module the task needs then fails that task with
    the ImportError, which comes back as its result; sent as Dask's own message, the same task fails to deserialize
    in the worker's connection, which Dask drops: the worker is restarted and fed it again, never an error."""

    def __init__(self, fn: Callable[[_T], _R], task: _T, threads: int | None) -> None:
        self.call = (fn, task, threads)

    def __reduce__(self) -> tuple[Any, ...]:
        return _threaded, self.call


def _die_with_parent(parent: int | None = None) -> None:
    """Initializer of a forked figure worker: SIGKILL this process when its parent dies (Linux); leave Ctrl-C to the
    parent.

    ``parent``: the parent's pid, to see that it died before the request took effect (the child is then someone
    else's, not always init's: a container's subreaper); without it, a parent of pid 1 counts as gone."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass
        if os.getppid() == 1 or parent is not None and os.getppid() != parent:
            os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _worker_start(run: int, environ: dict[str, str], threads: int) -> None:
    """Initializer of a measuring worker: it ends when the run (process ``run``) ends, kill -9 included; it sees the
    run's environment as it is now (a worker forked from the fork server would otherwise see the server's, from
    the first pool of the run's process), with its share of the cores (``thread_environment``), and runs torch on
    ``threads`` threads; Ctrl-C is left to the run.

    The worker's parent is the fork server, which lives as long as its workers do, so the parent's death cannot
    be what ends it: it watches the run itself (``_watch``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.clear()
    os.environ.update({**environ, **thread_environment(threads)})
    import torch  # already loaded where the fork server preloaded it; a spawned worker loads it now, after the env

    torch.set_num_threads(threads)
    _watch(run, lambda: os.kill(os.getpid(), signal.SIGKILL))


def _context(threads: int) -> Any:  # a multiprocessing context (its class is private)
    """The measuring workers' start method: forkserver where the platform has it (each worker forks from a server
    that imported ``PRELOAD`` once: on the 2-core VM about 2 s of CPU saved per worker), spawn elsewhere.

    Either way a worker starts from a process that has never run torch (no thread pool or device state copied from
    the run) and imports capacity and the user's modules itself, from disk, when its pool starts. The server is
    started here, the first time, under ``thread_environment(threads)``: the libraries it preloads read their
    thread settings then (a later pool's workers set their own count of torch threads, ``_worker_start``)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    from multiprocessing import forkserver

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))  # read when this process first starts its server
    wanted = thread_environment(threads)
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)  # the server inherits this process's environment as it starts
    try:
        forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return ctx


def _meanwhile(work: Callable[[], object] | None) -> None:
    """``work()`` in this process while the workers measure; its failure is left to whoever needs its result."""
    if work is not None:
        try:
            work()
        except Exception:  # an import done early only to save time: the later real one reports it
            pass


def _processes(
    fn: Callable[[_T], _R],
    tasks: Sequence[tuple[str, _T]],
    workers: int | None,
    meanwhile: Callable[[], object] | None,
) -> Generator[tuple[str, _R], None, None]:
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    workers = min(workers or cores(), max(1, len(tasks)))
    threads = threads_per_worker(workers)
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=_context(threads),
        initializer=_worker_start,
        initargs=(os.getpid(), dict(os.environ), threads),
    )
    clean = False
    try:
        futures = {pool.submit(fn, task): key for key, task in tasks}
        _meanwhile(meanwhile)
        for fut in as_completed(futures):
            try:
                result = fut.result()
            except BrokenProcessPool:
                raise WorkerLost(futures[fut], "a worker process died (killed by a signal, or out of memory)") from None
            yield futures[fut], result
        clean = True
    finally:
        if not clean:  # interrupted or failed: stop the workers now rather than let them finish their groups
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.kill()
        pool.shutdown(wait=True, cancel_futures=not clean)


def _watch(pid: int, gone: Callable[[], object]) -> None:
    """Call ``gone()`` in a thread of this process once process ``pid`` (the run) has ended; at once if it already has.

    Linux: the thread waits on the process's pidfd (woken when it ends); elsewhere it looks every 0.5 s."""
    import select
    import threading
    import time

    fd = None
    try:
        if hasattr(os, "pidfd_open"):
            fd = os.pidfd_open(pid)
        else:
            os.kill(pid, 0)
    except ProcessLookupError:
        gone()
        return
    except OSError:  # a kernel without pidfds, or someone else's process (PermissionError: it is there)
        pass

    def loop() -> None:
        if fd is not None:
            select.select([fd], [], [])
            os.close(fd)
        else:
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except PermissionError:
                    pass
                time.sleep(0.5)
        gone()

    threading.Thread(target=loop, daemon=True, name="capacity-watchdog").start()


def _dask(
    fn: Callable[[_T], _R],
    tasks: Sequence[tuple[str, _T]],
    workers: int | None,
    scheduler: str | None,
    meanwhile: Callable[[], object] | None,
) -> Generator[tuple[str, _R], None, None]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise CapacityError(
            "the dask executor needs dask[distributed]: pip install 'linear-attention-capacity[dask]'"
        ) from None
    timeout = connect_timeout()  # a bad setting is one line before any cluster starts
    cluster, threads, scratch, config = None, None, None, None  # a remote cluster keeps its own thread setting
    # a lost scheduler is our one line, not Dask's log lines too (its loggers have levels of their own)
    quiet = [logging.getLogger(f"distributed{n}") for n in ("", ".client", ".comm", ".core", ".batched")]
    levels = [q.level for q in quiet]
    if scheduler:
        for q in quiet:
            q.setLevel(logging.CRITICAL + 1)
        client = _connect(Client, scheduler, timeout)
    else:
        import dask

        workers = workers or cores()
        scratch = tempfile.mkdtemp(prefix="capacity-dask-")  # the cluster's scratch space, removed below
        # where nannies and workers make theirs; workers that are not daemonic processes, so that user code in them
        # may start processes of its own (a fork pool, a DataLoader's workers) as it may in this process
        config = dask.config.set({"temporary-directory": scratch, "distributed.worker.daemon": False})
        try:
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.CRITICAL,  # a task's error comes back as its result: no worker log dumps
                local_directory=scratch,
            )
            # never the scheduler of xarray or the caller's dask code. The nannies run in this process; each worker
            # process exits once its nanny's pipe closes (distributed's own watch), so none outlives a kill -9 of it
            client = Client(cluster, set_as_default=False)
        except Exception as exc:  # a worker killed or out of memory while it started ("Nanny failed to start")
            try:
                if cluster is not None:
                    cluster.close(timeout=timeout)
            except Exception:  # what is left of it: its nannies die with this process (or exit on their own)
                pass
            config.__exit__(None, None, None)
            shutil.rmtree(scratch, ignore_errors=True)
            raise CapacityError(
                f"the local Dask cluster of {workers} workers did not start ({type(exc).__name__}: {one_line(exc)[:200]}); nothing was measured: run the same command again, and if it fails the same way, check the Dask settings (dask config files, DASK_* environment variables)"
            ) from None
        threads = threads_per_worker(workers)
    futures = {}
    try:
        for key, task in tasks:
            sealed = pickle.dumps(_Sealed(fn, task, threads))
            futures[client.submit(pickle.loads, sealed, key=f"capacity-task-{key}", pure=False)] = key
        _meanwhile(meanwhile)
        for fut in _finished(client, futures, scheduler):
            try:
                result = fut.result()
            except CancelledError:  # the scheduler went away (the client cancels what it waited for)
                raise WorkerLost(
                    futures[fut], f"lost the Dask scheduler {scheduler or 'of the local cluster'}"
                ) from None
            except CapacityError:
                raise
            except Exception as exc:  # Dask's own, not the user's (user code raises UserCodeError)
                if type(exc).__name__ == "KilledWorker":  # distributed.KilledWorker: each retry's worker died
                    raise WorkerLost(
                        futures[fut], f"each Dask worker that ran it died, until Dask gave up (KilledWorker): {_DIED}"
                    ) from None
                if not isinstance(exc, ImportError) and "deserializ" not in str(exc).lower():
                    raise
                raise WorkerLost(
                    futures[fut],
                    f"the Dask cluster could not load the work ({type(exc).__name__}: {one_line(exc)[:200]}); the "
                    "scheduler and every worker need this package and your modules importable, in one environment",
                ) from None
            yield futures[fut], result
    finally:
        for fut in futures:
            fut.cancel()
        _close(client, cluster, timeout)
        for q, lvl in zip(quiet, levels):
            q.setLevel(lvl)
        if config is not None:
            config.__exit__(None, None, None)  # the caller's Dask configuration again
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _close(client: Any, cluster: Any, timeout: float) -> None:
    """Close the client, and the local cluster if there is one, within about ``timeout`` s each. A close that
    fails (a nanny that is starting its worker again after a crash outlasts it on a busy machine) must not stand in
    for what ended the run: the workers left are killed instead (their nannies, in this process, go with it)."""
    for part in (client, cluster):
        if part is None:
            continue
        try:
            part.close(timeout=timeout)
        except Exception:  # what is left is killed below
            pass
    for nanny in list(getattr(cluster, "workers", {}).values()):
        pid = getattr(nanny, "pid", None)  # distributed.Nanny.pid: its worker process's, None once it has ended
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


_DIED = "a crash of the code it runs (a segfault or abort in a memory's C code, ctypes), out of memory, or a kill"


def _finished(client: Any, futures: dict[Any, str], scheduler: str | None) -> Generator[Any, None, None]:
    """The futures as each finishes (distributed.Future, untyped). A scheduler left without any worker for longer
    than ``connect_timeout()`` (every worker killed, a node pre-empted) ends the wait: ``WorkerLost``, which says
    that the worker died while it ran the task when the scheduler counted that (a worker whose nanny restarts it
    more slowly than the wait: the same cause as Dask's KilledWorker, however fast the machine)."""
    from distributed import as_completed

    waiting, since, limit, looked = as_completed(list(futures), loop=client.loop), None, connect_timeout(), 0.0
    while not waiting.is_empty():
        if waiting.has_ready():
            yield from waiting.next_batch(block=False)
            since = None
            continue
        time.sleep(0.05)  # the client's own thread marks futures done; a look at the workers once a second
        if time.monotonic() - looked < 1.0:
            continue
        looked = time.monotonic()
        try:
            workers = len(client.scheduler_info().get("workers", {}))
        except Exception:  # the scheduler is gone: its futures are cancelled, and the caller says so
            workers = 1
        since = None if workers else since or looked
        if since is not None and looked - since > limit:
            left = [f for f in futures if not f.done()] or list(futures)
            where = f"the Dask scheduler {scheduler or 'of the local cluster'} has had no worker for {limit:g} s"
            gone = "killed, or their node is gone; start workers" if scheduler else "none came back in that time"
            died = _deaths(client, {f.key: f for f in left}, limit)
            if died is None:
                raise WorkerLost(futures[left[0]], f"{where} ({gone})")
            fut, n = died
            times = "once" if n == 1 else f"{n} times"
            raise WorkerLost(
                futures[fut],
                f"the Dask worker that ran it died while it ran ({times}: {_DIED}), and {where} since ({gone})",
            )


def _suspicious(keys: list[str], dask_scheduler: Any = None) -> tuple[str, int] | None:
    """On the scheduler (``Client.run_on_scheduler``): the key of ``keys`` whose workers died most often while they
    ran it (Dask's count, ``TaskState.suspicious``: what KilledWorker counts), and how often; None when none did."""
    counts = [(k, dask_scheduler.tasks[k].suspicious) for k in keys if k in dask_scheduler.tasks]
    k, n = max(counts, key=lambda c: c[1], default=("", 0))
    return (k, n) if n > 0 else None


def _deaths(client: Any, left: dict[str, Any], timeout: float) -> tuple[Any, int] | None:
    """Of the futures ``left`` (by key), the one whose workers died most often while they ran it, and how often, by
    the scheduler's count; None when none did, or the scheduler cannot say (gone, or without this package)."""
    try:
        got = client.run_on_scheduler(_suspicious, list(left), callback_timeout=timeout)
    except Exception:  # the scheduler cannot run it: the plain line
        return None
    return None if got is None or got[0] not in left else (left[got[0]], int(got[1]))


def connect_timeout() -> float:
    """Seconds to wait for a Dask scheduler to answer: Dask's own setting ``distributed.comm.timeouts.connect``
    (environment variable DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT, e.g. 20s; Dask's default 30 s). A value that
    is not a positive duration is one line naming the setting."""
    import dask
    from dask.utils import parse_timedelta

    value = dask.config.get("distributed.comm.timeouts.connect", "30s")
    try:
        seconds = float(parse_timedelta(value, default="seconds"))
    except (KeyError, ValueError, TypeError):
        seconds = float("nan")
    if not seconds > 0:
        raise CapacityError(
            f"the Dask setting distributed.comm.timeouts.connect is {value!r}, not a positive duration (e.g. 30s); "
            "fix it where it is set (DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT, or a dask config file)"
        )
    return seconds


def _connect(Client: Any, scheduler: str, timeout: float) -> Any:  # distributed.Client (untyped)
    """A Client of ``scheduler`` with at least one worker, or a one-line CapacityError within about ``timeout`` s.

    Dask's own timeout does not bound every wait: a listener that accepts the connection and never answers (not a
    Dask scheduler, or a hung one) keeps Client() waiting for ever. So Client() runs in a thread that is given up
    after ``timeout`` (it closes the client if it connects later); then the scheduler must have a worker.
    """
    import threading

    box: dict[str, Any] = {}  # "client" or "error"
    gave_up = threading.Event()

    def attempt() -> None:
        try:
            client = Client(scheduler, timeout=timeout, set_as_default=False)
        except BaseException as exc:  # reported by the caller
            box["error"] = exc
            return
        if gave_up.is_set():
            client.close()
        box["client"] = client

    th = threading.Thread(target=attempt, daemon=True, name="capacity-dask-connect")
    th.start()
    th.join(timeout + 2.0)
    where = f"the Dask scheduler at {scheduler!r}"
    if th.is_alive():
        gave_up.set()
        raise CapacityError(
            f"{where} accepted the connection but did not answer within {timeout:g} s: is it a Dask scheduler "
            "(tcp://host:8786)? (the wait: Dask's distributed.comm.timeouts.connect, e.g. DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=60s)"
        )
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, KeyboardInterrupt):
            raise exc
        if isinstance(exc, (OSError, TimeoutError, ValueError)):  # not there, or not an address
            raise CapacityError(f"cannot reach {where}: {type(exc).__name__}: {one_line(exc)}") from None
        raise CapacityError(
            f"{where} answered, but not as a Dask scheduler ({type(exc).__name__}: {one_line(exc)[:200]}); "
            "is it one (tcp://host:8786)?"
        ) from None
    client = box["client"]
    try:
        client.wait_for_workers(1, timeout=timeout)
    except Exception:
        client.close()
        raise CapacityError(
            f"{where} has no workers (waited {timeout:g} s); start some with dask worker {scheduler}"
        ) from None
    return client


def unpicklable(objects: Iterable[object]) -> tuple[object, str] | None:
    """The first of ``objects`` that pickle cannot send to a worker process, with the reason, or None."""
    for obj in objects:
        try:
            pickle.dumps(obj)
        except Exception as exc:  # PicklingError, TypeError ("cannot pickle '_thread.lock' object"), AttributeError
            return obj, f"{type(exc).__name__}: {one_line(exc)[:200]}"
    return None


def main_only(objects: Iterable[object], executor: str) -> bool:
    """Whether any of ``objects`` is defined in ``__main__`` (so the run stays in this process); refused in one line
    for an executor of worker processes, which cannot import it."""
    local = next((o for o in objects if type(o).__module__ == "__main__"), None)
    if local is not None and executor in ("processes", "dask"):
        raise CapacityError(
            f"variant {type(local).__name__!r} is defined in __main__, which worker processes cannot import: move it into a module, or use executor='serial'"
        )
    return local is not None


def unguarded_script() -> str | None:
    """The script this process runs whose top-level code, outside ``if __name__ == "__main__":``, is what called
    this (a sweep started at import time), else None. A worker process of the processes executor or of a local Dask
    cluster imports the script again (the spawn start method) and would start the same sweep, which waits for
    this one's store lock for ever; such a script must keep its work under the guard."""
    import inspect

    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)  # what a spawned worker runs again (none: a notebook, python -c)
    if not isinstance(script, str):
        return None
    frame = inspect.currentframe()
    while frame is not None:
        code = frame.f_code
        if code.co_name == "<module>" and frame.f_globals is vars(main):
            path = code.co_filename
            try:
                with open(path, "rb") as fh:
                    tree = ast.parse(fh.read())
            except (OSError, SyntaxError, ValueError):  # no file (python -c, a notebook): nothing imports it again
                return None
            line = frame.f_lineno
            guarded = any(
                isinstance(node, ast.If)
                and _is_main_test(node.test)
                and node.body[0].lineno <= line <= node.body[-1].end_lineno  # type: ignore[operator]  # ast.parse sets end_lineno
                for node in tree.body
            )
            return None if guarded else path
        frame = frame.f_back
    return None


def _is_main_test(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or len(test.comparators) != 1:
        return False
    sides = [test.left, test.comparators[0]]
    names = [x for x in sides if getattr(x, "id", None) == "__name__"]
    consts = [x for x in sides if getattr(x, "value", None) == "__main__"]
    return len(names) == 1 and len(consts) == 1


def bootstrapping() -> bool:
    """This process is a worker still importing its parent's script (the spawn start method's bootstrap)."""
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def resolve(
    name: str,
    device: str,
    groups: int,
    scheduler: str | None = None,
    *,
    work_seconds: float | None = None,
    local_only: bool = False,
) -> str:
    """The executor ``auto`` stands for (see the module's docstring); ``local_only``: the study holds objects that
    worker processes cannot import (defined in ``__main__``), so it runs in this process."""
    _validate.choice("executor", name, EXECUTORS)
    if name != "auto":
        return name
    if scheduler:
        return "dask"
    small = work_seconds is not None and work_seconds < 2 * POOL_SECONDS
    return "serial" if local_only or not device.startswith("cpu") or cores() < 2 or groups < 2 or small else "processes"


def execute(
    name: str,
    fn: Callable[[_T], _R],
    tasks: Sequence[tuple[str, _T]],
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> Generator[tuple[str, _R], None, None]:
    """Yield ``(key, fn(task))`` for every ``(key, task)`` as it finishes, on the named executor (not ``auto``).

    ``meanwhile``: a function this process calls once, after handing out the tasks, while workers measure (the
    processes and dask executors; serial has no idle time): work it would do later anyway (imports); an
    exception in it is ignored.
    """
    _validate.choice("executor", name, [e for e in EXECUTORS if e != "auto"])
    if workers is not None:
        workers = _validate.positive_int("workers", workers)
    if scheduler and name != "dask":
        raise CapacityError(f"--scheduler applies to the dask executor only, not {name!r}")
    if name == "serial":  # one task after another, here (no idle time for meanwhile)
        return ((key, fn(task)) for key, task in tasks)
    if name == "processes":
        return _processes(fn, tasks, workers, meanwhile)
    return _dask(fn, tasks, workers, scheduler, meanwhile)
