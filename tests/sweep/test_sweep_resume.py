"""The resume guarantee: kill a sweep part way (SIGKILL, SIGINT), rerun it, and get exactly an uninterrupted run's Dataset."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from test_sweep_support import SMALL, one_torch_thread  # noqa: F401 - autouse fixture

from lacapacity import studies, sweep
from lacapacity.sweep.plan import Plan

SETS = SMALL  # 8 cells (16 write passes), 48 points
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # as the one_torch_thread fixture does in-process


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    study = studies.get("capacity-vs-d").with_overrides(SETS)
    return study, sweep.run(study, out=tmp_path_factory.mktemp("uninterrupted"), device="cpu", progress=False)


def _store(out: Path, study) -> Path:
    return out / ".sweep" / study.name


def _persisted(out: Path, study) -> tuple[set[str], int]:
    """The cell files in the store and the points they hold."""
    files = {p.stem for p in _store(out, study).glob("*.json") if p.name != "manifest.json"}
    points = sum(len(json.loads((_store(out, study) / f"{k}.json").read_text())["points"]) for k in files)
    return files, points


def _resume_and_compare(study, out, reference, persisted: set[str]):
    keys = set(Plan(study, torch.device("cpu")).keys.values())
    assert persisted <= keys
    _, points = _persisted(out, study)
    resumed = sweep.run(study, out=out, device="cpu", progress=False)
    assert resumed.reused == points, "every point persisted before the kill is reused"
    assert resumed.measured == 48 - points, "and only the others are measured again"
    files = sorted(p.name for p in _store(out, study).iterdir())
    assert files == sorted([f"{k}.json" for k in keys] + ["manifest.json"]), (
        "one file per cell: nothing lost, nothing duplicated, no temporary left"
    )
    assert resumed.dataset.equals(reference.dataset)
    assert resumed.dataset.attrs["config_hash"] == reference.dataset.attrs["config_hash"]


def _script(tmp_path: Path, prelude: str = "") -> Path:
    """A script that runs the study into the folder argv[1], after ``prelude`` (e.g. a sabotage hook)."""
    path = tmp_path / "sweep_script.py"
    run = f"""
        import sys
        from lacapacity import studies, sweep
        study = studies.get("capacity-vs-d").with_overrides({SETS!r})
        sweep.run(study, out=sys.argv[1], device="cpu", executor="serial", progress=False)
        """
    path.write_text(textwrap.dedent(prelude) + textwrap.dedent(run))
    return path


@pytest.mark.slow
def test_sigkill_part_way_then_resume(tmp_path, reference, cli):
    study, ref = reference
    out = tmp_path / "killed"
    script = _script(tmp_path)
    proc = subprocess.Popen([sys.executable, str(script), str(out)], env=ENV)
    store = _store(out, study)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if store.exists() and len([p for p in store.glob("*.json") if p.name != "manifest.json"]) >= 2:
                break
            time.sleep(0.005)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the sweep was still running when it was killed"
    persisted, points = _persisted(out, study)
    assert 2 <= len(persisted) and points < 48
    assert not (out / f"{study.name}.nc").exists()
    assert cli.here("store", out, "--prune").returncode == 0  # it keeps what the documented resume reuses
    assert _persisted(out, study) == (persisted, points)
    _resume_and_compare(study, out, ref, persisted)


def test_sigkill_in_the_middle_of_a_write_leaves_no_partial_result(tmp_path, reference):
    """Killed after the temporary file is written but before the rename: that pass does not count, its temporary is removed."""
    study, ref = reference
    out = tmp_path / "midwrite"
    script = _script(
        tmp_path,
        """
        import os, signal
        calls = []
        real_replace = os.replace
        def replace(src, dst):
            if "manifest" not in str(dst):  # the manifest is written before the run measures (pending cells)
                calls.append(dst)
            if len(calls) == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            real_replace(src, dst)
        os.replace = replace
        """,
    )
    proc = subprocess.run([sys.executable, str(script), str(out)], timeout=120, env=ENV)
    assert proc.returncode == -signal.SIGKILL
    store = _store(out, study)
    assert len(list(store.glob(".*.tmp"))) == 1, "the interrupted write left its temporary file"
    persisted, _ = _persisted(out, study)
    assert len(persisted) == 2
    _resume_and_compare(study, out, ref, persisted)


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_stops_with_a_resume_hint_then_resumes(tmp_path, reference):
    study, ref = reference
    out = tmp_path / "interrupted"
    cmd = [sys.executable, "-m", "lacapacity.cli", "run", "capacity-vs-d", "--out", str(out), "--verbose"]
    cmd += ["--executor", "serial", "--device", "cpu", *[x for s in SETS for x in ("--set", s)]]
    # SIGINT as a terminal delivers it: a test run started in the background inherits it ignored
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=ENV, preexec_fn=_default_sigint)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "points; finished" in line:  # one pass is persisted: interrupt now
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 130, "".join(lines) + rest
    assert "interrupted:" in rest and "run the same command again to resume" in rest and "Traceback" not in rest
    persisted, points = _persisted(out, study)
    assert 1 <= len(persisted) and points < 48
    _resume_and_compare(study, out, ref, persisted)
