"""User code that forks (issue 51): the child is not the command.

A memory that ``os.fork()``s a helper ending in ``os._exit(0)``, or runs a ``multiprocessing`` fork pool, gives one
result and the numbers of the same memory without the fork, under every executor; a child forked inside
``lacapacity.errors.user_code`` exits as it would outside the toolkit (its ``os._exit`` exits, a return or an
exception ends it, never the command a second time) and its signals are its own.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import xarray as xr
from user_code_support import user_module

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="os.fork and the fork start method")

FORKING = """
import multiprocessing, os
import torch


class ForkMem:
    name = "forkmem"

    @property
    def params(self):
        return {}

    def init_state(self, batch, d, dv, *, device=None):
        return torch.zeros(batch, d, dv, device=device)

    def write(self, state, k, v):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return state + k.float().transpose(1, 2) @ v.float()

    def read(self, state, q):
        return q.float() @ state

    def state_numel(self, d, dv):
        return d * dv


def _square(x):
    return x * x


class PoolMem(ForkMem):
    name = "poolmem"

    def init_state(self, batch, d, dv, *, device=None):
        with multiprocessing.get_context("fork").Pool(1) as pool:
            assert pool.map(_square, [3]) == [9]
        return torch.zeros(batch, d, dv, device=device)
"""


@pytest.mark.slow  # a command of its own per executor: 10-25 s each on the loaded 2-core VM
@pytest.mark.parametrize("executor", ["serial", "processes", "dask"])
def test_a_memory_that_forks_gives_one_result_and_the_numbers_without_the_fork(cli, tmp_path, monkeypatch, executor):
    mod = user_module(tmp_path, monkeypatch, FORKING)
    argv = ["compare", f"{mod}:ForkMem", f"{mod}:PoolMem", "linear", "--d", "8", "--load", "1,2", "--seeds", "1"]
    argv += ["--quiet", "--no-figures", "--executor", executor, "--workers", "1", "--out", tmp_path / "o"]
    proc = cli(*argv, timeout=180)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.splitlines() == [str(tmp_path / "o" / "compare.nc")]  # one copy of the command printed
    with xr.open_dataset(tmp_path / "o" / "compare.nc") as ds:
        mse = ds["mse"].load()
    additive = mse.sel(variant="linear")  # the built-in additive memory: the same writes and reads, no fork
    for name in ("ForkMem", "PoolMem"):
        assert (mse.sel(variant=f"{mod}:{name}").values == additive.values).all(), (name, mse.values)


FORKED = """
import os, signal, sys
from lacapacity.errors import UserCodeError, user_code

from lacapacity import cli

signal.signal(signal.SIGTERM, cli._on_stop)  # the command's own handler
for how in ("os._exit(5)", "return", "raise RuntimeError('child')", "sys.exit(6)"):
    try:
        with user_code("memory 'm'", "in write()"):
            pid = os.fork()
            if pid == 0:
                handler = signal.getsignal(signal.SIGTERM)
                if handler is not signal.SIG_DFL:
                    os.write(1, b"child kept the command's SIGTERM handler\\n")
                if how == "os._exit(5)":
                    os._exit(5)
                elif how == "raise RuntimeError('child')":
                    raise RuntimeError("child")
                elif how == "sys.exit(6)":
                    sys.exit(6)
            else:
                _, status = os.waitpid(pid, 0)
                print(how, os.waitstatus_to_exitcode(status), flush=True)
    except UserCodeError as exc:
        print("UserCodeError", exc, flush=True)
print("after", flush=True)
"""


def test_a_child_forked_in_user_code_ends_as_outside_the_toolkit():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(FORKED)], capture_output=True, text=True, timeout=60)
    assert proc.stdout.splitlines() == [
        "os._exit(5) 5",
        "return 0",
        "raise RuntimeError('child') 1",
        "sys.exit(6) 6",
        "after",
    ], (proc.stdout, proc.stderr)
    assert proc.returncode == 0
    assert "RuntimeError: child" in proc.stderr  # the child's own traceback, as Python prints it
