"""The combined study Dataset (docs/results-schema.md) from the per-group Datasets, with theory and provenance."""

from __future__ import annotations

import datetime
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import numpy as np
import xarray as xr

from capacity import __version__, mqar, probe, theory
from capacity.sweep.config import Study, n_of
from capacity.sweep.points import Group, build_variant

__all__ = ["assemble", "versions", "git_commit"]

_THEORY = {
    "frame_bound": (
        "T5 frame-potential bound max(n/d - 1, 0): the least mean error of n unit keys in R^d (orthonormal values)",
        theory.frame_bound,
    ),
    "welch_bound": (
        "T6 Welch bound sqrt((n - d)/(d (n - 1))) on the largest coherence of n unit keys (0 for n <= d)",
        theory.welch_bound,
    ),
    "random_keys_error": ("T7 expected mean error (n - 1)/d of random unit keys", theory.random_keys_error),
    "rank_bound": (
        "T8 rank bound max(1 - d/n, 0): the least mean error of any d x dv state with a linear read",
        theory.rank_bound,
    ),
    "optimal_gain_error": (
        "T9 mean error (n - 1)/(d + n - 1) of random keys read with the optimal scalar gain",
        theory.optimal_gain_error,
    ),
}
_STAT_ATTRS = {
    "mean_sq_coherence": (
        "mean squared coherence",
        "1",
        "mean over pairs i != j of (k_i . k_j)^2 of the keys written (1/d for random keys, T7)",
    ),
    "max_coherence": (
        "max coherence",
        "1",
        "max over pairs i != j of |k_i . k_j| of the keys written (never below the T6 Welch bound)",
    ),
    "frame_potential_ratio": (
        "frame potential / (n^2/d)",
        "1",
        "||K^T K||_F^2 / (n^2/d) of the keys written; 1 iff a tight frame (T5)",
    ),
    "effective_rank": (
        "effective rank",
        "dimensions",
        "participation ratio (tr K^T K)^2 / ||K^T K||_F^2 of the keys written",
    ),
}


