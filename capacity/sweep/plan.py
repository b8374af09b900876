"""What a run measures: the study's cells, the memories written in them, and the passes still to make.

A cell is one value of every cell axis (variant, keys, feature, d, dtype, dv); a point is a cell at one seed and
one pair count n. One write pass measures any pair counts of a cell for any of its seeds (all seeds in one batch).
``Plan`` resolves a study once per run: it builds and fingerprints each memory (``lacapacity.sweep.provenance``), names
each cell by what computes its numbers (``identity``; the store names its file by that's hash) and, from the points already stored, makes the passes that
measure the rest. A point is stored on its own, and so reused on its own, when its numbers depend on nothing but
its cell, seed and n: always for the recall kind's pair counts (the probe writes in fixed blocks), for seeds when
the memory reads the same bits alone as in a batch (``provenance.behaviour``). Otherwise the reuse key names the
seeds (or the pair counts) and the cell is measured whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch

from lacapacity import variants as variants_mod
from lacapacity.base import _opened
from lacapacity.base.labels import Spec
from lacapacity.errors import CapacityError
from lacapacity.inputs import keys as keys_mod
from lacapacity.sweep import provenance
from lacapacity.sweep.config import CELL_AXES, Study
from lacapacity.sweep.store import reuse_key
from lacapacity.tasks import get as tasks_get
from lacapacity.tasks import probe
from lacapacity.tasks.protocol import Cell, Pass
from lacapacity.variants._guard import guard

if TYPE_CHECKING:  # pragma: no cover
    from lacapacity.variants import Variant


def cells(study: Study) -> list[Cell]:
    """The study's cells in grid order (an empty ``dv`` axis means dv = d, an empty ``value_heads`` as many as
    ``heads``)."""
    out: list[tuple[tuple[str, Any], ...]] = [()]
    for axis in CELL_AXES:
        out = [(*c, (axis, v)) for c in out for v in study.grid.values(axis)]
    same = {"dv": "d", "value_heads": "heads"}  # an empty axis: as many as its partner
    return [Cell(**{a: (v or dict(c)[same[a]]) if a in same else v for a, v in c}) for c in out]


@dataclass
class Memory:
    """A resolved memory: the object (with its feature map), its variant's label in results, its full description,
    its behavioural fingerprint and the user's code and files it runs."""

    obj: Variant
    label: str
    description: Any  # provenance.describe: JSON
    behaviour: dict[str, Any]  # provenance.behaviour: JSON
    code: dict[str, Any]


