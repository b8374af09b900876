"""Files written whole or not at all: a temporary name beside the target, flushed to disk, then renamed."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["atomic_write", "atomic_netcdf"]


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
