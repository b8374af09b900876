"""The closed-form check: every measured read against the read T2/T3 predict, on a diagonal.

Sweep results keep only means over the stored pairs, so this figure has its own data:
``measure(keys, values)`` runs the probe with ``per_query=True`` and puts next to each measured
per-query quantity the same quantity computed from the closed forms of the additive state

- T2 at n = 2: r_1 = ||k_1||^2 v_1 + (k_1 . k_2) v_2 (``theory.two_pair_readout``);
- T3 at every other checkpoint: r_i = G_ii v_i + sum_{j != i} G_ij v_j (``theory.decomposition``);
- T4 per run: the mean error (||G||_F^2 - 2 tr G + n)/n (``theory.crosstalk_error``), exact for
  orthonormal values, the expectation over values otherwise.

The result is a Dataset with ``attrs["study"] == "closed-form"``, so ``render`` and
``capacity plot`` draw it like a study result (save it with ``to_netcdf`` to plot it later).

>>> from lacapacity import keys, values
>>> ds = measure(keys.make("gaussian", 24, 8, seed=0), values.make("gaussian", 24, 16, seed=0), checkpoints=[2, 24])
>>> float(abs(ds.measured_sq_error - ds.predicted_sq_error).max()) < 1e-4
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
import xarray as xr

from lacapacity import theory, variants
from lacapacity.plots import _data, names, theme
from lacapacity.tasks import probe

if TYPE_CHECKING:
    import numpy.typing as npt
    from matplotlib.figure import Figure

    from lacapacity.variants import Variant


# variable suffix -> (panel title, axis quantity, units, log axes)
QUANTITIES = {
    "signal": ("signal coefficient a_i = <r_i, v_i> / ||v_i||²", "a_i", "dimensionless", False),
    "leak": ("leak energy ||r_i − a_i v_i||²", "leak", "value units²", True),
    "sq_error": ("squared error ||r_i − v_i||²", "error", "value units²", True),
}


def _default_checkpoints(n: int) -> list[int]:
    return sorted({c for c in probe.default_checkpoints(n, count=6) if c >= 2} | ({2} if n >= 2 else {n}))


def _scores(r: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-query signal coefficient, leak energy and squared error of reads r [B, c, dv] against values v [B, c, dv]."""
    a = (r * v).sum(-1) / (v * v).sum(-1)  # [B, c]
    leak = r - a[..., None] * v
    return {"signal": a, "leak": (leak * leak).sum(-1), "sq_error": ((r - v) ** 2).sum(-1)}


def _predicted_reads(K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """Reads of every stored key by the closed forms: T2 for two pairs, T3 otherwise. [B, c, dv]."""
    if K.shape[1] == 2:
        r1 = theory.two_pair_readout(K[:, 0], K[:, 1], V[:, 0], V[:, 1])
        r2 = theory.two_pair_readout(K[:, 1], K[:, 0], V[:, 1], V[:, 0])
        return torch.stack([r1, r2], dim=1)
    signal, leak = theory.decomposition(K, V)
    return signal + leak


def measure(
    keys: torch.Tensor,
    values: torch.Tensor,
    *,
    variant: Variant | str | None = None,
    checkpoints: probe.Checkpoints = None,
) -> xr.Dataset:
    """Measured against predicted per-query reads of the additive memory.

    Shapes: keys ``[B, n, d]``, values ``[B, n, dv]``. ``variant``: the memory to probe (default
    ``variants.get("linear")``; the closed forms are those of the additive state, so another
    variant shows how far it departs from them). ``checkpoints``: pair counts (default: 2 and a
    few geometric steps to n).

    Returns a Dataset over (n, batch, query) with ``measured_*`` and ``predicted_*`` for
    ``signal``, ``leak`` and ``sq_error`` (NaN where query >= n), and over (n, batch) the mean
    error ``measured_mse`` and ``predicted_mse`` (T4, ``crosstalk_error``).
    """
    variant = variant if variant is not None else variants.get("linear")
    n_total = keys.shape[1] if isinstance(keys, torch.Tensor) and keys.ndim == 3 else 1
    cps = _default_checkpoints(n_total) if checkpoints is None else checkpoints
    pr = probe.recall(variant, keys, values, checkpoints=cps, per_query=True)
    cps = [int(c) for c in pr.n.values]
    B, n, dv = values.shape
    predicted = {q: np.full((len(cps), B, n), np.nan) for q in QUANTITIES}
    t4 = np.zeros((len(cps), B))
    for i, c in enumerate(cps):
        K = keys[:, :c].double().cpu()  # [B, c, d]
        V = values[:, :c].double().cpu()  # [B, c, dv]
        for q, x in _scores(_predicted_reads(K, V), V).items():
            predicted[q][i, :, :c] = x.numpy()
        t4[i] = theory.crosstalk_error(K).numpy()
    Vd = values.double().cpu()
    gram_v = Vd @ Vd.transpose(1, 2)  # [B, n, n]
    orthonormal = bool((gram_v - torch.eye(n, dtype=torch.float64)).abs().max() < 1e-5)
    measured = {"signal": pr["signal_q"], "leak": pr["leak_q"], "sq_error": pr["mse_q"]}
    dims = ("n", "batch", "query")
    data: dict[
        str, tuple[tuple[str, ...], npt.NDArray[np.float64], dict[str, str]]
    ] = {}  # name -> (dims, values, attrs)
    for q, (title, _, units, _) in QUANTITIES.items():
        data[f"measured_{q}"] = (dims, measured[q].values, {"long_name": f"measured {title}", "units": units})
        data[f"predicted_{q}"] = (dims, predicted[q], {"long_name": f"{title} by T2 (n = 2) and T3", "units": units})
    data["measured_mse"] = (
        ("n", "batch"),
        pr["mse"].values,
        {"long_name": "measured mean squared error", "units": "value units²"},
    )
    data["predicted_mse"] = (
        ("n", "batch"),
        t4,
        {"long_name": "T4 crosstalk error (||G||_F² − 2 tr G + n)/n", "units": "value units²"},
    )
    return xr.Dataset(
        data,
        coords={
            "n": ("n", cps, {"long_name": "pairs written", "units": "pairs"}),
            "batch": np.arange(B),
            "query": np.arange(n),
        },
        attrs={
            "study": "closed-form",
            "description": "measured reads of the additive memory against T2/T3/T4",
            "variant": pr.attrs["variant"],
            "variant_params": pr.attrs["variant_params"],
            "d": int(keys.shape[2]),
            "dv": int(dv),
            "values_orthonormal": int(orthonormal),
            "config": pr.attrs["config"],
        },
    )


def _limits(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], log: bool) -> tuple[float, float]:
    both = np.concatenate([x, y])
    both = both[np.isfinite(both) & ((both > 0) if log else True)]
    lo, hi = float(both.min()), float(both.max())
    if log:
        return lo / 1.6, hi * 1.6
    pad = 0.08 * (hi - lo) + 1e-3
    return lo - pad, hi + pad


