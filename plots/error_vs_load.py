"""Measured mean error against load n/d, with the bounds and the expectation it tests.

One panel per (variant, d), one colour per key family (mean over seeds, standard-error band), log-log,
a dotted marker at n = d. Closed forms, drawn on a fine grid of n/d for each panel's d:

- T5 frame bound max(n/d - 1, 0): no n unit keys do better (tight frames meet it);
- T7 random keys (n - 1)/d: the expected error of keys uniform on the sphere;
- T8 rank bound max(1 - d/n, 0): no d x dv state with a linear read does better, whatever its
  write rule (T5 and T7 are those of the additive memory).

Errors below the axis floor (exact recall, e.g. orthogonal keys with n <= d) fall below the
panel; a note under the figure says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from lacapacity import theory
from lacapacity.plots import _data, names, theme

if TYPE_CHECKING:
    import numpy.typing as npt
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.typing import ColorType, LineStyleType

    from lacapacity.theory._common import Floats


FLOOR = 1e-3  # lowest error shown on the log axis

# theorem -> (the stored variable, legend label, line style): drawn by the function the Dataset's task stores the
# variable by (Task.closed_forms: recall's theory.frame_bound, random_keys_error, rank_bound), on a finer grid
THEORY: dict[str, tuple[str, str, LineStyleType]] = {
    "T5": ("frame_bound", "T5 frame bound: max(n/d − 1, 0)", "--"),
    "T7": ("random_keys_error", "T7 random keys: (n − 1)/d", ":"),
    "T8": ("rank_bound", "T8 rank bound: max(1 − d/n, 0)", "-."),
}


def theory_curves(
    ax: Axes, ds: xr.Dataset, d: int, lo: float, hi: float, *, which: Sequence[str] = ("T5", "T7", "T8")
) -> npt.NDArray[np.float64]:
    """Draw the closed forms of ``which`` against load n/d in [lo, hi] for dimension ``d``, each by the function the
    task of ``ds`` stores it by (``_data.closed_form``).

    The feature-map figure passes a feature dimension D as ``d``, with loads n / D.
    """
    lo = max(lo, 1.0 / d)  # at least one pair
    x = np.geomspace(lo, hi, 96)  # [points], n / d
    for theorem in which:
        name, label, ls = THEORY[theorem]
        fn: Callable[[npt.NDArray[np.float64], int], Floats] = _data.closed_form(ds, name)
        theme.theory_line(ax, x, fn(x * d, d), theorem=theorem, label=label, ls=ls)
    return x


def delta_curve(ax: Axes, d: int, beta: float, lo: float, hi: float, *, color: ColorType | None = "0.15") -> Line2D:
    """The delta rule's exact mean error for random unit keys (``theory.delta_rule_error``) against load n/d."""
    n = np.unique(np.round(np.geomspace(max(lo * d, 1.0), hi * d, 64))).astype(int)
    label = f"T12 delta rule, β = {beta:g}, random keys: exact mean"
    return theme.theory_line(
        ax,
        n / d,
        theory.delta_rule_error(n, max(d, 2), beta=beta),
        theorem="T12:delta",
        label=label,
        color=color,
        ls=(0, (3, 1, 1, 1)),
    )


def family_curves(ax: Axes, da: xr.DataArray, y: str, colors: theme.Colors) -> int:
    """One panel: ``da`` (its values named ``y``) against load, a curve per key family; returns how many measured
    points lie below ``FLOOR``, under the axis."""
    df = _data.by_family(da, y)
    if len(df):
        theme.curves(ax, df, x="load", y=y, hue="key_family", name=names.keys_name, colors=colors)
    return int((df[y] < FLOOR).sum())


def error_vs_load(ds: xr.Dataset, *, metric: str = "mse") -> Figure:
    """The error-vs-load figure of a result Dataset (dims ``d`` and ``load``; variable ``metric``)."""
    _data.require(ds, "error vs load", variables=(metric,), coords=("n",), dims=("d", "load"))
    variants, thinned_v = _data.panels(ds, "variant")  # a panel per (variant, d): at most MAX_PANELS each way
    d_grid, thinned_d = _data.panels(ds, "d")
    d_grid = [int(x) for x in d_grid]
    fam_labels = _data.families(ds)
    colors = theme.palette(fam_labels)
    loads = np.asarray(ds["load"].values, dtype=float)
    below = 0
    with theme.style():
        fig, axes = theme.figure(len(variants), len(d_grid), sharex=True, sharey=True)
        for r, variant in enumerate(variants):
            for c, d in enumerate(d_grid):
                ax = axes[r, c]
                sub = _data.sel(ds, variant=variant, d=d)
                below += family_curves(ax, sub[metric], metric, colors)
                additive, linear = _data.reads(ds, variant)
                which = (["T5", "T7"] if additive else []) + (["T8"] if linear else [])
                theory_curves(ax, ds, d, float(loads.min()), float(loads.max()), which=which)
                beta = _data.delta_beta(ds, variant)
                if (
                    beta is not None
                    and any(_data.spec(ds, "keys", f)[0] == "gaussian" for f in fam_labels)
                    and metric == "mse"
                ):
                    delta_curve(
                        ax,
                        d,
                        beta,
                        float(loads.min()),
                        float(loads.max()),
                        color=colors.get(next(f for f in fam_labels if _data.spec(ds, "keys", f)[0] == "gaussian")),
                    )
                theme.mark_x(ax, 1.0, label="n = d", gid="marker:n=d")
                theme.load_axis(ax)
                ax.set_ylim(bottom=FLOOR)
                head = f"d = {d}" if variant is None else f"{names.variant_name(variant)}, d = {d}"
                ax.set_title(head)
        ylabel = (
            names.AXIS[metric]
            if metric in names.AXIS
            else f"{ds[metric].attrs.get('long_name', metric)} ({ds[metric].attrs.get('units', '1')})"
        )
        theme.label_outer(axes, xlabel=names.AXIS["load"], ylabel=ylabel)
        theme.legend(fig, axes, title="key family / theory")
        nseeds = ds.sizes.get("seed", 1)
        text = (
            theme.SEEDS_NOTE
            + f" ({nseeds} seed{'s' if nseeds != 1 else ''}). T5 and T7 hold for the additive memory, T8 for any d x dv state with a linear read."
        )
        if below:
            text += f" {below} measured points below {FLOOR:g} (exact recall) lie under the axis."
        text = " ".join(t for t in (text, thinned_v, thinned_d) if t)
        theme.note(fig, text)
    return theme.finish(fig, "error-vs-load")
