"""Durable per-group results: one small JSON file per finished group, written atomically, checked on load.

A group's file is named by its content hash (``Group.key``: the study's configuration, the group's coordinates, the
device type and ``fingerprint``, a hash of the source code that computes the numbers: the package's own files and the
source of every user variant, key family or feature map in the study), so a run picks up only files that the current
code would compute; the hash is stored inside the file and checked on load. Every loaded group is also checked
against what the group must hold (``expect``: coordinates, variables, shapes, dtypes) and against a checksum of its
numbers written beside them; a file that fails is measured again, with one line saying why. Files are written to a temporary name in the same folder,
flushed to disk, then renamed over the final name: a reader (or a resumed run) sees a whole
file or none. JSON keeps every float64 exactly (Python writes the shortest repr that reads
back to the same double) and is an order of magnitude faster to write than a small netCDF.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import sys
import uuid
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["Store", "atomic_netcdf", "atomic_write", "fingerprint", "checksum"]

_PACKAGES = ("capacity", "capacity.kernels", "capacity.studies")  # the code that computes numbers (not the plots)


@cache
def _package_sources() -> str:
    """sha256 over every .py file of the installed package (not the plots), in a stable order."""
    h = hashlib.sha256()
    for pkg in _PACKAGES:
        spec = importlib.util.find_spec(pkg)
        for root in sorted(spec.submodule_search_locations or []):
            for f in sorted(Path(root).rglob("*.py")):
                if "plots" in f.relative_to(root).parts:
                    continue
                h.update(str(f.relative_to(root)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def _file(path) -> str:
    """sha256 of a file's bytes; '' when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _source_of(obj) -> str:
    """The source file of the module that defines ``obj`` (its class for an instance), as a hash; '' if none."""
    target = obj if inspect.isclass(obj) or inspect.isfunction(obj) else type(obj)
    module = sys.modules.get(getattr(target, "__module__", ""), None)
    path = getattr(module, "__file__", None)
    return _file(path) if path else ""


def fingerprint(user_objects=(), data_files=()) -> str:
    """A hash of what computes a study's numbers besides its configuration: the package's sources, the user's
    plug-in sources, and the data files the study reads (e.g. the text of pretrained keys)."""
    parts = [_package_sources(), *sorted(_source_of(o) for o in user_objects), *sorted(_file(f) for f in data_files)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def checksum(ds: xr.Dataset) -> str:
    """sha256 over the names, dims, dtypes and bytes of every variable and coordinate of ``ds``."""
    h = hashlib.sha256()
    for name in sorted(ds.variables):
        v = ds.variables[name]
        h.update(f"{name}|{v.dims}|{v.dtype.str}|".encode())
        x = v.values
        if x.dtype.kind == "f":
            x = np.where(np.isnan(x), np.nan, x)  # one NaN bit pattern, as JSON reads it back
        h.update(np.ascontiguousarray(x).tobytes() if x.dtype.kind != "O" else repr(x.tolist()).encode())
    return h.hexdigest()


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
    var = lambda v: {"dims": list(v.dims), "dtype": v.dtype.str, "data": v.values.tolist()}
    return {
        "coords": {k: var(v) for k, v in ds.coords.items()},
        "data_vars": {k: var(v) for k, v in ds.data_vars.items()},
        "attrs": dict(ds.attrs),
    }


def _decode(data: dict) -> xr.Dataset:
    var = lambda v: (tuple(v["dims"]), np.asarray(v["data"], dtype=np.dtype(v["dtype"])))
    return xr.Dataset(
        {k: var(v) for k, v in data["data_vars"].items()},
        coords={k: var(v) for k, v in data["coords"].items()},
        attrs=data["attrs"],
    )


class Store:
    """The finished groups of one study under ``root`` (``<out>/.sweep/<study>/``)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def load(
        self, key: str, expect: Callable[[xr.Dataset], str | None] | None = None
    ) -> tuple[xr.Dataset | None, str | None]:
        """``(Dataset, None)`` for a finished group that passes every check, else ``(None, why)`` (``why`` None: no file).

        ``expect(ds)`` returns what is wrong with the Dataset (a short phrase), or None.
        """
        p = self.path(key)
        if not p.exists():
            return None, None
        try:
            data = json.loads(p.read_text())
            ds = _decode(data)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None, "unreadable"
        if ds.attrs.get("group_key") != key:
            return None, "its key does not match its name"
        stored = ds.attrs.pop("checksum", None)
        if stored != checksum(ds):
            return None, "its numbers do not match their checksum"
        why = expect(ds) if expect is not None else None
        return (None, why) if why else (ds, None)

    def save(self, key: str, ds: xr.Dataset) -> None:
        ds = ds.copy()
        ds.attrs["group_key"] = key
        data = _encode(ds)
        data["attrs"]["checksum"] = checksum(ds)
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
