"""Measured points on disk: one JSON file per cell, named by what computes its numbers, checked on load.

``reuse_key`` names a cell's file from what computes its numbers (``lacapacity.sweep.plan.Plan.identity``, the one
screen that says what decides reuse). A run reuses a stored point only from the file its cell's key names, after the
file's key, checksum and contents are checked; anything else is measured again (with one line saying why). Each
pass's points are merged into their cell's file, written under a temporary name, flushed, then renamed: readers see
a whole file or none. JSON keeps every float64 exactly. ``manifest.json`` lists the cells the study's latest run
used; ``capacity store`` lists and prunes the rest.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from lacapacity.base._files import atomic_write, clean_stale
from lacapacity.errors import CapacityError, one_line
from lacapacity.sweep.config import digest

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import NDArray

    from lacapacity.tasks import Schema

# a cell's measured points: (seed, n) -> {variable: its array over the variable's dimensions but seed and n}
Points: TypeAlias = "dict[tuple[int, int], dict[str, NDArray[Any]]]"
# what a stored value of each variable must be: variable -> (dtype, shape (None: unchecked), finite)
Declared: TypeAlias = "dict[str, tuple[np.dtype[Any], tuple[int, ...] | None, bool]]"


SCHEMA = 2  # the layout of a cell file; a new layout is never mixed with files of an old one


def reuse_key(identity: dict[str, Any]) -> str:  # JSON
    """The name of a cell's file in the store: a hash of ``identity`` (``Plan.identity(cell)``: everything that
    computes the cell's numbers, as the plan resolved it) and of this store's layout."""
    return digest({**identity, "schema": SCHEMA})


READ_FILES = "read_files"  # a cell's attr: {path: sha256} of the files its memory read while measured


def declared(schema: Schema, coords: Mapping[str, Sequence[Any]]) -> Declared:
    """What a stored value of each variable must be: ``{variable: (dtype, shape, finite)}``, from the task's
    ``Schema`` of the study: the variable's dtype, its dimensions but seed and n at the sizes of ``coords`` (None,
    unchecked, for a dimension ``coords`` lacks), and whether it is ``finite`` (a value that cannot be NaN or infinite
    when measured: a fraction of counts, a size, a time)."""
    shape: Callable[[tuple[str, ...]], tuple[int, ...] | None] = lambda own: (
        None if set(own) - set(coords) - {"seed"} else tuple(len(coords[d]) for d in own if d != "seed")
    )
    return {v: (np.dtype(var.dtype), shape(var.dims), var.finite) for v, var in schema.variables.items()}


def _constant(name: str) -> float:
    """JSON's NaN and Infinity read as floats (``save`` writes them so); anything else is not a number."""
    if name in ("NaN", "Infinity", "-Infinity"):
        return float(name)
    raise ValueError(f"unknown constant {name}")


def _value(
    raw: Any, dtype: str, expect: tuple[np.dtype[Any], tuple[int, ...] | None, bool] | None
) -> NDArray[Any]:  # raw: JSON
    """A stored value as an array of ``dtype``, checked against ``expect`` (dtype, shape, finite) when given: numbers
    only (no null, string or bool), whole numbers for an integer dtype, the declared shape, finite where declared."""
    kind = np.dtype(dtype)
    whole = kind.kind in "iu"

    def numbers(x: Any) -> None:
        if isinstance(x, list):
            for y in x:
                numbers(y)
        elif isinstance(x, bool) or not isinstance(x, int if whole else (int, float)):
            raise ValueError(f"{x!r} is not a {'whole ' if whole else ''}number")

    numbers(raw)
    try:
        a = np.asarray(raw, dtype=kind)
    except OverflowError:
        raise ValueError(f"a number out of the range of {kind.name}") from None
    if expect is None:
        return a
    _, shape, finite = expect
    if shape is not None and a.shape != shape:
        raise ValueError(f"shape {list(a.shape)}, not {list(shape)}")
    if finite and kind.kind == "f" and not np.isfinite(a).all():
        raise ValueError("a value that must be finite is not")
    return a


