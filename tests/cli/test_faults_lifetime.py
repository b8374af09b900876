"""Nothing lost, nothing hangs: the store under concurrent use, user code that ends or hangs, orphaned processes.

``capacity store --prune`` under the run's lock, keeping the cells a cut-short run would resume from, refusing an
unreadable manifest; user code that raises SystemExit, calls os._exit or hangs (the fingerprint included), and
SIGTERM and SIGINT while it runs; figure workers killed with their parent; a script that starts worker processes
outside its main guard; forged, malformed and special cell files; a file the memory reads by a fixed path; and the
one-liners of the command line. Subprocesses only where the process itself is what is tested.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from proc_support import alive
from user_code_support import user_memory

from lacapacity import CapacityError, sweep
from lacapacity.base import _files
from lacapacity.cli import main
from lacapacity.sweep import executors
from lacapacity.sweep import store as store_mod
from lacapacity.sweep.store import Store

HINT = "run with --traceback for the full traceback"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _compare(out, *variants, load="1,2", d="8", extra=(), figures=False):
    loud = () if "--verbose" in extra else ("--quiet",)
    drawn = () if figures else ("--no-figures",)
    return ["compare", *variants, "--d", d, "--load", load, "--seeds", "1", "--out", str(out), *loud, *drawn, *extra]


def _wait_for(predicate, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# ---------------------------------------------------------------- the store: prune


def _cells(root: Path, *keys: str) -> None:
    """Write cells named ``keys`` (their content does not matter to prune)."""
    store = Store(root)
    for key in keys:
        store.save(key, {(0, 8): {"mse": np.float64(1.0)}}, {}, {"mse": "<f8"}, {})


def test_prune_refuses_while_a_run_holds_the_store(cli, tmp_path):
    root = tmp_path / "o" / ".sweep" / "compare"
    root.mkdir(parents=True)
    _cells(root, "a" * 64, "b" * 64)
    Store(root).record("compare", ["a" * 64])
    with _files.lock(root):  # what a run holds from before it loads the store until its manifest is written
        code, _, err = cli.here("store", tmp_path / "o", "--prune")
    cli.one_line(code, err, f"a run is writing {root}", "nothing was removed")
    assert (root / f"{'b' * 64}.json").exists()


@pytest.mark.slow  # two small runs in this process: about 5 s on the shared 2-core VM
def test_prune_keeps_what_a_cut_short_run_resumes_from_unless_all(cli, tmp_path, monkeypatch):
    """A run that fails after storing some cells (as after kill -9: no finished run) leaves cells that the same
    command reuses; prune keeps them."""
    mod = user_memory(
        tmp_path, monkeypatch, write="if k.shape[1] > 24 and k.shape[2] == 16: raise ValueError('broken')"
    )
    out = tmp_path / "o"
    argv = _compare(out, "linear", f"{mod}:Mem", load="4", d="8,16", extra=("--executor", "serial"))
    code, _, err = cli.here(*argv)
    cli.one_line(code, err, "ValueError in write(): broken")
    root = out / ".sweep" / "compare"
    cells = lambda: sorted(p.name for p in root.glob("*.json") if p.name != "manifest.json")
    saved = cells()
    assert len(saved) == 2  # d = 8 of both memories (one task), before d = 16 failed
    code, printed, _ = cli.here("store", out, "--prune")
    assert code == 0 and "kept 2 cells of a run that did not finish" in printed, printed
    assert cells() == saved
    code, _, err = cli.here(*_compare(out, "linear", load="4", extra=("--verbose", "--executor", "serial")))
    assert code == 0 and "0 measured in 0 passes, 1 reused" in err, err  # what prune kept is what resumes
    _cells(root, "c" * 64)  # a cell no run lists (of older code, say)
    code, printed, _ = cli.here("store", out, "--prune", "--dry-run")
    assert code == 0 and f"would remove {root / ('c' * 64)}.json" in printed and "kept 1 cells" in printed, printed


def test_prune_all_removes_cells_of_unfinished_runs(tmp_path, cli):
    root = tmp_path / "o" / ".sweep" / "s"
    root.mkdir(parents=True)
    keys = [k * 64 for k in "abcd"]
    _cells(root, *keys)
    store = Store(root)
    store.record("s", [keys[0]])  # the latest finished run used a
    store.start([keys[1], keys[2]])  # a run that measured b and c was cut short
    code, printed, _ = cli.here("store", tmp_path / "o", "--prune")
    assert code == 0 and "kept 2 cells" in printed
    assert sorted(p.stem for p in root.glob("*.json") if p.stem != "manifest") == keys[:3]
    code, printed, _ = cli.here("store", tmp_path / "o", "--prune", "--all")
    assert code == 0 and sorted(p.stem for p in root.glob("*.json") if p.stem != "manifest") == keys[:1]


def test_prune_removes_the_checkpoints_of_cells_no_run_uses_or_resumes(tmp_path, cli):
    """Points in progress (the trained task's checkpoints, by their cell's key) go with their cell: kept while the
    latest run uses the cell or a cut-short run would resume it, removed otherwise (``--all``: pending ones too)."""
    root = tmp_path / "o" / ".sweep" / "s"
    keys = [k * 64 for k in "abc"]
    for key in keys:
        (root / "checkpoints" / key).mkdir(parents=True)
        (root / "checkpoints" / key / "seed=0-n=4.pt").write_bytes(b"x")
    store = Store(root)
    store.record("s", [keys[0]])
    store.start([keys[1]])
    code, printed, _ = cli.here("store", tmp_path / "o", "--prune")
    assert code == 0 and f"removed {root / 'checkpoints' / keys[2]}" in printed, printed
    assert sorted(p.name for p in (root / "checkpoints").iterdir()) == keys[:2]
    code, printed, _ = cli.here("store", tmp_path / "o", "--prune", "--all")
    assert code == 0 and [p.name for p in (root / "checkpoints").iterdir()] == keys[:1], printed


@pytest.mark.parametrize("manifest", ["{not json", '{"cells": 3}', "fifo", "folder"])
def test_prune_refuses_a_manifest_it_cannot_read(cli, tmp_path, manifest):
    root = tmp_path / "o" / ".sweep" / "s"
    root.mkdir(parents=True)
    _cells(root, "a" * 64, "b" * 64)
    path = root / "manifest.json"
    if manifest == "fifo":
        os.mkfifo(path)
    elif manifest == "folder":
        path.mkdir()
    else:
        path.write_text(manifest)
    code, _, err = cli.here("store", tmp_path / "o", "--prune")
    cli.one_line(code, err, f"cannot read the store's manifest {path}", "nothing was removed")
    assert len(list(root.glob("?" * 64 + ".json"))) == 2
    code, printed, err = cli.here("store", tmp_path / "o")  # a listing shows what it can, and says so
    assert code == 0 and printed.splitlines()[1].split()[:3] == ["s", "2", "?"], printed
    assert "manifest of" in err and "cannot be read" in err


# ---------------------------------------------------------------- user code that ends the process or hangs


def test_system_exit_in_write_is_one_line_naming_the_memory(cli, tmp_path, monkeypatch):
    """The behavioural fingerprint runs write at plan time: it too runs it under the guard."""
    mod = user_memory(tmp_path, monkeypatch, write="raise SystemExit(7)")
    code, _, err = cli.here(*_compare(tmp_path / "o", f"{mod}:Mem", extra=("--executor", "serial")))
    cli.one_line(code, err, f"memory '{mod}:Mem", "SystemExit in write(): 7", HINT)


@pytest.mark.slow  # a process of its own (about 6 s here, most of it importing torch)
@pytest.mark.parametrize("executor", ["serial", "processes"])
def test_os_exit_in_write_is_one_line_naming_the_memory(cli, tmp_path, monkeypatch, executor):
    mod = user_memory(tmp_path, monkeypatch, write="os._exit(3)")
    proc = cli.start(*_compare(tmp_path / "o", f"{mod}:Mem", extra=("--executor", executor)), stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=120)
    cli.one_line(proc.returncode, err, f"memory '{mod}:Mem", "called os._exit(3) in write()")


HANG = """if {when}:
            open(os.path.join(HERE, "entered"), "w").close()
            try:
                while True:
                    try:
                        time.sleep(0.05)
                    except {caught} as exc:
                        with open(os.path.join(HERE, "swallowed"), "a") as f:
                            f.write(type(exc).__name__ + " ")
            finally:
                open(os.path.join(HERE, "unwound"), "w").close()"""


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal delivers it (a background test run ignores it)


@pytest.mark.slow  # a process of its own: about 6 s on the shared 2-core VM, most of it importing torch
@pytest.mark.parametrize(
    "signum,status,when,word",
    [
        (signal.SIGTERM, 143, "True", "terminated (SIGTERM)"),  # in the fingerprint
        (signal.SIGTERM, 143, "k.shape[1] > 24", "terminated (SIGTERM)"),  # past the fingerprint: in the measurement
    ],
)
def test_a_stop_signal_while_write_hangs_ends_the_run_with_its_status(
    cli, tmp_path, monkeypatch, signum, status, when, word
):
    """The memory swallows every Exception while it hangs: the stop is a BaseException, and never its fault.

    Events, not times: the stop reached the write's ``finally`` (it unwound through the user's code; the watchdog that
    ends a command after ``GRACE`` seconds would skip it) and no ``except Exception`` of the user's saw it."""
    mod = user_memory(tmp_path, monkeypatch, write=HANG.format(when=when, caught="Exception"))
    argv = _compare(tmp_path / "o", f"{mod}:Mem", load="4", extra=("--executor", "serial"))
    proc = cli.start(*argv, stderr=subprocess.PIPE, preexec_fn=_default_sigint)
    try:
        _wait_for(lambda: (tmp_path / "entered").exists(), 60, "the memory's write")
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    swallowed = tmp_path / "swallowed"
    assert not swallowed.exists(), f"the user's except Exception caught {swallowed.read_text()}"
    assert (tmp_path / "unwound").exists(), "the command ended without unwinding the write (the watchdog's exit)"
    assert proc.returncode == status and word in err and "raised" not in err and "Traceback" not in err, err


