"""Log-linear attention against its base memory at the same state bytes: argmax recall and state size against n.

One column per log-linear memory of the Dataset, drawn at the smallest key dimension d0 of the grid (its state
grows: floor(log2 n) + 1 levels of d0 dv numbers). Beside it, in the base memory's colour (``linear``, ``decay`` or
``gated_delta`` with the same gate and step): the base at the same bytes (solid), at each n the grid's d whose
d dv state holds exactly the log-linear state's numbers (d = d0 (floor(log2 n) + 1) when the grid has it), and the
base at d0 (dashed), the same keys' width and a fixed state. Top row: argmax recall (mean over seeds, band of one standard error);
bottom row: the state's bytes at float32 (from the recorded ``state_numel``). Dotted verticals mark the powers of
two, where every pair of a log-linear memory sits in one bucket and it reads as its base at d0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from lacapacity.errors import CapacityError
from lacapacity.plots import _data, theme

if TYPE_CHECKING:
    import numpy.typing as npt
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import ColorType, LineStyleType


def _base_of(ds: xr.Dataset, variant: object) -> str | None:
    """The label of the base memory of log-linear ``variant`` among the Dataset's variants, or None."""
    found = _data.memory(ds, variant)
    if found is None or found[0].form != "log_linear":
        return None
    params = found[1]
    base, alpha, beta = params.get("base", "linear"), float(params.get("alpha", 1.0)), float(params.get("beta", 1.0))
    # the family of the base memory at these parameters: a gated linear base is the decay memory
    want = "decay" if base == "linear" and alpha != 1.0 else {"linear": "additive"}.get(str(base), str(base))
    for other in _data.levels(ds, "variant"):
        got = _data.memory(ds, other)
        if got is None or got[0].form != want:
            continue
        p = got[1]
        if want != "additive" and float(p.get("alpha", 1.0)) != alpha:
            continue
        if want == "gated_delta" and float(p.get("beta", 1.0)) != beta:
            continue
        return str(other)
    return None


