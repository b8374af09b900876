"""One look for every figure: the seaborn style, colours, figure creation, measured curves, theory lines and notes.

Nothing here touches global state: the style is a context manager around matplotlib's ``rc_context``, and
figures are ``matplotlib.figure.Figure`` objects (Agg canvas, no pyplot, no display), so they are
garbage-collected like any object. The style and the qualitative palette are seaborn's ("ticks", "paper",
"colorblind"), written out here so that drawing a figure does not import seaborn (and with it scipy.stats and
pyplot); tests/plots/test_plots_theme.py keeps them equal to seaborn's. Only the sequential palette imports seaborn, once.
"""

from __future__ import annotations

import re
import textwrap
from contextlib import contextmanager

import matplotlib as mpl
import numpy as np
from capacity.plots import names
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LinearSegmentedColormap, to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
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
    "MEASURED_GID",
    "RANGE_GID",
    "COLORBLIND",
    "DASHES",
    "SEEDS_NOTE",
    "PANEL_W",
    "PANEL_H",
]

PANEL_W, PANEL_H = 3.3, 2.7  # inches per panel
MAX_LEGEND = 24  # entries of a figure legend; more measured curves are thinned (docs/plots.md)
_THEOREM = re.compile(r"^T\d")  # legend labels of closed forms: "T5 frame bound ...", "T8: ..."
THEORY_GID = "theory:"  # prefix of the gid of every closed-form line (tests find them by it)
MEASURED_GID = "measured:"  # prefix of the gid of every measured mean line: "measured:<label>"
RANGE_GID = "range:"  # prefix of the gid of every min-max band or bar set: "range:<label>"

# seaborn's axes_style("ticks", {"axes.grid": True, "grid.color": ".92"}), less its image.cmap ("rocket", which
# exists only once seaborn is imported; no figure draws an image)
_SEABORN_STYLE = {
    "figure.facecolor": "white",
    "axes.labelcolor": ".15",
    "xtick.direction": "out",
    "ytick.direction": "out",
    "xtick.color": ".15",
    "ytick.color": ".15",
    "axes.axisbelow": True,
    "grid.linestyle": "-",
    "text.color": ".15",
    "font.family": ["sans-serif"],
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans", "sans-serif"],
    "lines.solid_capstyle": "round",
    "patch.edgecolor": "w",
    "patch.force_edgecolor": True,
    "xtick.top": False,
    "ytick.right": False,
    "axes.grid": True,
    "axes.facecolor": "white",
    "axes.edgecolor": ".15",
    "grid.color": ".92",
    "axes.spines.left": True,
    "axes.spines.bottom": True,
    "axes.spines.right": True,
    "axes.spines.top": True,
    "xtick.bottom": True,
    "ytick.left": True,
}


def _seaborn_context(scale: float = 0.8, font_scale: float = 1.05) -> dict:
    """seaborn's plotting_context("paper", font_scale=1.05): its notebook sizes times 0.8, text times 1.05 more."""
    base = {
        "axes.linewidth": 1.25,
        "grid.linewidth": 1,
        "lines.linewidth": 1.5,
        "lines.markersize": 6,
        "patch.linewidth": 1,
        "xtick.major.width": 1.25,
        "ytick.major.width": 1.25,
        "xtick.minor.width": 1,
        "ytick.minor.width": 1,
        "xtick.major.size": 6,
        "ytick.major.size": 6,
        "xtick.minor.size": 4,
        "ytick.minor.size": 4,
    }
    text = {
        "font.size": 12,
        "axes.labelsize": 12,
        "axes.titlesize": 12,
        "xtick.labelsize": 11,
        "ytick.labelsize": 11,
        "legend.fontsize": 11,
        "legend.title_fontsize": 12,
    }
    sizes = {k: v * scale for k, v in {**base, **text}.items()}
    return {**sizes, **{k: sizes[k] * font_scale for k in text}}


