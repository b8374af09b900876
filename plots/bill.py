"""The bill (T13): what softmax and linear attention keep and spend per head, against n.

Left: numbers kept per head after n writes, measured (``state_numel``), next to T13's
n (d + dv) for the KV cache and d dv for the linear state, with the break-even
n = d dv / (d + dv) (d/2 when dv = d) marked. Right: measured decode time per token
(``decode_seconds``, mean over seeds with its standard error) and, on the right-hand axis,
T13's FLOPs per token, 2 n (d + dv) against 4 d dv, with their break-even 2 d dv / (d + dv)
(d when dv = d) marked. One row per key dimension d.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from capacity.plots import _data, names, theme

from capacity import theory

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure


def bill(ds: xr.Dataset) -> Figure:
    """The bill figure of a result Dataset (dims ``variant``, ``d``, ``n``; ``state_numel``, ``decode_seconds``)."""
    _data.require(
        ds,
        "bill",
        variables=("state_numel", "decode_seconds"),
        coords=("dv",),
        dims=("variant", "d", "n"),
        allowed=("variant", "d", "n", "seed"),
    )
    d_grid, thinned = _data.panels(ds, "d")  # a row per d: at most MAX_PANELS
    d_grid = [int(x) for x in d_grid]
    var_labels = [str(v) for v in ds["variant"].values]
    colors = theme.palette(var_labels)
    ns = np.asarray(ds["n"].values, dtype=float)
    dense = np.geomspace(max(ns.min(), 1.0), ns.max(), 96)
    soft, lin = colors.get("softmax", "0.15"), colors.get("linear", "0.15")
    with theme.style():
        fig, axes = theme.figure(len(d_grid), 2, legend_width=3.4)
        for r, d in enumerate(d_grid):
            dv = _data.dv_of(ds, d)
            t = theory.bill(dense, d, dv)
            sub = ds.sel(d=d)

            ax = axes[r, 0]
            df = _data.tidy(sub["state_numel"], "state_numel")
            if len(df):
                theme.curves(ax, df, x="n", y="state_numel", hue="variant", name=names.variant_name, colors=colors)
            theme.theory_line(
                ax, dense, t["softmax_cache"], theorem="T13:softmax_cache", label="T13 KV cache: n (d + dv)", color=soft
            )
            theme.theory_line(
                ax, dense, t["linear_state"], theorem="T13:linear_state", label="T13 linear state: d dv", color=lin
            )
            cache_even = theory.break_even_n(d, dv)
            theme.mark_x(ax, float(cache_even), label=f"break-even n = {cache_even:g}", gid="marker:break-even:cache")
            theme.log2_x(ax)
            ax.set_yscale("log")
            ax.set_xlabel(names.AXIS["n"])
            ax.set_ylabel(names.AXIS["state_numel"])
            ax.set_title(f"memory kept, d = {d}, dv = {dv}")

            ax = axes[r, 1]
            df = _data.tidy(sub["decode_seconds"], "decode_seconds")
            if len(df):
                theme.curves(ax, df, x="n", y="decode_seconds", hue="variant", name=names.variant_name, colors=colors)
            theme.log2_x(ax)
            ax.set_yscale("log")
            ax.set_xlabel(names.AXIS["n"])
            ax.set_ylabel(names.AXIS["decode_seconds"])
            ax.set_title(f"decode cost per token, d = {d}, dv = {dv}")
            twin = ax.twinx()
            twin.grid(False)
            theme.theory_line(
                twin,
                dense,
                t["softmax_decode_flops"],
                theorem="T13:softmax_decode_flops",
                label="T13 softmax decode: 2 n (d + dv) FLOPs",
                color=soft,
                ls=":",
            )
            theme.theory_line(
                twin,
                dense,
                t["linear_decode_flops"],
                theorem="T13:linear_decode_flops",
                label="T13 linear decode: 4 d dv FLOPs",
                color=lin,
                ls=":",
            )
            twin.set_yscale("log")
            twin.set_ylabel(names.AXIS["decode_flops"])
            flops_even = theory.break_even_n(d, dv, measure="flops")
            theme.mark_x(
                ax, float(flops_even), label=f"FLOPs break-even n = {flops_even:g}", gid="marker:break-even:flops"
            )
        theme.legend(
            fig,
            [ax for row in axes for ax in row] + [a for a in fig.axes if a not in np.ravel(axes)],
            title="memory / theory",
        )
        nseeds = ds.sizes.get("seed", 1)
        what = ds["decode_seconds"].attrs.get("description", "measured decode time")
        theme.note(
            fig,
            f"Measured: markers (state sizes counted from the state after n writes; decode times: {what}; mean over {nseeds} seed{'s' if nseeds != 1 else ''}, band one standard error of the mean). Dashed and dotted: T13 closed forms. {thinned}".rstrip(),
        )
    return theme.finish(fig, "bill")
