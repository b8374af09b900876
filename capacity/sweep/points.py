"""Units of work: a group is every grid point that one batched probe measures.

A group is one write pass. Points that differ only in the curve axis (load or n) and the
seed share one: a recall group draws its keys and values once for all seeds
(``seed=[s0, s1, ...]``, the batch dimension) and writes them in one pass, reading back at
every n as a checkpoint. Key families whose prefixes are not draws of the family
(``Family.iid_rows`` False: orthogonal, simplex) need a fresh draw and write pass per n (a
tight frame at each n), so for them each n is its own group. A group is also the unit of
persistence: its file holds all its points.

``measure(task)`` is the function executors run; it takes and returns plain picklable data.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np
import torch
import xarray as xr

from capacity import _validate, probe, values, variants
from capacity import keys as keys_mod
from capacity.errors import CapacityError
from capacity.sweep.config import Spec, Study, digest

__all__ = ["Group", "groups", "check", "build_variant", "measure", "STAT_VARS"]

STAT_VARS = ("mean_sq_coherence", "max_coherence", "frame_potential_ratio", "effective_rank")
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Group:
    """One write pass: a (variant, keys, feature, d, dtype, dv) cell and the curve values (loads or n) it covers, x seeds."""

    variant: Spec
    keys: Spec
    feature: Spec | None
    d: int
    dtype: str
    dv: int
    curve: tuple

    def to_json(self) -> dict:
        return {
            "variant": self.variant.to_json(),
            "keys": self.keys.to_json(),
            "feature": None if self.feature is None else self.feature.to_json(),
            "d": self.d,
            "dtype": self.dtype,
            "dv": self.dv,
            "curve": list(self.curve),
        }

    @classmethod
    def from_json(cls, data: dict) -> Group:
        feat = data["feature"]
        return cls(Spec.parse(data["variant"], "variant"), Spec.parse(data["keys"], "keys"), None if feat is None else Spec.parse(feat, "feature"), int(data["d"]), data["dtype"], int(data["dv"]), tuple(data["curve"]))

    def ns(self, study: Study) -> list[int]:
        """Pair counts of the curve values this group covers."""
        return [study.grid.ns(self.d)[study.grid.curve_values.index(x)] for x in self.curve]

    def key(self, study: Study, device: str) -> str:
        """Content hash of everything that determines this group's numbers."""
        return digest({"config": study.hash_payload(device), "group": self.to_json()})

    def points(self, study: Study) -> int:
        return len(self.curve) * (1 if study.probe.kind == "bill" else len(study.grid.seed))

    def cost(self, study: Study) -> float:
        """A rough relative cost, write pass plus argmax scores (for scheduling the largest groups first)."""
        ns = sorted(set(self.ns(study)))
        return len(study.grid.seed) * (ns[-1] * self.d * self.dv + sum(n * n for n in ns) * self.dv)


def _passes(study: Study, keys: Spec, d: int) -> list[tuple]:
    """The curve values each write pass covers: all at once, or one n at a time for non-i.i.d. key families."""
    g = study.grid
    fam = keys_mod.families().get(keys.name)
    if study.probe.kind == "bill" or fam is None or fam.iid_rows:
        return [tuple(g.curve_values)]
    by_n: dict[int, list] = {}
    for x, n in zip(g.curve_values, g.ns(d)):
        by_n.setdefault(n, []).append(x)
    return [tuple(xs) for xs in by_n.values()]


def groups(study: Study) -> list[Group]:
    """The study's groups (write passes) in grid order (variant, keys, feature, d, dtype, dv, curve)."""
    g = study.grid
    feats = g.feature or (None,)
    return [Group(v, k, f, d, dt, dv, c) for v in g.variant for k in g.keys for f in feats for d in g.d for dt in g.dtype for dv in g.dvs(d) for c in _passes(study, k, d)]


def build_variant(variant: Spec, feature: Spec | None):
    """The registered variant with its parameters (and feature map); bad names or parameters raise CapacityError."""
    kwargs = variant.kwargs
    if feature is not None:
        clash = sorted(set(kwargs) & (set(feature.kwargs) | {"feature"}))
        if clash:
            raise CapacityError(f"variant {variant.label!r} and feature map {feature.label!r} both set {', '.join(clash)}")
        kwargs = {**kwargs, "feature": feature.name, **feature.kwargs}
    try:
        return variants.get(variant.name, **kwargs)
    except TypeError as exc:
        what = variant.label if feature is None else f"{variant.label} with feature {feature.label}"
        raise CapacityError(f"variant {what!r} does not take these parameters ({exc})") from None


def check(study: Study) -> None:
    """Check every name and parameter of the study before any work: variants, key families, value sizes."""
    g = study.grid
    for v in g.variant:
        for f in g.feature or (None,):
            build_variant(v, f)
    fams = keys_mod.families()
    for k in g.keys:
        _validate.choice("key family", k.name, fams)
        unknown = sorted(set(k.kwargs) - set(fams[k.name].params))
        if unknown:
            allowed = ", ".join(fams[k.name].params) or "none"
            raise CapacityError(f"key family {k.label!r}: unknown parameter(s) {', '.join(unknown)}; allowed: {allowed}")
        for d in g.d:
            n = min(g.ns(d))
            keys_mod.make(k.name, n=min(n, d), d=d, seed=0, **k.kwargs)  # a small draw checks the parameter values
            if k.name == "simplex" and max(g.ns(d)) > d + 1:
                raise CapacityError(f"simplex keys exist for n <= d + 1; the grid asks for n = {max(g.ns(d))} at d = {d}")
    if study.probe.values == "orthonormal":
        for d in g.d:
            for dv in g.dvs(d):
                if max(g.ns(d)) > dv:
                    raise CapacityError(f"orthonormal values need n <= dv; the grid asks for n = {max(g.ns(d))} with dv = {dv} at d = {d}")