class Plan:
    """A study resolved for one run on ``device``: memories built and fingerprinted, every cell keyed.

    ``imports``: the modules the run imports first (``--import``); their code is part of every key."""

    def __init__(self, study: Study, device: torch.device, imports: Sequence[str] = ()) -> None:
        kind = cast(str, study.task.kind)  # cast: a study's task has a kind (Study.__post_init__)
        self.study, self.device, self.task = study, device, tasks_get(kind)
        self.cells = cells(study)
        self.labels: dict[Spec, str] = {}
        for spec in study.grid.variant:  # one label per memory, the same from an object, a name or a path
            label = _label(spec)
            if label in self.labels.values():
                other = next(s for s, lab in self.labels.items() if lab == label)
                raise CapacityError(
                    f"variants {other.label!r} and {spec.label!r} are the same memory (both are labelled {label!r}); list it once, or give a class a params property that tells its objects apart"
                )
            self.labels[spec] = label
        self._memories: dict[tuple[Spec, Spec | None], Memory] = {}
        for c in self.cells:
            if (c.variant, c.feature) not in self._memories:
                self._memories[c.variant, c.feature] = self._resolve(c.variant, c.feature)
        self.families = {kd: provenance.family(*kd) for kd in dict.fromkeys((c.keys, c.d) for c in self.cells)}
        objects = [m.obj for m in self._memories.values()] + [
            f.draw for f in map(keys_mod.family, {c.keys.name for c in self.cells})
        ]
        self.code = {"package": provenance.package(), "imports": provenance.user_code((), list(imports))}
        self.libraries = provenance.libraries(objects)
        self.numerics = provenance.numerics(device)
        self.schema = self.task.schema(study)
        self.coords = {k: list(v) for k, v in {**self.schema.dims, **self.schema.extra}.items() if k != "seed"}
        self.keys = {c: reuse_key(self.identity(c)) for c in self.cells}  # each cell's file in the store
        self._timed: dict[tuple[Spec, Spec | None, int, int], tuple[float, float]] = {}  # probe.write_seconds

    def identity(self, cell: Cell) -> dict[str, Any]:  # JSON
        """Everything that computes ``cell``'s numbers: the store names the cell's file by its hash (``reuse_key``).

        Covered: the probe settings (kind, value family, decode, ...); the cell's axes (d, dv, dtype, state dtype and rounding, head layout,
        key family and feature map with their parameters); the memory's full state (``provenance.describe``: every attribute, not
        only ``params``), its behavioural fingerprint (``provenance.behaviour``: the bits of a tiny fixed probe), the
        user's code it runs (``provenance.user_code``: the modules of its class, feature map, factory or import path
        and every module of the user's they import) and the files its parameters name; the key family's fingerprint,
        code and files; the seeds and pair counts when a point's numbers depend on the other points of its pass
        (``per_seed``, ``per_n``) and the kind's other coordinates (``coords``); the package's sources and data files and the ``--import`` modules'
        code; the versions of the numeric libraries loaded and of the distributions that hold plug-ins; the device
        and its numeric settings; and the store adds its layout. Not covered (docs/sweeps.md): torch's thread count (the built-in memories give the same bits
        on any), and a change that the tiny probe does not show in a file or library none of the above names.
        """
        plan, study, memory = self, self.study, self.memory(cell)
        label: Callable[[Spec | None], str | None] = lambda spec: None if spec is None else spec.label
        return {
            "probe": study.task.to_json(),
            "cell": {a: label(v) if isinstance(v, Spec) or v is None else v for a, v in cell.items() if a != "variant"},
            "memory": {"description": memory.description, "behaviour": memory.behaviour["bits"], **memory.code},
            "keys": {k: v for k, v in plan.families[cell.keys, cell.d].items() if k != "prefix_stable"},
            "seeds": None if plan.per_seed(cell) else list(study.grid.seed),
            "ns": None if plan.per_n(cell) else sorted(set(study.grid.ns(cell.d))),
            "coords": plan.coords,
            "code": plan.code,
            "libraries": plan.libraries,
            "numerics": plan.numerics,
        }

    def _resolve(self, variant: Spec, feature: Spec | None) -> Memory:
        """Build a memory, describe it, run its behavioural probe, and hash the user's code it runs."""
        with _opened.recording() as opened:  # files the user's code reads while built and fingerprinted
            obj = variants_mod.build(variant, feature)
            behaviour = provenance.behaviour(obj, self.device)  # first: what it imports lazily is then loaded
        mp = getattr(obj, "feature", None)
        objects = [obj] + ([mp] if mp is not None and not isinstance(mp, str) else [])
        if variant.obj is None and ":" not in variant.name and variant.name not in variants_mod.BUILT_IN:
            objects.append(variants_mod._factory(variant.name))  # registered by a plug-in
        paths = [variant.name.partition(":")[0]] if variant.obj is None and ":" in variant.name else []
        code = {"user": provenance.user_code(objects, paths), "files": provenance.spec_files(variant, feature)}
        if opened:  # only then: the keys of memories that read no file stay as they were
            code["opened"] = provenance.files(opened)
        return Memory(obj, self.labels[variant], provenance.describe(obj), behaviour, code)

    def memory(self, cell: Cell) -> Memory:
        return self._memories[cell.variant, cell.feature]

    def work(self, p: Pass[Any]) -> float:
        """Multiply-adds of the pass's writes and argmax scores (to schedule the largest first, and to estimate)."""
        queries = self.task.queries(self.study)  # reads per pair count (0: every stored pair)
        scores = sum(min(c, queries or c) * c for c in set(p.ns))  # each read against the c stored values
        return len(p.seeds) * (max(p.ns) * p.cell.d * p.cell.dv + scores * p.cell.dv)

    def cost(self, p: Pass[Any]) -> float:
        """``work(p)`` with its writes scaled by the memory's state per batch item over d x dv (a write touches its
        whole state: log_linear's levels at large n, ttt's expand), at least 1."""
        c, n = p.cell, max(p.ns)
        try:
            numel = guard(self.memory(c).obj).state_numel(c.d, c.dv, n=n)
        except CapacityError:  # a memory whose size cannot be read: the writes as counted
            numel = c.d * c.dv
        scale = max(1.0, numel / (c.d * c.dv))
        writes = len(p.seeds) * n * c.d * c.dv
        return self.work(p) + (scale - 1.0) * writes

    def seconds(self, p: Pass[Any], rate: float) -> float:
        """Estimated seconds of ``p``'s writes and reads on one CPU core: its multiply-adds (``cost``) at ``rate`` a
        second, or, where they take longer, its writes as timed on this machine just now (``probe.write_seconds``,
        once per memory, d and dv: a write that streams a large state runs far below the multiply-add rate, ttt's
        at expand 4096) and its reads at ``rate``. Asked after the run checked that its largest pass fits."""
        c = p.cell
        at = (c.variant, c.feature, c.d, c.dv)
        if at not in self._timed:
            self._timed[at] = probe.write_seconds(p.memory, c.d, c.dv, self.device)
        per_call, per_token = self._timed[at]
        T, block = self.task.writes(self.study, list(p.ns)), probe.BLOCK
        # as the probe writes: whole blocks into the state, the rest of a checkpoint's pairs into a copy
        tokens = T + sum(n % block for n in set(p.ns) if n < T)
        calls = T // block + sum(1 for n in set(p.ns) if n % block)
        reads = self.work(p) - len(p.seeds) * max(p.ns) * c.d * c.dv
        timed = len(p.seeds) * (tokens * per_token + calls * per_call) + reads / rate
        return max(self.cost(p) / rate, timed)

    def user_modules(self) -> list[str]:
        """The user's modules whose code is in the keys (the memories', the key families', the ``--import`` ones)."""
        names = {m for memory in self._memories.values() for m in memory.code["user"]} | set(self.code["imports"])
        return sorted(names | {m for fam in self.families.values() for m in fam["code"]})

    def object(self, variant: Spec) -> Variant:
        """The memory ``variant`` names, as built for the study's first feature map (or none)."""
        return next(m.obj for (v, _), m in self._memories.items() if v == variant)

    def per_seed(self, cell: Cell) -> bool:
        """Each seed's points are stored on their own (the memory is batch-invariant, the kind measures points)."""
        return self.task.per_point and self.memory(cell).behaviour["batch_invariant"]

    def per_n(self, cell: Cell) -> bool:
        """Each n's points are stored on their own: the kind measures points and the keys of n pairs do not depend on
        the largest n drawn (families drawn per n, or whose prefixes are draws)."""
        iid = keys_mod.family(cell.keys.name).iid_rows
        return self.task.per_point and (not iid or self.families[cell.keys, cell.d].get("prefix_stable", False))

    def passes(self, have: Mapping[Cell, set[tuple[int, int]]]) -> list[Pass[Any]]:
        """The passes (each on the plan's device, with its cell's memory) that measure every point not in ``have`` (cell -> set of stored (seed, n)).

        Seeds missing the same pair counts share a pass; a family drawn per n (``iid_rows`` False) gets a pass per n.
        """
        out = []
        for c in self.cells:
            want = {(s, n) for s in self.study.grid.seed for n in set(self.study.grid.ns(c.d))}
            missing = want - have.get(c, set())
            if not missing:
                continue
            if not (self.per_seed(c) and self.per_n(c)):  # the cell is measured (and stored) whole
                missing = want
            by_seed: dict[int, set[int]] = {}
            for s, n in missing:
                by_seed.setdefault(s, set()).add(n)
            together: dict[tuple[int, ...], list[int]] = {}
            for s, got in by_seed.items():
                together.setdefault(tuple(sorted(got)), []).append(s)
            for ns, listed in together.items():
                by_n = self.task.per_point and (self.task.pass_per_n or not keys_mod.family(c.keys.name).iid_rows)
                split = [(n,) for n in ns] if by_n else [ns]
                seeds = tuple(s for s in self.study.grid.seed if s in listed)
                # a task whose passes are long (it trains) saves each seed's point as it ends, where it may
                by_seed_too = self.task.pass_per_n and self.per_seed(c) and self.per_n(c)
                groups = [(s,) for s in seeds] if by_seed_too else [seeds]
                memory = self.memory(c).obj
                out += [Pass(self.study, c, memory, g, part, self.device) for g in groups for part in split]
        return out

    def draw_seconds(self, p: Pass[Any]) -> float:
        """Estimated seconds of a pass's key draws (families with a ``cost``: learned keys optimise)."""
        fam = keys_mod.family(p.cell.keys.name)
        draws = p.ns[-1:] if fam.iid_rows else p.ns  # one draw per pass, or per n (lacapacity.tasks.recall)
        return (
            0.0 if fam.cost is None else sum(fam.cost(len(p.seeds), n, p.cell.d, **p.cell.keys.kwargs) for n in draws)
        )


def _label(spec: Spec) -> str:
    """The label of the memory ``spec`` names, without a feature map: ``lacapacity.variants.label`` of the object."""
    try:
        return variants_mod.label(variants_mod.build(spec))
    except CapacityError:  # a variant that needs its feature map to be built (normalize_read): the label as given
        return spec.label