_RC = {
    **_SEABORN_STYLE,
    **_seaborn_context(),
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
# seaborn's "colorblind" palette
COLORBLIND = (
    "#0173B2",
    "#DE8F05",
    "#029E73",
    "#D55E00",
    "#CC78BC",
    "#CA9161",
    "#FBAFE4",
    "#949494",
    "#ECE133",
    "#56B4E9",
)
# seaborn's first dash patterns (unique_dashes): line styles of a second grouping (``curves(style=...)``; they
# repeat after five)
DASHES = ("", (4, 1.5), (1, 1), (3, 1.25, 1.5, 1.25), (5, 1, 1, 1))


@contextmanager
def style():
    """The plots' seaborn theme (ticks, paper context), applied only inside the block."""
    with mpl.rc_context(_RC):
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


def _order_key(label: str, rank: dict):
    base, params = names.parse_label(label)
    nums = []
    for v in params.values():
        try:
            nums.append((0, float(v), ""))
        except (TypeError, ValueError):
            nums.append((1, 0.0, str(v)))
    return (rank.get(base, len(rank)), base, nums)


def ordered(labels) -> list[str]:
    """Labels in legend order: registered names in the registries' order (``names.order``), then the rest by name;
    parameters ascending."""
    rank = {}
    for i, name in enumerate(names.order()):
        rank.setdefault(name, i)
    return sorted({str(x) for x in labels}, key=lambda lab: _order_key(lab, rank))


def _blend(a, b, n: int) -> list[tuple]:
    """n colours from a to b, linear in RGB (seaborn's blend_palette)."""
    cmap = LinearSegmentedColormap.from_list("blend", [to_rgb(a), to_rgb(b)])
    return [tuple(c) for c in cmap(np.linspace(0, 1, n))[:, :3]]


def palette(labels) -> dict[str, tuple]:
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
    out = {}
    for i, base in enumerate(bases):
        members = [lab for lab in labels if names.parse_label(lab)[0] == base]
        hue = np.asarray(to_rgb(COLORBLIND[i % len(COLORBLIND)]))
        if len(members) == 1:
            out[members[0]] = tuple(hue)
            continue
        light, dark = 0.55 * hue + 0.45, 0.65 * hue  # mixed with white, with black
        for lab, color in zip(members, _blend(tuple(light), tuple(dark), len(members))):
            out[lab] = color
    return out


def sequential(values, name: str = "flare") -> dict:
    """A colour per numeric value, light to dark in increasing order (a seaborn colormap: imported here, once)."""
    import seaborn as sns

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
    """One legend for the figure, right of the panels, with every distinct label once.

    With more than ``MAX_LEGEND`` entries, the theory lines stay and the measured curves are thinned to entries spread
    over them in legend order (their colours run in that order), with one line saying how many are not listed.
    """
    seen = {}
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if not lab.startswith("_") and lab not in seen:
                seen[lab] = h
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if len(seen) > MAX_LEGEND:
        theory = [lab for lab in seen if _THEOREM.match(lab)]
        measured = [lab for lab in seen if lab not in theory]
        keep = max(2, MAX_LEGEND - len(theory) - 1)
        idx = np.unique(np.round(np.linspace(0, len(measured) - 1, keep)).astype(int))
        listed = [measured[i] for i in idx]
        more = f"… {len(measured) - len(listed)} more, between those listed"
        seen = {lab: seen[lab] for lab in listed} | {more: Line2D([], [], ls="none")} | {t: seen[t] for t in theory}
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


def _name_axis(axis, text: str) -> None:
    """An axis without a label takes ``text``, hidden where the axis shows no tick labels (inner panels of shared
    axes), so that an empty label there takes no room when the figure later clears it."""
    if axis.get_label_text():
        return
    shown = axis.get_tick_params()
    sides = ("labelbottom", "labeltop") if axis.axis_name == "x" else ("labelleft", "labelright")
    axis.set_label_text(text, visible=any(shown.get(side, False) for side in sides))


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

    ``df`` is a tidy table (``_data.tidy``); rows that share (x, hue, style) are the seeds. The mean, min and max
    are taken here (a pandas groupby), in linear space, whatever the axes' scales, and each curve is drawn by
    itself, so every artist is known by its label: the mean (``ax.plot``, gid ``measured:<label>``, legend label
    ``name(label)``), then the ranges (``ax.fill_between``, or ``ax.errorbar`` with ``err_style="bars"``; gid
    ``range:<label>``). With ``style`` each (hue, style) pair is a line, dashed by style label (gid
    ``measured:<label>|<style label>``), and the legend lists the hues (colours) and the styles (dashes) apart.
    """
    labels = ordered(df[hue])
    colors = colors or palette(labels)
    keys = [hue] + ([style] if style is not None else []) + [x]
    agg = df.groupby(keys, sort=True)[y].agg(["mean", "min", "max"]).reset_index()
    parts = {tuple(map(str, np.atleast_1d(g))): part for g, part in agg.groupby(keys[:-1], sort=True)}
    styles = ordered(agg[style]) if style is not None else []
    dashes = dict(zip(styles, DASHES * (len(styles) // len(DASHES) + 1)))
    kw = {"marker": "o", "markeredgecolor": "none", "markeredgewidth": 0.75}
    for lab in labels:  # the means, in legend order
        for st in styles or [None]:
            part = parts.get((lab,) if st is None else (lab, st))
            if part is None:
                continue
            shown = name(lab) if st is None else f"_{name(lab)}"  # with styles, the legend has its own entries
            (line,) = ax.plot(
                part[x].to_numpy(float), part["mean"].to_numpy(float), color=colors[lab], label=shown, **kw
            )
            line.set_gid(MEASURED_GID + lab + ("" if st is None else f"|{st}"))
            if st is not None:
                line.set_dashes(dashes[st])
    if style is not None:  # legend entries: a colour per hue label, a dash pattern per style label
        style_name = style_name or str
        for lab in labels:
            ax.add_artist(Line2D([], [], label=name(lab), color=colors[lab], **kw))
        for st in styles:
            ax.add_artist(Line2D([], [], label=style_name(st), color=".2", dashes=dashes[st], **kw))
    for group, part in parts.items():  # the min-max ranges, over the means
        lab = group[0]
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
                art.set_gid(RANGE_GID + lab)
        else:
            art = ax.fill_between(part[x], part["min"], part["max"], color=colors[lab], alpha=0.2, linewidth=0)
            art.set_gid(RANGE_GID + lab)
    _name_axis(ax.xaxis, x)
    _name_axis(ax.yaxis, y)
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


_EM = 0.58  # average width of a character of the figures' font, in ems


def _text_width(text: str, size: float) -> float:
    return max((len(line) for line in text.split("\n")), default=0) * _EM * size


def _panel_width(ax) -> float:
    """The width in points a panel will have once the layout makes room for the figure's legend on the right."""
    fig = ax.figure
    spec = ax.get_subplotspec()
    cols = spec.get_gridspec().ncols if spec is not None else 1
    legend = 0.0
    for leg in fig.legends:
        labels = [t.get_text() for t in leg.get_texts()] + [leg.get_title().get_text()]
        legend = max(legend, max(_text_width(t, leg.get_texts()[0].get_fontsize()) for t in labels) + 40)
    return (fig.get_figwidth() * 72 - legend - 60) / cols - 24


def _wrap_title(ax) -> None:
    """Break a panel title into lines no wider than its panel, so that long memory labels never run into the
    neighbouring panel's title."""
    title = ax.title
    text = title.get_text()
    if not text:
        return
    per_line = max(12, int(_panel_width(ax) / (_EM * title.get_fontsize())))
    keep = lambda line: line.replace(" = ", "\u00a0=\u00a0")  # "β = 0.5" stays on one line
    lines = [
        textwrap.fill(keep(line), per_line, break_long_words=False, break_on_hyphens=False) for line in text.split("\n")
    ]
    title.set_text("\n".join(lines).replace("\u00a0", " "))


def finish(fig, name: str):
    """Last touches shared by every figure: its gid, panel titles that fit their panels, and no minor ticks on log
    axes (majors carry the grid)."""
    for ax in fig.axes:
        _wrap_title(ax)
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                axis.set_minor_locator(NullLocator())
    fig.set_gid(name)
    return fig
