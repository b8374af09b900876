"""Needle recall (``lacapacity.tasks.needle.probe``) against haystack length and depth, one colour and marker per memory.

``needle_figure``: one column per haystack, one row per number of values the answer is decoded among; recall against
the tokens written L, averaged over the needle depths. Curves that coincide are drawn side by side (each memory
shifted by a fraction of an octave), so that none hides another.

``needle_depth``: the needle-in-a-haystack grid, one panel per memory (rows) and haystack (columns): recall by
needle depth (0: written first) and L, decoded among the first number of candidates.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from lacapacity.errors import CapacityError
from lacapacity.plots import _data, names, theme

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure


HAYSTACK = {
    "random": "random keys",
    "repeat": "24-token pattern repeated (S-NIAH-1)",
    "text": "text keys (S-NIAH-2, -3)",
}
SHORT = {"random": "random keys", "repeat": "repeated pattern", "text": "text keys"}
RECALL = "needle recall (fraction)"
LENGTH = "tokens written L (tokens)"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _candidates_name(x: float) -> str:
    x = float(x)
    return f"2^{np.log2(x):.0f}" if x >= 2**40 else f"{x:.3g}"


def _prepare(ds: xr.Dataset, what: str) -> xr.Dataset:
    _data.require(
        ds,
        what,
        variables=("recall",),
        dims=("variant", "n", "haystack", "depth"),
        allowed=("variant", "d", "n", "haystack", "depth", "seed", "candidates"),
    )
    if ds.sizes.get("d", 1) > 1:
        raise CapacityError(f"the {what} figure draws one key dimension; select one first, e.g. ds.sel(d=...)")
    sub: xr.Dataset = ds.squeeze([x for x in ("d",) if x in ds.dims])  # xarray's Self: Any under 3.10
    if "candidates" not in sub["recall"].dims:
        sub = sub.assign(recall=sub["recall"].expand_dims(candidates=[np.nan]))
    return sub


def _settings(sub: xr.Dataset) -> str:
    d = int(np.asarray(sub["d"].values).ravel()[0]) if "d" in sub.coords else None
    dv = int(np.asarray(sub["dv"].values).ravel()[0]) if "dv" in sub.coords else None
    return f"d = {d}, dv = {dv}"


def needle_figure(ds: xr.Dataset) -> Figure:
    """Recall against L (mean over depths) of a ``needle`` study's results, per haystack and number of candidates."""
    sub = _prepare(ds, "needle")
    hay = [str(h) for h in sub["haystack"].values]
    cands = [float(c) for c in sub["candidates"].values]
    labels = theme.ordered(str(v) for v in sub["variant"].values)
    colors = theme.palette(labels)
    L = np.asarray(sub["n"].values, dtype=float)
    shift = {lab: 2.0 ** (0.07 * (i - (len(labels) - 1) / 2)) for i, lab in enumerate(labels)}  # a dodge in octaves
    nseeds = sub.sizes.get("seed", 1)
    with theme.style():
        fig, axes = theme.figure(len(cands), len(hay), sharex=True, sharey=True, legend_width=3.3)
        for r, c in enumerate(cands):
            for col, h in enumerate(hay):
                ax = axes[r, col]
                rec = sub["recall"].sel(haystack=h, candidates=c).mean("depth")  # [variant, n(, seed)]
                for i, lab in enumerate(labels):
                    y = rec.sel(variant=lab)
                    y = y.transpose("n", "seed") if "seed" in y.dims else y.expand_dims("seed", axis=1)  # [n, seeds]
                    mean, se = np.asarray(y.mean("seed"), float), np.asarray(theme.standard_error(y), float)
                    x = L * shift[lab]
                    (line,) = ax.plot(
                        x,
                        mean,
                        color=colors[lab],
                        marker=MARKERS[i % len(MARKERS)],
                        ms=5,
                        markeredgecolor="none",
                        label=names.variant_name(lab),
                    )
                    line.set_gid(theme.MEASURED_GID + lab)
                    if nseeds > 1:
                        band = ax.vlines(x, mean - se, mean + se, color=colors[lab], lw=1.2, alpha=0.6)
                        band.set_gid(theme.RANGE_GID + lab)
                ax.set_xscale("log", base=2)
                ax.xaxis.set_major_locator(FixedLocator(L))  # type: ignore[arg-type]  # any array: np.asarray(locs)
                ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1024:g}K" if x >= 1024 else f"{x:g}"))
                ax.xaxis.set_minor_locator(NullLocator())
                ax.set_xlim(L.min() / 1.35, L.max() * 1.35)
                ax.set_ylim(-0.04, 1.04)
                title = HAYSTACK.get(h, h) if r == 0 else ""
                ax.set_title(title, fontsize="small")
        theme.label_outer(axes, xlabel=LENGTH, ylabel=RECALL)
        for r, c in enumerate(cands):
            if not np.isnan(c):
                axes[r, 0].set_ylabel(f"recall among {_candidates_name(c)}\nvalues (fraction)")
        theme.legend(fig, axes, title="memory")
        theme.note(
            fig,
            f"Mean over the needle depths and {nseeds} sequences; bars: one standard error of that mean over the"
            f" sequences (their sample standard deviation / sqrt({nseeds})) ({_settings(sub)}). "
            "Markers of one L are shifted apart so that equal values stay visible. Recall: the exact probability "
            "that argmax among that many random unit values picks the needle's value. No training: each rule at "
            "the settings of the paper's 1.3B model (docs/needle.md).",
        )
    return theme.finish(fig, "needle")