@pytest.mark.slow
def test_a_stop_signal_ends_the_run_even_when_user_code_swallows_it(cli, tmp_path, monkeypatch):
    """A write that catches BaseException too: after lacapacity.cli.GRACE seconds the command ends anyway.

    SIGTERM and SIGINT, each to a run of its own, the two runs at once (each waits out GRACE)."""
    cases = {signal.SIGTERM: (143, "terminated (SIGTERM)"), signal.SIGINT: (130, "interrupted")}
    procs = {}
    try:
        for signum in cases:
            folder = tmp_path / signum.name
            folder.mkdir()
            mod = user_memory(folder, monkeypatch, write=HANG.format(when="True", caught="BaseException"))
            argv = _compare(folder / "o", f"{mod}:Mem", extra=("--executor", "serial"))
            procs[signum] = cli.start(*argv, stderr=subprocess.PIPE, preexec_fn=_default_sigint)
        for signum, proc in procs.items():
            entered = tmp_path / signum.name / "entered"
            _wait_for(entered.exists, 60, f"the memory's write ({signum.name})")
            proc.send_signal(signum)
        errs = {signum: proc.communicate(timeout=20)[1] for signum, proc in procs.items()}
    finally:
        for proc in procs.values():
            proc.kill()
    for signum, (status, word) in cases.items():
        err = errs[signum]
        assert procs[signum].returncode == status and word in err and "Traceback" not in err, (signum.name, err)


