"""The kinds of study, one module each (``recall``, ``bill``, ``mqar``), and ``measure(task)``, what ``capacity.executors`` runs.

A kind module has ``PER_POINT`` (a point's numbers depend only on its cell, seed and n, so points are stored and
reused one by one), ``coords(study)`` (a cell's dimensions besides n: ``seed`` and the kind's own),
``variables(study)`` (name -> attrs), ``writes(study, ns)`` (pairs one pass writes),
``measure(study, cell, memory, seeds, ns, device) -> Dataset`` over (n, *coords) and
``theory_vars(study, n, d, dv)`` (closed forms for the assembled study); optionally ``check(study)`` and
``attrs(study)`` (attrs of the assembled Dataset).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import torch
import xarray as xr

from capacity import _opened, _validate, labels, plugins, probe, provenance, variants
from capacity import heads as heads_mod
from capacity import keys as keys_mod
from capacity.errors import CapacityError
from capacity.kinds import _shared, bill, mqar, needle, recall

__all__ = ["KINDS", "DESCRIPTIONS", "Probe", "measure", "prepare", "check", "check_memory", "rules"]

READ_FILES = "capacity_read_files"  # a pass's attr: JSON {path: sha256} of the files the memory read while measured
KINDS = {"recall": recall, "bill": bill, "mqar": mqar, "needle": needle}
DESCRIPTIONS = {
    "recall": "write the pairs, read every stored key back at each n: the metrics of capacity.probe.recall",
    "bill": "measured state/cache size and per-token decode time after n writes",
    "mqar": "multi-query associative recall (capacity.mqar): n distinct keys of a vocabulary, some overwritten",
    "needle": "needles among n haystack tokens, read after them (capacity.needle): recall against n and depth",
}


@dataclass(frozen=True)
class Probe:
    """How each point is measured.

    ``kind``: one of ``KINDS``; ``values``: the value family; ``key_stats``: also store ``capacity.keys.describe``
    statistics; ``decode``: measure argmax recall (c^2 dv per checkpoint, most of a large probe's work);
    ``repeats``: timed decode steps per point (bill); ``vocab``, ``overwrite`` (fractions of the keys written
    again, an axis) and ``distractors``: the MQAR task; ``age_bins``: also store each metric per age bin of the
    pairs (``probe.recall(age_bins=True)``: ``<metric>_age`` over geometric bins up to the grid's largest n);
    ``haystack`` (an axis: random, repeat, text), ``depth`` (an axis of needle depths in [0, 1]), ``needles`` and
    ``candidates`` (an axis of how many values an answer is decoded among): the needle task (``capacity.needle``);
    ``top_k``: also ``recall_at`` over a dimension ``k`` (recall: listwise recall from the same exact decode, T30);
    ``queries``: read a fixed seeded sample of this many stored pairs at each n (0: all; ``capacity.probe.recall``'s
    ``queries``), with standard errors as ``<metric>_se``.
    """

    kind: str = "recall"
    values: str = "gaussian"
    key_stats: bool = False
    decode: bool = True
    repeats: int = 20
    vocab: int = 1024
    overwrite: tuple = (0.0,)
    distractors: int = 0
    age_bins: bool = False
    haystack: tuple = ("random",)
    depth: tuple = (0.0, 0.25, 0.5, 0.75, 1.0)
    needles: int = 1
    candidates: tuple = (1024.0,)
    top_k: tuple = ()
    queries: int = 0

    def __post_init__(self):
        from capacity import values

        _validate.choice("probe kind", self.kind, DESCRIPTIONS)
        _validate.choice("value family", self.values, values.available())
        for name in ("key_stats", "decode", "age_bins"):
            if not isinstance(getattr(self, name), bool):
                raise CapacityError(f"{name} must be true or false, got {getattr(self, name)!r}")
        put = lambda name, value: object.__setattr__(self, name, value)
        ks = labels.split(self.top_k) if isinstance(self.top_k, str) else self.top_k
        ks = (ks,) if isinstance(ks, (int, float)) else tuple(ks)  # one number (nan too: refused below, by name)
        ks = tuple(_validate.positive_int("top_k", labels.scalar(x) if isinstance(x, str) else x) for x in ks)
        if len(set(ks)) != len(ks):
            raise CapacityError(f"top_k must list distinct whole numbers >= 1, got {self.top_k!r}")
        put("top_k", ks)
        put("repeats", _validate.positive_int("repeats", self.repeats))
        put("vocab", _validate.positive_int("vocab", self.vocab, minimum=2))
        put("distractors", _validate.positive_int("distractors", self.distractors, minimum=0))
        put("queries", _validate.positive_int("queries", self.queries, minimum=0))
        ows = labels.split(self.overwrite) if isinstance(self.overwrite, str) else self.overwrite
        ows = (ows,) if isinstance(ows, (int, float)) else tuple(ows)
        scalar = lambda x: labels.scalar(x) if isinstance(x, str) else x
        put("overwrite", tuple(_validate.in_range("overwrite", scalar(x), 0.0, 1.0) for x in ows))
        if not self.overwrite or len(set(self.overwrite)) != len(self.overwrite):
            raise CapacityError(f"overwrite must list distinct fractions in [0, 1], got {self.overwrite!r}")
        from capacity import needle

        def items(name):
            x = getattr(self, name)
            return labels.split(x) if isinstance(x, str) else ((x,) if isinstance(x, (int, float)) else tuple(x))

        put(
            "haystack", tuple(_validate.choice("haystack", str(h).strip(), needle.HAYSTACKS) for h in items("haystack"))
        )
        put("depth", tuple(float(x) for x in needle._floats("depth", [scalar(x) for x in items("depth")], 0.0, 1.0)))
        put("candidates", tuple(needle._candidates([scalar(x) for x in items("candidates")])))
        put("needles", _validate.positive_int("needles", self.needles))
        if not self.haystack or len(set(self.haystack)) != len(self.haystack):
            raise CapacityError(
                f"haystack must list distinct haystacks of {', '.join(needle.HAYSTACKS)}, got {self.haystack!r}"
            )

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), **{k: list(getattr(self, k)) for k in _LISTS}}

    def changed(self) -> list[str]:
        """The fields set away from their defaults."""
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) != f.default]


_LISTS = ("overwrite", "haystack", "depth", "candidates", "top_k")


def measure(task: dict) -> list[tuple[str, xr.Dataset]]:
    """Run the passes of one task: ``[(key, Dataset), ...]`` in their order. ``task``: {"study", "device": str,
    "imports": [module, ...], "passes": [(key, pass, memory object, threads), ...]}.

    ``imports`` are imported first (``--import``: plug-ins that register themselves on import); ``threads``: torch
    threads for that pass only (None: leave the setting alone). The passes share their draws (``_shared``): the
    sweep gives one task the passes that differ only in their memory.
    """
    plugins.import_modules(task.get("imports"))  # a module that fails is one line, here and in every worker
    study, before, out = task["study"], torch.get_num_threads(), []
    kind = KINDS[study.probe.kind]
    with _shared.shared():
        for key, p, memory, threads in task["passes"]:
            if threads:
                torch.set_num_threads(threads)
            try:
                with _opened.recording() as opened:  # files the memory reads (sweep.store checks them on reuse)
                    ds = kind.measure(study, p.cell, memory, list(p.seeds), list(p.ns), torch.device(task["device"]))
                if opened:
                    ds.attrs[READ_FILES] = json.dumps(provenance.files(opened), sort_keys=True)
                out.append((key, ds))
            finally:
                torch.set_num_threads(before)
    return out


def prepare() -> None:
    """Import what assembling a study needs later (scipy, for the closed forms): the sweep calls it while its
    workers measure, so that the import is off the critical path."""
    from capacity.theory import _common

    _common._scipy()


def check(study) -> None:
    """Check every name and parameter before any work, cheaply: variants are built (not run), key families check
    their parameters on two keys (learned keys optimise nothing), sizes are compared."""
    g = study.grid
    for v in g.variant:
        for f in g.feature or (None,):
            variants.build(v, f)
    for k in g.keys:
        fam = keys_mod.family(k.name)
        for d in g.d:
            fam.validate(d, k.kwargs)
            if k.name == "simplex" and max(g.ns(d)) > d + 1:
                raise CapacityError(
                    f"simplex keys exist for n <= d + 1; the grid asks for n = {max(g.ns(d))} at d = {d}"
                )
    for d in g.d:
        for dv in g.dv or (d,):
            for h in g.heads:
                for hv in g.value_heads or (h,):
                    heads_mod.check_layout(d, dv, h, hv)
            if study.probe.values == "orthonormal" and max(g.ns(d)) > dv:
                raise CapacityError(
                    f"orthonormal values need n <= dv; the grid asks for n = {max(g.ns(d))} with dv = {dv} at d = {d}"
                )
    getattr(KINDS[study.probe.kind], "check", lambda s: None)(study)


def check_memory(plan, passes, parallel: int = 1) -> None:
    """Refuse, in one line, a run whose largest pass (times the passes run at once) cannot fit in memory
    (``plan``: a ``capacity.sweep.plan.Plan``; ``passes``: its passes to run)."""
    if not passes:
        return
    study, kind = plan.study, KINDS[plan.study.probe.kind]
    peak = lambda p: probe.peak_bytes(
        plan.memory(p.cell).obj,
        len(p.seeds),
        kind.writes(study, list(p.ns)),
        p.cell.d,
        p.cell.dv,
        study.probe.key_stats,
    )
    need, worst = max((peak(p), i) for i, p in enumerate(passes))
    worst, need, have = passes[worst], need * parallel, _validate.available_bytes(plan.device)
    if have is not None and need > 0.9 * have:
        gib = lambda b: f"{b / 2**30:.1f} GiB"
        at_once = f" ({parallel} passes at once)" if parallel > 1 else ""
        n, T = max(worst.ns), kind.writes(study, list(worst.ns))
        tokens = f", {T} tokens written" if T != n else ""
        fewer = " (or fewer distractors)" if study.probe.kind == "mqar" and study.probe.distractors else ""
        raise CapacityError(
            f"the largest pass ({plan.memory(worst.cell).label}, {worst.cell.keys.label}, d = {worst.cell.d}, n up to {n}{tokens}) "
            f"needs about {gib(need)}{at_once} but {plan.device.type} has {gib(have)} available; use a smaller d, load or fewer seeds{fewer}"
        )


def rules(study) -> None:
    """What a study of its kind must be: the kind's own grid rules (its ``grid_rules``), and no grid axis or probe
    field set away from its default that belongs to other kinds alone (their ``GRID_AXES`` and ``FIELDS``)."""
    kind = KINDS[study.probe.kind]
    getattr(kind, "grid_rules", lambda s: None)(study)
    defaults = {f.name: f.default for f in dataclasses.fields(study.grid)}
    for name, k in KINDS.items():  # grid axes of one kind alone (its GRID_AXES), left at their defaults by the others
        axes = getattr(k, "GRID_AXES", ())
        if name != study.probe.kind and any(getattr(study.grid, a) != defaults[a] for a in axes):
            listed = f"{', '.join(axes[:-1])} and {axes[-1]}" if len(axes) > 1 else axes[0]
            raise CapacityError(f"{listed} apply to {name} studies only (kind={name})")
    owner = {f: name for name, k in KINDS.items() for f in getattr(k, "FIELDS", ())}
    wrong = [f for f in study.probe.changed() if owner.get(f, study.probe.kind) != study.probe.kind]
    if wrong:
        k = owner[wrong[0]]
        verb = "applies" if len(wrong) == 1 else "apply"
        raise CapacityError(f"{', '.join(wrong)} {verb} to {k} studies only (kind={k})")
