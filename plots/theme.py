"""One look for every figure: the seaborn style, colours, figure creation, theory lines and notes.

Nothing here touches global state: the style is a context manager around matplotlib's
``rc_context`` and seaborn's style contexts, and figures are ``matplotlib.figure.Figure``
objects (Agg canvas, no pyplot, no display), so they are garbage-collected like any object.
"""

from __future__ import annotations

import textwrap
from contextlib import contextmanager

import matplotlib as mpl
import numpy as np
import seaborn as sns
from capacity.plots import names
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

__all__ = [
    "style",
    "figure",
    "palette",
    "sequential",
    "ordered",
    "curves",
    "theory_line",
    "mark_x",
    "note",
    "legend",
    "log2_x",
    "load_axis",
    "grid_axis",
    "label_outer",
    "finish",
    "THEORY_GID",
    "SEEDS_NOTE",
    "PANEL_W",
    "PANEL_H",
]

PANEL_W, PANEL_H = 3.3, 2.7  # inches per panel
THEORY_GID = "theory:"  # prefix of the gid of every closed-form line (tests find them by it)
_RC = {
    "figure.dpi": 100,
    "savefig.dpi": 130,
    "pdf.fonttype": 3,  # matplotlib's default; subsetting TrueType (42) costs a second per file
    "svg.hashsalt": "capacity",
    "axes.titlesize": "small",
    "legend.frameon": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 4.5,
    "font.family": "DejaVu Sans",  # ships with matplotlib: same glyphs on every machine
}


@contextmanager
def style():
    """The plots' seaborn theme (ticks, paper context), applied only inside the block."""
    with (
        sns.axes_style("ticks", {"axes.grid": True, "grid.color": ".92"}),
        sns.plotting_context("paper", font_scale=1.05),
        mpl.rc_context(_RC),
    ):
        yield


def figure(
    nrows: int = 1, ncols: int = 1, *, sharex=False, sharey=False, width=None, height=None, legend_width: float = 2.9
):
    """A new Figure with a grid of axes (always a 2-D array), constrained layout, Agg canvas.

    The default size gives each panel PANEL_W x PANEL_H inches plus ``legend_width`` inches on
    the right for the figure legend.
    """
    size = (width or PANEL_W * ncols + legend_width, height or PANEL_H * nrows + 0.5)
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=False)
    return fig, axes


def label_outer(axes, *, xlabel: str, ylabel: str):
    """Axis labels on the outer panels only: x on the bottom row, y on the left column (inner ones cleared)."""
    for r, row in enumerate(axes):
        for c, ax in enumerate(row):
            ax.set_xlabel(xlabel if r == len(axes) - 1 else "")
            ax.set_ylabel(ylabel if c == 0 else "")


def _order_key(label: str):
    base, params = names.parse_label(label)
    rank = names.ORDER.index(base) if base in names.ORDER else len(names.ORDER)
    nums = []
    for v in params.values():
        try:
            nums.append((0, float(v), ""))
        except (TypeError, ValueError):
            nums.append((1, 0.0, str(v)))
    return (rank, base, nums)


def ordered(labels) -> list[str]:
    """Labels in legend order: known names in the order of ``names.ORDER``, parameters ascending."""
    return sorted({str(x) for x in labels}, key=_order_key)


def palette(labels, name: str = "colorblind") -> dict[str, tuple]:
    """A colour per label, assigned in legend order (so the same labels get the same colours everywhere).

    Labels of one family with different parameters (``correlated(rho=0.2)``, ``correlated(rho=0.5)``)
    share the family's hue, light to dark as the parameter grows.
    """
    labels = ordered(labels)
    bases = []
    for lab in labels:
        base = names.parse_label(lab)[0]
        if base not in bases:
            bases.append(base)
    hues = sns.color_palette(name, n_colors=max(len(bases), 1))
    out = {}
    for i, base in enumerate(bases):
        members = [lab for lab in labels if names.parse_label(lab)[0] == base]
        hue = np.asarray(hues[i % len(hues)])
        if len(members) == 1:
            out[members[0]] = tuple(hue)
            continue
        light, dark = 0.55 * hue + 0.45, 0.65 * hue  # mixed with white, with black
        for lab, color in zip(members, sns.blend_palette([tuple(light), tuple(dark)], n_colors=len(members))):
            out[lab] = tuple(color)
    return out


def sequential(values, name: str = "flare") -> dict:
    """A colour per numeric value, light to dark in increasing order."""
    vals = sorted(set(values))
    colors = sns.color_palette(name, n_colors=max(len(vals), 1))
    return {v: colors[i] for i, v in enumerate(vals)}


def theory_line(ax, x, y, *, theorem: str, label: str, color="0.15", ls="--", lw=1.2, zorder=1.5):
    """Draw a closed form; its gid is ``'theory:' + theorem`` and its legend label ``label``."""
    (line,) = ax.plot(
        np.asarray(x, dtype=float), np.asarray(y, dtype=float), ls=ls, lw=lw, color=color, label=label, zorder=zorder
    )
    line.set_gid(THEORY_GID + theorem)
    return line


def mark_x(ax, x: float, *, label: str, gid: str, color="0.45"):
    """A vertical marker (e.g. n = d) with a small text label at the top of the axes."""
    line = ax.axvline(x, color=color, lw=0.9, ls=":", zorder=1)
    line.set_gid(gid)
    ax.annotate(
        label,
        xy=(x, 1.0),
        xycoords=("data", "axes fraction"),
        xytext=(2, -2),
        textcoords="offset points",
        ha="left",
        va="top",
        fontsize="x-small",
        color=color,
    )
    return line