def needle_depth(ds: xr.Dataset, *, candidates: float | None = None) -> Figure:
    """The needle-in-a-haystack grid: recall by depth and L, one panel per memory and haystack."""
    sub = _prepare(ds, "needle-depth")
    hay = [str(h) for h in sub["haystack"].values]
    labels = theme.ordered(str(v) for v in sub["variant"].values)
    c = float(sub["candidates"].values[0]) if candidates is None else float(candidates)
    L = [int(x) for x in sub["n"].values]
    depths = [float(x) for x in sub["depth"].values]
    with theme.style():
        fig, axes = theme.figure(
            len(labels), len(hay), sharex=True, sharey=True, width=2.0 * len(hay) + 2.4, height=1.25 * len(labels) + 1.2
        )
        image = None
        for r, lab in enumerate(labels):
            for col, h in enumerate(hay):
                ax = axes[r, col]
                grid = sub["recall"].sel(variant=lab, haystack=h, candidates=c)
                grid = grid.mean("seed") if "seed" in grid.dims else grid
                z = grid.transpose("depth", "n").values  # [depth, n]
                image = ax.imshow(
                    z,
                    origin="lower",
                    aspect="auto",
                    vmin=0,
                    vmax=1,
                    cmap="viridis",
                    extent=(-0.5, len(L) - 0.5, -0.5, len(depths) - 0.5),
                )
                image.set_gid(theme.MEASURED_GID + f"{lab}|{h}")
                ax.grid(False)
                ax.set_xticks(range(len(L)), [f"{x / 1024:g}K" if x >= 1024 else str(x) for x in L])
                ax.set_yticks(range(len(depths)), [f"{x:g}" for x in depths])
                if r == 0:
                    ax.set_title(SHORT.get(h, h), fontsize="small")
                if col == 0:
                    ax.set_ylabel(
                        textwrap.fill(names.variant_name(lab), 24) + "\nneedle depth (fraction)", fontsize="x-small"
                    )
        for ax in axes[-1]:
            ax.set_xlabel(LENGTH)
        bar = fig.colorbar(
            image,  # type: ignore[arg-type]  # require() refuses empty dims: an image was drawn
            ax=axes,
            location="right",
            shrink=0.6,
            label=RECALL,
        )
        bar.ax.set_gid("colorbar")
        theme.note(
            fig,
            f"Rows: memories; columns: haystacks; within a panel: needle depth (0: written first, 1: last) against L. "
            f"Decoded among {_candidates_name(c)} values; mean over sequences ({_settings(sub)}).",
        )
    return theme.finish(fig, "needle-depth")
