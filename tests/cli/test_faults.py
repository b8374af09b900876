"""Fault injection: damaged stores, code changes, killed runs and workers, bad paths and values.

Every case ends as the README promises: the right numbers or a one-line error (exit 2; 130 for an interrupt, 143 for
SIGTERM), no process left behind, nothing finished lost.
"""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr
from proc_support import as_from_a_terminal, still_alive

from lacapacity import CapacityError, studies, sweep
from lacapacity.sweep import provenance as store_mod
from lacapacity.sweep.jobs import check
from lacapacity.sweep.plan import Plan
from lacapacity.sweep.store import Store, _checksum
from lacapacity.tasks import learned

PKG = Path(__file__).resolve().parents[1] / "plugin_pkg"
ENV = {**os.environ, "PYTHONPATH": str(PKG) + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
SMALL = ["variant=linear,delta", "keys=gaussian", "d=8", "load=1/2,1,2", "seed=0,1"]
SLOW = [
    "slowmem:SlowMemory(sleep=0.25)",
    "--d",
    "8,12,16,24,32,48",
    "--load",
    "1/2,1,2",
    "--seeds",
    "1",
    "--no-figures",
]


def _parents() -> dict[int, int]:
    """Every process's parent: pid -> ppid (from /proc)."""
    parent = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
                parent[int(p.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return parent


def _children(pid: int, parent: dict[int, int] | None = None) -> set[int]:
    """Every live descendant of ``pid`` (``parent``: a ``_parents()`` already read)."""
    parent = _parents() if parent is None else parent
    found, frontier = set(), {pid}
    while frontier:
        frontier = {c for c, pp in parent.items() if pp in frontier} - found
        found |= frontier
    return found


def _workers(pid: int) -> list[int]:
    """The measuring workers among the descendants of ``pid``: the children of its fork server (spawned workers,
    where the platform has no fork server)."""

    def cmdline(p: int | None) -> str:
        try:
            return Path(f"/proc/{p}/cmdline").read_text(errors="ignore")
        except OSError:
            return ""

    parent = _parents()
    return [p for p in _children(pid, parent) if "spawn_main" in cmdline(p) or "forkserver" in cmdline(parent.get(p))]


def _start_slow(out: Path, *extra, hold: Path | None = None):
    """The slow run; ``hold``: its pass at d = 48 waits until that file exists (the run cannot end before;
    ``slowmem``'s SLOWMEM_HOLD)."""
    cmd = [sys.executable, "-m", "lacapacity.cli", "compare", *SLOW, "--out", str(out), "--verbose", *extra]
    env = {**ENV, "SLOWMEM_HOLD": str(hold)} if hold else ENV
    return subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _wait_for_a_group(proc) -> list[str]:
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "points; finished" in line:
            return lines
    raise AssertionError("the run ended before a pass finished: " + "".join(lines))


@contextmanager
def _held_in_two_workers(tmp_path: Path) -> Iterator[subprocess.Popen]:
    """The slow run in two worker processes, its pass at d = 48 held, once another pass has finished; killed after
    the block."""
    proc = _start_slow(tmp_path / "o", "--executor", "processes", "--workers", "2", hold=tmp_path / "gate")
    try:
        _wait_for_a_group(proc)
        yield proc
    finally:
        proc.kill()


# ---------------------------------------------------------------- the store


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    study = studies.get("capacity-vs-d").with_overrides(SMALL)
    out = tmp_path_factory.mktemp("ref")
    return study, sweep.run(study, out=out, device="cpu", progress=False).dataset


def _damage(study, out: Path, how):
    plan = Plan(study, torch.device("cpu"))
    key = plan.keys[plan.cells[0]]
    path = out / ".sweep" / study.name / f"{key}.json"
    data = json.loads(path.read_text())
    first = sorted(data["points"])[0]
    if how == "number":  # an edited number, checksum left as it was
        data["points"][first]["mse"] += 1.0
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[:50])
        return
    else:  # a consistent file (checksum recomputed) that does not hold what the cell must
        if how == "point":
            data["points"].pop(first)
        elif how == "variable":
            for values in data["points"].values():
                values.pop("mse")
            data["variables"].pop("mse")
        elif how == "coordinate":
            data["coords"] = {"overwrite": [0.5]}
        elif how == "dtype":
            data["variables"]["mse"] = "<U8"
        body = {k: data[k] for k in ("key", "schema", "variables", "coords", "attrs", "points")}
        data["checksum"] = _checksum(body)
    path.write_text(json.dumps(data))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["number", "truncated", "point", "variable", "coordinate", "dtype"])
def test_damaged_cells_are_measured_again(reference, tmp_path, capsys, how):
    study, ref = reference
    sweep.run(study, out=tmp_path, device="cpu", progress=False)
    _damage(study, tmp_path, how)
    again = sweep.run(study, out=tmp_path, device="cpu")
    cell = 3 * 2  # one cell: three loads, two seeds
    assert (again.measured, again.reused) == ((1, 2 * cell - 1) if how == "point" else (cell, cell))
    assert again.dataset.drop_attrs().equals(ref.drop_attrs())
    err = capsys.readouterr().err
    if how != "point" and (how != "truncated" or "unreadable" in err):
        assert "measuring them again" in err


def test_a_code_change_invalidates_every_stored_point(reference, tmp_path, monkeypatch):
    study, ref = reference
    sweep.run(study, out=tmp_path, device="cpu", progress=False)
    monkeypatch.setattr(store_mod, "package", lambda: "an edited probe")
    again = sweep.run(study, out=tmp_path, device="cpu", progress=False)
    assert again.reused == 0 and again.measured == 12


@pytest.mark.slow
def test_editing_a_user_variant_changes_the_numbers(cli, tmp_path):
    mod = tmp_path / "editmem.py"
    mod.write_text((PKG / "usermem.py").read_text())
    env = {**ENV, "PYTHONPATH": str(tmp_path) + os.pathsep + ENV["PYTHONPATH"]}
    args = [
        "compare",
        "editmem:GainMemory(c=1)",
        "--d",
        "8",
        "--load",
        "1,2",
        "--seeds",
        "1",
        "--out",
        str(tmp_path / "o"),
        "--quiet",
        "--no-figures",
    ]
    assert cli(*args, env=env).returncode == 0
    with xr.open_dataset(tmp_path / "o" / "compare.nc") as ds:
        before = ds.mse.values.copy()
    mod.write_text(
        mod.read_text().replace("return self.c * (q.float() @ state)", "return 2 * self.c * (q.float() @ state)")
    )
    proc = cli(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    with xr.open_dataset(tmp_path / "o" / "compare.nc") as ds:
        assert not np.allclose(ds.mse.values, before)


# ---------------------------------------------------------------- validation before work


def test_checking_learned_keys_optimises_nothing(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("validation ran the optimisation")

    monkeypatch.setattr(learned, "optimise", boom)
    check(studies.get("capacity-vs-d").with_overrides(["keys=learned(steps=100000)", "d=4096"]))
    with pytest.raises(CapacityError, match="steps"):
        check(studies.get("capacity-vs-d").with_overrides(["keys=learned(steps=0)"]))


@pytest.mark.parametrize(
    "sets,fragments",
    [
        (["d=100000"], ("needs about", "GiB", "available")),
        (["seed=18446744073709551616"], ("seed must be a whole number >= 0 and <= 2^63 - 1",)),
        (["load=1/0"], ("divides by zero",)),
        (["load=inf"], ("finite",)),
        (["load=0"], ("load must be a finite number > 0",)),
        (["variant=delta(beta=1,beta=0.5)"], ("sets beta more than once",)),
        (["variant=nosuch:Thing"], ("cannot import 'nosuch'",)),
    ],
)
def test_bad_values_stop_before_any_work(cli, tmp_path, sets, fragments):
    args = ["run", "capacity-vs-d", "--out", str(tmp_path / "o"), "--device", "cpu"]
    for s in sets:
        args += ["--set", s]
    t0 = time.perf_counter()
    cli.fails(cli.here(*args), *fragments)
    assert not (tmp_path / "o" / ".sweep" / "capacity-vs-d").exists() or not any(
        (tmp_path / "o" / ".sweep" / "capacity-vs-d").glob("*.json")
    )
    assert time.perf_counter() - t0 < 120


def test_a_study_name_cannot_escape_the_output_folder():
    with pytest.raises(CapacityError, match="study name"):
        sweep.Study("../x", "", sweep.Grid(load=(1,)), sweep.Recall())


# ---------------------------------------------------------------- paths


def test_bad_output_paths_are_one_line(cli, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    small = [a for s in SMALL for a in ("--set", s)]
    cli.fails(cli.here("run", "capacity-vs-d", *small, "--out", afile), "is a file, not a folder")
    (tmp_path / "o" / "capacity-vs-d.nc").mkdir(parents=True)
    cli.fails(cli.here("run", "capacity-vs-d", *small, "--out", tmp_path / "o", "--no-figures"), "is a folder")
    if Path("/sys/kernel").is_dir():  # a folder that even root cannot write
        cli.fails(cli.here("run", "capacity-vs-d", *small, "--out", "/sys/kernel"), "cannot write")
    cli.fails(cli.here("plot", tmp_path / "missing.nc"), "no such results file")


@pytest.mark.slow
def test_plot_onto_a_file_and_figures_written_whole(cli, reference, tmp_path, monkeypatch):
    _, ref = reference
    path = tmp_path / "r.nc"
    ref.to_netcdf(path, engine="h5netcdf")
    afile = tmp_path / "afile"
    afile.write_text("x")
    cli.fails(cli.here("plot", path, "--out", afile), "is a file")
    from lacapacity import plots

    real = Path.write_bytes

    def dies_half_way(self, data):  # the disk fills up while a figure's file is written
        real(self, bytes(data)[:100])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", dies_half_way)
    with pytest.raises(CapacityError, match="No space left"):
        plots.render(ref, out=tmp_path / "figs")
    monkeypatch.setattr(Path, "write_bytes", real)
    assert not any(
        p.suffix in (".png", ".pdf") for p in (tmp_path / "figs").iterdir()
    )  # no partial file under a final name


def test_an_output_folder_that_fails_mid_run_keeps_what_was_saved(reference, tmp_path, monkeypatch):
    study, ref = reference
    saved = []
    real = Store.save

    def full_after_one(self, key, *args):
        if saved:
            raise OSError(28, "No space left on device")
        saved.append(key)
        real(self, key, *args)

    monkeypatch.setattr(Store, "save", full_after_one)
    with pytest.raises(CapacityError, match="No space left on device.*6 points of this run are saved"):
        sweep.run(study, out=tmp_path, device="cpu", executor="serial", progress=False)
    monkeypatch.setattr(Store, "save", real)
    again = sweep.run(study, out=tmp_path, device="cpu", executor="serial", progress=False)
    assert again.reused == 6 and again.dataset.drop_attrs().equals(ref.drop_attrs())


@pytest.mark.parametrize(
    "argv,fragments",
    [
        (["run", "capacity-vs-d", "--device", "mps"], ("invalid choice",)),
        (["check", "--device", "mps"], ("no MPS",)),
        (["check", "--only", ","], ("no theorem selected",)),
    ],
)
def test_bad_devices_and_selections_are_one_line(cli, argv, fragments):
    cli.fails(cli.here(*argv), *fragments)


# ---------------------------------------------------------------- processes


@pytest.mark.slow
@pytest.mark.parametrize(
    "executor,moment", [("processes", "after a group"), ("processes", "at start-up"), ("dask", "after a group")]
)
def test_kill_9_of_the_run_leaves_no_worker_behind(cli, tmp_path, monkeypatch, executor, moment):
    gate = tmp_path / "gate"  # the run cannot finish before it is killed
    proc = _start_slow(tmp_path / "o", "--executor", executor, "--workers", "2", hold=gate)
    try:
        if moment == "at start-up":  # workers spawned, none finished
            deadline = time.time() + 120
            while len(_children(proc.pid)) < 2 and time.time() < deadline:
                time.sleep(0.05)
        else:
            _wait_for_a_group(proc)
        kids = _children(proc.pid)
        assert kids, "the run has worker processes"
        proc.kill()
        proc.wait(timeout=30)
        left = still_alive(kids, within=120)
        assert not left, f"left behind: {left}"
    finally:
        proc.kill()
    if moment == "after a group":  # the store the killed run left is whole: the resume reuses what it finished
        monkeypatch.syspath_prepend(str(PKG))  # slowmem, here as in the killed run
        resumed = cli.here("compare", *SLOW, "--out", str(tmp_path / "o"), "--verbose", "--executor", "serial")
        assert resumed.returncode == 0 and "measured in" in resumed.stderr
        assert " 0 reused" not in resumed.stderr, resumed.stderr


@pytest.mark.slow
def test_sigterm_ends_the_run_in_one_line_and_takes_the_workers(tmp_path):
    with _held_in_two_workers(tmp_path) as proc:
        kids = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143
        assert "terminated" in err and "Traceback" not in err
        assert not still_alive(kids, within=120)


@pytest.mark.slow
def test_a_killed_worker_ends_the_run_with_one_line(tmp_path):
    """The run holds its pass at d = 48 (it cannot end before the kill, however fast the machine: issue 51)."""
    with _held_in_two_workers(tmp_path) as proc:
        workers = _workers(proc.pid)
        assert workers
        os.kill(workers[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
        lines = [line for line in err.strip().splitlines() if line.startswith("capacity: error")]
        assert proc.returncode == 2 and "Traceback" not in err, err
        assert (
            len(lines) == 1
            and "a worker process died" in lines[0]
            and "run the same command again to resume" in lines[0]
        )


@pytest.mark.slow
def test_two_runs_into_one_folder_measure_each_point_once(tmp_path):
    """Each step waits for an event (issue 51): the first run holds the lock (a pass finished, the one at d = 48
    held on a file), the second says it waits for it, and only then is the first let go."""
    gate = tmp_path / "gate"
    a = _start_slow(tmp_path / "o", "--executor", "serial", hold=gate)
    b = None
    try:
        first = _wait_for_a_group(a)
        b = _start_slow(tmp_path / "o", "--executor", "serial", hold=gate)
        second = []
        for line in b.stderr:
            second.append(line)
            if "waiting for it" in line:
                break
        else:
            raise AssertionError("the second run did not wait: " + "".join(second))
        gate.touch()
        outs = [(a.communicate(timeout=300)[1], first), (b.communicate(timeout=300)[1], second)]
    finally:
        for p in (a, b):
            if p is not None:
                p.kill()
    assert a.returncode == 0 and b.returncode == 0, outs
    measured = [int(err.rsplit(" measured in", 1)[0].rsplit(" ", 1)[1]) for err, _ in outs]
    assert measured == [18, 0], outs  # 18 points (6 d, 3 loads), each measured by exactly one run


INTERRUPTED_AT_START = """
import os, signal, sys

class Interrupt:  # SIGINT to this process as the supervisor imports ctypes, before it forks
    def find_spec(self, name, path=None, target=None):
        if name == "ctypes":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)

where = {where!r}
if where == "before the fork":
    sys.meta_path.insert(0, Interrupt())
elif where == "in the child":  # pending there until the child unblocks it, inside the supervisor's code
    os.register_at_fork(after_in_child=lambda: os.kill(os.getpid(), signal.SIGINT))
else:  # to the supervisor once it forked: forwarded to the child in its first steps
    os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))
sys.argv = ["capacity", "list"]
from lacapacity import cli

cli.entry()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor forks (Linux)")
@pytest.mark.parametrize("where", ["before the fork", "in the child", "to the supervisor"])
def test_an_interrupt_at_start_up_is_one_line(where):
    """Ctrl-C at each step of the console script's start-up (issue 51: 0.3 s after the start it was a traceback from
    ``_supervise.supervise``): sent at a named moment, not after a guessed delay."""
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_AT_START.format(where=where)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=as_from_a_terminal,
    )
    lines = done.stderr.splitlines()  # main's own line when the child was already in it
    assert done.returncode == 130 and len(lines) == 1 and lines[0].startswith("capacity: interrupted"), done.stderr


INTERRUPTED_IN_TORCH = """
import os, signal, sys

class Interrupt:  # SIGINT to this process as torch's import reaches torch.distributed (its C++ part comes next)
    def find_spec(self, name, path=None, target=None):
        if name == "torch.distributed":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)

sys.meta_path.insert(0, Interrupt())
from lacapacity import cli

cli.GRACE = 600.0  # the import goes on after the interrupt: on a loaded machine longer than the grace that ends it anyway
code = cli.main(["{command}", *{args!r}])
print(code, "torch.distributed" in sys.modules, "lacapacity.check" in sys.modules or "lacapacity.sweep" in sys.modules)
"""


@pytest.mark.parametrize("command, args", [("check", ["--only", "T2"]), ("compare", ["linear", "--d", "8"])])
def test_an_interrupt_while_torch_is_imported_is_held_until_the_import_ends(tmp_path, command, args):
    """torch's import runs C++ (torch._C._c10d_init) that aborts the process when a signal handler raises in it: an
    interrupt during the import ends the command after the import, before any work, with status 130 and one line."""
    script = INTERRUPTED_IN_TORCH.format(
        command=command, args=[*args, *(["--out", str(tmp_path)] if command == "compare" else [])]
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=as_from_a_terminal,
    )
    assert done.stdout.split() == ["130", "True", "False"], done  # torch whole, the command's own modules never loaded
    assert done.stderr.startswith("capacity: interrupted") and done.stderr.count("\n") == 1, done.stderr


def test_sweep_run_refuses_a_name_or_no_folder_in_one_line(reference):
    study, _ = reference
    with pytest.raises(CapacityError, match=r"takes a lacapacity.sweep.Study \(lacapacity.studies.get\(name\)"):
        sweep.run("capacity-vs-d", out="unused", progress=False)
    with pytest.raises(CapacityError, match="out must be a folder path, got None"):
        sweep.run(study, out=None, progress=False)
