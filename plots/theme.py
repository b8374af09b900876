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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, TypeAlias, TypedDict, cast

import matplotlib as mpl
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import XAxis, YAxis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LinearSegmentedColormap, to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator
from matplotlib.typing import ColorType, LineStyleType, RcKeyType

from lacapacity.plots import names

if TYPE_CHECKING:  # types only: drawing a figure imports neither
    import numpy.typing as npt
    import pandas as pd
    import xarray as xr


# a figure's panels: a 2-D object array of matplotlib Axes ([nrows, ncols]; numpy types its items as Any)
AxesGrid: TypeAlias = "np.ndarray[tuple[int, int], np.dtype[np.object_]]"
RGB: TypeAlias = tuple[float, float, float]
# a colour per label: palette's RGB triples, or any matplotlib colour a caller chooses
Colors: TypeAlias = Mapping[str, ColorType]
# sharex/sharey of Figure.subplots
Share: TypeAlias = bool | Literal["none", "all", "row", "col"]

PANEL_W, PANEL_H = 3.3, 2.7  # inches per panel
LEGEND_W = 2.9  # inches right of the panels for the figure legend (``figure``'s default legend_width)
MAX_LEGEND = 24  # entries of a figure legend; more measured curves are thinned (docs/plots.md)
_THEOREM = re.compile(r"^T\d")  # legend labels of closed forms: "T5 frame bound ...", "T8: ..."
THEORY_GID = "theory:"  # prefix of the gid of every closed-form line (tests find them by it)
MEASURED_GID = "measured:"  # prefix of the gid of every measured mean line: "measured:<label>"
RANGE_GID = "range:"  # prefix of the gid of every band or bar set of standard errors (theme.curves): "range:<label>"

