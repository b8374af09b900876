"""Files written whole or not at all (a temporary name beside the target, flushed to disk, then renamed), folders
proven writable, and the lock that makes a second run into a folder wait for the first.

A temporary file is named ``.<name>.<pid>@<host>.<random>.tmp``. A write that fails (a full disk, a file-size limit:
Python ignores SIGXFSZ, so the limit is an OSError) removes its temporary file and raises the OSError; one killed
mid-write (SIGKILL, a power cut) leaves it, and ``clean_stale`` removes it on the next run into the same folder: files
of processes of this host that no longer run, and files of other hosts (a shared file system) older than a day.
NetCDF files are serialised in memory first and written like any other bytes, so HDF5 never writes to a disk that
can fill (HDF5 reports a full disk with an error dump, and can crash afterwards).
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from lacapacity.errors import CapacityError

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr


_HOST = re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname()) or "host"
_OWNER = re.compile(r"^(\d+)(?:@([A-Za-z0-9_-]+))?$")
STALE_ELSEWHERE = 24 * 3600.0  # seconds after which another host's temporary file is taken as abandoned


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
def lock(folder: Path, waiting: Callable[[], object] = lambda: None, *, wait: bool = True) -> Iterator[bool]:
    """Hold ``<folder>.lock``; a second holder waits for the first (calling ``waiting()`` once, before it waits).

    Yields True once held; with ``wait=False``, yields False at once, holding nothing, while another holds it."""
    folder = Path(folder)
    with open(folder.with_name(folder.name + ".lock"), "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            waiting()
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield True


def atomic_write(path: Path, write: Callable[[Path], object], *, durable: bool = True) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, flush it to disk, rename it to ``path``.

    ``durable=False`` skips the two fsyncs (the file's and the folder's): the file is still whole or absent after
    a kill, only a crash of the machine itself can lose or tear it, for files that are checked when read.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}@{_HOST}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(tmp)
        if durable:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    if not durable:
        return
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def write_bytes(path: Path, data: bytes | memoryview) -> None:
    """Write ``data`` (bytes or a memoryview) to ``path`` atomically."""
    atomic_write(path, lambda tmp: tmp.write_bytes(bytes(data)))


def atomic_netcdf(ds: xr.Dataset, path: Path) -> None:
    """Write ``ds`` to ``path`` as netCDF (h5netcdf), serialised in memory, then written atomically."""
    write_bytes(path, ds.to_netcdf(engine="h5netcdf"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def clean_stale(folder: Path) -> list[Path]:
    """Remove the temporary files ``atomic_write`` left in ``folder`` (not below it) when a write was killed; returns
    what was removed. Files of live processes, and other hosts' files younger than a day, are left alone."""
    removed: list[Path] = []
    try:
        candidates = list(Path(folder).glob(".*.tmp"))
    except OSError:
        return removed
    for tmp in candidates:
        parts = tmp.name.split(".")
        m = _OWNER.match(parts[-3]) if len(parts) >= 5 else None
        if m is None:
            continue  # not one of ours
        pid, host = int(m.group(1)), m.group(2) or _HOST
        try:
            if (host == _HOST and not _alive(pid)) or (
                host != _HOST and time.time() - tmp.stat().st_mtime > STALE_ELSEWHERE
            ):
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
        except OSError:
            pass
    return removed