def equal_bytes(
    ds: xr.Dataset, variant: object, base: object
) -> tuple[npt.NDArray[np.int_], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """For each n of the grid: the d at which ``base`` keeps as many numbers as log-linear ``variant`` at the grid's
    smallest d (0 where no d of the grid does), and the two states' numbers, ``(d [n], numel_ll [n], numel_base [n])``.
    Needs ``state_numel`` over (variant, d, n)."""
    sub = _squeeze(ds)
    d0 = int(min(sub["d"].values))
    numel = sub["state_numel"]
    if "seed" in numel.dims:
        numel = numel.max("seed")  # the same for every seed
    ll = np.asarray(numel.sel(variant=variant, d=d0).values, dtype=float)
    table = numel.sel(variant=base)  # [d, n]
    ds_ = np.asarray(table["d"].values, dtype=int)
    chosen = np.zeros(len(ll), dtype=int)
    kept = np.full(len(ll), np.nan)
    for i, target in enumerate(ll):
        row = np.asarray(table.isel(n=i).values, dtype=float)
        hit = np.nonzero(row == target)[0]
        if hit.size:
            chosen[i], kept[i] = ds_[hit[0]], row[hit[0]]
    return chosen, ll, kept


def _squeeze(ds: xr.Dataset) -> xr.Dataset:
    return ds.squeeze("key_family", drop=True) if "key_family" in ds.dims else ds


def log_linear_bytes(ds: xr.Dataset) -> Figure:
    """The log-linear figure: recall and state bytes against n, log-linear beside its base at the same bytes."""
    _data.require(
        ds,
        "log-linear",
        variables=("recall", "state_numel"),
        coords=("n", "dv"),
        dims=("variant", "d", "n"),
        allowed=("variant", "key_family", "d", "n", "seed"),
    )
    if ds.sizes.get("key_family", 1) != 1:
        raise CapacityError("the log-linear figure draws one key family; select it first")
    sub = _squeeze(ds)
    found = [(v, _base_of(sub, v)) for v in _data.levels(sub, "variant")]
    pairs = [(v, b) for v, b in found if b is not None]
    if not pairs:
        raise CapacityError(
            "the log-linear figure needs a log_linear memory and its base (linear, decay or gated_delta with the same "
            "gate and step) among the variants"
        )
    d0 = int(min(sub["d"].values))
    dv = _data.dv_of(sub, d0)
    ns = np.asarray(sub["n"].values, dtype=float)
    colors = theme.palette([b for _, b in pairs] + [v for v, _ in pairs])
    missing = 0
    with theme.style():
        fig, axes = theme.figure(2, len(pairs), sharex=True, sharey="row")
        for c, (v, b) in enumerate(pairs):
            chosen, ll_numel, base_numel = equal_bytes(sub, v, b)
            missing += int((chosen == 0).sum())
            top, bottom = axes[0, c], axes[1, c]
            rec = sub["recall"]

            def band(
                ax: Axes, da: xr.DataArray, *, color: ColorType, label: str, ls: LineStyleType = "-", marker: str = "o"
            ) -> None:
                if "seed" not in da.dims:
                    da = da.expand_dims("seed")
                m = np.asarray(da.mean("seed"), float)  # NaN where no seed has a value
                se = np.asarray(theme.standard_error(da), float)
                fill = ax.fill_between(ns, m - se, m + se, color=color, alpha=0.15, lw=0)
                fill.set_gid(theme.RANGE_GID + label)
                (line,) = ax.plot(ns, m, ls=ls, marker=marker, ms=3.5, lw=1.5, color=color, label=label)
                line.set_gid(theme.MEASURED_GID + label)

            band(top, rec.sel(variant=v, d=d0), color=colors[v], label=f"{v}, d = {d0} (grows)")
            same = np.stack(
                [
                    np.asarray(rec.sel(variant=b, d=int(dd), n=n).values, float)
                    if dd
                    else np.full(rec.sizes.get("seed", 1), np.nan)
                    for dd, n in zip(chosen, ns)
                ]
            )  # [n, seed]
            band(
                top, xr.DataArray(same, dims=("n", "seed")), color=colors[b], label=f"{b} at the same bytes", marker="s"
            )
            band(top, rec.sel(variant=b, d=d0), color=colors[b], label=f"{b}, d = {d0}", ls="--", marker="")
            kib = 4 / 1024  # float32 numbers -> KiB
            bottom.plot(ns, ll_numel * kib, marker="o", ms=3.5, lw=1.5, color=colors[v], label=f"{v}, d = {d0} (grows)")
            bottom.plot(ns, base_numel * kib, marker="s", ms=3, lw=0, color=colors[b], label=f"{b} at the same bytes")
            fixed = np.full(len(ns), float(np.max(sub["state_numel"].sel(variant=b, d=d0).values)))
            bottom.plot(ns, fixed * kib, ls="--", lw=1.2, color=colors[b], label=f"{b}, d = {d0}")
            for i, (dd, n) in enumerate(zip(chosen, ns)):
                if dd and (i == 0 or chosen[i - 1] != dd):  # the base's d at the same bytes, where it changes
                    bottom.annotate(
                        f"d={dd}",
                        xy=(n, base_numel[i] * kib),
                        xytext=(0, -11),
                        textcoords="offset points",
                        fontsize="xx-small",
                        color=colors[b],
                        ha="left",
                    )
            top.set_title(f"{v}\nagainst {b}")
            for ax in (top, bottom):
                theme.log2_x(ax)
                for n in ns:
                    if int(n) & (int(n) - 1) == 0:
                        ax.axvline(n, color="0.8", lw=0.8, ls=":", zorder=0)
            top.set_ylim(-0.02, 1.02)
            bottom.set_ylim(bottom=0)
        axes[0, 0].set_ylabel("argmax recall")
        axes[1, 0].set_ylabel("state, KiB (float32)")
        for ax in axes[1]:
            ax.set_xlabel("n (pairs written)")
        theme.legend(fig, axes)
        text = (
            f"Random keys (d as marked) and values (dv = {dv}). The base at the same bytes uses, at each n, the key "
            f"dimension d whose d x dv state holds as many numbers as the log-linear state at d = {d0}, "
            f"d = {d0} (floor(log2 n) + 1). Dotted: powers of two, where log-linear reads as its base at d = {d0}. "
            + theme.SEEDS_NOTE
        )
        if missing:
            text += f" {missing} points have no d of the grid at the same bytes and are not drawn."
        theme.note(fig, text)
    return theme.finish(fig, "log-linear")