# seaborn's axes_style("ticks", {"axes.grid": True, "grid.color": ".92"}), less its image.cmap ("rocket", which
# exists only once seaborn is imported; no figure draws an image)
_SEABORN_STYLE: dict[RcKeyType, object] = {
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


def _seaborn_context(scale: float = 0.8, font_scale: float = 1.05) -> dict[RcKeyType, float]:
    """seaborn's plotting_context("paper", font_scale=1.05): its notebook sizes times 0.8, text times 1.05 more."""
    base: dict[RcKeyType, float] = {
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
    text: dict[RcKeyType, float] = {
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


_RC: dict[RcKeyType, object] = {  # matplotlib's rc settings: each key's own type of value
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
def style() -> Iterator[None]:
    """The plots' seaborn theme (ticks, paper context), applied only inside the block."""
    with mpl.rc_context(_RC):
        yield


def figure(
    nrows: int = 1,
    ncols: int = 1,
    *,
    sharex: Share = False,
    sharey: Share = False,
    width: float | None = None,
    height: float | None = None,
    legend_width: float = LEGEND_W,
) -> tuple[Figure, AxesGrid]:
    """A new Figure with a grid of axes (always a 2-D array), constrained layout, Agg canvas.

    The default size gives each panel PANEL_W x PANEL_H inches plus ``legend_width`` inches on
    the right for the figure legend.
    """
    size = (width or PANEL_W * ncols + legend_width, height or PANEL_H * nrows + 0.5)
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    axes: AxesGrid = fig.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=False)
    return fig, axes


def label_outer(axes: AxesGrid, *, xlabel: str, ylabel: str) -> None:
    """Axis labels on the outer panels only: x on the bottom row, y on the left column (inner ones cleared)."""
    for r, row in enumerate(axes):
        for c, ax in enumerate(row):
            ax.set_xlabel(xlabel if r == len(axes) - 1 else "")
            ax.set_ylabel(ylabel if c == 0 else "")


def _order_key(label: str, rank: dict[str, int]) -> tuple[int, str, list[tuple[int, float, str]]]:
    base, params = names.parse_label(label)
    nums: list[tuple[int, float, str]] = []
    for v in params.values():
        try:
            nums.append((0, float(v), ""))
        except (TypeError, ValueError):
            nums.append((1, 0.0, str(v)))
    return (rank.get(base, len(rank)), base, nums)


def ordered(labels: Iterable[object]) -> list[str]:
    """Labels in legend order: registered names in the registries' order (``names.order``), then the rest by name;
    parameters ascending."""
    rank: dict[str, int] = {}
    for i, name in enumerate(names.order()):
        rank.setdefault(name, i)
    return sorted({str(x) for x in labels}, key=lambda lab: _order_key(lab, rank))


def _blend(a: ColorType, b: ColorType, n: int) -> list[RGB]:
    """n colours from a to b, linear in RGB (seaborn's blend_palette)."""
    cmap = LinearSegmentedColormap.from_list("blend", [to_rgb(a), to_rgb(b)])
    return [_rgb(c) for c in cmap(np.linspace(0, 1, n))[:, :3]]


def palette(labels: Iterable[object]) -> dict[str, RGB]:
    """A colour per label, assigned in legend order (so the same labels get the same colours everywhere).

    Labels of one family with different parameters (``correlated(rho=0.2)``, ``correlated(rho=0.5)``)
    share the family's hue, light to dark as the parameter grows.
    """
    labels = ordered(labels)
    bases: list[str] = []
    for lab in labels:
        base = names.parse_label(lab)[0]
        if base not in bases:
            bases.append(base)
    out: dict[str, RGB] = {}
    for i, base in enumerate(bases):
        members = [lab for lab in labels if names.parse_label(lab)[0] == base]
        hue = np.asarray(to_rgb(COLORBLIND[i % len(COLORBLIND)]))
        if len(members) == 1:
            out[members[0]] = _rgb(hue)
            continue
        light, dark = 0.55 * hue + 0.45, 0.65 * hue  # mixed with white, with black
        for lab, color in zip(members, _blend(_rgb(light), _rgb(dark), len(members))):
            out[lab] = color
    return out


def _rgb(c: npt.NDArray[np.float64]) -> RGB:
    """An RGB row as a tuple of its three numbers (numpy floats, as ``tuple(c)`` gives them)."""
    r, g, b = c
    return (r, g, b)


def sequential(values: Iterable[float], name: str = "flare") -> dict[float, RGB]:
    """A colour per numeric value, light to dark in increasing order (a seaborn colormap: imported here, once)."""
    import seaborn as sns

    vals = sorted(set(values))
    colors: list[RGB] = sns.color_palette(name, n_colors=max(len(vals), 1))  # seaborn is untyped: RGB triples
    return {v: colors[i] for i, v in enumerate(vals)}


def theory_line(
    ax: Axes,
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    theorem: str,
    label: str,
    color: ColorType | None = "0.15",
    ls: LineStyleType = "--",
    lw: float = 1.2,
    zorder: float = 1.5,
) -> Line2D:
    """Draw a closed form; its gid is ``'theory:' + theorem`` and its legend label ``label``."""
    (line,) = ax.plot(
        np.asarray(x, dtype=float), np.asarray(y, dtype=float), ls=ls, lw=lw, color=color, label=label, zorder=zorder
    )
    line.set_gid(THEORY_GID + theorem)
    return line


def mark_x(ax: Axes, x: float, *, label: str, gid: str, color: ColorType = "0.45") -> Line2D:
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


def note(fig: Figure, text: str) -> Text:
    """A short paragraph under the panels (the figure's supxlabel, so the layout makes room for it)."""
    width = max(40, int(fig.get_figwidth() * 17))  # characters per line at x-small size
    t = fig.supxlabel(
        textwrap.fill(text, width), x=0.0, ha="left", fontsize="x-small", color="0.3", multialignment="left"
    )
    t.set_gid("note")
    return t


def legend(fig: Figure, axes: AxesGrid | Sequence[Axes], *, title: str | None = None) -> None:
    """One legend for the figure, right of the panels, with every distinct label once.

    With more than ``MAX_LEGEND`` entries, the theory lines stay and the measured curves are thinned to entries spread
    over them in legend order (their colours run in that order), with one line saying how many are not listed.
    """
    seen: dict[str, Artist] = {}
    for ax in np.ravel(axes):  # type: ignore[arg-type]  # numpy's stubs know arrays of numbers; this is Axes objects
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


class _Markers(TypedDict):
    """The marker keywords of every measured curve and legend entry (``ax.plot``, ``Line2D``)."""

    marker: str
    markeredgecolor: str
    markeredgewidth: float


SEEDS_NOTE = (
    "Lines and markers: mean over seeds; bands and bars: one standard error of that mean (the seeds' sample standard"
    " deviation / sqrt(seeds)), none with one seed."
)


def standard_error(da: xr.DataArray, dim: str = "seed") -> xr.DataArray:
    """The standard error of the mean over ``dim``: the sample standard deviation (ddof 1) over the values present /
    sqrt(their count), 0 where fewer than two are present (``SEEDS_NOTE``: no band with one seed)."""
    count = da.count(dim)
    se: xr.DataArray = (da.std(dim, ddof=1) / np.sqrt(count)).where(count > 1, 0.0)  # xarray's Self: Any under 3.10
    return se


def _name_axis(axis: XAxis | YAxis, text: str) -> None:
    """An axis without a label takes ``text``, hidden where the axis shows no tick labels (inner panels of shared
    axes), so that an empty label there takes no room when the figure later clears it."""
    if axis.get_label_text():
        return
    shown = axis.get_tick_params()
    sides = ("labelbottom", "labeltop") if axis.axis_name == "x" else ("labelleft", "labelright")
    axis.set_label_text(text, visible=any(shown.get(side, False) for side in sides))


def curves(
    ax: Axes,
    df: pd.DataFrame,
    *,
    x: str,
    y: str,
    hue: str,
    name: Callable[[str], str],
    style: str | None = None,
    style_name: Callable[[str], str] | None = None,
    err_style: Literal["band", "bars"] = "band",
    colors: Colors | None = None,
) -> Axes:
    """Measured curves: one per ``hue`` label (shown as ``name(label)``), the mean over seeds with its standard error.

    ``df`` is a tidy table (``_data.tidy``); rows that share (x, hue, style) are the seeds. The mean and its
    standard error (sample standard deviation, ddof 1, over the seeds that have a value, / sqrt of their number) are
    taken here (a pandas groupby), in linear space, whatever the axes' scales, and each curve is drawn by
    itself, so every artist is known by its label: the mean (``ax.plot``, gid ``measured:<label>``, legend label
    ``name(label)``), then mean +- one standard error (``ax.fill_between``, or ``ax.errorbar`` with ``err_style="bars"``; gid
    ``range:<label>``). With ``style`` each (hue, style) pair is a line, dashed by style label (gid
    ``measured:<label>|<style label>``), and the legend lists the hues (colours) and the styles (dashes) apart.
    """
    labels = ordered(df[hue])
    colors = colors or palette(labels)
    keys = [hue] + ([style] if style is not None else []) + [x]
    agg = df.groupby(keys, sort=True)[y].agg(["mean", "std", "count"]).reset_index()  # std: ddof 1, NaN for one seed
    se = agg["std"] / np.sqrt(agg["count"])
    agg["min"], agg["max"] = agg["mean"] - se, agg["mean"] + se
    parts = {tuple(map(str, np.atleast_1d(g))): part for g, part in agg.groupby(keys[:-1], sort=True)}
    styles = ordered(agg[style]) if style is not None else []
    dashes = dict(zip(styles, DASHES * (len(styles) // len(DASHES) + 1)))
    kw: _Markers = {"marker": "o", "markeredgecolor": "none", "markeredgewidth": 0.75}
    for lab in labels:  # the means, in legend order
        each: Sequence[str | None] = styles or [None]
        for st in each:
            part = parts.get((lab,) if st is None else (lab, st))
            if part is None:
                continue
            shown = name(lab) if st is None else f"_{name(lab)}"  # with styles, the legend has its own entries
            (line,) = ax.plot(
                part[x].to_numpy(float), part["mean"].to_numpy(float), color=colors[lab], label=shown, **kw
            )
            line.set_gid(MEASURED_GID + lab + ("" if st is None else f"|{st}"))
            if st is not None:
                line.set_dashes(dashes[st])  # type: ignore[arg-type]  # DASHES[0] is "": an empty sequence, a solid line
    if style is not None:  # legend entries: a colour per hue label, a dash pattern per style label
        style_name = style_name or str
        for lab in labels:
            ax.add_artist(Line2D([], [], label=name(lab), color=colors[lab], **kw))
        for st in styles:
            ax.add_artist(Line2D([], [], label=style_name(st), color=".2", dashes=dashes[st], **kw))
    art: Artist
    for group, part in parts.items():  # mean +- one standard error, over the means
        lab = group[0]
        if not (part["max"] - part["min"]).abs().max() > 0:  # one seed (NaN) or seeds that agree
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


def _plain(x: float, _: object = None) -> str:
    """Plain numbers; powers of two below 1 as fractions (1/8, not 0.125 or 0.0078125)."""
    if 0 < x < 1 and abs(1 / x - round(1 / x)) < 1e-9:
        return f"1/{round(1 / x)}"
    return f"{x:g}"


_PLAIN = FuncFormatter(_plain)


def _spread(ticks: Iterable[float], min_octaves: float = 0.6) -> list[float]:
    """The ticks, dropping any closer than ``min_octaves`` (in log2) to the last one kept, so labels never overlap."""
    kept: list[float] = []
    for t in sorted(set(ticks)):
        if not kept or np.log2(t) - np.log2(kept[-1]) >= min_octaves:
            kept.append(t)
    return kept


def log2_x(ax: Axes) -> None:
    """A log x axis in powers of two, at most about seven labels, plain numbers (1/4, 1, 4)."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2, numticks=8))
    ax.xaxis.set_major_formatter(_PLAIN)


def load_axis(ax: Axes) -> None:
    """Log-log axes for a curve against load: x in powers of two (plain numbers), y in decades."""
    log2_x(ax)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10))


def grid_axis(ax: Axes, ticks: Iterable[float]) -> None:
    """Log-log axes against a dimension (d or D): x in powers of two with ticks at the measured values."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(FixedLocator(_spread(ticks)))
    ax.xaxis.set_major_formatter(_PLAIN)
    ax.xaxis.set_minor_locator(NullLocator())


_EM = 0.58  # average width of a character of the figures' font, in ems


def text_width(text: str, size: float) -> float:
    """The width in points of ``text`` (its longest line) at font ``size`` points, as the figures' font averages."""
    return max((len(line) for line in text.split("\n")), default=0) * _EM * size


def _panel_width(ax: Axes) -> float:
    """The width in points a panel will have once the layout makes room for the figure's legend on the right."""
    fig = cast(Figure, ax.figure)  # theme.figure's panels are a Figure's, never a SubFigure's
    spec = ax.get_subplotspec()
    cols = spec.get_gridspec().ncols if spec is not None else 1
    legend = 0.0
    for leg in fig.legends:
        labels = [t.get_text() for t in leg.get_texts()] + [leg.get_title().get_text()]
        size = cast(float, leg.get_texts()[0].get_fontsize())  # points: the stub's str is only what set_fontsize takes
        legend = max(legend, max(text_width(t, size) for t in labels) + 40)
    return (fig.get_figwidth() * 72 - legend - 60) / cols - 24


def _wrap_title(ax: Axes) -> None:
    """Break a panel title into lines no wider than its panel, so that long memory labels never run into the
    neighbouring panel's title."""
    title = ax.title
    text = title.get_text()
    if not text:
        return
    size = cast(float, title.get_fontsize())  # points (as in _panel_width)
    per_line = max(12, int(_panel_width(ax) / (_EM * size)))
    keep: Callable[[str], str] = lambda line: line.replace(" = ", "\u00a0=\u00a0")  # "β = 0.5" stays on one line
    lines = [
        textwrap.fill(keep(line), per_line, break_long_words=False, break_on_hyphens=False) for line in text.split("\n")
    ]
    title.set_text("\n".join(lines).replace("\u00a0", " "))


def finish(fig: Figure, name: str) -> Figure:
    """Last touches shared by every figure: its gid, panel titles that fit their panels, and no minor ticks on log
    axes (majors carry the grid)."""
    for ax in fig.axes:
        _wrap_title(ax)
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                axis.set_minor_locator(NullLocator())
    fig.set_gid(name)
    return fig
