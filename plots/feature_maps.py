"""Linear attention through feature maps: where interference starts, against the feature dimension D.

A feature map phi writes S = sum phi(k_i)^T v_i, a D x dv state, so the onset of interference
is governed by D and by how orthogonal the features can be (docs/theory.md): positive maps
(elu + 1, ReLU) keep every pair of features at a positive inner product, so interference starts
before n = D. Panels:

- one per key dimension d: mean error against n / D, one colour per map, a marker at n = D and
  the rank bound T8 in D, max(1 - D/n, 0), that no D x dv state with a linear read beats;
- capacity (mean error <= eps) against D, log-log, with the additive memory's closed forms in D:
  1 + eps D for random unit features (T7) and D (1 + eps) for unit features forming a tight
  frame (T5), the most that unit-norm features reach.
"""

from __future__ import annotations

import numpy as np
from capacity.plots import _data, names, theme
from capacity.plots.capacity_vs_d import EPS
from capacity.plots.error_vs_load import FLOOR, theory_curves

from capacity import metrics, theory

__all__ = ["feature_maps"]


def feature_maps(ds, *, eps: float = EPS, metric: str = "mse"):
    """The feature-maps figure of a result Dataset (dims ``feature``, ``d``, ``load``; coord ``feature_dim``)."""
    _data.require(
        ds,
        "feature maps",
        variables=(metric,),
        coords=("n", "feature_dim"),
        dims=("feature", "d", "load"),
        allowed=(*_data.GRID_DIMS, "feature"),
    )
    d_grid, thinned = _data.panels(ds, "d")  # a column per d: at most MAX_PANELS
    d_grid = [int(x) for x in d_grid]
    feats = [str(f) for f in ds["feature"].values]
    colors = theme.palette(feats)
    rows = [(v, k) for v in _data.levels(ds, "variant") for k in _data.levels(ds, "key_family")]
    fdim = ds["feature_dim"]
    notes = []
    several = len(rows) > 1
    with theme.style():
        fig, axes = theme.figure(len(rows), len(d_grid) + 1)
        for r, (variant, keys) in enumerate(rows):
            sub = _data.sel(ds, variant=variant, key_family=keys)
            prefix = ", ".join(
                x
                for x in (
                    names.variant_name(variant) if variant is not None else None,
                    names.keys_name(keys) if keys is not None else None,
                )
                if x
            )
            for c, d in enumerate(d_grid):
                ax = axes[r, c]
                at = sub.sel(d=d)
                df = _data.tidy(at[metric], metric)
                dims_at_d = {str(f): int(fdim.sel(feature=f, d=d)) for f in feats}
                df["load_feature"] = df["n"] / df["feature"].map(dims_at_d)
                if len(df):
                    theme.curves(
                        ax, df, x="load_feature", y=metric, hue="feature", name=names.feature_name, colors=colors
                    )
                lo, hi = float(df["load_feature"].min()), float(df["load_feature"].max())
                theory_curves(
                    ax, max(dims_at_d.values()), lo, hi, which=("T8",)
                )  # a function of n / D alone: one line for every D
                theme.mark_x(ax, 1.0, label="n = D", gid="marker:n=D")
                theme.load_axis(ax)
                ax.set_ylim(bottom=FLOOR)
                ax.set_xlabel(names.AXIS["load_feature"])
                ax.set_ylabel(names.AXIS.get(metric, metric) if c == 0 else "")
                ax.set_title(f"{prefix + ', ' if several else ''}d = {d}")
            ax = axes[r, -1]
            cap = metrics.capacity(sub, metric=metric, threshold=eps)  # [feature, d, seed]
            df = _data.tidy(cap, "capacity")
            df["feature_dim"] = [int(fdim.sel(feature=f, d=d)) for f, d in zip(df["feature"], df["d"])]
            if len(df):
                theme.curves(
                    ax,
                    df,
                    x="feature_dim",
                    y="capacity",
                    hue="feature",
                    name=names.feature_name,
                    colors=colors,
                    err_style="bars",
                )
            all_dims = np.unique(np.asarray(fdim.values, dtype=float))
            dense = np.geomspace(all_dims.min(), all_dims.max(), 48) if all_dims.size > 1 else all_dims
            theme.theory_line(
                ax,
                dense,
                theory.capacity_random_keys(eps, dense),
                theorem="T7",
                label="T7 in D: 1 + ε D (random unit features)",
            )
            theme.theory_line(
                ax,
                dense,
                theory.capacity_tight_frame(eps, dense),
                theorem="T5",
                label="T5 in D: D (1 + ε) (tight frame, unit features)",
                ls=(0, (1, 1)),
            )
            theme.grid_axis(ax, all_dims.astype(int))
            ax.set_xlabel(names.AXIS["feature_dim"])
            ax.set_ylabel(names.AXIS["capacity"])
            ax.set_title(f"{prefix + ': ' if several else ''}capacity, mean error ≤ ε = {eps:g}")
            text = _data.undetermined_note(
                _data.undetermined(sub, metric, eps), f"{prefix + ' ' if prefix else ''}capacity"
            )
            if text:
                notes.append(text)
        theme.legend(fig, axes, title="feature map / theory")
        nseeds = ds.sizes.get("seed", 1)
        single = (
            ""
            if several
            else ", ".join(
                x
                for x in (
                    names.variant_name(rows[0][0]) if rows[0][0] is not None else None,
                    names.keys_name(rows[0][1]) if rows[0][1] is not None else None,
                )
                if x
            )
        )
        head = f"{single}. " if single else ""
        theme.note(
            fig,
            " ".join(
                [head + theme.SEEDS_NOTE + f" ({nseeds} seed{'s' if nseeds != 1 else ''}).", *notes, thinned]
            ).rstrip(),
        )
    return theme.finish(fig, "feature-maps")