def test_the_needle_task_runs_the_memory_as_user_code(cli, tmp_path, monkeypatch):
    mod = user_memory(tmp_path, monkeypatch, read="if q.shape[1] == 1: raise IndexError('read past the end')")
    sets = [f"variant={mod}:Mem", "haystack=random", "depth=0,1", "n=16", "d=8", "seed=0", "candidates=16"]
    argv = ["run", "needle", "--out", tmp_path / "o", "--quiet", "--executor", "serial"]
    code, _, err = cli.here(*argv, *[x for s in sets for x in ("--set", s)])
    cli.one_line(code, err, f"memory '{mod}:Mem", "IndexError in read(): read past the end", HINT)


def test_an_allocation_failure_in_the_users_write_names_the_memory(cli, tmp_path, monkeypatch):
    mod = user_memory(
        tmp_path,
        monkeypatch,
        write="if k.shape[1] > 24: raise RuntimeError('DefaultCPUAllocator: can\\'t allocate memory: you tried to allocate 10^12')",
    )
    code, _, err = cli.here(*_compare(tmp_path / "o", f"{mod}:Mem", load="4", extra=("--executor", "serial")))
    line = cli.one_line(code, err, f"memory '{mod}:Mem", "in write() could not allocate memory", "can't allocate")
    assert not line.startswith("capacity: error: probe"), line