def versions() -> dict:
    """Versions of the packages that produce the numbers."""
    out = {"capacity": __version__, "python": platform.python_version()}
    for pkg in ("torch", "triton", "numpy", "xarray"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def git_commit() -> str:
    """The commit of the source tree the package runs from (``-dirty`` if it has changes), or ``unknown``."""
    here = Path(__file__).resolve().parent
    try:
        run = lambda *a: subprocess.run(["git", *a], cwd=here, capture_output=True, text=True, timeout=10)
        head = run("rev-parse", "HEAD")
        if head.returncode != 0:
            return "unknown"
        dirty = run("status", "--porcelain", "--untracked-files=no").stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _axes(study: Study) -> list[tuple[str, list]]:
    """(dimension, coordinate values) in schema order; single-valued dtype/dv (and bill's keys/seed) are scalars instead."""
    g, bill = study.grid, study.probe.kind == "bill"
    axes = [("variant", [v.label for v in g.variant])]
    if not bill:
        axes.append(("key_family", [k.label for k in g.keys]))
    if g.feature:
        axes.append(("feature", [f.label for f in g.feature]))
    axes.append(("d", list(g.d)))
    axes.append((g.curve, list(g.load or g.n)))
    if study.probe.kind == "mqar":
        axes.append(("overwrite", list(study.probe.overwrite)))
    if not bill:
        axes.append(("seed", list(g.seed)))
    if len(g.dtype) > 1:
        axes.append(("dtype", list(g.dtype)))
    if len(g.dv) > 1:
        axes.append(("dv", list(g.dv)))
    return axes


def _index(study: Study, group: Group, dims: list[str], x) -> tuple:
    """Where the group's points at curve value ``x`` (over seed, if a dimension) sit in the full arrays."""
    g = study.grid
    pos = {
        g.curve: g.curve_values.index(x),
        "variant": g.variant.index(group.variant),
        "key_family": g.keys.index(group.keys),
        "feature": g.feature.index(group.feature) if group.feature is not None else None,
        "d": g.d.index(group.d),
        "dtype": g.dtype.index(group.dtype),
        "dv": g.dv.index(group.dv) if len(g.dv) > 1 else None,
    }
    return tuple(slice(None) if dim in ("seed", "overwrite") else pos[dim] for dim in dims)


def assemble(study: Study, results: list[tuple[Group, xr.Dataset]], *, attrs: dict) -> xr.Dataset:
    """One Dataset over the study's grid from every group's Dataset (in any order), plus theory variables."""
    axes = _axes(study)
    dims = [a for a, _ in axes]
    shape = [len(v) for _, v in axes]
    g = study.grid
    first = results[0][1]
    names = list(first.data_vars)
    full = {m: np.full(shape, np.nan if first[m].dtype.kind == "f" else -1, dtype=first[m].dtype) for m in names}
    feature_dim = {}
    for group, ds in results:
        host = {m: ds[m].transpose(g.curve, ...).values for m in names}  # [curve, seed] or [curve]
        for i, x in enumerate(ds[g.curve].values.tolist()):
            ix = _index(study, group, dims, x)
            for m in names:
                full[m][ix] = host[m][i]
        if "feature_dim" in ds.attrs and group.feature is not None:
            feature_dim[(group.feature.label, group.d)] = int(ds.attrs["feature_dim"])

    data = {}
    for m in names:
        meta = (
            probe.METRICS.get(m) or _STAT_ATTRS.get(m) or (mqar.METRICS.get(m) if study.probe.kind == "mqar" else None)
        )
        data[m] = (dims, full[m], dict(zip(("long_name", "units", "description"), meta)) if meta else _BILL_ATTRS[m])

    coords = {a: (a, np.asarray(v), {}) for a, v in axes}
    built = [
        build_variant(v, None) if v.obj is not None or not g.feature else build_variant(v, g.feature[0])
        for v in g.variant
    ]
    coords["additive"] = (
        "variant",
        np.array([getattr(b, "additive", False) is True for b in built]),
        {"description": "the write is S += k^T v and the read q S: T5, T7 and T10 apply"},
    )
    coords["linear_read"] = (
        "variant",
        np.array([getattr(b, "linear_read", False) is True for b in built]),
        {"description": "the read is linear in a fixed-size state: the rank bound T8 applies"},
    )
    d = np.asarray(g.d)
    curve = g.curve
    if curve == "load":
        n = np.array([[n_of(x, dd) for x in g.load] for dd in g.d])  # [d, load]
        coords["n"] = (
            ("d", "load"),
            n,
            {"long_name": "pairs written", "units": "pairs", "description": "max(1, round(load * d))"},
        )
    else:
        n = np.broadcast_to(np.asarray(g.n)[None, :], (len(g.d), len(g.n)))  # [d, n]
        coords["load"] = (("d", "n"), n / d[:, None], {"long_name": "load n/d", "units": "1"})
    coords[curve] = (
        curve,
        np.asarray(g.load or g.n),
        {"long_name": "load n/d" if curve == "load" else "pairs written", "units": "1" if curve == "load" else "pairs"},
    )
    coords["d"] = ("d", d, {"long_name": "key dimension", "units": "dimensions"})
    if not g.dv:
        coords["dv"] = ("d", d, {"long_name": "value dimension", "units": "dimensions", "description": "dv = d"})
        dv = d[:, None]
    elif len(g.dv) == 1:
        coords["dv"] = ((), g.dv[0], {"long_name": "value dimension", "units": "dimensions"})
        dv = np.asarray(g.dv[0])
    else:
        coords["dv"] = ("dv", np.asarray(g.dv), {"long_name": "value dimension", "units": "dimensions"})
        dv = np.asarray(g.dv)[None, None, :]
    if len(g.dtype) == 1:
        coords["dtype"] = ((), g.dtype[0], {"description": "dtype of keys and values (the state is float32)"})
    if study.probe.kind == "bill":
        coords["key_family"] = ((), g.keys[0].label, {})
        coords["seed"] = ((), g.seed[0], {})
    if g.feature:
        fd = np.array([[feature_dim.get((f.label, dd), -1) for dd in g.d] for f in g.feature])
        coords["feature_dim"] = (
            ("feature", "d"),
            fd,
            {
                "long_name": "feature dimension",
                "units": "dimensions",
                "description": "dimension of phi(k) as the variant reports it (-1: not reported)",
            },
        )

    # theory over (d, curve) [+ dv]
    tdims = ("d", curve) + (("dv",) if len(g.dv) > 1 else ())
    n3 = n[..., None] if len(g.dv) > 1 else n
    d3 = d[:, None, None] if len(g.dv) > 1 else d[:, None]
    if study.probe.kind == "recall":
        for name, (desc, fn) in _THEORY.items():
            data[name] = (
                tdims,
                np.broadcast_to(fn(n3, d3), np.broadcast_shapes(n3.shape, np.shape(dv))).copy(),
                {"units": "1" if name == "welch_bound" else "value units^2", "description": desc},
            )
        pred = theory.argmax_recall(n3, d3, dv)
        data["argmax_recall_pred"] = (
            tdims,
            np.asarray(pred),
            {
                "long_name": "predicted argmax recall",
                "units": "fraction",
                "description": "T10 Gaussian-approximation prediction of argmax recall for random unit keys and values",
            },
        )
    elif study.probe.kind == "bill":
        b = theory.bill(n3, d3, dv)
        for name, desc in _BILL_THEORY.items():
            data[name] = (tdims, np.broadcast_to(b[name], n3.shape).copy(), {"description": desc})
    else:  # mqar: T10 decoded over the whole value vocabulary
        pred = mqar.predicted_accuracy(n3, d3, dv, study.probe.vocab)
        data["accuracy_pred"] = (
            tdims,
            np.broadcast_to(pred, np.broadcast_shapes(n3.shape, np.shape(dv))).copy(),
            {
                "long_name": "predicted MQAR accuracy",
                "units": "fraction",
                "description": "T10 for random keys and values, decoded over the whole value vocabulary (additive memory, no overwrites)",
            },
        )

    out = xr.Dataset(data, coords=coords, attrs=dict(attrs))
    if study.probe.kind == "mqar":
        out.attrs.update(vocab=int(study.probe.vocab), distractors=int(study.probe.distractors))
    if study.probe.kind == "bill":
        out.attrs["break_even_n"] = np.atleast_1d(
            theory.break_even_n(d, None if not g.dv else np.asarray(g.dv[0]), measure="cache")
        ).astype(np.float64)
    return out


_BILL_ATTRS = {
    "state_numel": {
        "long_name": "numbers kept per head",
        "units": "numbers",
        "description": "measured: elements of every tensor in the state after n writes, per batch item",
    },
    "decode_seconds": {
        "long_name": "decode time per token",
        "units": "s",
        "description": "measured: median time of one decode step (write one pair, read one query) after n writes",
    },
}
_BILL_THEORY = {
    "softmax_cache": "T13: n (d + dv) numbers cached by softmax attention",
    "linear_state": "T13: d dv numbers in the linear-attention state",
    "softmax_decode_flops": "T13: 2 n (d + dv) flops per decoded token for softmax attention",
    "linear_decode_flops": "T13: 4 d dv flops per decoded token for linear attention",
}


def provenance(study: Study, *, device: str, run: dict) -> dict:
    """The attrs every study Dataset carries (docs/results-schema.md)."""
    return {
        "study": study.name,
        "description": study.description,
        "config": json.dumps({**study.to_json(), "run": run}, sort_keys=True),
        "config_hash": study.config_hash(device.split(":")[0]),
        "versions": json.dumps(versions(), sort_keys=True),
        "device": device,
        "git_commit": git_commit(),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
