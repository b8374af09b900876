"""Finished groups on disk: one JSON file per group, named by what determines its numbers, checked on load.

A group's file name is ``Group.key``: a hash of the study's configuration, the group's coordinates, the device type
and ``fingerprint`` (the package's sources, the user's plug-in sources and the data files the study reads), so a run
finds only files the current code would compute. On load the stored key, a checksum of the numbers and the group's
expected contents (``kinds.expectation``) are checked; a file that fails is measured again. Files are written under
a temporary name, flushed, then renamed: readers see a whole file or none. JSON keeps every float64 exactly.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import xarray as xr

from capacity._files import atomic_write, clean_stale

__all__ = ["Store", "checksum"]


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
        """Remove temporary files left by processes that no longer run (a SIGKILL mid-write; ``_files.clean_stale``)."""
        clean_stale(self.root)
