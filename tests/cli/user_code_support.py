"""A user's module written for a test: a fresh name in ``tmp_path``, on ``sys.path`` (this process) and
``PYTHONPATH`` (worker processes and the ``cli`` fixture's interpreters), and a memory ``Mem`` in it whose methods
run a line of the test's first (``user_memory``): how the fault tests put user code that raises, exits, hangs or
crashes under the command."""

from __future__ import annotations

import os
import textwrap
import uuid
from pathlib import Path

import pytest

MEMORY = """
import ctypes, os, time
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


class Mem:
    name = "mem"

    def __init__(self, c=1.0):
        {init}
        self.c = c

    @property
    def params(self):
        return {{"c": self.c}}

    def init_state(self, batch, d, dv, *, device=None):
        {init_state}
        return torch.zeros(batch, d, dv, device=device)

    def write(self, state, k, v):
        {write}
        return state + k.float().transpose(1, 2) @ v.float()

    def read(self, state, q):
        {read}
        return self.c * (q.float() @ state)

    {state_numel}
"""
NUMEL = "def state_numel(self, d, dv):\n        return d * dv"


def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> str:
    """Write ``source`` as a fresh module in ``tmp_path``, importable here and in every process started after;
    returns its name."""
    name = f"usermod_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return name


def user_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **lines: str) -> str:
    """A module whose ``Mem`` (the additive memory, reads scaled by ``c``) runs ``lines[method]`` first in ``init``,
    ``init_state``, ``write`` or ``read`` (the module imports ctypes, os, time and torch, and names its folder
    ``HERE``); ``state_numel`` replaces that method's whole definition. Returns the module's name: ``f"{name}:Mem"`` is the
    memory's label."""
    body = {"init": "pass", "init_state": "pass", "write": "pass", "read": "pass", "state_numel": NUMEL, **lines}
    return user_module(tmp_path, monkeypatch, MEMORY.format(**body))
