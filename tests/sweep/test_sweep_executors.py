"""Executors: a Dask LocalCluster and local processes give exactly the serial run's Dataset."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_sweep_support import SMALL, one_torch_thread  # noqa: F401 - autouse fixture

from lacapacity import CapacityError, studies, sweep
from lacapacity.sweep import executors

SETS = SMALL  # 8 cells (16 write passes), 48 points


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    study = studies.get("capacity-vs-d").with_overrides(SETS)
    return study, sweep.run(
        study, out=tmp_path_factory.mktemp("serial"), device="cpu", executor="serial", progress=False
    )


@pytest.mark.slow
def test_dask_local_cluster_equals_serial(tmp_path, serial):
    distributed = pytest.importorskip("distributed")
    study, ref = serial
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        res = sweep.run(
            study, out=tmp_path, device="cpu", executor="dask", scheduler=cluster.scheduler_address, progress=False
        )
        assert res.measured == 48 and res.passes == 16 and res.reused == 0
        assert res.dataset.equals(ref.dataset)
        assert '"executor": "dask"' in res.dataset.attrs["config"]
        # the scheduler alone picks dask under executor=auto, and the stored points are reused
        again = sweep.run(
            study, out=tmp_path, device="cpu", executor="auto", scheduler=cluster.scheduler_address, progress=False
        )
        assert again.measured == 0 and again.dataset.equals(ref.dataset)


@pytest.mark.slow
def test_local_processes_equal_serial(tmp_path, serial, monkeypatch):
    """... and while the workers measure, this process imports what the assembly needs (lacapacity.sweep.jobs.prepare), once."""
    import sys

    runner, calls = sys.modules["lacapacity.sweep.runner"], []
    monkeypatch.setattr(runner, "prepare", lambda: calls.append("prepare"))
    study, ref = serial
    res = sweep.run(study, out=tmp_path, device="cpu", executor="processes", workers=2, progress=False)
    assert res.measured == 48 and res.dataset.equals(ref.dataset)
    assert calls == ["prepare"]


@pytest.mark.slow
def test_meanwhile_runs_once_here_after_the_tasks_are_handed_out_and_its_errors_are_ignored():
    import os

    seen = []

    def meanwhile():
        seen.append(os.getpid())
        raise ImportError("no such module")  # ignored: the later real import reports it

    out = dict(executors.execute("processes", abs, [("a", -1), ("b", 2)], workers=2, meanwhile=meanwhile))
    assert out == {"a": 1, "b": 2} and seen == [os.getpid()]
    assert dict(executors.execute("serial", abs, [("a", -1)], meanwhile=meanwhile)) == {"a": 1} and len(seen) == 1


def test_executor_choices():
    assert executors.resolve("auto", "cuda:0", 10) == "serial"
    assert executors.resolve("auto", "cpu", 1) == "serial"
    assert executors.resolve("auto", "cpu", 10, "tcp://host:8786") == "dask"
    assert executors.resolve("serial", "cpu", 10) == "serial"
    with pytest.raises(CapacityError, match="unknown executor 'threads'; known: auto, dask, processes, serial"):
        executors.resolve("threads", "cpu", 10)
    with pytest.raises(CapacityError, match="--scheduler applies to the dask executor only"):
        next(executors.execute("serial", abs, [], scheduler="tcp://x:1"))
    with pytest.raises(CapacityError, match="workers must be a whole number >= 1"):
        sweep.run(studies.get("capacity-vs-d"), out="unused", device="cpu", executor="processes", workers=0)


# ---------------------------------------------------------------- the workers' start


def _parent_cmdline(stat: str) -> str:
    ppid = int(stat.rsplit(")", 1)[1].split()[1])
    return Path(f"/proc/{ppid}/cmdline").read_text(errors="ignore").replace("\0", " ")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_workers_fork_from_a_server_and_see_the_environment_and_modules_of_now(tmp_path, monkeypatch):
    """Each worker is a child of the fork server (not of this process); a second pool's workers, forked from the
    same server, see this process's environment as it is now and the user's module as it is on disk now."""
    stat = dict(executors.execute("processes", Path.read_text, [("w", Path("/proc/self/stat"))], workers=1))["w"]
    assert "multiprocessing.forkserver" in _parent_cmdline(stat)  # spawned workers are this process's children
    monkeypatch.setenv("CAPACITY_TEST_SEEN", "after the server started")
    assert dict(executors.execute("processes", os.getenv, [("e", "CAPACITY_TEST_SEEN")], workers=1)) == {
        "e": "after the server started"
    }
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = tmp_path / "edited_here.py"
    for value in (1, 2):
        mod.write_text(f"def value(task):\n    return {value}\n")
        shutil.rmtree(tmp_path / "__pycache__", ignore_errors=True)
        sys.modules.pop("edited_here", None)
        import edited_here

        assert dict(executors.execute("processes", edited_here.value, [("v", 0)], workers=1)) == {"v": value}
    sys.modules.pop("edited_here", None)


def _threads_seen(task: object) -> tuple[int, str | None, str]:
    """In a worker: its torch threads, its OMP_NUM_THREADS, and the environment of its parent (the fork server, where
    torch was loaded) as the kernel holds it."""
    import torch

    server = Path(f"/proc/{os.getppid()}/environ").read_bytes().decode(errors="ignore")
    return torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS"), server


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or not Path("/proc").exists(), reason="Linux affinity")
def test_a_worker_runs_on_its_share_of_the_cores_it_is_given(monkeypatch):
    """threads per worker = the cores this process may run on // workers, at least 1: 2 cores and 1 worker give 2
    threads, 2 workers 1 each; 1 core (an affinity mask of one CPU) and 1 worker, 1. The fork server, which loads
    torch for every worker, starts with idle OpenMP threads asleep (OMP_WAIT_POLICY=PASSIVE)."""
    allowed = sorted(os.sched_getaffinity(0))
    names = (*executors.THREAD_VARIABLES, "OMP_WAIT_POLICY")
    before = {name: os.environ.get(name) for name in names}
    cases = [(allowed[:1], 1, 1)] + ([(allowed[:2], 1, 2), (allowed[:2], 2, 1)] if len(allowed) >= 2 else [])
    try:
        for cpus, workers, want in cases:
            os.sched_setaffinity(0, cpus)
            tasks = [(str(i), i) for i in range(workers)]
            seen = dict(executors.execute("processes", _threads_seen, tasks, workers=workers))
            assert {(t, omp) for t, omp, _ in seen.values()} == {(want, str(want))}, (cpus, workers, seen)
            assert all("OMP_WAIT_POLICY=PASSIVE" in server.split("\0") for _, _, server in seen.values())
    finally:
        os.sched_setaffinity(0, allowed)
    assert {name: os.environ.get(name) for name in names} == before  # this process's own environment is left alone


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polling"])
def test_watch_calls_back_once_the_process_ends(monkeypatch, pidfd):
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no os.pidfd_open here")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ended = threading.Event()
    try:
        executors._watch(proc.pid, ended.set)
        assert not ended.wait(0.3)  # still running
        proc.kill()
        proc.wait()
        assert ended.wait(5)
    finally:
        proc.kill()
    at_once = threading.Event()
    executors._watch(proc.pid, at_once.set)  # gone already: called before _watch returns
    assert at_once.is_set()
