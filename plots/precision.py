"""Error and argmax recall against n for each state dtype and rounding, with the rounding closed forms (T14-T19).

One row per memory (variant), two columns: mean error and argmax recall against n (mean over seeds, standard-error band;
the recall over the last pairs written, ``recall_recent``, where the results hold it, else over all pairs),
colour by ``state_dtype`` (float32 in black), dashes by ``rounding``. In the error column each dtype's prediction
is drawn as a thin line of its colour: the float32 curve plus the predicted deviation of a read (``step`` rounding:
T15, with T18 for decay and T19 for the delta rules; round-to-nearest, the study's default). Each dtype's measured
departure from the float32 curve (the first n where its error differs by more than ``DEPART`` of the float32
error) is a marker; the predicted departure (where the predicted deviation reaches that share) is a short tick of
the same colour on the x axis, so the two can be read side by side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from matplotlib.ticker import FixedLocator, FuncFormatter

from lacapacity import theory
from lacapacity.errors import CapacityError
from lacapacity.plots import _data, names, theme

if TYPE_CHECKING:
    import numpy.typing as npt
    import xarray as xr
    from matplotlib.figure import Figure

    from lacapacity.plots._data import Level
    from lacapacity.theory._common import Floats

# (memory kind of theory.step_rounding_error, alpha, beta)
Memory = tuple[str, float, float]


DEPART = 0.05  # a curve leaves the float32 curve where its error differs by more than this share
# the declared family (lacapacity.variants.Declares.form) -> the memory kind theory.step_rounding_error takes
_KINDS = {"additive": "linear", "decay": "decay", "delta": "delta", "gated_delta": "gated_delta"}


def _memory(ds: xr.Dataset, variant: str) -> Memory | None:
    """(memory kind of theory.step_rounding_error, alpha, beta) for a plain built-in of a family T15-T19 cover, or
    None; its family as it declares it, its parameters as the results record them (``plots._data.memory``): linear
    and delta have no gate (alpha 1), linear no beta (1)."""
    found = _data.memory(ds, variant)
    if found is None or found[0].form not in _KINDS:
        return None
    said, params = found
    family = str(said.form)
    if params.get("feature") is not None or (
        family in ("delta", "gated_delta") and params.get("normalize") is not True
    ):
        return None  # T15-T19 take unit keys: the delta rules normalise them unless told not to
    alpha, beta = params.get("alpha", 1.0), params.get("beta", 1.0)
    if isinstance(alpha, (list, tuple)) or isinstance(beta, (list, tuple)):
        return None  # drawn per token: no closed form here
    return _KINDS[family], float(alpha), float(beta)


def _mean(da: xr.DataArray) -> xr.DataArray:
    return da.mean("seed") if "seed" in da.dims else da


def departures(ds: xr.Dataset, *, share: float = DEPART) -> dict[tuple[Level, str, Level], float]:
    """(variant, state_dtype, rounding) -> the first n where the mean error differs from the float32 mean error by
    more than ``share`` of it (NaN if never on the grid), from a Dataset with ``state_dtype`` and ``rounding``."""
    out: dict[tuple[Level, str, Level], float] = {}
    sub = ds.squeeze("key_family", drop=True) if "key_family" in ds.dims else ds
    sub = sub.squeeze("d", drop=True) if "d" in sub.dims else sub
    ref = _mean(sub["mse"].sel(state_dtype="float32"))
    if "rounding" in ref.dims:
        ref = ref.isel(rounding=0)
    ns = np.asarray(sub["n"].values, dtype=float)
    for v in _data.levels(sub, "variant"):
        for dt in [str(x) for x in sub["state_dtype"].values if str(x) != "float32"]:
            for r in _data.levels(sub, "rounding"):
                cur = _mean(_data.sel(sub["mse"], variant=v, state_dtype=dt, rounding=r))
                base = _data.sel(ref, variant=v)
                rel = np.abs(np.asarray(cur.values, float) - np.asarray(base.values, float)) / np.abs(
                    np.asarray(base.values, float)
                )
                hit = np.nonzero(rel > share)[0]
                out[(v, dt, r)] = float(ns[hit[0]]) if hit.size else float("nan")
    return out


def _integer(dtype: object) -> bool:
    from lacapacity.variants import quantise

    return quantise.is_quantised(str(dtype))


def _step_deviation(ns: npt.NDArray[np.float64], d: int, dv: int, dtype: str, memory: Memory) -> Floats:
    """The predicted step-rounding deviation: T15 (T18, T19) for a float format, T32 for a scaled one (int8, int4,
    fp8 with scales)."""
    name, alpha, beta = memory
    from lacapacity.variants import quantise

    if quantise.is_quantised(dtype):
        spec = quantise.parse(dtype)
        return theory.quantised_step_error(
            ns,
            d,
            dv,
            "fp8" if spec.fp8 else spec.bits,
            spec.scope,
            group=spec.group,
            feedback=spec.feedback is not None,
            memory=name,
            alpha=alpha,
            beta=beta,
            target=spec.target,
        )
    return theory.step_rounding_error(ns, d, dv, dtype, memory=name, alpha=alpha, beta=beta)


def predicted_departure(
    memory: Memory,
    d: int,
    dv: int,
    dtype: str,
    ns: npt.NDArray[np.float64],
    float32_mse: npt.ArrayLike,
    *,
    share: float = DEPART,
) -> float:
    """The n (interpolated in log n on the grid ``ns``) where the predicted step-rounding deviation reaches ``share``
    of the float32 error; NaN if not on the grid."""
    dev = _step_deviation(np.asarray(ns, float), d, dv, dtype, memory)
    ratio = np.asarray(dev, float) / (share * np.asarray(float32_mse, float))
    hit = np.nonzero(ratio >= 1.0)[0]
    if not hit.size:
        return float("nan")
    i = hit[0]
    if i == 0:
        return float(ns[0])
    x0, x1, y0, y1 = np.log(ns[i - 1]), np.log(ns[i]), np.log(ratio[i - 1]), np.log(ratio[i])
    return float(np.exp(x0 - y0 * (x1 - x0) / (y1 - y0))) if y1 != y0 else float(ns[i])


def precision_curves(ds: xr.Dataset) -> Figure:
    """The precision figure: error and recall against n per state dtype and rounding, with T14-T19 and departures."""
    _data.require(
        ds,
        "precision",
        variables=("mse",),
        coords=("n", "dv"),
        dims=("variant", "n", "state_dtype"),
        allowed=("variant", "key_family", "d", "n", "seed", "state_dtype", "rounding"),
    )
    if ds.sizes.get("key_family", 1) != 1 or ds.sizes.get("d", 1) != 1:
        raise CapacityError("the precision figure draws one key family and one d; select them first, e.g. ds.sel(d=32)")
    if "float32" not in [str(x) for x in ds["state_dtype"].values]:
        raise CapacityError("the precision figure compares each state dtype with float32: the Dataset needs float32")
    sub = ds.squeeze("key_family", drop=True) if "key_family" in ds.dims else ds
    d = int(np.ravel(sub["d"].values)[0])
    dv = _data.dv_of(sub, d)
    sub = sub.squeeze("d", drop=True) if "d" in sub.dims else sub
    variants = _data.levels(sub, "variant")
    dtypes = [str(x) for x in sub["state_dtype"].values]
    roundings: list[str | None] = [str(x) for x in _data.levels(sub, "rounding")] if "rounding" in sub.dims else [None]
    # recall over the last pairs written where measured (``Recall(recent=R)``, as the precision study does): over all
    # pairs a memory that forgets reads chance in every format, over the pairs it still holds its formats differ
    recall = "recall_recent" if "recall_recent" in sub.data_vars else "recall"
    metrics = [m for m in ("mse", recall) if m in sub.data_vars]
    shades: dict[str, theme.RGB] = {"float32": (0.1, 0.1, 0.1)}
    shades.update(theme.palette([t for t in dtypes if t != "float32"]))
    ns = np.asarray(sub["n"].values, dtype=float)
    seen = departures(sub)
    with theme.style():
        fig, axes = theme.figure(len(variants), len(metrics), sharex=True)
        for r, v in enumerate(variants):
            mem = _memory(ds, v)
            base = _mean(_data.sel(sub["mse"], variant=v, state_dtype="float32"))
            if "rounding" in base.dims:
                base = base.isel(rounding=0)
            for c, metric in enumerate(metrics):
                ax = axes[r, c]
                da = _data.sel(sub[metric], variant=v)
                if "rounding" not in da.dims:
                    da = da.expand_dims(rounding=["step"])
                df = _data.tidy(da, metric)
                df = df[(df["state_dtype"] != "float32") | (df["rounding"] == df["rounding"].iloc[0])]
                df.loc[df["state_dtype"] == "float32", "rounding"] = "float32"
                rank = {"float32": 0, **{rd: i + 1 for i, rd in enumerate(roundings)}}  # legend order: as listed
                df["rounding"] = [f"{rank.get(x, 9)}:{x}" for x in df["rounding"]]
                theme.curves(
                    ax,
                    df,
                    x="n",
                    y=metric,
                    hue="state_dtype",
                    name=str,
                    style="rounding" if len(roundings) > 1 else None,
                    style_name=lambda s: (
                        "float32 (not rounded)" if s.endswith(":float32") else f"rounding {s.split(':', 1)[1]}"
                    ),
                    colors=shades,
                )
                for dt in dtypes:
                    if dt == "float32":
                        continue
                    for rd in roundings:
                        n_out = seen.get((v, dt, rd), float("nan"))
                        if np.isfinite(n_out):
                            y = float(
                                _mean(_data.sel(sub[metric], variant=v, state_dtype=dt, rounding=rd)).sel(n=n_out)
                            )
                            (mk,) = ax.plot([n_out], [y], marker="X", ms=7, color=shades[dt], ls="none", zorder=4)
                            mk.set_gid(f"departure:{dt}|{rd}")
                    if mem is not None:
                        pred = predicted_departure(mem, d, dv, dt, ns, base.values)
                        if np.isfinite(pred):
                            tick = ax.axvline(pred, ymin=0, ymax=0.06, color=shades[dt], lw=2.2, zorder=4)
                            tick.set_gid(f"predicted:{dt}")
                if metric == "mse" and mem is not None:
                    for dt in dtypes:
                        if dt == "float32":
                            continue
                        dev = _step_deviation(ns, d, dv, dt, mem)
                        theme.theory_line(
                            ax,
                            ns,
                            np.asarray(base.values, float) + np.asarray(dev, float),
                            theorem=f"{'T32' if _integer(dt) else 'T15'}:{dt}",
                            label=f"float32 error + predicted step deviation, {dt} "
                            + ("(T32)" if _integer(dt) else "(T15, T18, T19)"),
                            color=shades[dt],
                            ls=(0, (1, 1)),
                            lw=0.9,
                        )
                ax.set_xscale("log", base=2)
                ax.xaxis.set_major_locator(FixedLocator(ns[:: max(1, len(ns) // 7)]))  # type: ignore[arg-type]  # any array
                ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"$2^{{{int(round(np.log2(x)))}}}$"))
                if metric == "mse":
                    vals = np.asarray(da.values, float)
                    vals = vals[np.isfinite(vals) & (vals > 0)]
                    if vals.size and vals.max() / vals.min() > 20:  # several decades: log; else linear
                        ax.set_yscale("log")
                ax.set_title(names.variant_name(v) + f", d = {d}")
        theme.label_outer(axes, xlabel=names.AXIS["n"], ylabel="")
        for c, metric in enumerate(metrics):
            label = names.AXIS.get(metric) or f"{sub[metric].attrs['long_name']} ({sub[metric].attrs['units']})"
            for r in range(len(variants)):
                axes[r, c].set_ylabel(label)
        theme.legend(fig, axes, title="state dtype / rounding / theory")
        nseeds = sub.sizes.get("seed", 1)
        sampled = (
            " Reads at each n: a fixed sample of stored pairs (queries), decoded against all n."
            if any(str(x).endswith("_se") for x in ds.data_vars)
            else ""
        )
        held = (
            f" Recall over the last pairs written ({sub[recall].attrs['long_name']}), each decoded against all n"
            " stored values: the pairs a memory that forgets still holds (over all n pairs its recall falls to chance"
            " in every format; the results hold that as recall)."
            if recall == "recall_recent"
            else ""
        )
        theme.note(
            fig,
            theme.SEEDS_NOTE
            + f" ({nseeds} seed{'s' if nseeds != 1 else ''}).{held} X: where a dtype's error first differs from float32's by"
            f" more than {DEPART:.0%}; ticks on the n axis: where the predicted step-rounding deviation (round-to-"
            f"nearest) reaches {DEPART:.0%} of the float32 error. The prediction holds before the stall of round-to-"
            "nearest (u² n ≲ 1; T17)." + sampled,
        )
    return theme.finish(fig, "precision")
