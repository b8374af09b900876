"""Capacity against key dimension d, per criterion, with the closed-form capacities drawn in.

Capacity is the largest n that still meets a criterion (``capacity.metrics.capacity``): mean
error <= eps, or argmax recall >= tau. One row of panels per variant, one column per criterion,
one colour per key family; markers are the mean over seeds with min-max bars. Theory lines
(docs/theory.md, for the additive memory):

- T7, random keys: n* = 1 + eps d (``theory.capacity_random_keys``);
- T5, tight frames: n* = d (1 + eps) (``theory.capacity_tight_frame``);
- T10, argmax recall of random keys and values: ``theory.argmax_capacity(d, dv, tau)``.

Runs whose capacity is not determined on the measured grid (still meeting the criterion at the
largest n, or failing it at the smallest) are not drawn; a note under the figure counts them.
"""

from __future__ import annotations

import numpy as np
from capacity.plots import _data, names, theme

from capacity import metrics, theory

__all__ = ["capacity_vs_d", "EPS", "TAU"]

EPS = 0.5  # default mean-error threshold
TAU = 0.9  # default argmax-recall threshold


def _dense(lo: float, hi: float, count: int = 48) -> np.ndarray:
    return np.geomspace(lo, hi, count) if hi > lo else np.array([lo])


def capacity_vs_d(ds, *, eps: float = EPS, tau: float = TAU):
    """The capacity-vs-d figure of a result Dataset (dims ``d`` and ``load``; variables ``mse``, ``recall``)."""
    _data.require(ds, "capacity vs d", variables=("mse", "recall"), coords=("n", "dv"), dims=("d", "load"))
    criteria = [
        ("mse", float(eps), f"mean error ≤ ε = {eps:g}"),
        ("recall", float(tau), f"argmax recall ≥ τ = {tau:g}"),
    ]
    if ds.sizes.get("variant", 1) > 1 and ds.sizes.get("key_family", 1) == 1:
        return _overlay(ds, criteria)
    variants = _data.levels(ds, "variant")
    d_grid = [int(x) for x in ds["d"].values]
    lo, hi = min(d_grid), max(d_grid)
    dense = _dense(lo, hi)
    fam_labels = [str(k) for k in _data.levels(ds, "key_family") if k is not None]
    bases = {names.parse_label(k)[0]: k for k in fam_labels}
    colors = theme.palette(fam_labels)
    notes = []
    t10 = None
    with theme.style():
        fig, axes = theme.figure(len(variants), len(criteria), sharex=True, sharey="col")
        for r, variant in enumerate(variants):
            sub = _data.sel(ds, variant=variant)
            for c, (metric, thr, crit) in enumerate(criteria):
                ax = axes[r, c]
                cap = metrics.capacity(sub, metric=metric, threshold=thr)  # [key_family, d, seed]
                df = _data.tidy(cap, "capacity")
                if "key_family" not in df:
                    df["key_family"] = "unknown"
                if len(df):
                    theme.curves(
                        ax,
                        df,
                        x="d",
                        y="capacity",
                        hue="key_family",
                        name=names.keys_name,
                        err_style="bars",
                        colors=colors,
                    )
                else:
                    ax.text(
                        0.5,
                        0.5,
                        "no capacity determined\non the measured grid",
                        transform=ax.transAxes,
                        ha="center",
                        va="center",
                        fontsize="small",
                        color="0.3",
                    )
                why = _data.undetermined(sub, metric, thr)
                text = _data.undetermined_note(
                    why, f"{names.variant_name(variant) if variant is not None else ''} {crit}".strip()
                )
                if text:
                    notes.append(text)
                additive, linear = _data.reads(ds, variant)
                if metric == "mse" and linear:
                    theme.theory_line(
                        ax,
                        dense,
                        theory.rank_bound_capacity(thr, dense),
                        theorem="T8",
                        label="T8: n* ≤ d / (1 − ε) (any linear read)",
                        color="0.45",
                        ls=(0, (1, 1)),
                    )
                beta = _data.delta_beta(variant)
                if metric == "mse" and beta is not None and ("gaussian" in bases or not bases):
                    dd = np.unique(np.round(dense)).astype(int)
                    theme.theory_line(
                        ax,
                        dd,
                        theory.delta_rule_capacity(thr, dd, beta),
                        theorem="T12:delta",
                        label=f"T12 delta rule, β = {beta:g}: n* from its exact mean (random keys)",
                        color=colors.get(bases.get("gaussian"), "0.15"),
                        ls=(0, (3, 1, 1, 1)),
                    )
                if metric == "mse" and additive:
                    if "gaussian" in bases or not bases:
                        theme.theory_line(
                            ax,
                            dense,
                            theory.capacity_random_keys(thr, dense),
                            theorem="T7",
                            label="T7: n* = 1 + ε d (random keys, additive)",
                            color=colors.get(bases.get("gaussian"), "0.15"),
                        )
                    if "orthogonal" in bases:
                        theme.theory_line(
                            ax,
                            dense,
                            theory.capacity_tight_frame(thr, dense),
                            theorem="T5",
                            label="T5: n* = d (1 + ε) (tight frame, additive)",
                            color=colors[bases["orthogonal"]],
                            ls="-.",
                        )
                elif metric == "recall" and additive:
                    if t10 is None:  # a root search per point: computed once per figure, at the grid and between
                        t10 = _t10(ds, d_grid, thr)
                    theme.theory_line(
                        ax,
                        *t10,
                        theorem="T10",
                        label=f"T10: argmax capacity (random keys, additive, dv = {_dv_text(ds)})",
                        color=colors.get(bases.get("gaussian"), "0.15"),
                        ls=":",
                    )
                theme.grid_axis(ax, d_grid)
                title = crit if variant is None else f"{names.variant_name(variant)}\n{crit}"
                ax.set_title(title)
        theme.label_outer(axes, xlabel=names.AXIS["d"], ylabel=names.AXIS["capacity"])
        theme.legend(fig, axes, title="key family / theory")
        nseeds = ds.sizes.get("seed", 1)
        theme.note(fig, " ".join([theme.SEEDS_NOTE + f" ({nseeds} seed{'s' if nseeds != 1 else ''})", *notes]))
    return theme.finish(fig, "capacity-vs-d")


