"""Keys of a pretrained model next to random keys and tight frames: error against load, and coherence.

One row per d. One panel per memory (variant): mean error against load n/d, one colour per key
family (mean over seeds, standard-error band), with the closed forms drawn where they hold: T5 (frame
bound) and T7 (random keys) for the additive memory, T8 (rank bound) for every memory. A last
panel: the keys' mean squared coherence mean_{i != j} (k_i . k_j)^2 against load, next to the
random-key value 1/d (T7) and the tight-frame value (n/d - 1)/(n - 1) for n > d (T5 equality),
which no unit keys beat. The additive memory's error is (n - 1) times that coherence (T4), so
the last panel says why a key family sits above or below the T7 line in the first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lacapacity import theory
from lacapacity.plots import _data, names, theme
from lacapacity.plots.error_vs_load import FLOOR, family_curves, theory_curves

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure


def _additive(ds: xr.Dataset, variant: object) -> bool:
    return _data.reads(ds, variant)[0]


def pretrained_keys(ds: xr.Dataset, *, metric: str = "mse") -> Figure:
    """The pretrained-keys figure of a result Dataset (dims ``d``, ``load``; variables ``metric`` and
    ``mean_sq_coherence``)."""
    stat = "mean_sq_coherence"
    _data.require(ds, "pretrained keys", variables=(metric, stat), coords=("n",), dims=("d", "load"))
    variants = _data.levels(ds, "variant")
    d_grid, thinned = _data.panels(ds, "d")  # a row per d: at most MAX_PANELS
    d_grid = [int(x) for x in d_grid]
    colors = theme.palette(_data.families(ds))
    loads = np.asarray(ds["load"].values, dtype=float)
    below = 0
    with theme.style():
        fig, axes = theme.figure(len(d_grid), len(variants) + 1)
        for r, d in enumerate(d_grid):
            for c, variant in enumerate(variants):
                ax = axes[r, c]
                below += family_curves(ax, _data.sel(ds, variant=variant, d=d)[metric], metric, colors)
                which = ("T5", "T7", "T8") if _additive(ds, variant) else ("T8",)
                theory_curves(ax, ds, d, float(loads.min()), float(loads.max()), which=which)
                theme.mark_x(ax, 1.0, label="n = d", gid="marker:n=d")
                theme.load_axis(ax)
                ax.set_ylim(bottom=FLOOR)
                ax.set_title(f"d = {d}" if variant is None else f"{names.variant_name(variant)}, d = {d}")
                ax.set_xlabel(names.AXIS["load"] if r == len(d_grid) - 1 else "")
                ax.set_ylabel(names.AXIS.get(metric, metric) if c == 0 else "")
            ax = axes[r, -1]  # the keys' coherence: the same keys for every memory, so the first variant's
            first = _data.sel(ds, variant=variants[0], d=d)
            below += family_curves(ax, first[stat], stat, colors)  # orthonormal keys (n <= d): zero up to rounding
            x = np.geomspace(max(float(loads.min()), 1.0 / d), float(loads.max()), 96)  # [points], n / d
            label = "T7 random keys: 1/d"
            theme.theory_line(ax, x, np.full_like(x, 1.0 / d), theorem="T7:coherence", label=label, ls=":")
            frame = x[x * d > d]
            label = "T5 tight frame: (n/d − 1)/(n − 1)"
            theme.theory_line(
                ax, frame, theory.tight_frame_coherence(frame * d, d), theorem="T5:coherence", label=label
            )
            theme.mark_x(ax, 1.0, label="n = d", gid="marker:n=d")
            theme.load_axis(ax)
            ax.set_ylim(bottom=FLOOR)
            ax.set_title(f"key coherence, d = {d}")
            ax.set_xlabel(names.AXIS["load"] if r == len(d_grid) - 1 else "")
            ax.set_ylabel("mean (k_i·k_j)², i ≠ j (dimensionless)")
        theme.legend(fig, axes, title="key family / theory")
        nseeds = ds.sizes.get("seed", 1)
        text = (
            theme.SEEDS_NOTE + f" ({nseeds} seed{'s' if nseeds != 1 else ''}). T5 and T7 hold for the additive memory,"
            " T8 for any d x dv state with a linear read. Right: the keys' mean squared coherence (the same keys feed"
            " every memory); the additive memory's error is (n − 1) times it (T4)."
        )
        if below:
            text += f" {below} measured points below {FLOOR:g} (exact recall, orthonormal keys) lie under the axes."
        theme.note(fig, f"{text} {thinned}".rstrip())
    return theme.finish(fig, "pretrained-keys")
