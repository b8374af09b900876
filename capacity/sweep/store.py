"""Durable per-group results: one netCDF file per finished group, written atomically.

A group's file is named by its content hash (``Group.key``: the study's configuration, the
group's coordinates, the device type and the package version), so a file can only ever be
picked up by a run that would compute exactly the same numbers; the hash is stored inside the
file as well and checked on load. Files are written to a temporary name in the same folder,
flushed to disk, then renamed over the final name: a reader (or a resumed run) sees a whole
file or none.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import xarray as xr

__all__ = ["Store", "atomic_netcdf"]


def atomic_netcdf(ds: xr.Dataset, path: Path) -> None:
    """Write ``ds`` to ``path`` (netCDF, h5netcdf) via a temporary file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        ds.to_netcdf(tmp, engine="h5netcdf")
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


class Store:
    """The finished groups of one study under ``root`` (``<out>/.sweep/<study>/``)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.nc"

    def load(self, key: str) -> xr.Dataset | None:
        """The group's Dataset if it was finished by a run with the same configuration, else None."""
        p = self.path(key)
        if not p.exists():
            return None
        try:
            with xr.open_dataset(p, engine="h5netcdf") as ds:
                ds = ds.load()
        except (OSError, ValueError):
            return None  # unreadable: recompute it (rename-on-write makes this an outside accident)
        if ds.attrs.get("group_key") != key:
            return None
        return ds

    def save(self, key: str, ds: xr.Dataset) -> None:
        ds = ds.copy()
        ds.attrs["group_key"] = key
        atomic_netcdf(ds, self.path(key))

    def clean(self) -> None:
        """Remove temporary files left by processes that no longer run (a SIGKILL mid-write)."""
        if not self.root.exists():
            return
        for tmp in self.root.glob(".*.tmp"):
            try:
                pid = int(tmp.name.split(".")[-3])
                os.kill(pid, 0)
            except (ValueError, IndexError, ProcessLookupError):
                tmp.unlink(missing_ok=True)
            except PermissionError:
                pass
