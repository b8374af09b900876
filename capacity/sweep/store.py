"""Measured points on disk: one JSON file per cell, named by what computes its numbers, checked on load.

``reuse_key`` names a cell's file. A run reuses a stored point only from the file its cell's key names, after the
file's key, checksum and contents are checked; anything else is measured again (with one line saying why). Each
pass's points are merged into their cell's file, written under a temporary name, flushed, then renamed: readers see
a whole file or none. JSON keeps every float64 exactly. ``manifest.json`` lists the cells the study's latest run
used; ``capacity store`` lists and prunes the rest.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from capacity.base._files import atomic_write, clean_stale
from capacity.sweep.config import Spec, digest

__all__ = ["reuse_key", "Store", "SCHEMA"]

SCHEMA = 2  # the layout of a cell file; a new layout is never mixed with files of an old one


def reuse_key(plan, cell) -> str:
    """The name of ``cell``'s file in the store: a hash of everything that computes its points' numbers.

    Covered: the probe settings (kind, value family, decode, ...); the cell's axes (d, dv, dtype, state dtype and rounding, head layout,
    key family and feature map with their parameters); the memory's full state (``provenance.describe``: every attribute, not
    only ``params``), its behavioural fingerprint (``provenance.behaviour``: the bits of a tiny fixed probe), the
    user's code it runs (``provenance.user_code``: the modules of its class, feature map, factory or import path
    and every module of the user's they import) and the files its parameters name; the key family's fingerprint,
    code and files; the seeds and pair counts when a point's numbers depend on the other points of its pass
    (``plan.per_seed``, ``plan.per_n``) and the kind's other coordinates (``plan.coords``); the package's sources and data files and the ``--import`` modules'
    code; the versions of the numeric libraries loaded and of the distributions that hold plug-ins; the device
    and its numeric settings; this store's layout. Not covered (docs/sweeps.md): torch's thread count (the built-in memories give the same bits
    on any), and a change that the tiny probe does not show in a file or library none of the above names.
    """
    study, memory = plan.study, plan.memory(cell)
    label = lambda spec: None if spec is None else spec.label
    return digest(
        {
            "probe": study.task.to_json(),
            "cell": {a: label(v) if isinstance(v, Spec) or v is None else v for a, v in cell.values if a != "variant"},
            "memory": {"description": memory.description, "behaviour": memory.behaviour["bits"], **memory.code},
            "keys": {k: v for k, v in plan.families[cell.keys, cell.d].items() if k != "prefix_stable"},
            "seeds": None if plan.per_seed(cell) else list(study.grid.seed),
            "ns": None if plan.per_n(cell) else sorted(set(cell.ns(study))),
            "coords": plan.coords,
            "code": plan.code,
            "libraries": plan.libraries,
            "numerics": plan.numerics,
            "schema": SCHEMA,
        }
    )


def _checksum(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class Store:
    """The measured cells of one study under ``root`` (``<out>/.sweep/<study>/``)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def load(self, key: str, variables: list[str], coords: dict) -> tuple[dict, dict, str | None]:
        """The stored points of cell ``key``: ``(points, attrs, why)``, points ``{(seed, n): {variable: value}}``.

        Empty with ``why`` None when there is no file; empty with ``why`` (a short phrase) when the file fails a
        check: its key, its checksum, its variables or its coordinates (``coords``: the kind's besides seed and n).
        """
        p = self.path(key)
        if not p.exists():
            return {}, {}, None
        try:
            data = json.loads(p.read_text())
            body = {k: data[k] for k in ("key", "schema", "variables", "coords", "attrs", "points")}
        except (OSError, ValueError, KeyError, TypeError):
            return {}, {}, "unreadable"
        if body["key"] != key or body["schema"] != SCHEMA:
            return {}, {}, "its key does not match its name"
        if data.get("checksum") != _checksum(body):
            return {}, {}, "its numbers do not match their checksum"
        if sorted(body["variables"]) != sorted(variables):
            held = ", ".join(sorted(body["variables"])) or "no variables"
            return {}, {}, f"it holds {held} instead of {', '.join(sorted(variables))}"
        if body["coords"] != {k: list(v) for k, v in coords.items()}:
            return {}, {}, "its coordinates differ from the study's"
        try:
            kinds = {v: np.dtype(t).kind for v, t in body["variables"].items()}
        except TypeError:
            kinds = {}
        if set(kinds.values()) - set("fiu") or len(kinds) != len(body["variables"]):
            return {}, {}, "it holds numbers of a type a result cannot hold"
        points = {}
        for item, values in body["points"].items():
            seed, n = map(int, item.split())
            points[seed, n] = {v: np.asarray(values[v], dtype=np.dtype(body["variables"][v])) for v in variables}
        return points, body["attrs"], None

    def save(self, key: str, points: dict, attrs: dict, variables: dict[str, str], coords: dict) -> None:
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

    def record(self, study: str, keys: list[str]) -> None:
        """Write the manifest: the cells the study's latest run used (``capacity store`` keeps them); a run that used
        the same cells leaves it as it is."""
        cells, path = sorted(set(keys)), self.root / "manifest.json"
        try:
            if json.loads(path.read_text())["cells"] == cells:
                return
        except (OSError, ValueError, KeyError, TypeError):
            pass
        stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        text = json.dumps({"study": study, "created": stamp, "cells": cells})
        atomic_write(path, lambda tmp: tmp.write_text(text))

    def contents(self) -> dict:
        """What the store holds: ``{"cells", "used", "points", "bytes", "newest", "oldest"}`` (times: seconds of age),
        ``used`` the cells the latest run's manifest lists, ``unused`` the paths of the others."""
        try:
            used = set(json.loads((self.root / "manifest.json").read_text())["cells"])
        except (OSError, ValueError, KeyError, TypeError):
            used = set()
        files = sorted(p for p in self.root.glob("*.json") if p.name != "manifest.json")
        ages, points, size = [time.time() - p.stat().st_mtime for p in files], 0, 0
        for p in files:
            size += p.stat().st_size
            try:
                points += len(json.loads(p.read_text())["points"])
            except (OSError, ValueError, KeyError, TypeError):
                pass
        return {
            "cells": len(files),
            "used": sum(p.stem in used for p in files),
            "unused": [p for p in files if p.stem not in used],
            "points": points,
            "bytes": size,
            "newest": min(ages, default=None),
            "oldest": max(ages, default=None),
        }

    def clean(self) -> None:
        """Remove temporary files left by processes that no longer run (a SIGKILL mid-write; ``_files.clean_stale``)."""
        clean_stale(self.root)
