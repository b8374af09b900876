"""Memory variants side by side: error and argmax recall against load, one colour per variant.

Rows: mean error, argmax recall. Columns: key dimension d. Line style: key family (when there
are several). Closed forms for reference:

- error: T8 rank bound max(1 - d/n, 0), the floor of every d x dv state with a linear read
  (the delta rule included), and, for the key families present, the additive memory's T7
  (random keys) and T5 (tight frames);
- error, softmax attention at scale beta with random keys: T29's exact mean error
  (``theory.softmax_error``), dashed in the variant's colour;
- recall: T10, the predicted argmax recall of the additive memory with random keys and values.

The note under the panels names the memories drawn without a closed form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from lacapacity import theory
from lacapacity.plots import _data, names, theme
from lacapacity.plots.error_vs_load import FLOOR, delta_curve, theory_curves

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.typing import ColorType


class _Style(TypedDict, total=False):
    """theme.curves' dashes by a second grouping (key families, when the Dataset has several)."""

    style: str
    style_name: Callable[[str], str]


def _softmax_scale(ds: xr.Dataset, variant: object, d: int) -> float | None:
    """The scale of a softmax memory at key dimension d (its ``scale``; None: sqrt(d)), or None for any other memory."""
    found = _data.memory(ds, variant)
    if found is None or found[0].form != "softmax":
        return None
    scale = found[1].get("scale")
    return float(np.sqrt(d)) if scale is None else float(scale)


def softmax_curve(ax: Axes, d: int, scale: float, lo: float, hi: float, *, color: ColorType = "0.15") -> Line2D:
    """T29: softmax attention's exact mean error for random unit keys and values (``theory.softmax_error``)."""
    n = np.unique(np.round(np.geomspace(max(lo * d, 2.0), hi * d, 40))).astype(int)
    return theme.theory_line(
        ax,
        n / d,
        theory.softmax_error(n, max(d, 2), scale),
        theorem=f"T29:softmax:{scale:g}",
        label=f"T29 softmax, scale {scale:g}, random keys: exact mean",
        color=color,
        ls=(0, (4, 1.5)),
    )


def variant_curves(ds: xr.Dataset) -> Figure:
    """The variants figure of a result Dataset (dims ``variant``, ``d``, ``load``; variables ``mse``, ``recall``)."""
    _data.require(ds, "variants", variables=("mse", "recall"), coords=("n", "dv"), dims=("variant", "d", "load"))
    d_grid, thinned = _data.panels(ds, "d")  # a column per d: at most MAX_PANELS
    d_grid = [int(x) for x in d_grid]
    var_labels = [str(v) for v in ds["variant"].values]
    colors = theme.palette(var_labels)
    fam_labels = _data.families(ds)
    bases = {_data.spec(ds, "keys", k)[0] for k in fam_labels}
    several = len(fam_labels) > 1
    loads = np.asarray(ds["load"].values, dtype=float)
    kinds = [_data.reads(ds, v) for v in var_labels]
    any_additive, any_linear = any(a for a, _ in kinds), any(lr for _, lr in kinds)
    with theme.style():
        fig, axes = theme.figure(2, len(d_grid), sharex=True, sharey="row")
        for c, d in enumerate(d_grid):
            sub = _data.sel(ds, d=d)
            for r, metric in enumerate(("mse", "recall")):
                ax = axes[r, c]
                df = _data.tidy(sub[metric], metric)
                if len(df):
                    style: _Style = (
                        {"style": "key_family", "style_name": names.keys_name} if several and "key_family" in df else {}
                    )
                    theme.curves(
                        ax, df, x="load", y=metric, hue="variant", name=names.variant_name, colors=colors, **style
                    )
                if metric == "mse":
                    which = ["T8"] if any_linear else []
                    if any_additive:
                        which += (["T7"] if "gaussian" in bases or not bases else []) + (
                            ["T5"] if "orthogonal" in bases else []
                        )
                    theory_curves(ax, ds, d, float(loads.min()), float(loads.max()), which=which)
                    if "gaussian" in bases or not bases:
                        for v in var_labels:
                            if _data.delta_beta(ds, v) is not None:
                                delta_curve(
                                    ax,
                                    d,
                                    _data.delta_beta(ds, v),  # type: ignore[arg-type]  # not None: checked above
                                    float(loads.min()),
                                    float(loads.max()),
                                    color=colors[v],
                                )
                            elif _softmax_scale(ds, v, d) is not None:
                                softmax_curve(
                                    ax,
                                    d,
                                    _softmax_scale(ds, v, d),  # type: ignore[arg-type]  # not None: checked above
                                    float(loads.min()),
                                    float(loads.max()),
                                    color=colors[v],
                                )
                    theme.load_axis(ax)
                    ax.set_ylim(bottom=FLOOR)
                elif any_additive:
                    x = np.geomspace(max(loads.min(), 1.0 / d), loads.max(), 64)
                    theme.theory_line(
                        ax,
                        x,
                        _data.closed_form(ds, "argmax_recall_pred")(x * d, d, _data.dv_of(ds, d)),  # finer than stored
                        theorem="T10",
                        label="T10 argmax recall (random keys, additive)",
                        ls=(0, (5, 1.5, 1, 1.5, 1, 1.5)),
                    )
                if metric == "recall":
                    theme.log2_x(ax)
                    ax.set_ylim(-0.03, 1.03)
                theme.mark_x(ax, 1.0, label="n = d", gid="marker:n=d")
                ax.set_ylabel(names.AXIS[metric] if c == 0 else "")
                ax.set_title(f"d = {d}, dv = {_data.dv_of(ds, d)}")
        for r, row in enumerate(axes):
            for ax in row:
                ax.set_xlabel(names.AXIS["load"] if r == len(axes) - 1 else "")
        theme.legend(fig, axes, title="variant / theory")
        nseeds = ds.sizes.get("seed", 1)
        keys_text = ", ".join(names.keys_name(k) for k in fam_labels) or "unnamed"
        random = "gaussian" in bases or not bases
        drawn: Callable[[str], object] = lambda v: (
            kinds[var_labels.index(v)][0]
            or (random and (_data.delta_beta(ds, v) is not None or _softmax_scale(ds, v, 16)))
        )
        bare = [names.variant_name(v) for v in var_labels if not drawn(v)]
        text = theme.SEEDS_NOTE + f" ({nseeds} seed{'s' if nseeds != 1 else ''}; keys: {keys_text})."
        if bare:
            text += f" No closed form for the mean error of: {', '.join(bare)} (T8 bounds those with a linear read)."
        if any(_softmax_scale(ds, v, 16) is not None for v in var_labels):
            text += " Recall: no closed form for softmax's argmax recall; T10 is the additive memory's."
        if any(_data.family(ds, v) == "log_linear" for v in var_labels):
            text += (
                " Log-linear attention: at n = 2^m every pair lies in one Fenwick level, so it reads as its base memory"
                " (scaled) there and its recall coincides with the base's; only n between powers of two tell them apart."
            )
        theme.note(fig, f"{text} {thinned}".rstrip())
    return theme.finish(fig, "variants")
