"""The recall task: write the pairs of every seed in one batched pass, read every stored key back at each n.

A cell's Dataset holds the probe's means (``lacapacity.probe.METRICS``) over ``n`` and ``seed``, with ``key_stats``
the statistics of ``lacapacity.keys.describe``, and with ``age_bins`` each metric per age bin (``<metric>_age`` over
``n``, ``seed`` and ``age``; ``pairs_age`` over ``n`` and ``age``); the assembled study adds the closed forms T5-T10.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
import torch

from lacapacity import theory
from lacapacity.base import _validate, labels
from lacapacity.errors import CapacityError
from lacapacity.inputs import keys as keys_mod
from lacapacity.inputs import values
from lacapacity.tasks import probe
from lacapacity.tasks._shared import drawn
from lacapacity.tasks.protocol import Config, GridView, Measured, Pass, Schema, StudyView, Task, Variable
from lacapacity.variants import heads, precision
from lacapacity.variants._guard import guard
from lacapacity.variants.declares import declared

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr
    from numpy.typing import NDArray


TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_ATTRS = ("long_name", "units", "description")
_STATS = {
    "mean_sq_coherence": (
        "mean squared coherence",
        "1",
        "mean over pairs i != j of (k_i . k_j)^2 (1/d for random keys, T7)",
    ),
    "max_coherence": ("max coherence", "1", "max over pairs i != j of |k_i . k_j| (never below the T6 Welch bound)"),
    "frame_potential_ratio": ("frame potential / (n^2/d)", "1", "||K^T K||_F^2 / (n^2/d); 1 iff a tight frame (T5)"),
    "effective_rank": ("effective rank", "dimensions", "participation ratio (tr K^T K)^2 / ||K^T K||_F^2"),
}
# the closed forms stored with a recall study (Task.theory): variable -> units; the function of each is
# RecallTask.closed_forms', which a figure that draws one on a finer grid calls (lacapacity.plots.error_vs_load)
_UNITS = {
    "frame_bound": "value units^2",
    "welch_bound": "1",
    "random_keys_error": "value units^2",
    "rank_bound": "value units^2",
    "optimal_gain_error": "value units^2",
}


_FINITE = (
    "recall",
    "recall_at",
    "recall_recent",
)  # fractions of counts, never NaN when measured: a stored NaN is not reused
_LAYOUT = {
    "state_dtype": "dtype the state is stored in (lacapacity.variants.precision; float32: as computed)",
    "rounding": "when the stored state is rounded: step, final or chunk=C (+stochastic)",
    "heads": "key heads H, each of d/H dimensions normalised on its own (lacapacity.variants.heads)",
    "value_heads": "value heads HV, each of dv/HV dimensions",
}


def _tuple(x: str | float | Iterable[Any]) -> tuple[Any, ...]:
    """A list setting from a command-line word (``"1,5"``), one value or a sequence."""
    x = labels.split(x) if isinstance(x, str) else x
    return (x,) if isinstance(x, (int, float)) else tuple(x)


@dataclass(frozen=True)
class Recall(Config):
    """How the recall task measures each point.

    ``values``: the value family; ``key_stats``: also store ``lacapacity.keys.describe`` statistics; ``decode``:
    measure argmax recall (c^2 dv per checkpoint, most of a large probe's work); ``age_bins``: also store each
    metric per age bin of the pairs (``probe.recall(age_bins=True)``: ``<metric>_age`` over geometric bins up to the
    grid's largest n); ``top_k``: also ``recall_at`` over a dimension ``k`` (listwise recall from the same exact
    decode, T30); ``queries``: read a fixed seeded sample of this many stored pairs at each n (0: all;
    ``lacapacity.probe.recall``'s ``queries``), with standard errors as ``<metric>_se``; ``recent``: also each metric
    over the last this many pairs written, every one of them, as ``<metric>_recent`` (0: not measured;
    ``lacapacity.probe.recall``'s ``recent``): what a memory that forgets still holds.
    """

    kind: ClassVar[str] = "recall"
    values: str = "gaussian"
    key_stats: bool = False
    decode: bool = True
    age_bins: bool = False
    top_k: tuple[int, ...] = ()
    queries: int = 0
    recent: int = 0

    def __post_init__(self) -> None:
        check_values(self.values)
        for name in ("key_stats", "decode", "age_bins"):
            if not isinstance(getattr(self, name), bool):
                raise CapacityError(f"{name} must be true or false, got {getattr(self, name)!r}")
        ks = tuple(
            _validate.positive_int("top_k", labels.scalar(x) if isinstance(x, str) else x) for x in _tuple(self.top_k)
        )
        if len(set(ks)) != len(ks):
            raise CapacityError(f"top_k must list distinct whole numbers >= 1, got {self.top_k!r}")
        object.__setattr__(self, "top_k", ks)
        object.__setattr__(self, "queries", _validate.positive_int("queries", self.queries, minimum=0))
        object.__setattr__(self, "recent", _validate.positive_int("recent", self.recent, minimum=0))


_STATE_NUMEL = (
    "state size",
    "numbers per batch item",
    "numbers the state keeps after n writes: numel(state) for a state that grows, state_numel(d, dv) otherwise",
)


def grows(study: StudyView[Config]) -> bool:
    """True when a memory of the study keeps a state that grows (it declares ``state="growing"``, as softmax and
    log_linear do): every cell then records ``state_numel`` per point. Studies of fixed states record nothing new."""
    from lacapacity import variants

    g = study.grid
    return any(declared(variants.build(v, f)).state == "growing" for v in g.variant for f in (g.feature or (None,)))


def check_values(family: str) -> None:
    """A value family by name (``lacapacity.values.available()``)."""
    _validate.choice("value family", family, values.available())


def check_values_fit(study: _ValuedStudy) -> None:
    """Orthonormal values exist for n <= dv: refuse a grid that asks for more, in one line."""
    g = study.grid
    if study.task.values == "orthonormal":
        for d in g.d:
            for dv in g.dv or (d,):
                if max(g.ns(d)) > dv:
                    raise CapacityError(
                        f"orthonormal values need n <= dv; the grid asks for n = {max(g.ns(d))} with dv = {dv} at d = {d}"
                    )


class _Valued(Protocol):
    @property
    def values(self) -> str: ...


class _ValuedStudy(Protocol):
    """A study whose task draws values of a family (recall's, bill's): what ``check_values_fit`` reads."""

    @property
    def grid(self) -> GridView: ...
    @property
    def task(self) -> _Valued: ...


def age_edges(study: StudyView[Config]) -> list[int]:
    """The age bins of an ``age_bins`` study: geometric (``probe.age_edges``) up to its largest n."""
    return probe.age_edges(max(max(study.grid.ns(d)) for d in study.grid.d))


class RecallTask(Task[Recall]):
    """Write the pairs, read every stored key back at each n: the metrics of ``lacapacity.probe.recall``.

    A cell's Dataset holds the probe's means (``lacapacity.probe.METRICS``) over ``n`` and ``seed``, with ``key_stats``
    the statistics of ``lacapacity.keys.describe``, with ``age_bins`` each metric per age bin (``<metric>_age`` over
    ``n``, ``seed`` and ``age``; ``pairs_age`` over ``n`` and ``age``), with ``top_k`` ``recall_at`` over ``k`` and
    with ``queries`` standard errors ``<metric>_se``, with ``recent`` ``<metric>_recent``; the assembled study adds the closed forms T5-T10.
    """

    name = "recall"
    description = "write the pairs, read every stored key back at each n: the metrics of lacapacity.probe.recall"
    Config = Recall
    per_point = True  # the probe writes in fixed blocks: a point's numbers depend on its cell, seed and n alone
    key_axis = True
    grid_axes = ("state_dtype", "rounding", "heads", "value_heads")
    closed_forms = {  # T5-T9 of (n, d), T10 of (n, d, dv)
        "frame_bound": theory.frame_bound,
        "welch_bound": theory.welch_bound,
        "random_keys_error": theory.random_keys_error,
        "rank_bound": theory.rank_bound,
        "optimal_gain_error": theory.optimal_gain_error,
        "argmax_recall_pred": theory.argmax_recall,
    }

    def check_grid(self, study: StudyView[Recall]) -> None:
        """``queries`` reads a sample: it does not combine with what describes or bins every stored pair."""
        p = study.task
        if p.queries and (p.key_stats or p.age_bins or p.top_k):
            raise CapacityError(
                "queries reads a sample of the stored pairs; it does not combine with key_stats, age_bins or top_k"
            )

    def check(self, study: StudyView[Recall]) -> None:
        check_values_fit(study)

    def schema(self, study: StudyView[Recall]) -> Schema:
        p, g = study.task, study.grid
        metrics = {m: meta for m, meta in probe.METRICS.items() if m != "recall" or p.decode}
        names, dims = dict(metrics), dict[str, tuple[str, ...]]()
        if p.key_stats:
            names.update(_STATS)
        if p.top_k:
            names["recall_at"] = probe.RECALL_AT
            dims["recall_at"] = ("seed", "k")
        if p.queries:  # standard errors of the sampled means
            names.update({f"{m}_se": probe.se_meta(m, p.queries) for m in metrics})
        if p.recent:  # the means over the last pairs written
            names.update({probe.RECENT[m]: probe.recent_meta(m, p.recent) for m in metrics})
        if p.age_bins:
            names.update({probe.PER_AGE[m]: probe.age_meta(m) for m in metrics})
            names["pairs_age"] = probe.PAIRS_AGE
            dims.update({probe.PER_AGE[m]: ("seed", "age") for m in metrics})
            dims["pairs_age"] = ("age",)
        if grows(study):
            names["state_numel"] = _STATE_NUMEL
        variables = {
            m: Variable(dims.get(m, ("seed",)), dict(zip(_ATTRS, meta)), finite=m in _FINITE)
            for m, meta in names.items()
        }
        extra = {"age": age_edges(study)[:-1]} if p.age_bins else {}
        extra = {**extra, "k": list(p.top_k)} if p.top_k else extra
        return Schema({"seed": list(g.seed)}, variables, extra=extra, coords=self._coords(study))

    def _coords(self, study: StudyView[Recall]) -> dict[str, tuple[str | tuple[str, ...], Any, dict[str, str]]]:
        """How the state is stored and laid out (a dimension where the grid lists several values, else a scalar), and
        with ``age_bins`` each age bin's end."""
        g, out = study.grid, dict[str, tuple[str | tuple[str, ...], Any, dict[str, str]]]()
        for axis, desc in _LAYOUT.items():
            values: tuple[Any, ...] = getattr(g, axis)
            if axis == "value_heads" and not values:  # as many as key heads
                axis_of: tuple[str, ...] = ("heads",)
                values, desc = g.heads, desc + " (= heads)"
            else:
                axis_of = (axis,)
            out[axis] = (
                (axis_of, list(values), {"description": desc})
                if len(values) > 1
                else ((), values[0], {"description": desc})
            )
        if study.task.age_bins:
            edges = age_edges(study)
            out["age"] = ("age", edges[:-1], {"long_name": "pair age", "units": "writes"})
            out["age_end"] = ("age", edges[1:], {"long_name": "end of the age bin", "units": "writes"})
        return out

    def writes(self, study: StudyView[Recall], ns: list[int]) -> int:
        """Pairs one pass writes."""
        return max(ns)

    def measure(self, run: Pass[Recall]) -> Measured:
        """Draw keys and values for every seed at once, write them, read back at every n.

        Every point's numbers depend on its cell, seed and n alone: families whose prefixes are draws are drawn once at
        the largest n (the others at each n), orthonormal values always as dv rows (their prefixes are then the same
        for every n), and the probe writes in fixed blocks (``probe.BLOCK``).
        """
        study, cell, seeds = run.study, run.cell, list(run.seeds)
        fam, dtype = keys_mod.family(cell.keys.name), TORCH_DTYPES[cell.dtype]
        # the state as stored (float32: the memory itself), then the head layout (one head: the memory itself)
        memory = precision.stored(run.memory, cell.state_dtype, cell.rounding, seed=list(seeds))
        memory = heads.split(memory, cell.heads, cell.value_heads)
        draw = dict(batch=len(seeds), seed=seeds, device=run.device)
        width = cell.dv if study.task.values == "orthonormal" else max(run.ns)
        V = drawn(values.make, study.task.values, width, cell.dv, **draw).to(dtype)  # [S, >= n_max, dv]
        make_keys: Callable[[int], torch.Tensor] = lambda n: drawn(
            keys_mod.make, cell.keys.name, n, cell.d, **draw, **cell.keys.kwargs
        ).to(dtype)
        order = sorted(set(run.ns))
        passes = [order] if fam.iid_rows else [[n] for n in order]  # else a fresh tight frame per n
        edges = age_edges(study) if study.task.age_bins else None
        schema = self.schema(study)
        sized = "state_numel" in schema.variables  # a memory of the study grows (grows(study), decided once)
        parts: dict[str, list[NDArray[Any]]] = {m: [] for m in schema.variables}  # per pass, over (its ns, ...)
        attrs = {}
        for at in passes:
            K = make_keys(max(at))
            cv = probe.measure(
                memory,
                K,
                V[:, : max(at)],
                checkpoints=at,
                decode=study.task.decode,
                age_bins=edges,
                top_k=study.task.top_k or None,
                queries=study.task.queries or None,
                recent=study.task.recent or None,
            )
            # the probe's arrays over (checkpoint = n, seed, ...) are the pass's: no copy, no row by row
            got = {**cv.metrics, **{f"{m}_se": x for m, x in cv.se.items()}}
            got.update({probe.RECENT[m]: x for m, x in cv.recent.items()})  # [C, S]
            got.update({probe.PER_AGE[m]: x for m, x in cv.per_age.items()})  # [C, S, A]
            if edges is not None:
                bins = list(zip(edges, edges[1:]))
                got["pairs_age"] = np.array([[max(0, min(b, n) - a) for a, b in bins] for n in at])  # [C, A]
            if sized:  # the same for every seed: the state after n writes
                sizes = cv.sizes or [guard(memory).state_numel(cell.d, cell.dv)] * len(at)
                got["state_numel"] = np.repeat(np.asarray(sizes, dtype=np.float64)[:, None], len(seeds), axis=1)
            if study.task.key_stats:
                stats = [keys_mod.statistics(K[:, :n].float()) for n in at]  # describe's numbers, no Dataset
                got.update({s: np.stack([x[s] for x in stats]) for s in _STATS})  # [C, S]
            for m in parts:
                parts[m].append(got[m])
            if cv.feature_dim is not None:
                attrs["feature_dim"] = int(cv.feature_dim)
        arrays = {
            m: (xs[0] if len(xs) == 1 else np.concatenate(xs)).astype(schema.variables[m].dtype, copy=False)
            for m, xs in parts.items()
        }
        return Measured(arrays, attrs)

    def theory(
        self, study: StudyView[Recall], n: NDArray[np.int64], d: NDArray[np.int64], dv: NDArray[np.int64]
    ) -> dict[str, tuple[float | NDArray[Any], dict[str, Any]]]:
        """T5-T9 from n and d, T10 from n, d and dv (arrays that broadcast); each described by its function's first
        docstring line (empty under ``python -OO``, which strips docstrings)."""

        about: Callable[[Callable[..., Any]], str] = lambda fn: (fn.__doc__ or "").split("\n")[0]
        forms = self.closed_forms
        out = {
            name: (forms[name](n, d), {"units": units, "description": about(forms[name])})
            for name, units in _UNITS.items()
        }
        fn = forms["argmax_recall_pred"]
        out["argmax_recall_pred"] = (
            fn(n, d, dv),
            {"long_name": "predicted argmax recall", "units": "fraction", "description": about(fn)},
        )
        return out

    def attrs(self, study: StudyView[Recall]) -> dict[str, Any]:
        return {}

    def figures(self, ds: xr.Dataset) -> list[str]:
        """From what ``ds`` holds: closed-form for the per-query reads of ``lacapacity.plots.measure_closed_form``;
        log-linear for the log-linear study; precision for several state dtypes over n; heads for several head
        counts over load; forgetting for per-age variables (alone when the curve axis has one point); feature-maps
        for a feature axis; orthogonality for key statistics (with pretrained keys, their own panels); the variants
        overlay for several memories on one key family (else the error-vs-load panels, key families as colours);
        capacity against d for several d, and the frontier beside the overlay."""

        def several(dim: str) -> bool:
            return ds.sizes.get(dim, 0) > 1

        def has(*names: str) -> bool:
            return all(n in ds.data_vars for n in names)

        if ds.attrs.get("study") == "closed-form":
            return ["closed-form"]
        if ds.attrs.get("study") == "log-linear" and has("recall", "state_numel") and "n" in ds.dims:
            return ["log-linear"]  # log-linear attention beside its base at the same bytes
        if has("mse") and several("state_dtype") and "n" in ds.dims:
            return ["precision"]
        if has("mse") and several("heads") and "load" in ds.dims and "value_heads" not in ds.dims:
            return ["heads"]
        ages = ["forgetting"] if has("signal_age", "mse_age") and "variant" in ds.dims else []
        if ages and not several("load"):  # one point on the curve: the age figure is the figure
            return ages
        if not (has("mse") and "d" in ds.dims and "load" in ds.dims):
            return []
        if "feature" in ds.dims:
            return ["feature-maps"]
        chosen = list(ages)
        if has("mean_sq_coherence", "effective_rank"):
            families = [str(k) for k in ds["key_family"].values.ravel()] if "key_family" in ds.coords else []
            if ds.attrs.get("study") == "pretrained-keys" or any(f.startswith("pretrained") for f in families):
                return ["pretrained-keys", "orthogonality"]  # its panels hold the error against load too
            chosen.append("orthogonality")
        overlay = several("variant") and not several("key_family") and has("recall")
        chosen.append("variants" if overlay else "error-vs-load")
        if several("d") and has("recall"):
            chosen.append("capacity")
            if overlay:
                chosen.append("frontier")
        return chosen

    def queries(self, study: StudyView[Recall]) -> int:
        return study.task.queries

    def key_stats(self, study: StudyView[Recall]) -> bool:
        return study.task.key_stats