def _overlay(ds, criteria):
    """Several memories on one key family: one panel per criterion, one colour per memory, bounds where they hold."""
    ds = ds.squeeze("key_family", drop=False) if "key_family" in ds.dims else ds
    family = str(ds["key_family"].values) if "key_family" in ds.coords else "gaussian"
    var_labels = [str(v) for v in ds["variant"].values]
    colors = theme.palette(var_labels)
    kinds = [_data.reads(ds, v) for v in var_labels]
    any_additive, any_linear = any(a for a, _ in kinds), any(lr for _, lr in kinds)
    base = names.parse_label(family)[0]
    d_grid = [int(x) for x in ds["d"].values]
    dense = _dense(min(d_grid), max(d_grid))
    notes = []
    with theme.style():
        fig, axes = theme.figure(1, len(criteria), sharex=True)
        for c, (metric, thr, crit) in enumerate(criteria):
            ax = axes[0, c]
            cap = metrics.capacity(
                ds.drop_vars("key_family", errors="ignore"), metric=metric, threshold=thr
            )  # [variant, d, seed]
            df = _data.tidy(cap, "capacity")
            if len(df):
                theme.curves(
                    ax, df, x="d", y="capacity", hue="variant", name=names.variant_name, err_style="bars", colors=colors
                )
            text = _data.undetermined_note(_data.undetermined(ds, metric, thr), crit)
            if text:
                notes.append(text)
            if metric == "mse" and any_linear:
                theme.theory_line(
                    ax,
                    dense,
                    theory.rank_bound_capacity(thr, dense),
                    theorem="T8",
                    label="T8: n* ≤ d / (1 − ε) (any linear read)",
                    color="0.45",
                    ls=(0, (1, 1)),
                )
            if metric == "mse" and any_additive and base == "gaussian":
                theme.theory_line(
                    ax,
                    dense,
                    theory.capacity_random_keys(thr, dense),
                    theorem="T7",
                    label="T7: n* = 1 + ε d (random keys, additive)",
                )
            if metric == "mse" and base == "gaussian":
                dd = np.unique(np.round(dense)).astype(int)
                for v in var_labels:
                    if _data.delta_beta(v) is not None:
                        theme.theory_line(
                            ax,
                            dd,
                            theory.delta_rule_capacity(thr, dd, _data.delta_beta(v)),
                            theorem="T12:delta",
                            label=f"T12 delta rule, β = {_data.delta_beta(v):g}: n* from its exact mean",
                            color=colors[v],
                            ls=(0, (3, 1, 1, 1)),
                        )
            if metric == "mse" and any_additive and base == "orthogonal":
                theme.theory_line(
                    ax,
                    dense,
                    theory.capacity_tight_frame(thr, dense),
                    theorem="T5",
                    label="T5: n* = d (1 + ε) (tight frame, additive)",
                    ls="-.",
                )
            if metric == "recall" and any_additive and base == "gaussian":
                theme.theory_line(
                    ax,
                    *_t10(ds, d_grid, thr),
                    theorem="T10",
                    label=f"T10: argmax capacity (random keys, additive, dv = {_dv_text(ds)})",
                    ls=":",
                )
            theme.grid_axis(ax, d_grid)
            ax.set_title(f"{crit}\n{names.keys_name(family)} keys")
        theme.label_outer(axes, xlabel=names.AXIS["d"], ylabel=names.AXIS["capacity"])
        theme.legend(fig, axes, title="memory / theory")
        nseeds = ds.sizes.get("seed", 1)
        theme.note(fig, " ".join([theme.SEEDS_NOTE + f" ({nseeds} seed{'s' if nseeds != 1 else ''})", *notes]))
    return theme.finish(fig, "capacity-vs-d")


def _t10(ds, d_grid, tau):
    """T10's argmax capacity at the measured d and (dv fixed) at the geometric midpoints between them."""
    grid = np.asarray(sorted(set(d_grid)), dtype=float)
    if ds["dv"].ndim > 0:
        dvs = np.array([_data.dv_of(ds, int(x)) for x in grid], dtype=float)
        return grid, theory.argmax_capacity(grid, dvs, tau=tau)
    xs = np.sort(np.concatenate([grid, np.sqrt(grid[1:] * grid[:-1])]))
    return xs, theory.argmax_capacity(xs, _data.dv_of(ds, None), tau=tau)


def _dv_text(ds) -> str:
    dv = ds["dv"]
    return str(int(dv)) if dv.ndim == 0 else "per d"
