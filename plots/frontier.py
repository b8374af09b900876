"""The recall-memory frontier: capacity against the numbers a memory keeps, every memory on one pair of axes.

For each memory (variant, with its feature map) and key dimension d, the capacity at each criterion (mean error
<= eps, argmax recall >= tau; ``capacity.metrics.capacity``, mean over seeds with min-max bars) against the size of
the state it reads, per value dimension: D for a linear read of a D x dv state (D the feature dimension: d, or a
feature map's), and for softmax's cache at its capacity n* (d + dv) / dv. T8 bounds every linear read: no D x dv
state keeps mean error <= eps past n* = D / (1 - eps), the frontier; the least-squares memory (lsq) reaches it.
Softmax keeps every pair (T13): n = N / (d + dv) for N numbers. (lsq also keeps a d x d matrix for its update,
which this axis does not count; the note says so.)

A third panel puts trained results beside the training-free ceiling, in bytes: Based's Fig. 2 (arXiv 2402.18668),
MQAR accuracy of trained Based, Mamba, attention and sliding-window attention models against their recurrent state
size (``capacity.published``, ``plots.published.trained_points``), and the additive memory's T10 accuracy on the
same test mix for one float32 d x d state (``plots.published.mqar_ceiling``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from capacity.plots import _data, names, published, theme
from capacity.plots.capacity_vs_d import EPS, TAU

from capacity import metrics, theory, variants
from capacity.errors import CapacityError

__all__ = ["frontier"]


def _built(label: str):
    """The variant a label names, or None when it cannot be built here."""
    try:
        return variants.resolve(label)
    except CapacityError:
        return None


def _rows(v, d: int, dv: int):
    """(state rows D = numbers read per value dimension, grows) of the built variant ``v``: D for a fixed D x dv state;
    for a cache that grows, (d + dv) / dv per pair kept; None when unknown."""
    if v is None:
        return None, False
    if getattr(v, "linear_read", False) is True:
        return float(v.feature_dim(d) if callable(getattr(v, "feature_dim", None)) else d), False
    if callable(getattr(v, "numel", None)):
        return (d + dv) / dv, True
    return None, False


def frontier(ds, *, eps: float = EPS, tau: float = TAU):
    """The frontier figure of a result Dataset (dims ``variant``, ``d``, ``load``; variables ``mse``, ``recall``)."""
    _data.require(ds, "frontier", variables=("mse", "recall"), coords=("n", "dv"), dims=("variant", "d", "load"))
    if ds.sizes.get("key_family", 1) != 1:
        raise CapacityError(
            "the frontier figure draws one key family; select one first, e.g. ds.sel(key_family='gaussian')"
        )
    sub = ds.squeeze("key_family", drop=True) if "key_family" in ds.dims else ds
    var_labels = [str(v) for v in sub["variant"].values]
    colors = theme.palette(var_labels)
    criteria = [
        ("mse", float(eps), f"mean error ≤ ε = {eps:g}"),
        ("recall", float(tau), f"argmax recall ≥ τ = {tau:g}"),
    ]
    skipped = []
    with theme.style():
        built = {v: _built(v) for v in var_labels}  # each memory resolved once
        growing = [v for v in var_labels if _rows(built[v], 16, 16)[1]]
        fig, axes = theme.figure(1, 3, height=theme.PANEL_H + 1.6)
        axes[0, 1].sharex(axes[0, 0])
        for c, (metric, thr, crit) in enumerate(criteria):
            ax = axes[0, c]
            cap = metrics.capacity(sub, metric=metric, threshold=thr)  # [variant, d, seed]
            rows = []
            for v in var_labels:
                for d in [int(x) for x in sub["d"].values]:
                    dv = _data.dv_of(sub, d)
                    size, grows = _rows(built[v], d, dv)
                    if size is None:
                        if v not in skipped:
                            skipped.append(v)
                        continue
                    for seed_cap in np.atleast_1d(cap.sel(variant=v, d=d).values):
                        if np.isfinite(seed_cap):
                            rows.append(
                                {"variant": v, "numbers": size * (seed_cap if grows else 1.0), "capacity": seed_cap}
                            )
            df = pd.DataFrame(rows)
            if len(df):
                theme.curves(
                    ax,
                    df,
                    x="numbers",
                    y="capacity",
                    hue="variant",
                    name=names.variant_name,
                    err_style="bars",
                    colors=colors,
                )
            lo = min([float(df["numbers"].min())] if len(df) else []) if len(df) else float(min(sub["d"].values))
            hi = max(float(df["numbers"].max()) if len(df) else 0.0, 16.0 * float(max(sub["d"].values)))
            x = np.geomspace(lo, hi, 48)
            if metric == "mse":
                theme.theory_line(
                    ax,
                    x,
                    theory.rank_bound_capacity(thr, x),
                    theorem="T8",
                    label="T8 frontier of linear reads: n* = D / (1 − ε)",
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
                    label="softmax keeps every pair: n = N / (d + dv) (T13)",
                    color=colors[growing[0]],
                    ls=":",
                )
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            ax.set_title(crit)
            ax.set_xlabel("state rows D = numbers kept / dv")
        axes[0, 0].set_ylabel(names.AXIS["capacity"])
        axes[0, 1].set_ylabel("")
        _trained_panel(axes[0, 2])
        theme.legend(fig, axes, title="memory / theory")
        nseeds = sub.sizes.get("seed", 1)
        text = (
            theme.SEEDS_NOTE
            + f" ({nseeds} seed{'s' if nseeds != 1 else ''}). x: a fixed D x dv state's D (the feature dimension); softmax's cache at its capacity, n* (d + dv) / dv (where its capacity lies on the grid: it keeps every pair, so it usually meets the criterion at every n measured). lsq also keeps a d x d matrix for its update, not counted here."
        )
        text += (
            " Right: trained models' MQAR accuracy as read from Based's Fig. 2 (Arora et al., arXiv 2402.18668;"
            " capacity/data/based_figure2.csv, reading error ±0.01 in log2 bytes and ±0.003 in accuracy); its bytes count"
            " the paper's recurrent state, the T10 line one float32 d × d state on zoology's test mix (4-256 pairs,"
            " vocabulary 8,192)."
        )
        if skipped:
            text += f" Not drawn (no size known): {', '.join(skipped)}."
        theme.note(fig, text)
    return theme.finish(fig, "frontier")


def _trained_panel(ax):
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
