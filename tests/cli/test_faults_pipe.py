"""A reader that goes away (``capacity ... | head -1``) is treated alike by every command (docs/errors.md): the
command does all it was asked, drops what it cannot print, and ends with 141 (128 + SIGPIPE) instead of 0, without a
message. In this process: standard output is a pipe whose reading end is closed (Python ignores SIGPIPE, so each
write that reaches it fails with EPIPE, as under ``| head``)."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

import pytest

from lacapacity import sweep
from lacapacity.cli import PIPE_CLOSED, main


@contextmanager
def closed_pipe():
    """sys.stdout: a pipe nobody reads any more (set in the test itself: capsys sets its own at each phase)."""
    read, write = os.pipe()
    os.close(read)
    stream = os.fdopen(write, "w", buffering=1)  # line-buffered, as a terminal's: each line meets the closed pipe
    saved, sys.stdout = sys.stdout, stream
    try:
        yield stream
    finally:
        sys.stdout = saved
        try:
            stream.close()
        except OSError:  # what is left in its buffer cannot be written anywhere
            pass


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    out = tmp_path_factory.mktemp("pipe")
    sweep.compare(["linear"], d=(8,), load=(1,), seeds=(0,), out=out, executor="serial", progress=False)
    return out


def test_list_into_a_closed_pipe_is_141_without_a_message(capsys):
    with closed_pipe():
        assert main(["list"]) == PIPE_CLOSED
    assert capsys.readouterr().err == ""


def test_store_prune_into_a_closed_pipe_still_removes_all_it_lists(tmp_path, capsys):
    """The listing is cut short, the pruning is not."""
    import numpy as np

    from lacapacity.sweep.store import Store

    (tmp_path / ".sweep" / "old").mkdir(parents=True)
    store = Store(tmp_path / ".sweep" / "old")
    for key in ("a" * 64, "b" * 64, "c" * 64):
        store.save(key, {(0, 8): {"mse": np.float64(1.0)}}, {}, {"mse": "<f8"}, {})
    store.record("old", [])  # a finished run that uses none of them
    cells = [p for p in (tmp_path / ".sweep" / "old").glob("*.json") if p.name != "manifest.json"]
    assert len(cells) == 3
    with closed_pipe():
        code = main(["store", str(tmp_path), "--prune"])
    assert code == PIPE_CLOSED, capsys.readouterr().err
    assert not any(p.exists() for p in cells)
    assert capsys.readouterr().err == ""


def test_plot_into_a_closed_pipe_draws_every_figure_and_is_141(stored, tmp_path, capsys):
    out = tmp_path / "figures"
    with closed_pipe():
        assert main(["plot", str(stored / "compare.nc"), "--out", str(out)]) == PIPE_CLOSED
    assert capsys.readouterr().err == ""
    assert len(list(out.glob("*.png"))) >= 1


def test_a_command_that_prints_all_it_has_ends_with_0(tmp_path, capsys, stored):
    """The same commands with a reader: 0 (the status changes only for output that could not be written)."""
    assert main(["list"]) == 0
    assert main(["plot", str(stored / "compare.nc"), "--out", str(tmp_path / "f")]) == 0
    out, err = capsys.readouterr()
    assert "linear" in out and str(tmp_path / "f") in out and err == ""
