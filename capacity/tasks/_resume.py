"""Checkpoints of a point in progress: a long pass saves its work as it goes, and the same command resumes it.

The sweep gives each pass the folder of its cell's checkpoints (``<out>/.sweep/<study>/checkpoints/<reuse key>``,
``lacapacity.sweep.runner``): the cell's reuse key names everything that computes its numbers (code, settings,
memory, libraries, device), so a checkpoint is only ever resumed by the code and settings that wrote it. Inside
``checkpoints(folder)`` a task asks ``point(seed, n)`` for the ``Checkpoint`` of one point (None outside, or when the
folder cannot be made: then nothing is saved, as on a Dask worker that does not share the run's file system). The
sweep discards a point's checkpoint once the point is stored (``discard``).

A checkpoint is one ``torch.save`` file, written under a temporary name and renamed (whole or absent), read back with
``weights_only`` (tensors, numbers, strings, lists and dicts: nothing that runs code); one that cannot be read, or that
was written for other settings (``Checkpoint.load``'s ``settings``), is ignored and the point starts over.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

from lacapacity.base._files import atomic_write

SECONDS = 60.0  # seconds of work between two checkpoints of a point (and one when its training ends)
_LOCAL = threading.local()  # .folder: the current pass's checkpoint folder, per thread (Dask runs tasks in threads)


@contextlib.contextmanager
def checkpoints(folder: str | Path | None) -> Iterator[None]:
    """Points measured inside the block save and resume their checkpoints in ``folder`` (None: not at all)."""
    old = getattr(_LOCAL, "folder", None)
    _LOCAL.folder = None if folder is None else Path(folder)
    try:
        yield
    finally:
        _LOCAL.folder = old


def _name(seed: int, n: int) -> str:
    return f"seed={seed}-n={n}.pt"


def point(seed: int, n: int) -> Checkpoint | None:
    """The checkpoint of point (``seed``, ``n``) of the pass being measured, or None: no folder, or one that cannot be
    made in its parent, which the sweep makes (a worker that does not share the run's file system has none)."""
    folder = getattr(_LOCAL, "folder", None)
    if folder is None:
        return None
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return None
    return Checkpoint(folder / _name(seed, n))


def discard(folder: str | Path, points: Iterable[tuple[int, int]] | None = None) -> None:
    """Remove the checkpoints of ``points`` ((seed, n) pairs) from ``folder``; None: the folder with every one, and
    its parent once empty. The folder stays while points are named: other passes of the cell (other workers) may be
    saving theirs into it (``tidy`` removes it once the run's workers are done). Missing files and folders are fine;
    one that cannot be removed is left."""
    folder = Path(folder)
    if points is None:
        shutil.rmtree(folder, ignore_errors=True)
        tidy(folder.parent, below=False)
        return
    for seed, n in points:
        with contextlib.suppress(OSError):
            (folder / _name(seed, n)).unlink(missing_ok=True)


def tidy(root: str | Path, *, below: bool = True) -> None:
    """Remove ``root`` if it is empty, after each empty folder in it (``below``): the checkpoint folders of cells
    whose points are all stored, once no worker of the run can still save into them."""
    root = Path(root)
    if below:
        with contextlib.suppress(OSError):
            for sub in root.iterdir():
                with contextlib.suppress(OSError):
                    sub.rmdir()  # only when empty
    with contextlib.suppress(OSError):
        root.rmdir()


class Checkpoint:
    """One point's saved work at ``path``: ``load`` what was saved for the same ``settings``, ``due`` when
    ``SECONDS`` of work have passed since the last save (or the start), ``save`` a dict of tensors and numbers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.since = time.monotonic()
        self.saves = 0

    def load(self, settings: dict[str, Any]) -> dict[str, Any] | None:
        """The state saved for ``settings`` (a dict of plain values), or None: no file, one that cannot be read,
        or one saved for other settings."""
        try:
            saved = torch.load(self.path, weights_only=True)
        except FileNotFoundError:
            return None
        except Exception:  # a torn or foreign file: start over
            return None
        if not isinstance(saved, dict) or saved.get("settings") != settings:
            return None
        self.since = time.monotonic()
        return dict(saved["state"])

    def due(self) -> bool:
        return time.monotonic() - self.since >= SECONDS

    def save(self, settings: dict[str, Any], state: dict[str, Any]) -> None:
        """Save ``state`` for ``settings``; a folder that cannot be written saves nothing (the work goes on)."""
        try:
            atomic_write(self.path, lambda tmp: torch.save({"settings": settings, "state": state}, tmp), durable=False)
        except OSError:
            return
        except RuntimeError:  # torch.save's word for a folder that is gone (a run that ended, a prune)
            if self.path.parent.is_dir():
                raise
            return
        self.since, self.saves = time.monotonic(), self.saves + 1
