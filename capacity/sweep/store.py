"""Durable per-group results: one small JSON file per finished group, written atomically.

A group's file is named by its content hash (``Group.key``: the study's configuration, the
group's coordinates, the device type and the package version), so a file can only ever be
picked up by a run that would compute exactly the same numbers; the hash is stored inside the
file as well and checked on load. Files are written to a temporary name in the same folder,
flushed to disk, then renamed over the final name: a reader (or a resumed run) sees a whole
file or none. JSON keeps every float64 exactly (Python writes the shortest repr that reads
back to the same double) and is an order of magnitude faster to write than a small netCDF.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["Store", "atomic_netcdf", "atomic_write"]


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, flush it to disk, rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(tmp)
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


def atomic_netcdf(ds: xr.Dataset, path: Path) -> None:
    """Write ``ds`` to ``path`` as netCDF (h5netcdf), atomically."""
    atomic_write(path, lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf"))


def _encode(ds: xr.Dataset) -> dict:
    var = lambda v: {"dims": list(v.dims), "dtype": v.dtype.str, "data": v.values.tolist()}  # noqa: E731
    return {"coords": {k: var(v) for k, v in ds.coords.items()}, "data_vars": {k: var(v) for k, v in ds.data_vars.items()}, "attrs": dict(ds.attrs)}


def _decode(data: dict) -> xr.Dataset:
    var = lambda v: (tuple(v["dims"]), np.asarray(v["data"], dtype=np.dtype(v["dtype"])))  # noqa: E731
    return xr.Dataset({k: var(v) for k, v in data["data_vars"].items()}, coords={k: var(v) for k, v in data["coords"].items()}, attrs=data["attrs"])


class Store:
    """The finished groups of one study under ``root`` (``<out>/.sweep/<study>/``)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def load(self, key: str) -> xr.Dataset | None:
        """The group's Dataset if it was finished by a run with the same configuration, else None."""
        p = self.path(key)
        if not p.exists():
            return None
        try:
            ds = _decode(json.loads(p.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable: recompute it (rename-on-write makes this an outside accident)
        if ds.attrs.get("group_key") != key:
            return None
        return ds

    def save(self, key: str, ds: xr.Dataset) -> None:
        data = _encode(ds)
        data["attrs"]["group_key"] = key
        atomic_write(self.path(key), lambda tmp: tmp.write_text(json.dumps(data)))

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