# ---------------------------------------------------------------- no process outlives its parent


FIGURES = """
import os, sys, time
from lacapacity.sweep import executors
from lacapacity.plots.render import save_all

executors.cores = lambda: 2  # two figures, two forked children, whatever this machine has


def build():
    open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
    time.sleep(120)


save_all([("a", build), ("b", build)], os.path.join(sys.argv[1], "figures"))
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_kill_9_of_the_parent_leaves_no_figure_worker(tmp_path):
    script = tmp_path / "figures.py"
    script.write_text(FIGURES)
    pids = tmp_path / "pids"
    pids.mkdir()
    proc = subprocess.Popen([sys.executable, str(script), str(pids)], env=ENV)
    try:
        _wait_for(lambda: len(list(pids.iterdir())) == 2, 60, "two figure workers")
        children = [int(p.name) for p in pids.iterdir()]
        assert all(alive(pid) for pid in children)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _wait_for(lambda: not any(alive(pid) for pid in children), 5, "the figure workers to die with their parent")
    finally:
        proc.kill()
        for p in pids.iterdir():
            try:
                os.kill(int(p.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


UNGUARDED = """
import sys
from lacapacity import sweep

sweep.compare(["linear"], d=(8,), load=(1,), seeds=1, out=sys.argv[1], executor=sys.argv[2], progress=False)
print("done")
"""


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["processes"])
def test_a_script_without_the_main_guard_is_told_so_never_hangs(tmp_path, executor):
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "o"), executor],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "CapacityError" in last and "outside if __name__ == '__main__':" in last and str(script) in last, last


# ---------------------------------------------------------------- stored cells that are not what they claim


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A finished run's result and its one cell file."""
    out = tmp_path_factory.mktemp("stored")
    res = sweep.compare(["linear"], d=(8,), load=(1, 2), seeds=(0,), out=out, executor="serial", progress=False)
    (cell,) = [p for p in (out / ".sweep" / "compare").glob("*.json") if p.name != "manifest.json"]
    return out, res.dataset, cell, cell.read_bytes()


def _forge(data: dict, change) -> str:
    body = {k: data[k] for k in ("key", "schema", "variables", "coords", "attrs", "points")}
    change(body)
    return json.dumps({**body, "checksum": store_mod._checksum(body)})


def _point(body):
    return body["points"][next(iter(body["points"]))]


FORGERIES = {
    "int64": lambda b: (
        b["variables"].update(mse="<i8"),
        [p.update(mse=int(p["mse"] * 0 + 3)) for p in b["points"].values()],
    ),
    "float16": lambda b: b["variables"].update(mse="<f2"),
    "uint8": lambda b: (
        b["variables"].update(recall="|u1"),
        [p.update(recall=int(p["recall"] > 0)) for p in b["points"].values()],
    ),
    "null": lambda b: _point(b).update(mse=None),
    "nan recall": lambda b: _point(b).update(recall=float("nan")),
    "a list": lambda b: _point(b).update(mse=[1.0, 2.0]),
    "bad point name": lambda b: b["points"].update({"zero eight": _point(b)}),
    "points a list": lambda b: b.update(points=[1, 2]),
}