def _kind(path: Path) -> str | None:
    """What ``path`` is, by ``lstat`` (never opened): None if absent, "file" for a regular file, else a phrase."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError:
        return "unreadable"
    if stat.S_ISREG(mode):
        return "file"
    return {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFLNK: "a symbolic link"}.get(
        stat.S_IFMT(mode), "a special file"
    )


def _changed_files(recorded: Any) -> str | None:  # JSON, checked here
    """The first of the ``recorded`` files ({path: sha256}) whose bytes differ now (or that is gone), else None."""
    if not recorded:
        return None
    if not isinstance(recorded, dict):
        return "its record of them is malformed"
    from lacapacity.sweep import provenance

    now = provenance.files(list(recorded))
    return next((p for p, h in sorted(recorded.items()) if not h or now.get(p) != h), None)


def _checksum(body: dict[str, Any]) -> str:  # JSON
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class Store:
    """The measured cells of one study under ``root`` (``<out>/.sweep/<study>/``)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def checkpoints(self, key: str = "") -> Path:
        """The folder of cell ``key``'s checkpoints (no key: the folder of every cell's): its points in progress
        (``lacapacity.tasks._resume``), made by the task that saves one; a point's file goes once the point is stored,
        the folder once every point of the cell is, or when the run ends with it empty."""
        return self.root / "checkpoints" / key

    def load(
        self, key: str, variables: list[str], coords: Mapping[str, Sequence[Any]], declared: Declared | None = None
    ) -> tuple[Points, dict[str, Any], str | None]:
        """The stored points of cell ``key``: ``(points, attrs, why)``, points ``{(seed, n): {variable: value}}``.

        Empty with ``why`` None when there is no file; empty with ``why`` (a short phrase) when the file fails a
        check: a regular file (never a folder, a FIFO or a device: it is not opened), its key, its checksum, its
        variables, its coordinates (``coords``: the kind's besides seed and n), what ``declared`` (``declared(...)``:
        variable -> (dtype, shape, finite)) says of each value exactly, and the files the memory read while the points
        were measured (still the same bytes). The checksum alone proves nothing: anyone can recompute it.
        """
        p = self.path(key)
        kind = _kind(p)
        if kind is None:
            return {}, {}, None
        if kind != "file":
            return {}, {}, f"it is {kind}, not a file"
        try:
            data = json.loads(p.read_text(), parse_constant=_constant)
            body = {k: data[k] for k in ("key", "schema", "variables", "coords", "attrs", "points")}
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
            return {}, {}, "unreadable"
        if body["key"] != key or body["schema"] != SCHEMA:
            return {}, {}, "its key does not match its name"
        if data.get("checksum") != _checksum(body):
            return {}, {}, "its numbers do not match their checksum"
        if not isinstance(body["variables"], dict) or sorted(body["variables"]) != sorted(variables):
            held = ", ".join(sorted(map(str, body["variables"]))) or "no variables"
            return {}, {}, f"it holds {held} instead of {', '.join(sorted(variables))}"
        if body["coords"] != {k: list(v) for k, v in coords.items()}:
            return {}, {}, "its coordinates differ from the study's"
        try:
            kinds = {v: np.dtype(t).kind for v, t in body["variables"].items()}
        except TypeError:
            kinds = {}
        if set(kinds.values()) - set("fiu") or len(kinds) != len(body["variables"]):
            return {}, {}, "it holds numbers of a type a result cannot hold"
        if declared is not None:
            wrong = [v for v in variables if np.dtype(body["variables"][v]) != np.dtype(declared[v][0])]
            if wrong:
                v = wrong[0]
                return {}, {}, f"its {v} is declared {body['variables'][v]}, not {np.dtype(declared[v][0]).name}"
        if not isinstance(body["attrs"], dict) or not isinstance(body["points"], dict):
            return {}, {}, "malformed (attrs or points not a mapping)"
        changed = _changed_files(body["attrs"].get(READ_FILES))
        if changed:
            return {}, {}, f"a file its memory read while measured changed or is gone ({changed})"
        points: Points = {}
        for item, values in body["points"].items():
            try:
                seed, n = map(int, item.split())
                point = {
                    v: _value(values[v], body["variables"][v], None if declared is None else declared[v])
                    for v in variables
                }
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                return {}, {}, f"malformed at point {item!r} ({exc})"
            points[seed, n] = point
        return points, body["attrs"], None

    def save(
        self,
        key: str,
        points: Points,
        attrs: dict[str, Any],
        variables: dict[str, str],
        coords: Mapping[str, Sequence[Any]],
    ) -> None:
        """Write cell ``key``'s points (``{(seed, n): {variable: array}}``; ``variables``: name -> dtype string)."""
        body = {
            "key": key,
            "schema": SCHEMA,
            "variables": variables,
            "coords": {k: list(v) for k, v in coords.items()},
            "attrs": attrs,
            "points": {
                f"{s} {n}": {v: np.asarray(x).tolist() for v, x in vals.items()}
                for (s, n), vals in sorted(points.items())
            },
        }
        text = json.dumps({**body, "checksum": _checksum(body)})
        # not fsynced: a file a machine crash tears fails its checksum and is measured again (``load``)
        atomic_write(self.path(key), lambda tmp: tmp.write_text(text), durable=False)

    def set_aside(self, key: str) -> Path:
        """Rename what stands in the place of cell ``key``'s file but is not a file (a folder) to
        ``<key>.json.not-a-file-<time>``, so that the cell can be saved; returns the new path."""
        p = self.path(key)
        aside = p.with_name(f"{p.name}.not-a-file-{time.strftime('%Y%m%dT%H%M%S')}")
        os.replace(p, aside)
        return aside

    def manifest(self) -> dict[str, Any] | None:  # JSON
        """The manifest, ``{"study", "created", "cells", "pending"}``: None when there is none; a CapacityError (one
        line naming it) when it cannot be read, so that nothing acts on a guess of what it lists."""
        path = self.root / "manifest.json"
        kind = _kind(path)
        if kind is None:
            return None
        try:
            if kind != "file":
                raise ValueError(f"it is {kind}")
            data = json.loads(path.read_text())
            cells, pending = data["cells"], data.get("pending", [])
            if not all(isinstance(c, str) for c in [*cells, *pending]):
                raise ValueError("cells that are not names")
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise CapacityError(
                f"cannot read the store's manifest {path} ({type(exc).__name__}: {one_line(exc)}); "
                "nothing was removed: run the study again (it rewrites the manifest) or remove the file"
            ) from None
        return {**data, "cells": list(cells), "pending": list(pending)}

    def _write_manifest(self, study: str, cells: list[str], pending: list[str]) -> None:
        stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        text = json.dumps({"study": study, "created": stamp, "cells": cells, "pending": pending})
        atomic_write(self.root / "manifest.json", lambda tmp: tmp.write_text(text))

    def _current(self) -> dict[str, Any]:
        try:
            return self.manifest() or {}
        except CapacityError:  # a run rewrites a manifest it cannot read
            return {}

    def start(self, keys: list[str]) -> None:
        """Before a run measures: add its cells to the manifest's ``pending`` (a run that is cut short, by an error,
        Ctrl-C or kill -9, leaves them there; the same command resumes from them, and ``prune`` keeps them)."""
        old = self._current()
        pending = sorted(set(old.get("pending", [])) | set(keys))
        if pending != old.get("pending"):
            self._write_manifest(old.get("study", self.root.name), old.get("cells", []), pending)

    def record(self, study: str, keys: list[str]) -> None:
        """Write the manifest: the cells the study's latest finished run used (``capacity store`` keeps them), these
        no longer pending (the cells of other runs that were cut short stay pending); a run that used the same cells
        leaves it as it is."""
        cells, old = sorted(set(keys)), self._current()
        pending = sorted(set(old.get("pending", [])) - set(cells))
        if old.get("cells") == cells and old.get("pending", []) == pending:
            return
        self._write_manifest(study, cells, pending)

    def contents(self, strict: bool = True) -> dict[str, Any]:
        """What the store holds: ``{"cells", "used", "points", "bytes", "newest", "oldest", "unused", "pending"}``
        (times: seconds of age): ``used`` the cells the latest finished run's manifest lists, ``unused`` the paths of
        the others (their files, and the folders of their checkpoints), ``pending`` those of the others that a run cut short would reuse (the manifest's ``pending``, or
        every cell when there is no manifest: no run has finished). A manifest that cannot be read is a
        CapacityError (``strict``; otherwise ``used`` is None and nothing is ``unused``). Nothing that is not a
        regular file is opened."""
        try:
            manifest = self.manifest()
        except CapacityError:
            if strict:
                raise
            manifest = {"cells": None, "pending": []}
        used = set(manifest["cells"] or ()) if manifest else set()
        pending = set(manifest["pending"]) if manifest else None
        files = sorted(p for p in self.root.glob("*.json") if p.name != "manifest.json" and _kind(p) == "file")
        ages, points, size = [time.time() - p.stat().st_mtime for p in files], 0, 0
        for p in files:
            size += p.stat().st_size
            try:
                points += len(json.loads(p.read_text())["points"])
            except (OSError, ValueError, KeyError, TypeError):
                pass
        known = not manifest or manifest["cells"] is not None
        unused = [p for p in files if p.stem not in used] if known else []
        saved = self.checkpoints()  # points in progress (``checkpoints``), by their cell's key
        folders = sorted(p for p in saved.iterdir() if _kind(p) == "a folder") if _kind(saved) == "a folder" else []
        unused += [p for p in folders if p.name not in used] if known else []
        return {
            "cells": len(files),
            "used": sum(p.stem in used for p in files) if known else None,
            "unused": unused,
            "pending": [p for p in unused if pending is None or (p.stem if p in files else p.name) in pending],
            "points": points,
            "bytes": size,
            "newest": min(ages, default=None),
            "oldest": max(ages, default=None),
        }

    def clean(self) -> None:
        """Remove temporary files left by processes that no longer run (a SIGKILL mid-write; ``_files.clean_stale``)."""
        clean_stale(self.root)
