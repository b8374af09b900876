"""Executors: a Dask LocalCluster and local processes give exactly the serial run's Dataset."""

from __future__ import annotations

import pytest
from test_sweep_support import one_torch_thread  # noqa: F401 - autouse fixture

from capacity import CapacityError, studies, sweep
from capacity.sweep import executors

SETS = [
    "variant=linear,delta",
    "keys=gaussian,orthogonal",
    "d=16,32",
    "load=1/4,1,4",
    "seed=0,1",
]  # 48 points in 16 write passes


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
    """... and while the workers measure, this process imports what the assembly needs (capacity.sweep.jobs.prepare), once."""
    import sys

    runner, calls = sys.modules["capacity.sweep.runner"], []
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