@pytest.mark.slow
@pytest.mark.parametrize("forgery", list(FORGERIES) + ["fifo", "folder", "not json"])
def test_a_cell_that_is_not_what_the_schema_declares_is_measured_again_naming_the_file(stored, capsys, forgery):
    out, ref, cell, original = stored
    try:
        cell.unlink()
        if forgery == "fifo":
            os.mkfifo(cell)
        elif forgery == "folder":
            cell.mkdir()
        elif forgery == "not json":
            cell.write_text('{"key": ')
        else:
            cell.write_text(_forge(json.loads(original), FORGERIES[forgery]))
        res = sweep.compare(["linear"], d=(8,), load=(1, 2), seeds=(0,), out=out, executor="serial", verbose=True)
        err = capsys.readouterr().err
        assert res.measured == 2 and res.dataset.mse.equals(ref.mse), err
        assert "measuring them again" in err and str(cell) in err, err
        assert stat.S_ISREG(os.lstat(cell).st_mode) and cell.read_bytes() == original  # measured and saved again
        # the store's listing opens no FIFO either
        if forgery == "fifo":
            cell.unlink()
            os.mkfifo(cell)
            code = main(["store", str(out)])
            assert code == 0
    finally:
        if cell.is_dir():
            cell.rmdir()
        cell.unlink(missing_ok=True)
        cell.write_bytes(original)
        for aside in cell.parent.glob("*.not-a-file-*"):
            aside.rmdir()


# ---------------------------------------------------------------- a file the memory reads by a fixed path


def test_a_file_read_by_a_fixed_path_past_the_fingerprint_is_part_of_what_is_reused(tmp_path, monkeypatch, capsys):
    """The memory reads ``scale.txt`` (named nowhere in its parameters) only past the fingerprint's 24 pairs."""
    (tmp_path / "scale.txt").write_text("1.0")
    mod = user_memory(
        tmp_path,
        monkeypatch,
        read="self.c = float(open(os.path.join(HERE, 'scale.txt')).read()) if q.shape[1] > 24 else self.c",
    )
    kw = dict(d=(8,), load=(4,), seeds=(0,), out=tmp_path / "o", executor="serial", progress=False)
    first = sweep.compare([f"{mod}:Mem"], **kw)
    again = sweep.compare([f"{mod}:Mem"], **kw)
    assert again.measured == 0 and again.dataset.mse.equals(first.dataset.mse)  # unchanged: reused
    (tmp_path / "scale.txt").write_text("2.0")
    edited = sweep.compare([f"{mod}:Mem"], **{**kw, "progress": True, "verbose": True})
    err = capsys.readouterr().err
    assert edited.measured == 1 and "a file its memory read while measured changed" in err, err
    assert not edited.dataset.mse.equals(first.dataset.mse)


def test_a_file_read_while_built_or_fingerprinted_is_in_the_reuse_key(tmp_path, monkeypatch):
    from lacapacity import studies
    from lacapacity.sweep.plan import Plan

    (tmp_path / "scale.txt").write_text("1.0")
    mod = user_memory(tmp_path, monkeypatch, write="open(os.path.join(HERE, 'scale.txt')).read()")  # read, kept nowhere
    study = studies.get("capacity-vs-d").with_overrides([f"variant={mod}:Mem", "d=8", "load=1", "seed=0"])
    key = lambda: next(iter(Plan(study, __import__("torch").device("cpu")).keys.values()))
    before = key()
    (tmp_path / "scale.txt").write_text("2.0")
    assert key() != before


# ---------------------------------------------------------------- one line each, named for what failed


def test_top_k_nan_is_refused_by_name(cli, tmp_path):
    code, _, err = cli.here("run", "capacity-vs-d", "--set", "top_k=nan", "--out", tmp_path)
    cli.one_line(code, err, "top_k must be a whole number >= 1, got nan")


