"""A task is its folder: a copy of a built-in task's folder under a new name, and nothing else, is a task of its own
that ``capacity run``, ``capacity plot`` and ``capacity list`` take (its settings, its figures, its listing).

The copy goes into a copy of the installed package: a folder ``site/capacity`` whose entries are links to this
tree's (``capacity/``, and ``plots``, ``kernels`` and ``studies`` where the wheel puts them), except ``tasks/``,
whose entries are links too, plus the new folder. The commands run in subprocesses with ``site`` first on the path,
so the package they import is this tree with one folder added, and the test checks that it is.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from lacapacity import studies, sweep

ROOT = Path(__file__).resolve().parents[2]
NEW = "mqar_copy"
pytestmark = pytest.mark.slow  # four processes, each starting Python and importing torch


def _site(tmp: Path) -> Path:
    """A package tree that is this one, every file a link to the original, with the mqar folder copied as NEW."""
    site = tmp / "site"
    pkg = site / "lacapacity"
    pkg.mkdir(parents=True)
    for entry in (ROOT / "capacity").iterdir():
        if entry.name not in ("tasks", "__pycache__"):
            (pkg / entry.name).symlink_to(entry)
    for top in ("plots", "kernels", "studies"):  # installed inside the package (pyproject.toml)
        (pkg / top).symlink_to(ROOT / top)
    (pkg / "tasks").mkdir()
    for entry in (ROOT / "capacity" / "tasks").iterdir():
        if entry.name != "__pycache__":
            (pkg / "tasks" / entry.name).symlink_to(entry)
    copy = pkg / "tasks" / NEW
    shutil.copytree(ROOT / "capacity" / "tasks" / "mqar", copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path in copy.glob("*.py"):  # the new name: its kind, and its own modules imported from the copy
        text = path.read_text(encoding="utf-8").replace("lacapacity.tasks.mqar.", f"lacapacity.tasks.{NEW}.")
        text = text.replace("lacapacity.tasks.mqar import", f"lacapacity.tasks.{NEW} import")
        text = re.sub(r'^(    name|    kind: ClassVar\[str\]) = "mqar"$', rf'\1 = "{NEW}"', text, flags=re.M)
        path.write_text(text, encoding="utf-8")
    return site


def _capacity(site: Path, *args: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "lacapacity.cli", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_copied_task_folder_runs_plots_and_lists(tmp_path):
    site = _site(tmp_path)
    # the tree the commands import is this one with the one folder added: every other file a link to the original
    files = {p.relative_to(site / "lacapacity") for p in (site / "lacapacity").rglob("*.py")}
    added = {p for p in files if not (site / "lacapacity" / p).resolve().is_relative_to(ROOT)}
    assert added == {Path("tasks", NEW, p.name) for p in (ROOT / "capacity/tasks/mqar").glob("*.py")}
    small = ["variant=linear,delta(beta=1.0)", "d=8", "n=4,8", "seed=0", "vocab=32", "overwrite=0,0.5"]
    options = [a for setting in small for a in ("--set", setting)] + ["--executor", "serial", "--no-figures"]
    listed = _capacity(site, "list", "tasks", cwd=tmp_path)
    assert re.search(rf"^  {NEW} +multi-query associative recall .*\(fields: vocab, overwrite, ", listed, re.M), listed
    _capacity(site, "run", "mqar", *options, "--set", f"kind={NEW}", "--out", "copy", cwd=tmp_path)
    # capacity plot, in a process that first says where the task and its figure come from
    where = (
        "import importlib, sys, lacapacity.tasks as t; r = importlib.import_module('lacapacity.plots.render'); "
        f"m = t.get({NEW!r}); print(t.__file__, type(m).__module__, r.own_figures(m)['mqar'].__module__); "
        "from lacapacity.cli import main; sys.exit(main(['plot', 'copy/mqar.nc']))"
    )
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", where], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines[:3] == [
        str(site / "lacapacity/tasks/__init__.py"),
        f"lacapacity.tasks.{NEW}.task",
        f"lacapacity.tasks.{NEW}.figures",  # the copy's own figure module draws its results
    ]
    assert sorted(Path(p).name for p in lines[3:]) == ["mqar_mqar.pdf", "mqar_mqar.png"]

    original = sweep.run(
        studies.get("mqar").with_overrides(small), out=tmp_path / "orig", executor="serial", quiet=True
    )
    with xr.open_dataset(tmp_path / "copy/mqar.nc") as copy, xr.open_dataset(original.path) as orig:
        assert f'"kind": "{NEW}"' in copy.attrs["config"] and '"kind": "mqar"' in orig.attrs["config"]
        assert sorted(copy.data_vars) == sorted(orig.data_vars) and "accuracy" in copy.data_vars
        for name in orig.data_vars:  # the same code under another name: the same numbers, bit for bit
            np.testing.assert_array_equal(copy[name].values, orig[name].values, err_msg=name)
