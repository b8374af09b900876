"""What a reader changes about a figure without redrawing its data: the panels it draws (``select``: the values of the
Dataset's dimensions to keep) and, once drawn, its title, axis labels and legend (``relabel``).

``capacity plot --select d=16,32 --title ... --xlabel ... --ylabel ... --legend below`` applies both to every figure it
draws (``render.render_path``); from Python, select before drawing and relabel the Figure a figure function returns:

>>> import numpy as np, xarray as xr
>>> ds = xr.Dataset({"mse": (("d", "n"), np.ones((3, 2)))}, coords={"d": [8, 16, 32], "n": [1, 2]})
>>> [int(d) for d in select(ds, {"d": ["8", "32"]})["d"]]
[8, 32]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
from matplotlib.layout_engine import ConstrainedLayoutEngine

from lacapacity.base import labels
from lacapacity.errors import CapacityError
from lacapacity.plots import theme

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend as MplLegend

__all__ = ["select", "relabel"]

Legend = Literal["right", "below", "none"]
LEGEND: tuple[Legend, ...] = ("right", "below", "none")  # where the figure legend goes (right: as drawn)


def select(ds: xr.Dataset, where: Mapping[str, Sequence[object]]) -> xr.Dataset:
    """``ds`` with only the given values of each dimension named in ``where`` (``{"d": ["16", 32]}``), the dimension
    kept, so that a figure draws a panel (or a curve) for each value kept and none for the rest.

    Values are matched to the coordinate as its type reads them: numbers (``"1/4"`` is 0.25) to a numeric coordinate
    within 1e-9 of it, text to a text coordinate exactly. A dimension the Dataset lacks, or a value it does not hold,
    is a ``CapacityError`` naming what it holds.
    """
    for dim, wanted in where.items():
        if dim not in ds.dims:
            raise CapacityError(
                f"--select {dim}=...: these results have no dimension {dim!r} (they have {', '.join(map(str, ds.dims))})"
            )
        held = ds[dim].values
        if not len(wanted):
            raise CapacityError(f"--select {dim}= names no value")
        idx: list[int] = []
        for value in wanted:
            hit = _position(held, value)
            if hit is None:
                shown = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in held.tolist()[:12])
                more = f" and {len(held) - 12} more" if len(held) > 12 else ""
                raise CapacityError(f"--select {dim}={value}: not in these results ({dim} = {shown}{more})")
            if hit not in idx:
                idx.append(hit)
        ds = ds.isel({dim: idx})
    return ds


def _position(held: np.ndarray, value: object) -> int | None:
    """The index of ``value`` among a coordinate's values ``held``, as the coordinate's type reads it, or None."""
    if held.dtype.kind in "biuf":
        parsed = labels.scalar(str(value)) if isinstance(value, str) else value
        if isinstance(parsed, bool) or not isinstance(parsed, (int, float)):
            return None
        hits = np.nonzero(np.isclose(held.astype(float), float(parsed), rtol=1e-9, atol=0.0))[0]
    else:
        hits = np.nonzero(held.astype(str) == str(value))[0]
    return int(hits[0]) if hits.size else None


def _texts(texts: str | Sequence[str] | None) -> list[str]:
    return [] if texts is None else [texts] if isinstance(texts, str) else list(texts)


def _rename(axes: list[Axes], axis: Literal["x", "y"], texts: list[str]) -> None:
    """Give the figure's ``axis`` labels new texts: one text renames every label shown; several, the distinct labels in
    the order they first appear (panels row by row), one each."""
    if not texts:
        return
    label = [(ax.xaxis if axis == "x" else ax.yaxis).label for ax in axes]
    distinct = list(dict.fromkeys(t.get_text() for t in label if t.get_text()))
    if len(texts) > 1 and len(texts) != len(distinct):
        raise CapacityError(
            f"--{axis}label given {len(texts)} times; this figure has {len(distinct)} distinct {axis} labels"
            f" ({'; '.join(distinct) or 'none'}): give one text for all, or one for each"
        )
    new = dict(zip(distinct, texts * len(distinct) if len(texts) == 1 else texts))
    for t in label:
        if t.get_text():
            t.set_text(new[t.get_text()])


def relabel(
    fig: Figure,
    *,
    title: str | None = None,
    xlabel: str | Sequence[str] | None = None,
    ylabel: str | Sequence[str] | None = None,
    legend: Legend = "right",
) -> Figure:
    """The figure ``fig`` with a title over its panels, new axis labels and its legend moved; returns ``fig``.

    ``xlabel`` / ``ylabel``: one text for every x (y) label the figure shows, or a sequence of texts, one for each of
    its distinct labels in the order they first appear (panels row by row: the precision figure's y labels are the
    error's, then the recall's). ``legend``: ``"right"`` (as drawn), ``"below"`` (under the panels, in as many
    columns as the width holds; the figure loses the legend's column and grows by its rows) or ``"none"``.
    """
    if legend not in LEGEND:
        raise CapacityError(f"the legend goes {' or '.join(LEGEND)}, got {legend!r}")
    axes = list(fig.axes)
    _rename(axes, "x", _texts(xlabel))
    _rename(axes, "y", _texts(ylabel))
    if title is not None:
        fig.suptitle(title).set_gid("title")
    if legend != "right":
        for leg in list(fig.legends):
            _move(fig, leg, legend)
    return fig


def _move(fig: Figure, leg: MplLegend, legend: Legend) -> None:
    """Take the figure legend ``leg`` out of the column right of the panels: below them, or away.

    The figure gives the legend's column back (``theme.LEGEND_W``, or the legend's width if narrower). Below, the
    legend is laid out in as many columns as the width holds, over the note (``theme.note``), and the panels above
    both (constrained layout's ``rect``): the layout would reserve one bottom margin for an outside legend and the
    note together, and overlap them.
    """
    entries = [(h, t.get_text()) for h, t in zip(leg.legend_handles, leg.get_texts()) if h is not None]
    handles, texts = [h for h, _ in entries], [t for _, t in entries]
    heading = leg.get_title().get_text() or None
    size = float(leg.get_texts()[0].get_fontsize()) if texts else 8.0
    width = max((theme.text_width(t, size) for t in texts), default=0.0) / 72 + 0.6  # inches, with the key
    leg.remove()
    fig.set_figwidth(max(fig.get_figwidth() - min(width, theme.LEGEND_W), 3.0))  # at most the column theme.figure adds
    caption = fig.get_supxlabel()
    note = theme.note(fig, " ".join(caption.split("\n"))) if caption else None  # wrapped to the new width
    if legend == "none":
        return
    columns = max(1, min(len(texts), int(fig.get_figwidth() / width)))
    moved = fig.legend(
        handles,
        texts,
        loc="lower center",
        ncols=columns,
        title=heading,
        fontsize="small",
        title_fontsize="small",
    )
    moved.set_gid("legend")
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # theme.figure's canvas is Agg's
    tall = moved.get_window_extent(renderer).height / fig.dpi  # inches
    low = note.get_window_extent(renderer).height / fig.dpi + 0.1 if note is not None else 0.0
    fig.set_figheight(fig.get_figheight() + tall)
    height = fig.get_figheight()
    if note is not None:
        note.set_in_layout(False)  # placed by hand at the bottom: the layout keeps the panels above it and the legend
        note.set_y(0.02 / height)
        note.set_verticalalignment("bottom")
    moved.set_bbox_to_anchor((0.0, low / height, 1.0, tall / height), transform=fig.transFigure)
    engine = fig.get_layout_engine()
    if isinstance(engine, ConstrainedLayoutEngine):  # theme.figure's layout
        engine.set(rect=(0.0, (low + tall) / height, 1.0, 1.0 - (low + tall) / height))
