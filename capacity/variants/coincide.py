"""Which of several memories are the same memory at their parameters, by a cheap behavioural check.

Memories of different names can be the same memory at some parameters: ``gated_delta``, ``kda`` and ``gdn2`` at
their defaults (a scalar gate 0.95, beta 1), ``delta`` and ``gated_delta(alpha=1)``, ``linear`` and
``decay(alpha=1)``. Their curves then coincide, one curve under several names. ``same`` finds them by what they do,
which holds for any memory, registered or not, whatever it declares: each memory writes the same fixed probe
(``PAIRS`` x d gaussian keys with unit rows and gaussian values, dv = d, two batch items, seed 0) and reads every
written key back; two memories are the same when their reads agree to ``TOL`` of the largest read, at every d
asked. Float32 rounding of one recurrence computed two ways stays near 1e-7 relative; memories that differ at all
differ by far more on a probe past their capacity (gated_delta against delta: 0.5; gdn2 with gamma = 0.5 against
beta = 0.6: 0.17).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lacapacity.errors import CapacityError
from lacapacity.inputs import keys, values
from lacapacity.variants._guard import guard
from lacapacity.variants.declares import declared

TOL = 1e-5  # largest difference of two reads, relative to the largest read, between the same memories
PAIRS = 2  # pairs written per key dimension: n = 2 d, past every fixed state's capacity


def _reads(memory: object, d: int) -> torch.Tensor | None:
    """The memory's float64 reads ``[2, n, d]`` of every written key of the probe at key dimension d, or None where
    it does not take d (declared ``dims``) or fails on the probe (the run reports that failure itself)."""
    dims = declared(memory).dims
    if dims is not None and d not in dims:
        return None
    n = PAIRS * d
    K = keys.make("gaussian", n, d, batch=2, seed=0)  # [2, n, d], unit rows
    V = values.make("gaussian", n, d, batch=2, seed=0)  # [2, n, d]
    mem = guard(memory)
    try:
        with torch.no_grad():
            return mem.read(mem.write(mem.init_state(2, d, d), K, V), K).double()
    except (CapacityError, RuntimeError, ValueError, TypeError):
        return None


def same(memories: Sequence[tuple[str, object]], d: Sequence[int]) -> list[tuple[list[str], float]]:
    """Groups of two or more labels whose memories read the probe alike at every d in ``d`` (each with the largest
    relative difference seen), in the order the memories are given. ``memories``: (label, memory) pairs."""
    ds = sorted({int(x) for x in d})
    reads = {label: [_reads(mem, x) for x in ds] for label, mem in memories}
    groups: list[tuple[list[str], float]] = []
    placed: set[str] = set()
    for i, (a, _) in enumerate(memories):
        if a in placed or any(r is None for r in reads[a]):
            continue
        group, worst = [a], 0.0
        for b, _ in memories[i + 1 :]:
            if b in placed or any(r is None for r in reads[b]):
                continue
            diffs = []
            for ra, rb in zip(reads[a], reads[b]):
                assert ra is not None and rb is not None  # checked above
                scale = float(ra.abs().max().clamp_min(1e-30))
                diffs.append(float((ra - rb).abs().max()) / scale if ra.shape == rb.shape else float("inf"))
            if max(diffs) <= TOL:
                group.append(b)
                worst = max(worst, *diffs)
        if len(group) > 1:
            groups.append((group, worst))
            placed.update(group)
    return groups


def sentence(group: list[str], worst: float, d: Sequence[int]) -> str:
    """One line telling the user that the memories of ``group`` are the same memory, and how that was found."""
    names = ", ".join(group[:-1]) + f" and {group[-1]}"
    at = " and ".join(str(x) for x in sorted({int(x) for x in d}))
    how = "exactly" if worst == 0.0 else f"to {worst:.1g} of the largest read (float32 rounding)"
    return (
        f"{names} are the same memory at these parameters: they read a fixed probe ({PAIRS} d gaussian pairs written "
        f"and read back, d = {at}) alike, {how}, so their error and recall curves coincide; keep one, or set a "
        "parameter that tells them apart"
    )