def note(fig, text: str):
    """A short paragraph under the panels (the figure's supxlabel, so the layout makes room for it)."""
    width = max(40, int(fig.get_figwidth() * 17))  # characters per line at x-small size
    t = fig.supxlabel(
        textwrap.fill(text, width), x=0.0, ha="left", fontsize="x-small", color="0.3", multialignment="left"
    )
    t.set_gid("note")
    return t


def legend(fig, axes, *, title: str | None = None):
    """One legend for the figure, right of the panels, with every distinct label once."""
    seen = {}
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if not lab.startswith("_") and lab not in seen:
                seen[lab] = h
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if seen:
        fig.legend(
            list(seen.values()),
            list(seen.keys()),
            loc="outside right upper",
            title=title,
            fontsize="small",
            title_fontsize="small",
        )


SEEDS_NOTE = "Lines and markers: mean over seeds; bands and bars: min to max across seeds."


def curves(
    ax,
    df,
    *,
    x: str,
    y: str,
    hue: str,
    name,
    style: str | None = None,
    style_name=None,
    err_style: str = "band",
    colors=None,
):
    """Measured curves: one per ``hue`` label (shown as ``name(label)``), the mean over seeds with the min-max range.

    ``df`` is a tidy table (``_data.tidy``); rows that share (x, hue, style) are the seeds. The
    mean, min and max are taken here, in linear space, whatever the axes' scales; seaborn draws
    the means (its lines get the gid ``measured:<hue label>``), matplotlib the ranges (a band,
    or bars with ``err_style="bars"``).
    """
    labels = ordered(df[hue])
    colors = colors or palette(labels)
    keys = [hue] + ([style] if style is not None else []) + [x]
    agg = df.groupby(keys, sort=True)[y].agg(["mean", "min", "max"]).reset_index()
    agg["_hue"] = agg[hue].map(lambda s: name(str(s)))
    kw = {}
    if style is not None:
        style_name = style_name or str
        agg["_style"] = agg[style].map(style_name)
        kw = {"style": "_style", "style_order": [style_name(s) for s in ordered(agg[style])]}
    before = set(ax.get_lines())
    sns.lineplot(
        data=agg,
        x=x,
        y="mean",
        hue="_hue",
        hue_order=[name(lab) for lab in labels],
        palette={name(lab): colors[lab] for lab in labels},
        estimator=None,
        sort=True,
        marker="o",
        markeredgecolor="none",
        ax=ax,
        **kw,
    )
    by_color = {tuple(np.round(mpl.colors.to_rgb(colors[lab]), 6)): lab for lab in labels}
    for line in ax.get_lines():  # tag seaborn's data lines: gid "measured:<hue label>"
        if line not in before and line.get_label().startswith("_child"):
            lab = by_color.get(tuple(np.round(mpl.colors.to_rgb(line.get_color()), 6)))
            if lab is not None:
                line.set_gid(f"measured:{lab}")
    for group, part in agg.groupby(keys[:-1], sort=True):  # the min-max range of each curve
        lab = group[0] if isinstance(group, tuple) else group
        part = part.sort_values(x)
        if (part["max"] - part["min"]).abs().max() == 0:
            continue
        if err_style == "bars":
            bars = ax.errorbar(
                part[x],
                part["mean"],
                yerr=np.maximum([part["mean"] - part["min"], part["max"] - part["mean"]], 0.0),
                fmt="none",
                ecolor=colors[lab],
                elinewidth=1.2,
                capsize=0,
            )
            for art in bars.lines[2]:
                art.set_gid(f"range:{lab}")
        else:
            art = ax.fill_between(part[x], part["min"], part["max"], color=colors[lab], alpha=0.2, linewidth=0)
            art.set_gid(f"range:{lab}")
    ax.set_ylabel(y)
    return ax


def _plain(x, _=None) -> str:
    """Plain numbers; powers of two below 1 as fractions (1/8, not 0.125 or 0.0078125)."""
    if 0 < x < 1 and abs(1 / x - round(1 / x)) < 1e-9:
        return f"1/{round(1 / x)}"
    return f"{x:g}"


_PLAIN = FuncFormatter(_plain)


def _spread(ticks, min_octaves: float = 0.6) -> list:
    """The ticks, dropping any closer than ``min_octaves`` (in log2) to the last one kept, so labels never overlap."""
    kept: list = []
    for t in sorted(set(ticks)):
        if not kept or np.log2(t) - np.log2(kept[-1]) >= min_octaves:
            kept.append(t)
    return kept


def log2_x(ax):
    """A log x axis in powers of two, at most about seven labels, plain numbers (1/4, 1, 4)."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2, numticks=8))
    ax.xaxis.set_major_formatter(_PLAIN)


def load_axis(ax):
    """Log-log axes for a curve against load: x in powers of two (plain numbers), y in decades."""
    log2_x(ax)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10))


def grid_axis(ax, ticks):
    """Log-log axes against a dimension (d or D): x in powers of two with ticks at the measured values."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(FixedLocator(_spread(ticks)))
    ax.xaxis.set_major_formatter(_PLAIN)
    ax.xaxis.set_minor_locator(NullLocator())


def finish(fig, name: str):
    """Last touches shared by every figure: its gid, and no minor ticks on log axes (majors carry the grid)."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                axis.set_minor_locator(NullLocator())
    fig.set_gid(name)
    return fig