def closed_form(ds: xr.Dataset) -> Figure:
    """The closed-form figure of a ``measure`` Dataset: measured (y) against predicted (x), one colour per n."""
    need = tuple(f"{kind}_{q}" for q in QUANTITIES for kind in ("measured", "predicted")) + (
        "measured_mse",
        "predicted_mse",
    )
    _data.require(
        ds, "closed-form check", variables=need, dims=("n", "batch", "query"), allowed=("n", "batch", "query")
    )
    panels = list(QUANTITIES) + ["mse"]
    ns = [int(x) for x in ds.n.values]
    colors = theme.sequential(ns)
    with theme.style():
        fig, axes = theme.figure(1, len(panels), legend_width=1.3)
        for ax, q in zip(axes[0], panels):
            if q == "mse":
                title, sym, units, log = "mean error per run (T4)", "mean error", "value units²", True
                theorem = (
                    "T4, exact for orthonormal values"
                    if ds.attrs.get("values_orthonormal")
                    else "T4, expected over values"
                )
            else:
                title, sym, units, log = QUANTITIES[q]
                theorem = "T2/T3"
            xs, ys = [], []
            for n in ns:
                x = np.ravel(ds[f"predicted_{q}"].sel(n=n).values)
                y = np.ravel(ds[f"measured_{q}"].sel(n=n).values)
                keep = np.isfinite(x) & np.isfinite(y)
                label = f"n = {n}" + (" (T2)" if n == 2 else "")
                pts = ax.scatter(
                    x[keep], y[keep], s=9 if q != "mse" else 22, color=colors[n], alpha=0.75, linewidths=0, label=label
                )
                pts.set_gid(f"measured:{q}:n={n}")
                xs.append(x[keep])
                ys.append(y[keep])
            x, y = np.concatenate(xs), np.concatenate(ys)
            lo, hi = _limits(x, y, log)
            if log:
                ax.set_xscale("log")
                ax.set_yscale("log")
            (diag,) = ax.plot(
                [lo, hi], [lo, hi], color="0.2", lw=0.9, ls="--", label="measured = predicted", zorder=0.5
            )
            diag.set_gid("diagonal")
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
            ax.set_aspect("equal", adjustable="box")
            ax.set_title(title)
            ax.set_xlabel(f"predicted by {theorem} ({units})")
            ax.set_ylabel(f"measured ({units})")
            dev = np.max(np.abs(y - x)) if x.size else np.nan
            ax.text(
                0.04,
                0.96,
                f"max |measured − predicted| = {dev:.1e}",
                transform=ax.transAxes,
                ha="left",
                va="top",
                fontsize="x-small",
                color="0.3",
            )
        theme.legend(fig, axes, title="pairs written")
        variant = names.variant_name(ds.attrs.get("variant", "linear"))
        theme.note(
            fig,
            f"{variant}, d = {ds.attrs.get('d', '?')}, dv = {ds.attrs.get('dv', '?')}, {ds.sizes['batch']} runs; every stored key read back at each n (one point per query).",
        )
    return theme.finish(fig, "closed-form")
