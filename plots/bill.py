"""The bill (T13): what softmax and linear attention keep and spend per head, against n.

Left: numbers kept per head after n writes, measured (``state_numel``), next to T13's
n (d + dv) for the KV cache and d dv for the linear state, with the break-even
n = d dv / (d + dv) (d/2 when dv = d) marked. Right: measured decode time per token
(``decode_seconds``, mean over seeds with its standard error) and, on the right-hand axis,
T13's FLOPs per token, 2 n (d + dv) against 4 d dv, with their break-even 2 d dv / (d + dv)
(d when dv = d) marked. One row per key dimension d.

T13's lines are the closed-form variables the bill task stores (``softmax_cache``, ``linear_state``,
``softmax_decode_flops``, ``linear_decode_flops``, over n), read here, not computed again: straight lines on the
log-log axes, so the stored n draw them exactly; each break-even is where the stored lines cross (softmax's grow
in proportion to n).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lacapacity.plots import _data, names, theme

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure

_T13 = ("softmax_cache", "linear_state", "softmax_decode_flops", "linear_decode_flops")  # stored by the bill task


def _crossing(softmax: np.ndarray, linear: np.ndarray, ns: np.ndarray) -> float:
    """The n at which softmax's stored line (proportional to n) meets linear's (constant): T13's break-even."""
    return float(linear[0] * ns[0] / softmax[0])


def bill(ds: xr.Dataset) -> Figure:
    """The bill figure of a result Dataset (dims ``variant``, ``d``, ``n``; ``state_numel``, ``decode_seconds``)."""
    _data.require(
        ds,
        "bill",
        variables=("state_numel", "decode_seconds", *_T13),
        coords=("dv",),
        dims=("variant", "d", "n"),
        allowed=("variant", "d", "n", "seed"),
    )
    d_grid, thinned = _data.panels(ds, "d")  # a row per d: at most MAX_PANELS
    d_grid = [int(x) for x in d_grid]
    var_labels = [str(v) for v in ds["variant"].values]
    colors = theme.palette(var_labels)
    ns = np.asarray(ds["n"].values, dtype=float)
    soft, lin = colors.get("softmax", "0.15"), colors.get("linear", "0.15")
    with theme.style():
        fig, axes = theme.figure(len(d_grid), 2, legend_width=3.4)
        for r, d in enumerate(d_grid):
            dv = _data.dv_of(ds, d)
            sub = ds.sel(d=d)
            t = {name: np.asarray(sub[name].transpose("n").values, dtype=float) for name in _T13}  # over n

            ax = axes[r, 0]
            df = _data.tidy(sub["state_numel"], "state_numel")
            if len(df):
                theme.curves(ax, df, x="n", y="state_numel", hue="variant", name=names.variant_name, colors=colors)
            theme.theory_line(
                ax, ns, t["softmax_cache"], theorem="T13:softmax_cache", label="T13 KV cache: n (d + dv)", color=soft
            )
            theme.theory_line(
                ax, ns, t["linear_state"], theorem="T13:linear_state", label="T13 linear state: d dv", color=lin
            )
            cache_even = _crossing(t["softmax_cache"], t["linear_state"], ns)
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
                ns,
                t["softmax_decode_flops"],
                theorem="T13:softmax_decode_flops",
                label="T13 softmax decode: 2 n (d + dv) FLOPs",
                color=soft,
                ls=":",
            )
            theme.theory_line(
                twin,
                ns,
                t["linear_decode_flops"],
                theorem="T13:linear_decode_flops",
                label="T13 linear decode: 4 d dv FLOPs",
                color=lin,
                ls=":",
            )
            twin.set_yscale("log")
            twin.set_ylabel(names.AXIS["decode_flops"])
            flops_even = _crossing(t["softmax_decode_flops"], t["linear_decode_flops"], ns)
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
