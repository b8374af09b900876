"""Units of work and the checks made before any: a group is every grid point one write pass measures.

Points that differ only in the curve axis (load or n) and the seed share a group: its keys and values are drawn
once for all seeds (the batch) and written in one pass, read back at every n. Key families whose prefixes are not
draws of the family (``Family.iid_rows`` False: orthogonal, simplex) need a fresh draw per n, so there each n is its
own group. A group is also the unit of persistence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from capacity import _validate, features, plugins
from capacity import heads as heads_mod
from capacity import keys as keys_mod
from capacity import variants as variants_mod
from capacity.errors import CapacityError
from capacity.sweep.config import Spec, Study, build_variant, digest
from capacity.sweep.kinds import KINDS

__all__ = ["Group", "groups", "check", "check_memory", "peak_bytes", "user_code"]


@dataclass(frozen=True)
class Group:
    """One write pass: a (variant, keys, feature, d, dtype, dv, state_dtype, rounding, heads, value_heads) cell and
    the curve values it covers, for every seed."""

    variant: Spec
    keys: Spec
    feature: Spec | None
    d: int
    dtype: str
    dv: int
    curve: tuple
    state_dtype: str = "float32"
    rounding: str = "step"
    heads: int = 1
    value_heads: int = 1

    def ns(self, study: Study) -> list[int]:
        """Pair counts of the curve values this group covers."""
        return [study.grid.ns(self.d)[study.grid.curve_values.index(x)] for x in self.curve]

    def key(self, study: Study, device: str, code: str) -> str:
        """Content hash of what determines this group's numbers; ``code`` fingerprints the code (``store``)."""
        spec = lambda s: None if s is None else s.to_json()
        cell = {"variant": spec(self.variant), "keys": spec(self.keys), "feature": spec(self.feature)}
        cell.update(d=self.d, dtype=self.dtype, dv=self.dv, curve=list(self.curve))
        cell.update(
            state_dtype=self.state_dtype, rounding=self.rounding, heads=self.heads, value_heads=self.value_heads
        )
        return digest({"config": study.hash_payload(device), "group": cell, "code": code})

    def points(self, study: Study) -> int:
        return len(self.curve) * math.prod(len(v) for v in KINDS[study.probe.kind].coords(study).values())

    def cost(self, study: Study) -> float:
        """Multiply-adds of the write pass and the argmax scores (to schedule the largest groups first)."""
        ns = sorted(set(self.ns(study)))
        return len(study.grid.seed) * (ns[-1] * self.d * self.dv + sum(n * n for n in ns) * self.dv)


def groups(study: Study) -> list[Group]:
    """The study's groups in grid order (variant, keys, feature, d, dtype, dv, state_dtype, rounding, heads and
    value_heads, curve)."""
    g, one_pass = study.grid, KINDS[study.probe.kind].ONE_PASS

    def passes(keys: Spec, d: int) -> list[tuple]:
        if one_pass or keys_mod.family(keys.name).iid_rows:
            return [g.curve_values]
        by_n: dict[int, list] = {}
        for x, n in zip(g.curve_values, g.ns(d)):
            by_n.setdefault(n, []).append(x)
        return [tuple(xs) for xs in by_n.values()]

    return [
        Group(v, k, f, d, dt, dv, c, sd, r, h, hv)
        for v in g.variant
        for k in g.keys
        for f in g.feature or (None,)
        for d in g.d
        for dt in g.dtype
        for dv in g.dvs(d)
        for sd in g.state_dtype
        for r in g.rounding
        for h, hv in g.layouts()
        for c in passes(k, d)
    ]


def check(study: Study) -> None:
    """Check every name and parameter before any work, cheaply: variants are built (not run), key families check
    their parameters on two keys (learned keys optimise nothing), sizes are compared."""
    g = study.grid
    for v in g.variant:
        for f in g.feature or (None,):
            build_variant(v, f)
    for k in g.keys:
        fam = keys_mod.family(k.name)
        for d in g.d:
            fam.validate(d, k.kwargs)
            if k.name == "simplex" and max(g.ns(d)) > d + 1:
                raise CapacityError(
                    f"simplex keys exist for n <= d + 1; the grid asks for n = {max(g.ns(d))} at d = {d}"
                )
    for d in g.d:
        for dv in g.dvs(d):
            for h, hv in g.layouts():
                heads_mod.check_layout(d, dv, h, hv)
            if study.probe.values == "orthonormal" and max(g.ns(d)) > dv:
                raise CapacityError(
                    f"orthonormal values need n <= dv; the grid asks for n = {max(g.ns(d))} with dv = {dv} at d = {d}"
                )
    getattr(KINDS[study.probe.kind], "check", lambda s: None)(study)


def peak_bytes(study: Study, group: Group) -> int:
    """An upper estimate of one group's peak memory in bytes.

    Keys and values drawn in float64 and kept in float32 ``[S, n, d + dv]``; features ``[S, n, D]``; reads, their
    errors and per-query metrics ``[S, n, dv]`` four times; the state twice; the decode's score block of 2^24
    floats; key statistics' Gram blocks ``[S, 2048, n]`` in float64.
    """
    S, d, dv = len(study.grid.seed), group.d, group.dv
    n = KINDS[study.probe.kind].writes(study, group.ns(study))
    var = build_variant(group.variant, group.feature)
    D = var.feature_dim(d) if callable(getattr(var, "feature_dim", None)) else d
    try:
        state = int(var.state_numel(D, dv))
    except (TypeError, ValueError):  # a memory that grows (softmax) wants n
        state = int(var.state_numel(D, dv, n=n))
    total = 12 * S * n * (d + dv) + 4 * S * n * D + 16 * S * n * dv + 8 * S * state + 4 * (1 << 24)
    return int(total + (8 * S * min(n, 2048) * n if study.probe.key_stats else 0))


def check_memory(study: Study, todo: list[Group], device: torch.device, parallel: int = 1) -> None:
    """Refuse, in one line, a study whose largest group (times the groups run at once) cannot fit in memory."""
    if not todo:
        return
    need, worst = max((peak_bytes(study, gr), i) for i, gr in enumerate(todo))
    worst, need, have = todo[worst], need * parallel, _validate.available_bytes(device)
    if have is not None and need > 0.9 * have:
        gib = lambda b: f"{b / 2**30:.1f} GiB"
        at_once = f" ({parallel} groups at once)" if parallel > 1 else ""
        raise CapacityError(
            f"the largest group ({worst.variant.label}, {worst.keys.label}, d = {worst.d}, n up to {max(worst.ns(study))}) "
            f"needs about {gib(need)}{at_once} but {device.type} has {gib(have)} available; use a smaller d, load or fewer seeds"
        )


def user_code(study: Study) -> list:
    """The user code a study runs: variant objects, and the classes, families and maps named by path or entry point."""
    found = []
    for v in study.grid.variant:
        if v.obj is not None:
            found.append(v.obj)
        elif ":" in v.name:
            found.append(plugins.load_path(v.name))
        elif v.name not in variants_mod._REGISTRY:
            found.append(variants_mod._factory(v.name))
    for k in study.grid.keys:
        draw = keys_mod.family(k.name).draw
        if draw.__module__ != keys_mod.__name__:
            found.append(draw)
    for f in study.grid.feature:
        mp = features.get(f.name, **f.kwargs)
        if type(mp).__module__ != features.__name__:
            found.append(mp)
    return found
