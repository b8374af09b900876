"""Linear attention through feature maps: where interference starts, against the feature dimension D.

A feature map phi writes S = sum phi(k_i)^T v_i, a D x dv state, so the onset of interference
is governed by D and by how orthogonal the features can be (docs/theory.md): positive maps
(elu + 1, ReLU) keep every pair of features at a positive inner product, so interference starts
before n = D. Panels:

- one per key dimension d: mean error against n / D, one colour per map, a marker at n = D, the
  rank bound T8 in D, max(1 - D/n, 0), that no D x dv state with a linear read beats, and each
  map's own closed form (n - 1) rho2 (T25-T28, ``lacapacity.theory.feature_crosstalk``), dashed in
  the map's colour, where the memory is the linear one with L2-normalised features;
- capacity (mean error <= eps) against D, log-log: each map's closed form 1 + eps / rho2 (dashed,
  the map's colour) and the frame bound T5 in D, D (1 + eps), the most that unit-norm features
  reach with the additive write. (T7 in D, 1 + eps D, is the identity map's own line: no other
  map's features are random unit vectors in R^D.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from lacapacity import theory
from lacapacity.errors import CapacityError
from lacapacity.plots import _data, names, theme
from lacapacity.plots.capacity_vs_d import EPS
from lacapacity.plots.error_vs_load import FLOOR, theory_curves
from lacapacity.tasks import metrics

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from lacapacity.plots._data import Level


THEORY_LABEL = "T25–T28 closed form of each map: (n − 1) ρ² (dashed, the map's colour)"


def _unit_feature_linear(ds: xr.Dataset, variant: object) -> bool:
    """Whether ``variant`` (a label, or None: no variant axis) is of the additive family with L2-normalised features
    and a plain read, the memory T25-T28 describe (its family as it declares it, its parameters as ``ds`` records
    them)."""
    found = _data.memory(ds, variant)
    if found is None:
        return False
    said, params = found
    plain = params.get("normalize") is True and not params.get("normalize_read", False)
    return said.form == "additive" and plain


def _crosstalk(ds: xr.Dataset, feature: str, d: int) -> float | None:
    """rho2 of the map labelled ``feature`` in ``ds`` at key dimension d, or None where no closed form is known."""
    base, params = _data.spec(ds, "feature", feature)
    params = {k: v for k, v in params.items() if k not in ("seed", "orthogonal")}  # T28 averages over the draw
    try:
        return float(theory.feature_crosstalk(base, d, **params))
    except CapacityError:
        return None


def feature_maps(ds: xr.Dataset, *, eps: float = EPS, metric: str = "mse") -> Figure:
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
    rows: list[tuple[Level, Level]] = [
        (v, k) for v in _data.levels(ds, "variant") for k in _data.levels(ds, "key_family")
    ]
    fdim = ds["feature_dim"]
    notes: list[str] = []
    no_form: list[str] = []
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
                    ax, ds, max(dims_at_d.values()), lo, hi, which=("T8",)
                )  # a function of n / D alone: one line for every D
                if _unit_feature_linear(ds, variant):
                    _map_lines(ds, ax, feats, dims_at_d, d, lo, hi, colors, no_form)
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
            if _unit_feature_linear(ds, variant):
                for f in feats:
                    pts: Sequence[tuple[int, float | None]]
                    pts = [(int(fdim.sel(feature=f, d=d)), _crosstalk(ds, f, d)) for d in d_grid]
                    pts = [(D, 1.0 + eps / r) for D, r in pts if r is not None]
                    if pts:
                        xs, ys = zip(*pts)
                        theme.theory_line(
                            ax, xs, ys, theorem=f"T25-T28:{f}", label="_" + THEORY_LABEL, color=colors[f], lw=1.0
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
        if any(_unit_feature_linear(ds, v) for v, _ in rows):
            (proxy,) = axes[0, 0].plot([], [], ls="--", color="0.45", lw=1.0, label=THEORY_LABEL)
            proxy.set_gid("legend:T25-T28")
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
        if any(_unit_feature_linear(ds, v) for v, _ in rows):
            notes.append(
                "Dashed: each map's closed form for L2-normalised features and random unit keys (T25 identity and "
                "Taylor, exact; T26 ReLU exact, elu + 1 with Gaussian coordinates; T27 DPFP, ratio of exact moments; "
                "T28 Performer over i.i.d. projections, orthogonal ones measure 2–3% lower)."
            )
        else:
            notes.append(
                "No closed form drawn per map: T25–T28 describe the linear memory with L2-normalised features."
            )
        if no_form:
            notes.append(f"No closed form is known for: {', '.join(sorted(set(no_form)))}.")
        theme.note(
            fig,
            " ".join(
                [head + theme.SEEDS_NOTE + f" ({nseeds} seed{'s' if nseeds != 1 else ''}).", *notes, thinned]
            ).rstrip(),
        )
    return theme.finish(fig, "feature-maps")


def _map_lines(
    ds: xr.Dataset,
    ax: Axes,
    feats: list[str],
    dims_at_d: dict[str, int],
    d: int,
    lo: float,
    hi: float,
    colors: theme.Colors,
    no_form: list[str],
) -> None:
    """Each map's (n - 1) rho2 against n / D on one panel (key dimension d)."""
    for f in feats:
        rho2 = _crosstalk(ds, f, d)
        if rho2 is None:
            no_form.append(names.feature_name(f))
            continue
        D = dims_at_d[f]
        n = np.unique(np.round(np.geomspace(max(lo * D, 2.0), max(hi * D, 2.0), 64)))
        theme.theory_line(
            ax, n / D, (n - 1.0) * rho2, theorem=f"T25-T28:{f}", label="_" + THEORY_LABEL, color=colors[f], lw=1.0
        )
