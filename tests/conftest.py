"""Shared test settings.

A fixed thread count keeps timings predictable on small CI machines. Under pytest-xdist (the README's
``-n 2``) each worker already has a core of its own: one torch thread per worker, since two threads per
worker on two cores would make every small matmul wait on the other worker's threads (measured: a
[54, 16] x [16, 54] product takes 0.01 ms on one thread, 0.6 ms on two with the other core busy).
"""

import os
import sys

# Bytecode is cached (__pycache__, git-ignored) even where the environment turns the cache off
# (PYTHONDONTWRITEBYTECODE, which some containers set, this project's 2-core VM among them). The suite starts about
# 200 interpreters (the command line, worker processes, clusters); without the cache each compiles the package from
# source again, and each pytest worker rewrites the asserts of every test module again. Popped here, before
# pytest-xdist starts its workers, so that they and every process a test starts write and reuse the cache. Measured on
# the 2-core VM (2026-12-03): 549 to 501 busy core-seconds for the whole suite, collection 9.7 s to 5.0 s per worker.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

import torch  # noqa: E402

torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else max(1, min(2, torch.get_num_threads())))


# What a test needs from the machine, declared once: a test marked with one of these is skipped, with the reason,
# where the machine lacks it (pyproject.toml registers the markers).
import importlib.util  # noqa: E402

import pytest  # noqa: E402

_NEEDS = {
    "requires_cuda": (lambda: torch.cuda.is_available(), "no CUDA device: compiled-kernel tests need a GPU"),
    "requires_triton": (lambda: importlib.util.find_spec("triton") is not None, "triton is not installed"),
    "requires_fla": (
        lambda: importlib.util.find_spec("fla") is not None and importlib.util.find_spec("einops") is not None,
        "fla-core is not installed (pip install -e '.[test]' installs fla-core==0.6.0 and einops)",
    ),
}


def pytest_collection_modifyitems(config, items):
    have = {}
    for item in items:
        for name, (check, reason) in _NEEDS.items():
            if item.get_closest_marker(name) is not None:
                if name not in have:
                    have[name] = check()
                if not have[name]:
                    item.add_marker(pytest.mark.skip(reason=reason))


# The command line as a user runs it, in a fresh interpreter: the one way tests start ``capacity`` as a process.
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import NamedTuple  # noqa: E402

PLUGIN_PKG = Path(__file__).resolve().parent / "plugin_pkg"  # user modules the tests import by path


class Ran(NamedTuple):
    """What a command run in this process gave (``cli.here``): unpacks as ``code, out, err``."""

    returncode: int
    stdout: str
    stderr: str


class Cli:
    """``python -m lacapacity.cli`` in a fresh interpreter (the fixture ``cli``).

    ``cli(*args, env=None, path=(), timeout=300, **kw)``: run to the end, stdout and stderr captured as text (a
    ``CompletedProcess``); ``cli.start(*args, env=None, path=(), **kw)``: a ``Popen`` in a session of its own, for
    tests that send signals or watch children; ``cli.one_line(code, err, *fragments, status=2)``: check that a run
    ended with ``status`` and one line on stderr (no traceback) holding every fragment, and return the line;
    ``cli.fails(proc, *fragments, status=2)``: the same for a finished process. The environment is the test's with
    one torch thread and ``tests/plugin_pkg`` on PYTHONPATH, after the folders ``path``; ``env`` adds to it.
    ``cli.here(*args)``: the same command in this process (``lacapacity.cli.main``, what the console script runs
    after its supervisor's fork), its output read through pytest's ``capsys``, as a ``Ran`` (``code, out, err``;
    ``cli.fails`` takes it): for refusals and quick commands, without a fresh interpreter's second of start-up."""

    def __init__(self, capsys: pytest.CaptureFixture[str]):
        self._capsys = capsys

    def env(self, extra: dict | None = None, path=()) -> dict:
        folders = [*map(str, path), str(PLUGIN_PKG), os.environ.get("PYTHONPATH", "")]
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(f for f in folders if f),
            "OMP_NUM_THREADS": "1",
            **(extra or {}),
        }

    def __call__(
        self, *args, env: dict | None = None, path=(), timeout: float = 300, **kw
    ) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "lacapacity.cli", *map(str, args)]
        return subprocess.run(cmd, env=self.env(env, path), capture_output=True, text=True, timeout=timeout, **kw)

    def start(self, *args, env: dict | None = None, path=(), **kw) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "lacapacity.cli", *map(str, args)]
        return subprocess.Popen(cmd, env=self.env(env, path), text=True, start_new_session=True, **kw)

    def here(self, *args) -> Ran:
        from lacapacity import cli as _cli

        argv = [str(a) for a in args]
        self._capsys.readouterr()  # what the test printed before is not the command's
        code = _cli.main(argv)
        out, err = self._capsys.readouterr()
        return Ran(code, out, err)

    @staticmethod
    def one_line(code: int, err: str, *fragments: str, status: int = 2) -> str:
        lines = err.strip().splitlines()
        assert code == status, err
        assert len(lines) == 1 and "Traceback" not in err, err
        for f in fragments:
            assert f in lines[0], lines[0]
        return lines[0]

    def fails(self, proc: subprocess.CompletedProcess | Ran, *fragments: str, status: int = 2) -> str:
        return self.one_line(proc.returncode, proc.stderr, *fragments, status=status)


@pytest.fixture
def cli(capsys) -> Cli:
    return Cli(capsys)
