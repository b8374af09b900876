"""Units of work, and the checks made before any: a group is every grid point that one batched probe measures.

A group is one write pass. Points that differ only in the curve axis (load or n) and the
seed share one: a recall group draws its keys and values once for all seeds
(``seed=[s0, s1, ...]``, the batch dimension) and writes them in one pass, reading back at
every n as a checkpoint. Key families whose prefixes are not draws of the family
(``Family.iid_rows`` False: orthogonal, simplex) need a fresh draw and write pass per n (a
tight frame at each n), so for them each n is its own group. A group is also the unit of
persistence: its file holds all its points.

``check(study)`` validates a
study cheaply (no full-size draws, no optimisation) and ``peak_bytes`` estimates the memory of its largest group.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from capacity import _validate, variants
from capacity import keys as keys_mod
from capacity.errors import CapacityError
from capacity.sweep.config import Spec, Study, digest

__all__ = ["Group", "groups", "check", "check_memory", "build_variant", "peak_bytes"]


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
        return cls(
            Spec.parse(data["variant"], "variant"),
            Spec.parse(data["keys"], "keys"),
            None if feat is None else Spec.parse(feat, "feature"),
            int(data["d"]),
            data["dtype"],
            int(data["dv"]),
            tuple(data["curve"]),
        )

    def ns(self, study: Study) -> list[int]:
        """Pair counts of the curve values this group covers."""
        return [study.grid.ns(self.d)[study.grid.curve_values.index(x)] for x in self.curve]

    def key(self, study: Study, device: str, code: str) -> str:
        """Content hash of everything that determines this group's numbers, ``code`` the fingerprint of the code."""
        return digest({"config": study.hash_payload(device), "group": self.to_json(), "code": code})

    def points(self, study: Study) -> int:
        per = {"bill": 1, "mqar": len(study.probe.overwrite) * len(study.grid.seed)}.get(
            study.probe.kind, len(study.grid.seed)
        )
        return len(self.curve) * per

    def cost(self, study: Study) -> float:
        """A rough relative cost, write pass plus argmax scores (for scheduling the largest groups first)."""
        ns = sorted(set(self.ns(study)))
        return len(study.grid.seed) * (ns[-1] * self.d * self.dv + sum(n * n for n in ns) * self.dv)


def _passes(study: Study, keys: Spec, d: int) -> list[tuple]:
    """The curve values each write pass covers: all at once, or one n at a time for non-i.i.d. key families."""
    g = study.grid
    if study.probe.kind in ("bill", "mqar") or keys_mod.family(keys.name).iid_rows:
        return [tuple(g.curve_values)]
    by_n: dict[int, list] = {}
    for x, n in zip(g.curve_values, g.ns(d)):
        by_n.setdefault(n, []).append(x)
    return [tuple(xs) for xs in by_n.values()]


def groups(study: Study) -> list[Group]:
    """The study's groups (write passes) in grid order (variant, keys, feature, d, dtype, dv, curve)."""
    g = study.grid
    feats = g.feature or (None,)
    return [
        Group(v, k, f, d, dt, dv, c)
        for v in g.variant
        for k in g.keys
        for f in feats
        for d in g.d
        for dt in g.dtype
        for dv in g.dvs(d)
        for c in _passes(study, k, d)
    ]


def build_variant(variant: Spec, feature: Spec | None):
    """The variant of a spec (a registered name, an import path, or the object itself) with its feature map."""
    if variant.obj is not None:
        if feature is not None:
            raise CapacityError(
                f"variant {variant.label!r} is an object; feature maps go to registered variants (feature={feature.label!r})"
            )
        return variant.obj
    kwargs = variant.kwargs
    if feature is not None:
        clash = sorted(set(kwargs) & (set(feature.kwargs) | {"feature"}))
        if clash:
            raise CapacityError(
                f"variant {variant.label!r} and feature map {feature.label!r} both set {', '.join(clash)}"
            )
        kwargs = {**kwargs, "feature": feature.name, **feature.kwargs}
    return variants.resolve(variant.name, **kwargs)


def check(study: Study) -> None:
    """Check every name and parameter of the study before any work, cheaply: variants are built (not run), key
    families check their parameters on two keys (learned keys optimise nothing), value sizes are compared."""
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
    if study.probe.kind == "mqar" and max(g.n) > study.probe.vocab:
        raise CapacityError(
            f"mqar writes n distinct keys of a vocabulary of {study.probe.vocab}: n = {max(g.n)} is too many (raise vocab)"
        )
    if study.probe.values == "orthonormal":
        for d in g.d:
            for dv in g.dvs(d):
                if max(g.ns(d)) > dv:
                    raise CapacityError(
                        f"orthonormal values need n <= dv; the grid asks for n = {max(g.ns(d))} with dv = {dv} at d = {d}"
                    )


def _state_numbers(variant, d: int, dv: int, n: int) -> int:
    try:
        return int(variant.state_numel(d, dv))
    except (TypeError, ValueError):  # a memory that grows (softmax) wants n
        return int(variant.state_numel(d, dv, n=n))


def peak_bytes(study: Study, group: Group) -> int:
    """An upper estimate of the memory one group's measurement holds at its peak, in bytes.

    Keys and values are drawn in float64 and kept in float32 ``[S, n, d + dv]``; the reads, their errors and the
    per-query metrics ``[S, n, dv]`` a few times over; the state; a score block of 2^24 floats; key statistics'
    Gram blocks ``[S, 2048, n]`` in float64.
    """
    S = 1 if study.probe.kind == "bill" else len(study.grid.seed)  # recall and mqar draw every seed at once
    n = max(group.ns(study)) + (study.probe.repeats if study.probe.kind == "bill" else 0)
    d, dv = group.d, group.dv
    var = build_variant(group.variant, group.feature)
    D = var.feature_dim(d) if callable(getattr(var, "feature_dim", None)) else d
    total = 8 * S * n * (d + dv) + 4 * S * n * (d + dv)  # draws, float32 copies
    total += 4 * S * n * D  # features
    total += 4 * 4 * S * n * dv  # reads, differences, per-query metrics
    total += 2 * 4 * S * _state_numbers(var, D, dv, n)  # the state and a copy
    total += 4 * (1 << 24)  # score block of the argmax decode
    if study.probe.key_stats:
        total += 8 * S * min(n, 2048) * n
    return int(total)


def _gb(b: float) -> str:
    return f"{b / 2**30:.1f} GiB"


def check_memory(study: Study, groups_: list[Group], device: torch.device, parallel: int = 1) -> None:
    """Refuse, in one line, a study whose largest group (times the groups run at once) cannot fit in memory."""
    if not groups_:
        return
    sizes = [peak_bytes(study, gr) for gr in groups_]  # each builds its variant once
    i = max(range(len(sizes)), key=sizes.__getitem__)
    worst, need = groups_[i], sizes[i] * parallel
    have = _validate.available_bytes(device)
    if have is not None and need > 0.9 * have:
        at_once = f" ({parallel} groups at once)" if parallel > 1 else ""
        raise CapacityError(
            f"the largest group ({worst.variant.label}, {worst.keys.label}, d = {worst.d}, n up to {max(worst.ns(study))}) needs about "
            f"{_gb(need)}{at_once} but {device.type} has {_gb(have)} available; use a smaller d, load or fewer seeds"
        )