# ---------------------------------------------------------------- measurement


def measure(task: dict) -> xr.Dataset:
    """Run one group. ``task``: {"study": Study.to_json(), "group": Group.to_json(), "device": str, "threads": int | None}.

    Returns a Dataset over the curve axis (``load`` or ``n``) and, for recall, ``seed``.
    """
    if task.get("threads"):
        torch.set_num_threads(int(task["threads"]))
    study = Study.from_dict(task["study"])
    group = Group.from_json(task["group"])
    device = torch.device(task["device"])
    if study.probe.kind == "bill":
        return _bill(study, group, device)
    return _recall(study, group, device)


def _recall(study: Study, group: Group, device: torch.device) -> xr.Dataset:
    grid = study.grid
    fam = keys_mod.families()[group.keys.name]
    seeds = list(grid.seed)
    ns = group.ns(study)
    uniq = sorted(set(ns))
    dtype = _DTYPES[group.dtype]
    var = build_variant(group.variant, group.feature)
    draw = dict(batch=len(seeds), seed=seeds, device=device)
    V = values.make(study.probe.values, max(uniq), group.dv, **draw).to(dtype)  # [S, n_max, dv]; prefixes are draws too
    by_n: dict[int, dict[str, np.ndarray]] = {}
    feature_dim = None

    def collect(cv: probe.Curves, K: torch.Tensor | None, at: list[int]):
        nonlocal feature_dim
        feature_dim = cv.feature_dim
        where = {c: i for i, c in enumerate(cv.checkpoints)}
        for n in at:
            row = {m: x[where[n]] for m, x in cv.metrics.items()}  # [S] each
            if study.probe.key_stats:
                stats = keys_mod.describe(K[:, :n].float())
                row.update({s: stats[s].values for s in STAT_VARS})
            by_n[n] = row

    if fam.iid_rows:  # one write pass; every n is a checkpoint
        K = keys_mod.make(group.keys.name, max(uniq), group.d, **draw, **group.keys.kwargs).to(dtype)  # [S, n_max, d]
        collect(probe.measure(var, K, V, checkpoints=uniq, decode=study.probe.decode), K, uniq)
    else:  # a fresh draw (and write pass) per n
        for n in uniq:
            K = keys_mod.make(group.keys.name, n, group.d, **draw, **group.keys.kwargs).to(dtype)  # [S, n, d]
            collect(probe.measure(var, K, V[:, :n], checkpoints=[n], decode=study.probe.decode), K, [n])
    names = [m for m in probe.METRICS if m != "recall" or study.probe.decode] + (list(STAT_VARS) if study.probe.key_stats else [])
    curve = grid.curve
    data = {m: ((curve, "seed"), np.stack([by_n[n][m] for n in ns]).astype(np.float64)) for m in names}
    attrs = {}
    if feature_dim is not None:
        attrs["feature_dim"] = int(feature_dim)
    return xr.Dataset(data, coords={curve: list(group.curve), "seed": seeds}, attrs=attrs)


def _numel(state) -> int:
    """Numbers a state holds: tensors counted, containers walked."""
    if isinstance(state, torch.Tensor):
        return state.numel()
    if isinstance(state, dict):
        return sum(_numel(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(_numel(v) for v in state)
    if hasattr(state, "__dict__"):
        return sum(_numel(v) for v in vars(state).values())
    return 0


def _clone(state):
    if isinstance(state, torch.Tensor):
        return state.clone()
    return copy.deepcopy(state)


def _bill(study: Study, group: Group, device: torch.device) -> xr.Dataset:
    """After each n writes: the numbers the state holds per batch item, and the median time of one decode step.

    A decode step writes one new pair and reads one query (what a decoder does per token); it
    runs on a copy of the state so the next n starts from exactly n writes.
    """
    ns = list(study.grid.n)
    order = sorted(set(ns))
    reps = study.probe.repeats
    dtype = _DTYPES[group.dtype]
    seed = study.grid.seed[0]
    var = build_variant(group.variant, group.feature)
    K = keys_mod.make(group.keys.name, order[-1] + reps, group.d, seed=seed, device=device, **group.keys.kwargs).to(dtype)  # [1, n_max + reps, d]
    V = values.make(study.probe.values, order[-1] + reps, group.dv, seed=seed, device=device).to(dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    state = var.init_state(1, group.d, group.dv, device=device)
    numel, seconds, written = {}, {}, 0
    for n in order:
        state = var.write(state, K[:, written:n], V[:, written:n])
        written = n
        numel[n] = _numel(state)
        trial = _clone(state)
        times = []
        for r in range(reps + 2):  # two warm-up steps
            k, v, q = K[:, n + r % reps : n + r % reps + 1], V[:, n + r % reps : n + r % reps + 1], K[:, r % n : r % n + 1]
            sync()
            t0 = time.perf_counter()
            trial = var.write(trial, k, v)
            var.read(trial, q)
            sync()
            times.append(time.perf_counter() - t0)
        seconds[n] = float(np.median(times[2:]))
    return xr.Dataset(
        {
            "state_numel": ("n", np.array([numel[n] for n in ns], dtype=np.int64)),
            "decode_seconds": ("n", np.array([seconds[n] for n in ns], dtype=np.float64)),
        },
        coords={"n": ns},
    )
