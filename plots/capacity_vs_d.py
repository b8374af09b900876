"""Capacity against key dimension d, per criterion, with the closed-form capacities drawn in.

Capacity is the largest n that still meets a criterion (``lacapacity.metrics.capacity``): mean
error <= eps, or argmax recall >= tau. One row of panels per variant, one column per criterion,
one colour per key family; markers are the mean over seeds with standard-error bars. Theory lines
(docs/theory.md, for the additive memory):

- T7, random keys: n* = 1 + eps d (``theory.capacity_random_keys``);
- T5, tight frames: n* = d (1 + eps) (``theory.capacity_tight_frame``);
- T10, argmax recall of random keys and values: ``theory.argmax_capacity(d, dv, tau)``.

Runs whose capacity is not determined on the measured grid (still meeting the criterion at the
largest n, or failing it at the smallest) are not drawn; a note under the figure counts them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np

from lacapacity import theory
from lacapacity.plots import _data, names, theme
from lacapacity.tasks import metrics

if TYPE_CHECKING:
    import numpy.typing as npt
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import ColorType

    from lacapacity.theory._common import Floats

# (metric, threshold, its words): a capacity criterion, a column of panels
Criterion = tuple[str, float, str]
# T10's line per threshold: (d, capacity), computed once per figure
T10Cache = dict[float, tuple["npt.NDArray[np.float64]", "Floats"]]


EPS = 0.5  # default mean-error threshold
TAU = 0.9  # default argmax-recall threshold
T10_POINTS = 12  # points of the T10 line (each a root search); the measured d, or as many spread over them


def _dense(lo: float, hi: float, count: int = 48) -> npt.NDArray[np.float64]:
    return np.geomspace(lo, hi, count) if hi > lo else np.array([lo])


def capacity_vs_d(ds: xr.Dataset, *, eps: float = EPS, tau: float = TAU) -> Figure:
    """The capacity-vs-d figure of a result Dataset (dims ``d`` and ``load``; variables ``mse``, ``recall``)."""
    _data.require(ds, "capacity vs d", variables=("mse", "recall"), coords=("n", "dv"), dims=("d", "load"))
    criteria: list[Criterion] = [
        ("mse", float(eps), f"mean error ≤ ε = {eps:g}"),
        ("recall", float(tau), f"argmax recall ≥ τ = {tau:g}"),
    ]
    if ds.sizes.get("variant", 1) > 1 and ds.sizes.get("key_family", 1) == 1:
        return _overlay(ds, criteria)
    variants, thinned = _data.panels(ds, "variant")  # a row per variant: at most MAX_PANELS
    d_grid = [int(x) for x in ds["d"].values]
    fam_labels = _data.families(ds)
    bases = {_data.spec(ds, "keys", k)[0]: k for k in fam_labels}
    colors = theme.palette(fam_labels)
    notes: list[str] = []
    t10: T10Cache = {}
    with theme.style():
        fig, axes = theme.figure(len(variants), len(criteria), sharex=True, sharey="col")
        for r, variant in enumerate(variants):
            sub = _data.sel(ds, variant=variant)
            for c, (metric, thr, crit) in enumerate(criteria):
                ax = axes[r, c]
                cap = metrics.capacity(sub, metric=metric, threshold=thr)  # [key_family, d, seed]
                df = _data.by_family(cap, "capacity")
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
                gauss: ColorType = colors.get(bases.get("gaussian"), "0.15")  # type: ignore[arg-type]  # no gaussian: None, no key
                fams: dict[str, ColorType] = {"gaussian": gauss} if ("gaussian" in bases or not bases) else {}
                if "orthogonal" in bases:
                    fams["orthogonal"] = colors[bases["orthogonal"]]
                beta = _data.delta_beta(ds, variant)
                _bounds(
                    ax,
                    ds,
                    metric,
                    thr,
                    d_grid,
                    t10,
                    additive=additive,
                    linear=linear,
                    families=fams,
                    deltas=[(beta, gauss)] if beta is not None else [],
                )
                theme.grid_axis(ax, d_grid)
                title = crit if variant is None else f"{names.variant_name(variant)}\n{crit}"
                ax.set_title(title)
        theme.label_outer(axes, xlabel=names.AXIS["d"], ylabel=names.AXIS["capacity"])
        theme.legend(fig, axes, title="key family / theory")
        nseeds = ds.sizes.get("seed", 1)
        theme.note(fig, " ".join([theme.SEEDS_NOTE + f" ({nseeds} seed{'s' if nseeds != 1 else ''})", *notes, thinned]))
    return theme.finish(fig, "capacity-vs-d")


def _overlay(ds: xr.Dataset, criteria: list[Criterion]) -> Figure:
    """Several memories on one key family: one panel per criterion, one colour per memory, bounds where they hold."""
    ds = ds.squeeze("key_family", drop=False) if "key_family" in ds.dims else ds
    family = str(ds["key_family"].values) if "key_family" in ds.coords else "gaussian"
    var_labels = [str(v) for v in ds["variant"].values]
    colors = theme.palette(var_labels)
    kinds = [_data.reads(ds, v) for v in var_labels]
    any_additive, any_linear = any(a for a, _ in kinds), any(lr for _, lr in kinds)
    base = _data.spec(ds, "keys", family)[0]
    d_grid = [int(x) for x in ds["d"].values]
    notes: list[str] = []
    t10: T10Cache = {}
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
            fams: dict[str, ColorType] = {base: "0.15"} if base in ("gaussian", "orthogonal") else {}
            deltas = cast(  # the None betas are filtered out (mypy cannot see it through the second call)
                "list[tuple[float, ColorType]]",
                [(_data.delta_beta(ds, v), colors[v]) for v in var_labels if _data.delta_beta(ds, v) is not None],
            )
            _bounds(
                ax, ds, metric, thr, d_grid, t10, additive=any_additive, linear=any_linear, families=fams, deltas=deltas
            )
            theme.grid_axis(ax, d_grid)
            ax.set_title(f"{crit}\n{names.keys_name(family)} keys")
        theme.label_outer(axes, xlabel=names.AXIS["d"], ylabel=names.AXIS["capacity"])
        theme.legend(fig, axes, title="memory / theory")
        nseeds = ds.sizes.get("seed", 1)
        theme.note(fig, " ".join([theme.SEEDS_NOTE + f" ({nseeds} seed{'s' if nseeds != 1 else ''})", *notes]))
    return theme.finish(fig, "capacity-vs-d")


def _bounds(
    ax: Axes,
    ds: xr.Dataset,
    metric: str,
    thr: float,
    d_grid: list[int],
    t10: T10Cache,
    *,
    additive: bool,
    linear: bool,
    families: dict[str, ColorType],
    deltas: list[tuple[float, ColorType]],
) -> None:
    """The closed-form capacities that hold for a panel, each only where its assumptions do.

    T8 for a linear read (mean-error panels); for an additive memory T7 (random keys), T5 (tight frames) and, on
    recall panels, T10 (random keys); the exact mean of each plain delta rule in ``deltas`` [(beta, colour)] with
    random keys. ``families``: key family base name -> colour, for those present. ``t10`` caches T10's root search.
    """
    dense = _dense(min(d_grid), max(d_grid))
    if metric == "mse" and linear:
        label = "T8: n* ≤ d / (1 − ε) (any linear read)"
        theme.theory_line(
            ax, dense, theory.rank_bound_capacity(thr, dense), theorem="T8", label=label, color="0.45", ls=(0, (1, 1))
        )
    if metric == "mse" and "gaussian" in families:
        dd = np.unique(np.round(dense)).astype(int)
        for beta, color in deltas:
            label = f"T12 delta rule, β = {beta:g}: n* from its exact mean (random keys)"
            theme.theory_line(
                ax,
                dd,
                theory.delta_rule_capacity(thr, dd, beta),
                theorem="T12:delta",
                label=label,
                color=color,
                ls=(0, (3, 1, 1, 1)),
            )
    if not additive:
        return
    if metric == "mse" and "gaussian" in families:
        label = "T7: n* = 1 + ε d (random keys, additive)"
        theme.theory_line(
            ax, dense, theory.capacity_random_keys(thr, dense), theorem="T7", label=label, color=families["gaussian"]
        )
    if metric == "mse" and "orthogonal" in families:
        label = "T5: n* = d (1 + ε) (tight frame, additive)"
        theme.theory_line(
            ax,
            dense,
            theory.capacity_tight_frame(thr, dense),
            theorem="T5",
            label=label,
            color=families["orthogonal"],
            ls="-.",
        )
    if metric == "recall" and "gaussian" in families:
        if thr not in t10:  # a root search per point: once per figure, at the grid and between
            t10[thr] = _t10(ds, d_grid, thr)
        label = f"T10: argmax capacity (random keys, additive, dv = {_dv_text(ds)})"
        theme.theory_line(ax, *t10[thr], theorem="T10", label=label, color=families["gaussian"], ls=":")


def _t10(ds: xr.Dataset, d_grid: list[int], tau: float) -> tuple[npt.NDArray[np.float64], Floats]:
    """T10's argmax capacity at the measured d and (dv fixed) at the geometric midpoints between them."""
    # a root search per point (about 0.3 s each): at most T10_POINTS of them, spread over the measured d
    grid = np.asarray(_data.thin(sorted(set(d_grid)), T10_POINTS), dtype=float)
    if ds["dv"].ndim > 0:
        dvs = np.array([_data.dv_of(ds, int(x)) for x in grid], dtype=float)
        return grid, theory.argmax_capacity(grid, dvs, tau=tau)
    xs = np.sort(np.concatenate([grid, np.sqrt(grid[1:] * grid[:-1])]))
    xs = np.asarray(_data.thin(list(xs), T10_POINTS), dtype=float)
    return xs, theory.argmax_capacity(xs, _data.dv_of(ds, None), tau=tau)


def _dv_text(ds: xr.Dataset) -> str:
    dv = ds["dv"]
    return str(int(dv)) if dv.ndim == 0 else "per d"
