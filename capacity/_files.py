"""Files written whole or not at all (a temporary name beside the target, flushed to disk, then renamed), folders
proven writable, and the lock that makes a second run into a folder wait for the first."""

from __future__ import annotations

import fcntl
import os
import uuid
from contextlib import contextmanager
from pathlib import Path

from capacity.errors import CapacityError

__all__ = ["atomic_write", "atomic_netcdf", "writable_folder", "lock"]


def writable_folder(path: Path, what: str) -> Path:
    """Create ``path`` if needed and prove it writable, or raise one line saying why not."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CapacityError(f"{what} {path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / f".write-test.{os.getpid()}").write_bytes(b"")
        (path / f".write-test.{os.getpid()}").unlink()
    except OSError as exc:
        raise CapacityError(f"cannot write to {what} {path}: {exc.strerror or exc}") from None
    return path


@contextmanager
def lock(folder: Path, waiting=lambda: None):
    """Hold ``<folder>.lock``; a second holder waits for the first (calling ``waiting()`` once, before it waits)."""
    folder = Path(folder)
    with open(folder.with_name(folder.name + ".lock"), "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waiting()
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def atomic_write(path: Path, write) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, flush it to disk, rename it to ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def atomic_netcdf(ds, path: Path) -> None:
    """Write ``ds`` to ``path`` as netCDF (h5netcdf), atomically."""
    atomic_write(path, lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf"))
