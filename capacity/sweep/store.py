"""Finished groups on disk: one JSON file per group, named by what determines its numbers, checked on load.

A group's file name is ``Group.key``: a hash of the study's configuration, the group's coordinates, the device type
and ``fingerprint`` (the package's sources, the user's plug-in sources and the data files the study reads), so a run
finds only files the current code would compute. On load the stored key, a checksum of the numbers and the group's
expected contents (``kinds.expectation``) are checked; a file that fails is measured again. Files are written under
a temporary name, flushed, then renamed: readers see a whole file or none. JSON keeps every float64 exactly.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import sys
import uuid
from functools import cache
from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["Store", "atomic_write", "atomic_netcdf", "fingerprint", "checksum"]


@cache
def _package_sources() -> str:
    """sha256 over every .py file of the package that computes numbers (not the plots), in a stable order."""
    h = hashlib.sha256()
    for pkg in ("capacity", "capacity.kernels", "capacity.studies"):
        for root in sorted(importlib.util.find_spec(pkg).submodule_search_locations or []):
            for f in sorted(Path(root).rglob("*.py")):
                if "plots" not in f.relative_to(root).parts:
                    h.update(str(f.relative_to(root)).encode() + f.read_bytes())
    return h.hexdigest()


def _file(path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _source_of(obj) -> str:
    """A hash of the source file of the module that defines ``obj`` (its class, for an instance); '' if none."""
    target = obj if inspect.isclass(obj) or inspect.isfunction(obj) else type(obj)
    path = getattr(sys.modules.get(getattr(target, "__module__", ""), None), "__file__", None)
    return _file(path) if path else ""


def fingerprint(user_objects=(), data_files=()) -> str:
    """A hash of what computes the numbers besides the configuration: the package, user plug-ins, data files."""
    parts = [_package_sources(), *sorted(map(_source_of, user_objects)), *sorted(map(_file, data_files))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def checksum(ds: xr.Dataset) -> str:
    """sha256 over the names, dims, dtypes and bytes of every variable and coordinate of ``ds``."""
    h = hashlib.sha256()
    for name in sorted(ds.variables):
        v = ds.variables[name]
        x = v.values
        x = np.where(np.isnan(x), np.nan, x) if x.dtype.kind == "f" else x  # one NaN bit pattern, as JSON reads back
        h.update(f"{name}|{v.dims}|{v.dtype.str}|".encode())
        h.update(np.ascontiguousarray(x).tobytes() if x.dtype.kind != "O" else repr(x.tolist()).encode())
    return h.hexdigest()


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


def atomic_netcdf(ds: xr.Dataset, path: Path) -> None:
    """Write ``ds`` to ``path`` as netCDF (h5netcdf), atomically."""
    atomic_write(path, lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf"))


def _encode(ds: xr.Dataset) -> dict:
    var = lambda v: {"dims": list(v.dims), "dtype": v.dtype.str, "data": v.values.tolist()}
    coords, data = ({k: var(v) for k, v in m.items()} for m in (ds.coords, ds.data_vars))
    return {"coords": coords, "data_vars": data, "attrs": dict(ds.attrs)}


def _decode(data: dict) -> xr.Dataset:
    var = lambda v: (tuple(v["dims"]), np.asarray(v["data"], dtype=np.dtype(v["dtype"])))
    coords, data_vars = ({k: var(v) for k, v in data[m].items()} for m in ("coords", "data_vars"))
    return xr.Dataset(data_vars, coords=coords, attrs=data["attrs"])


class Store:
    """The finished groups of one study under ``root`` (``<out>/.sweep/<study>/``)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def load(self, key: str, expect=None) -> tuple[xr.Dataset | None, str | None]:
        """``(Dataset, None)`` for a stored group that passes every check, else ``(None, why)`` (None: no file).

        ``expect(ds)`` returns what is wrong with the Dataset (a short phrase), or None.
        """
        p = self.path(key)
        if not p.exists():
            return None, None
        try:
            ds = _decode(json.loads(p.read_text()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None, "unreadable"
        if ds.attrs.get("group_key") != key:
            return None, "its key does not match its name"
        if ds.attrs.pop("checksum", None) != checksum(ds):
            return None, "its numbers do not match their checksum"
        why = expect(ds) if expect is not None else None
        return (None, why) if why else (ds, None)

    def save(self, key: str, ds: xr.Dataset) -> None:
        ds = ds.assign_attrs(group_key=key)
        data = _encode(ds)
        data["attrs"]["checksum"] = checksum(ds)
        atomic_write(self.path(key), lambda tmp: tmp.write_text(json.dumps(data)))

    def clean(self) -> None:
        """Remove temporary files left by processes that no longer run (a SIGKILL mid-write)."""
        for tmp in self.root.glob(".*.tmp"):
            try:
                os.kill(int(tmp.name.split(".")[-3]), 0)
            except (ValueError, IndexError, ProcessLookupError):
                tmp.unlink(missing_ok=True)
            except PermissionError:
                pass
