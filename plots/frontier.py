"""The recall-memory frontier: capacity against the bytes a memory keeps, every memory on one pair of axes.

For each memory (variant, with its feature map) and key dimension d, the capacity at each criterion (mean error
<= eps, argmax recall >= tau; ``lacapacity.metrics.capacity``, mean over seeds with standard-error bars) against the bytes
of everything its state holds (``lacapacity.variants.precision.state_bytes``: every state tensor, lsq's d x d matrix included,
at the Dataset's ``state_dtype``, float32 when it has none), per sequence and head; for softmax's cache, at its
capacity n*: n* (d + dv) numbers. T8 bounds every linear read: no D x dv state keeps mean error <= eps past
n* = D / (1 - eps), which in bytes b = s D dv (s bytes a number) is the line n* = b / (s dv (1 - eps)), one per
value dimension dv. Softmax keeps every pair (T13): n = b / (s (d + dv)).

A third panel puts trained results beside the training-free ceiling, in bytes: Based's Fig. 2 (arXiv 2402.18668),
MQAR accuracy of trained Based, Mamba, attention and sliding-window attention models against their recurrent state
size (``lacapacity.tasks.published``, ``plots.published.trained_points``), and the additive memory's T10 accuracy on the
same test mix for one float32 d x d state (``plots.published.mqar_ceiling``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lacapacity import theory, variants
from lacapacity.errors import CapacityError
from lacapacity.plots import _data, names, published, theme
from lacapacity.plots.capacity_vs_d import EPS, TAU
from lacapacity.tasks import metrics
from lacapacity.variants import precision
from lacapacity.variants.declares import declared

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from lacapacity.variants import Variant


def _built(label: str) -> Variant | None:
    """The variant a label names, or None when it cannot be built here."""
    try:
        return variants.resolve(label)
    except CapacityError:
        return None


def _bytes(v: Variant | None, d: int, dv: int, dtype: str) -> tuple[Callable[[float], float] | None, bool]:
    """(bytes kept by the built variant ``v`` after n writes, as a function of n; grows): for a fixed state, every
    state tensor at ``dtype``; for a state that grows (declared ``state="growing"``), ``state_numel(d, dv, n=n)`` numbers at
    ``dtype`` (softmax's cache n (d + dv), log-linear's floor(log2 n) + 1 levels of d dv), linear between whole n
    (a capacity averaged over seeds need not be whole); None when unknown."""
    if v is None:
        return None, False
    size = precision.itemsize(dtype)
    if declared(v).state == "growing":

        def grown(n: float) -> float:
            lo = max(int(math.floor(n)), 0)
            # a state that grows (it has numel) takes n, which the Variant protocol's state_numel does not name
            a = v.state_numel(d, dv, n=lo)  # type: ignore[call-arg]
            return size * (a + (n - lo) * (v.state_numel(d, dv, n=lo + 1) - a)) if n > lo else size * a  # type: ignore[call-arg]

        try:
            grown(1.0)
        except (CapacityError, TypeError, ValueError):
            return None, True
        return grown, True
    try:
        kept = float(precision.state_bytes(v, d, dv, dtype))
    except (CapacityError, TypeError, ValueError):
        return None, False
    return (lambda n: kept), False


def frontier(ds: xr.Dataset, *, eps: float = EPS, tau: float = TAU, published: bool = False) -> Figure:
    """The frontier figure of a result Dataset (dims ``variant``, ``d``, ``load``; variables ``mse``, ``recall``).

    x is the state's bytes given to d at the memory's own dv: bytes / (s dv), the key dimension of one linear d x dv
    state of the same bytes (s bytes a number). A memory is so compared with the linear state its bytes would buy at
    its own value width, whatever shape it spends them on: one that holds two d x dv states sits at x = 2d, beside
    a linear state of key dimension 2d. ``published``: add the panel of trained models' results in bytes (Based,
    Fig. 2), on its own x range; a study asks for it with ``Study(figures={"frontier": {"published": True}})``.
    """
    _data.require(ds, "frontier", variables=("mse", "recall"), coords=("n", "dv"), dims=("variant", "d", "load"))
    if ds.sizes.get("key_family", 1) != 1:
        raise CapacityError(
            "the frontier figure draws one key family; select one first, e.g. ds.sel(key_family='gaussian')"
        )
    if not isinstance(published, bool):
        raise CapacityError(f"frontier: published must be True or False, got {published!r}")
    sub = ds.squeeze("key_family", drop=True) if "key_family" in ds.dims else ds
    dtype = (
        str(sub["state_dtype"].values) if "state_dtype" in sub.coords and sub["state_dtype"].ndim == 0 else "float32"
    )
    size = precision.itemsize(dtype)
    var_labels = [str(v) for v in sub["variant"].values]
    colors = theme.palette(var_labels)
    criteria = [
        ("mse", float(eps), f"mean error ≤ ε = {eps:g}"),
        ("recall", float(tau), f"argmax recall ≥ τ = {tau:g}"),
    ]
    skipped: list[str] = []
    several: list[str] = []  # memories that hold more than one d x dv state (declares.states)
    with theme.style():
        built = {v: _built(v) for v in var_labels}  # each memory resolved once
        for v in var_labels:
            held = declared(built[v]).states if built[v] is not None else 1
            if held > 1:
                several.append(f"{held} in {names.variant_name(v)}")
        # T13's cache line goes with softmax; other growing states (log-linear) are drawn at their own bytes
        growing = [v for v in var_labels if built[v] is not None and declared(built[v]).form == "softmax"]
        fig, axes = theme.figure(1, 3 if published else 2, height=theme.PANEL_H + 1.6)
        axes[0, 1].sharex(axes[0, 0])
        for c, (metric, thr, crit) in enumerate(criteria):
            ax = axes[0, c]
            cap = metrics.capacity(sub, metric=metric, threshold=thr)  # [variant, d, seed]
            rows: list[dict[str, object]] = []
            for v in var_labels:
                for d in [int(x) for x in sub["d"].values]:
                    dv = _data.dv_of(sub, d)
                    kept, _ = _bytes(built[v], d, dv, dtype)
                    if kept is None:
                        if v not in skipped:
                            skipped.append(v)
                        continue
                    for seed_cap in np.atleast_1d(cap.sel(variant=v, d=d).values):
                        if np.isfinite(seed_cap):  # the bytes given to d at this memory's own dv
                            rows.append(
                                {"variant": v, "d_bytes": kept(float(seed_cap)) / (size * dv), "capacity": seed_cap}
                            )
            df = pd.DataFrame(rows)
            if len(df):
                theme.curves(
                    ax,
                    df,
                    x="d_bytes",
                    y="capacity",
                    hue="variant",
                    name=names.variant_name,
                    err_style="bars",
                    colors=colors,
                )
            d_all = [int(x) for x in sub["d"].values]
            lo = float(df["d_bytes"].min()) if len(df) else float(min(d_all))
            hi = max(float(df["d_bytes"].max()) if len(df) else 0.0, 4.0 * max(d_all))
            x = np.geomspace(lo, hi, 48)
            if metric == "mse":  # T8 at equal bytes: one line for every dv, n* = (bytes / (s dv)) / (1 - eps)
                theme.theory_line(
                    ax,
                    x,
                    theory.rank_bound_capacity(thr, x),
                    theorem="T8",
                    label="T8 frontier of linear reads: n* = x / (1 − ε)",
                    color="0.15",
                )
            if growing:
                dv0 = _data.dv_of(sub, int(sub["d"].values[0]))
                d0 = int(sub["d"].values[0])
                theme.theory_line(
                    ax,
                    x,
                    x * dv0 / (d0 + dv0),
                    theorem="T13:cache",
                    label=f"softmax keeps every pair: n = x dv / (d + dv) (T13, d = {d0}, dv = {dv0})",
                    color=colors[growing[0]],
                    ls=":",
                )
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            ax.set_title(crit)
            ax.set_xlabel(f"d at equal bytes: state bytes / ({size} dv)")
        axes[0, 0].set_ylabel(names.AXIS["capacity"])
        axes[0, 1].set_ylabel("")
        if published:
            _trained_panel(axes[0, 2])
        theme.legend(fig, axes, title="memory / theory")
        nseeds = sub.sizes.get("seed", 1)
        text = (
            theme.SEEDS_NOTE
            + f" ({nseeds} seed{'s' if nseeds != 1 else ''}). Equal bytes: x gives a memory's state bytes to d at its"
            f" own dv, x = bytes / ({size} dv) ({dtype}, {size} bytes a number), the key dimension of one linear d × dv"
            " state of the same bytes; so T8 is one line for every dv, and a memory that spends its bytes on several"
            " d × dv states sits at several times d, beside the linear state those bytes buy."
            " The bytes count every tensor the state holds (lsq's d × d matrix included); a state that grows at its"
            " capacity n*: softmax's cache n* (d + dv) numbers (where its capacity lies on the grid: it keeps every"
            " pair, so it usually meets the criterion at every n measured), log-linear attention's floor(log2 n*) + 1"
            " levels of d dv numbers (state_numel(d, dv, n*))."
        )
        if several:
            text += f" Several d × dv states: {'; '.join(several)}."
        if published:
            text += (
                " Right: trained models' MQAR accuracy as read from Based's Fig. 2 (Arora et al., arXiv 2402.18668;"
                " capacity/data/based_figure2.csv, reading error ±0.01 in log2 bytes and ±0.003 in accuracy); its"
                " bytes count the paper's recurrent state, the T10 line one float32 d × d state on zoology's test mix"
                " (4-256 pairs, vocabulary 8,192)."
            )
        if skipped:
            text += f" Not drawn (no size known): {', '.join(skipped)}."
        theme.note(fig, text)
    return theme.finish(fig, "frontier")


def _trained_panel(ax: Axes) -> None:
    """Based's Fig. 2 trained points (Based, Mamba, attention, sliding-window attention) and the T10 ceiling, in bytes."""
    archs = ("Based", "Mamba", "Attention (full)", "Attention (sliding window)")
    drawn = published.trained_points(ax, "based_figure2", architectures=archs)
    xs = np.concatenate([line.get_xdata() for line in drawn])
    published.mqar_ceiling(ax, float(xs.min()) / 2, float(xs.max()) * 2)
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.03, 1.05)
    ax.set_xlabel("recurrent state size (bytes)")
    ax.set_ylabel("MQAR accuracy (fraction)")
    ax.set_title("trained (Based, Fig. 2) beside the ceiling")
