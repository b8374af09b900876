"""Trained results beside the training-free ceilings: layers that draw ``lacapacity.tasks.published`` tables on an axis.

``trained_points`` draws a table's points (one marker per architecture, open, grey-scale markers so that they read
as published numbers next to the probe's coloured curves); ``mqar_ceiling`` draws the additive memory's predicted
MQAR accuracy (T10 over the value vocabulary) on zoology's test mix of Based's Fig. 2, against the bytes of one
float32 d x d state. Both take the axis to draw on, so any figure can carry them (the frontier figure does).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from lacapacity.tasks import published
from lacapacity.tasks.mqar import probe as mqar
from lacapacity.tasks.mqar.task import MqarTask

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.lines import Line2D
    from matplotlib.typing import ColorType


# one open marker per architecture of Based's Fig. 2 (and a default for others)
MARKERS = {
    "Based": ("o", "0.1"),
    "Mamba": ("s", "0.35"),
    "Attention (full)": ("D", "0.0"),
    "Attention (sliding window)": ("^", "0.5"),
    "H3": ("v", "0.65"),
    "Hyena": ("P", "0.65"),
}
CITATION = {"based_figure2": "Based Fig. 2"}


def trained_points(
    ax: Axes,
    name: str = "based_figure2",
    *,
    architectures: Iterable[str] | None = None,
    x: str = "state_bytes",
    y: str = "accuracy",
) -> list[Line2D]:
    """Draw the published table ``name`` on ``ax``: one series per architecture (gid ``published:<name>:<arch>``).

    ``architectures``: the ones to draw (default: all in the file). Returns the drawn artists, one per architecture.
    """
    table = published.load(name)
    archs = list(dict.fromkeys(table["architecture"])) if architectures is None else list(architectures)
    drawn: list[Line2D] = []
    for arch in archs:
        rows = table[table["architecture"] == arch]
        if not len(rows):
            continue
        marker, shade = MARKERS.get(arch, ("X", "0.3"))
        (line,) = ax.plot(
            rows[x].to_numpy(float),
            rows[y].to_numpy(float),
            ls="none",
            marker=marker,
            ms=4.5,
            mfc="none",
            mec=shade,
            mew=1.0,
            label=f"{arch}, trained ({CITATION.get(name, name)})",  # the note or caption cites the paper
            zorder=3,
        )
        line.set_gid(f"published:{name}:{arch}")
        drawn.append(line)
    return drawn


def mqar_ceiling(ax: Axes, lo_bytes: float, hi_bytes: float, *, color: ColorType = "0.15") -> Line2D:
    """The additive memory's predicted accuracy on zoology's Fig. 2 test mix against the bytes of one float32 d x d state.

    Accuracy = sum over the test configurations of pairs x the mqar task's ``accuracy_pred`` (its function,
    ``MqarTask.closed_forms``: ``lacapacity.theory.vocab_argmax_recall(pairs, d, d, vocab)``) / sum of pairs
    (zoology's valid/accuracy counts every query), vocab = the 4,096 value tokens, d = sqrt(bytes / 4).
    Random keys, no training: a floor of what the state holds, not a bound on what a trained layer can do.
    """
    mix = mqar.ZOOLOGY_BASED_FIGURE2_TEST
    pairs = np.array([p for _, p in mix], dtype=float)
    vocab = mqar.ZOOLOGY_VOCAB // 2
    b = np.geomspace(lo_bytes, hi_bytes, 40)
    d = np.sqrt(b / 4.0)
    predicted = MqarTask.closed_forms["accuracy_pred"]
    acc = np.array([(pairs * predicted(pairs, dd, dd, vocab)).sum() / pairs.sum() for dd in d])
    (line,) = ax.plot(
        b,
        acc,
        color=color,
        ls=(0, (5, 1.5, 1, 1.5)),
        lw=1.2,
        label="T10 ceiling: additive, random keys, 4 d² bytes",
        zorder=1.5,
    )
    line.set_gid("theory:T10:mqar-ceiling")
    return line
