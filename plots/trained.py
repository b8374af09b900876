"""Trained beside the ceiling (``trained`` study): one column per memory.

Top: the trained accuracy, best over the learning-rate sweep (mean over seeds, bars one standard error), against
the pairs per sequence, with the two ceilings of the same memory, d and test sequences: the probe with random keys
(the model with identity projections, dashed) and with keys learned through the memory (dotted). Bottom: the trained
accuracy against the learning rate, one line per pairs value (the window).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lacapacity.errors import CapacityError
from lacapacity.plots import _data, names, theme

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import ColorType


ACCURACY = "MQAR accuracy (fraction)"


def _over_seeds(
    ax: Axes, x: list[float] | list[int], da: xr.DataArray, *, color: ColorType, ms: float, label: str, gid: str
) -> None:
    """``da``'s mean over seeds against ``x`` (``da`` ``[x, seed]``), bars one standard error; ``gid`` names the means'
    line (the caps and bars are the container's others)."""
    bars = ax.errorbar(
        x,
        da.mean("seed").values,
        yerr=theme.standard_error(da).values,
        color=color,
        marker="o",
        ms=ms,
        capsize=2,
        label=label,
    )
    bars.lines[0].set_gid(gid)


def trained_figure(ds: xr.Dataset) -> Figure:
    """The trained figure of a ``trained`` study's Dataset (dims variant, d, n, lr, seed; one d)."""
    _data.require(
        ds,
        "trained",
        variables=("accuracy", "accuracy_best", "ceiling_random", "ceiling_learned"),
        dims=("variant", "n", "lr"),
        allowed=("variant", "d", "n", "lr", "seed"),
    )
    if ds.sizes.get("d", 1) != 1:
        raise CapacityError("the trained figure draws one d; select one first, e.g. ds.sel(d=32)")
    ds = ds.squeeze("d") if "d" in ds.dims else ds
    if "seed" not in ds.dims:
        ds = ds.expand_dims("seed")
    d, seeds = int(ds["d"].values), ds.sizes["seed"]
    labels = [str(v) for v in ds["variant"].values]
    colors = theme.palette(labels)
    pairs = [int(n) for n in ds["n"].values]
    shades = theme.sequential(pairs)
    with theme.style():
        fig, axes = theme.figure(2, len(labels), sharey=True)
        for j, lab in enumerate(labels):
            one = ds.sel(variant=lab)
            top, bottom = axes[0, j], axes[1, j]
            label = "trained, best over lr (± SE)"
            _over_seeds(top, pairs, one["accuracy_best"], color=colors[lab], ms=4, label=label, gid=f"measured:{lab}")
            for var, ls, text in (
                ("ceiling_random", "--", "ceiling: random keys (identity projections)"),
                ("ceiling_learned", ":", "ceiling: keys learned through the memory"),
            ):
                top.plot(
                    pairs, one[var].mean("seed").values, ls=ls, color="0.25", lw=1.3, label=text, gid=f"{var}:{lab}"
                )
            top.set_title(names.variant_name(lab))
            theme.log2_x(top)
            lrs = [float(x) for x in one["lr"].values]
            for n in pairs:
                acc = one["accuracy"].sel(n=n)
                _over_seeds(bottom, lrs, acc, color=shades[n], ms=3, label=f"{n} pairs", gid=f"window:{lab}|{n}")
            bottom.set_xscale("log")
            for ax in (top, bottom):
                ax.set_ylim(-0.03, 1.03)
        theme.label_outer(axes[:1], xlabel="key-value pairs per sequence", ylabel=ACCURACY)
        theme.label_outer(axes[1:], xlabel="learning rate", ylabel=ACCURACY)
        theme.legend(fig, axes, title="trained / ceiling; lr panels: pairs")
        attrs = ds.attrs
        theme.note(
            fig,
            f"Continuous MQAR (zoology): d = {d}, {attrs.get('vocabulary', '?')} fixed unit embeddings, "
            f"{attrs.get('steps', '?')} AdamW steps of {attrs.get('batch', '?')} sequences, "
            f"accuracy on {attrs.get('test_sequences', '?')} held-out sequences; mean over {seeds} "
            f"seed{'s' if seeds != 1 else ''}, bars one standard error. The ceilings are the same memory read "
            "without training on the same test sequences.",
        )
    return theme.finish(fig, "trained")
