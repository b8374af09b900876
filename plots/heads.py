"""Capacity against the number of heads H, at a fixed key width d and at a fixed state size (T20).

Left: the capacity at mean error <= eps against H, one line per d (H heads of d/H key and value dimensions), with
T20's 1 + eps d / min(H, HV) for the additive memory. Second: the same at argmax recall >= tau, with T10 in the
effective key dimension d / min(H, HV) (``theory.argmax_capacity``, its conservative Gaussian bound). Third and
fourth: the layouts whose state holds the same number of numbers, d dv / min(H, HV) = N for the N the grid has most
often, capacity against H at each criterion, with T20 and T10 drawn through them. Mean over seeds with standard-error bars.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lacapacity import theory
from lacapacity.errors import CapacityError
from lacapacity.plots import _data, names, theme
from lacapacity.plots.capacity_vs_d import EPS, TAU
from lacapacity.tasks import metrics

if TYPE_CHECKING:
    import numpy.typing as npt
    import xarray as xr
    from matplotlib.figure import Figure


def heads_capacity(ds: xr.Dataset, *, eps: float = EPS, tau: float = TAU) -> Figure:
    """The heads figure of a Dataset with dims ``variant``, ``d``, ``load`` and ``heads`` (value heads = heads)."""
    _data.require(
        ds,
        "heads",
        variables=("mse",),
        coords=("n", "dv"),
        dims=("d", "load", "heads"),
        allowed=("variant", "key_family", "d", "load", "seed", "heads"),
    )
    if ds.sizes.get("key_family", 1) != 1:
        raise CapacityError(
            "the heads figure draws one key family; select one first, e.g. ds.sel(key_family='gaussian')"
        )
    sub = ds.squeeze("key_family", drop=True) if "key_family" in ds.dims else ds
    variants = [str(v) for v in _data.levels(sub, "variant")]
    colors = theme.palette(variants)
    H = [int(h) for h in sub["heads"].values]
    HV = [int(h) for h in np.ravel(sub["value_heads"].values)] if "value_heads" in sub.coords else H
    lo = dict(zip(H, [min(a, b) for a, b in zip(H, HV)]))
    ds_ = [int(x) for x in sub["d"].values]
    sizes = Counter(_data.dv_of(sub, d) * d // lo[h] for d in ds_ for h in H)
    N = sizes.most_common(1)[0][0]
    criteria = [("mse", float(eps), f"mean error ≤ ε = {eps:g}")]
    if "recall" in sub.data_vars:
        criteria.append(("recall", float(tau), f"argmax recall ≥ τ = {tau:g}"))
    with theme.style():
        fig, axes = theme.figure(1, 2 * len(criteria))
        caps = {m: metrics.capacity(sub, metric=m, threshold=t) for m, t, _ in criteria}  # [variant, d, heads, seed]
        for c, (metric, thr, crit) in enumerate(criteria):
            ax = axes[0, c]
            for i, d in enumerate(ds_):
                rows = [
                    {"variant": v, "heads": h, "capacity": float(x)}
                    for v in variants
                    for h in H
                    for x in np.atleast_1d(
                        _data.sel(caps[metric], variant=v if "variant" in sub.dims else None).sel(d=d, heads=h).values
                    )
                    if np.isfinite(x)
                ]
                df = pd.DataFrame(rows)
                if len(df):
                    df["variant"] = df["variant"] + f"|d = {d}"
                    shade = {f"{v}|d = {d}": theme._blend(colors[v], (1, 1, 1), len(ds_) + 1)[i] for v in variants}
                    theme.curves(
                        ax,
                        df,
                        x="heads",
                        y="capacity",
                        hue="variant",
                        name=lambda s: names.variant_name(s.split("|")[0]) + ", " + s.split("|")[1],
                        colors=shade,
                        err_style="bars",
                    )
                hs = np.asarray(H, float)
                dv = _data.dv_of(sub, d)
                eff = np.asarray([d / lo[h] for h in H], float)
                if metric == "mse":
                    y: npt.ArrayLike = theory.heads_capacity(thr, d, hs, np.asarray([HV[H.index(h)] for h in H], float))
                    label = "T20 additive, random keys: 1 + ε d / min(H, HV)"
                else:
                    y = np.asarray([theory.argmax_capacity(e, dv, thr) for e in eff], float)
                    label = "T10 with d / min(H, HV) for d (additive)"
                theme.theory_line(ax, hs, y, theorem=f"T20:d={d}" if metric == "mse" else f"T10:d={d}", label=label)
            theme.grid_axis(ax, H)
            ax.set_title(crit + ", fixed d")
            ax.set_xlabel("key heads H (each d/H dimensions)")
        on = [(d, h) for d in ds_ for h in H if _data.dv_of(sub, d) * d // lo[h] == N]
        for c, (metric, thr, crit) in enumerate(criteria):  # the same state size, laid out in more heads
            ax = axes[0, len(criteria) + c]
            rows = [
                {"variant": v, "heads": h, "capacity": float(x)}
                for v in variants
                for d, h in on
                for x in np.atleast_1d(
                    _data.sel(caps[metric], variant=v if "variant" in sub.dims else None).sel(d=d, heads=h).values
                )
                if np.isfinite(x)
            ]
            if rows:
                theme.curves(
                    ax,
                    pd.DataFrame(rows),
                    x="heads",
                    y="capacity",
                    hue="variant",
                    name=names.variant_name,
                    colors=colors,
                    err_style="bars",
                )
            if on:
                hs = np.asarray([h for _, h in on], float)
                if metric == "mse":
                    y = [float(theory.heads_capacity(thr, d, h, HV[H.index(h)])) for d, h in on]
                    label, thm = "T20 additive, random keys: 1 + ε d / min(H, HV)", "T20:fixed-state"
                else:
                    y = [float(theory.argmax_capacity(d / lo[h], _data.dv_of(sub, d), thr)) for d, h in on]
                    label, thm = "T10 with d / min(H, HV) for d (additive)", "T10:fixed-state"
                theme.theory_line(ax, hs, y, theorem=thm, label=label)
            theme.grid_axis(ax, [h for _, h in on] or H)
            ax.set_title(f"{crit}, fixed state of {N} numbers")
            ax.set_xlabel("key heads H (d = " + ", ".join(str(d) for d, _ in on) + ")")
        for a in axes[0]:
            a.set_ylabel(names.AXIS["capacity"])
        theme.legend(fig, axes, title="memory, d / theory")
        nseeds = sub.sizes.get("seed", 1)
        theme.note(
            fig,
            theme.SEEDS_NOTE
            + f" ({nseeds} seed{'s' if nseeds != 1 else ''}). H heads of d/H key and value dimensions, each key slice"
            " normalised on its own (lacapacity.variants.heads); a fixed state of N numbers: the layouts with d dv / min(H, HV) = N.",
        )
    return theme.finish(fig, "heads")