@pytest.mark.parametrize("how", ["before Python starts", "after"])
def test_list_with_stdout_closed_is_one_line(cli, how):
    """Closed before Python starts (``capacity list >&-``: sys.stdout is None) or after (a descriptor closed)."""
    code = "import os; os.close(1); " if how == "after" else ""
    proc = subprocess.run(
        [sys.executable, "-c", f"{code}from lacapacity.cli import entry; entry()", "list"],
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        timeout=60,
        preexec_fn=(lambda: os.close(1)) if how != "after" else None,
    )
    cli.one_line(proc.returncode, proc.stderr, "standard output is closed: 'capacity list' has nowhere to print")


@pytest.mark.slow
def test_run_piped_into_head_draws_its_figures_and_ends_as_list_does(cli, tmp_path):
    """141 without a message, as every command whose reader went away (tests/cli/test_faults_pipe.py), after all of
    its work: the figures are drawn, no false warning."""
    proc = cli.start(
        *_compare(tmp_path / "o", "linear", extra=("--executor", "serial"), figures=True),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # what head -1 does
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert first.strip().endswith("compare.nc")
    assert proc.returncode == 141 and err == "", err
    assert len(list((tmp_path / "o" / "figures").glob("*.png"))) >= 1  # the figures were drawn


@pytest.mark.slow
def test_an_unwritable_mplconfigdir_leaves_no_folder_behind(cli, tmp_path, stored):
    """MPLCONFIGDIR below a file: matplotlib would make its own folder in TMPDIR and leave it (the command ends
    without the interpreter's teardown)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    (tmp_path / "file").write_text("")
    env = {"MPLCONFIGDIR": str(tmp_path / "file" / "mpl"), "TMPDIR": str(temp)}
    proc = cli.start("plot", stored[0] / "compare.nc", "--out", tmp_path / "figs", env=env, stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and err == "", err
    assert list(temp.iterdir()) == []


def test_an_unwritable_mplconfigdir_is_replaced_for_the_command(tmp_path, monkeypatch):
    from lacapacity import cli

    (tmp_path / "file").write_text("")  # a file where the folder would be: matplotlib cannot use it
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "file" / "mpl"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    home = cli._matplotlib_home()
    assert home is not None and os.environ["MPLCONFIGDIR"] == home and Path(home).parent == tmp_path
    os.rmdir(home)
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mine"))  # one it can use: the user's choice stands
    assert cli._matplotlib_home() is None and (tmp_path / "mine").is_dir()


class _Locked:
    """A memory that pickle cannot send to a worker (it holds a lock)."""

    name = "locked"

    def __init__(self):
        import threading

        self.lock = threading.Lock()

    def init_state(self, batch, d, dv, *, device=None):
        import torch

        return torch.zeros(batch, d, dv)

    def write(self, state, k, v):
        return state + k.transpose(1, 2) @ v

    def read(self, state, q):
        return q @ state

    def state_numel(self, d, dv):
        return d * dv


def test_an_unpicklable_grid_object_is_a_capacity_error(tmp_path):
    with pytest.raises(
        CapacityError, match=r"variant '_Locked' cannot be sent to worker processes \(TypeError: cannot"
    ):
        sweep.compare([_Locked()], d=(8,), load=(1,), seeds=1, out=tmp_path, executor="processes", progress=False)


def test_render_path_with_a_number_for_out_is_a_capacity_error(stored):
    from lacapacity.plots import render_path

    with pytest.raises(CapacityError, match=r"render_path's out must be a path .* got 3"):
        render_path(stored[0] / "compare.nc", out=3)


def test_a_dask_cluster_whose_worker_dies_while_it_starts_is_one_line(monkeypatch, tmp_path):
    distributed = pytest.importorskip("distributed")

    def nanny_failed(*args, **kwargs):
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(distributed, "LocalCluster", nanny_failed)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(CapacityError, match=r"the local Dask cluster of 2 workers did not start \(RuntimeError: Nanny"):
        list(executors.execute("dask", abs, [("a", -1)], workers=2))
    assert list(tmp_path.iterdir()) == []  # its scratch folder is removed
