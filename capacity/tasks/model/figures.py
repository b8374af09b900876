"""The model task's own figures (the figures layer: ``lacapacity.plots.render`` finds ``FIGURES`` here, nothing of the
tasks layer imports this module): a real hybrid model's linear heads on a text (``capacity run model``; docs/models.md).

- ``model-maps``: layer x head maps of the keys' mean squared coherence (as a multiple of random keys' 1/d), their
  effective rank (as a fraction of d), the head's mean gate, its mean beta, and how full its state is (the mean
  recall error of all its pairs, measured over the closed form at its gate and beta).
- ``model-recall``: recall error of the head's own pairs against their age, one panel per layer, each head a
  curve, the closed form (T22/T23 at that head's mean gate and beta) dashed beside it; and every memory of the grid
  written with the same keys and values (mean over heads and layers).
- ``model-precision``: the output error of each stored format against float32, per layer (mean over heads, the
  range over heads as bars).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lacapacity.plots import _data, names, theme

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure


FLOOR = 1e-4  # the lowest recall error the other memories' panel shows
_ALLOWED = ("variant", "d", "n", "seed", "layer", "head", "age", "format")


def _own(ds: xr.Dataset, name: str) -> np.ndarray:
    """A model variable (the same in every cell): ``[layer, head, ...]``, from the first cell."""
    da = ds[name]
    for dim in ("variant", "d", "n", "seed"):
        if dim in da.dims:
            da = da.isel({dim: 0})
    return np.asarray(da.transpose("layer", "head", ...).values, dtype=float)


def _age_mid(ds: xr.Dataset) -> np.ndarray:
    """Where each age bin sits on the plot: its lower edge, the first bin (age 0) at 0.5 for the log axis."""
    edges = np.asarray(ds["age"].values, dtype=float)
    return np.where(edges == 0, 0.5, edges)


def model_maps(ds: xr.Dataset) -> Figure:
    """Layer x head maps of key geometry, gates and fullness of a model study."""
    need: tuple[str, ...] = (
        "coherence2",
        "coherence2_random",
        "effective_rank",
        "gate_mean",
        "fullness",
        "fullness_theory",
    )
    # beta_mean is NaN for every head of an additive rule (Mamba-2, MiniMax): required unless so, its panel then says so
    additive = "beta_mean" in ds.data_vars and not np.isfinite(np.asarray(ds["beta_mean"].values, dtype=float)).any()
    need += () if additive else ("beta_mean",)
    _data.require(ds, "model_maps", variables=need, dims=("layer", "head"), allowed=_ALLOWED)
    d = int(ds.attrs.get("head_d", 0)) or None
    maps = [
        ("keys' mean squared coherence / (1/d)", _own(ds, "coherence2") / _own(ds, "coherence2_random")),
        ("effective rank of the keys / d", _own(ds, "effective_rank") / (d or 1)),
        ("mean gate", _own(ds, "gate_mean")),
        ("mean beta", _own(ds, "beta_mean")),
        ("fullness: mean recall error, measured", _own(ds, "fullness")),
        ("fullness: measured / closed form", _own(ds, "fullness") / _own(ds, "fullness_theory")),
    ]
    layers = [int(x) for x in ds["layer"].values]
    with theme.style():
        fig, axes = theme.figure(2, 3, legend_width=0.4)
        for ax, (title, m) in zip(axes.ravel(), maps, strict=True):
            if not np.isfinite(m).any():
                ax.text(0.5, 0.5, "no beta:\nan additive rule", ha="center", va="center", transform=ax.transAxes)
                ax.set_title(title)
                ax.set_axis_off()
                continue
            im = ax.imshow(m, aspect="auto", cmap="viridis", origin="upper")
            ax.set_yticks(range(len(layers)), [str(x) for x in layers])
            ax.set_xticks(range(m.shape[1]))
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            ax.set_title(title)
            fig.colorbar(im, ax=ax)
        theme.note(fig, _caption(ds))
    return theme.finish(fig, "model-maps")


def _caption(ds: xr.Dataset) -> str:
    a = ds.attrs
    return (
        f"{a.get('model', '?')} ({a.get('model_type', '?')}, {a.get('family', '?')} heads of d = {a.get('head_d', '?')}, "
        f"dv = {a.get('head_dv', '?')}), {int(ds['n'].values[0])} tokens of text ({a.get('tokenizer', '?')})."
    )


def model_recall(ds: xr.Dataset) -> Figure:
    """Recall error against age per layer, with the closed form at each head's gates, and the other memories."""
    _data.require(
        ds,
        "model_recall",
        variables=("recall_error", "recall_theory", "rule_error"),
        dims=("layer", "age"),
        allowed=_ALLOWED,
    )
    err, th = _own(ds, "recall_error"), _own(ds, "recall_theory")  # [layer, head, age]
    x = _age_mid(ds)
    layers = [int(v) for v in ds["layer"].values]
    shown, _ = _data.panels(ds, "layer")
    heads = err.shape[1]
    colors = theme.sequential(range(heads))
    variants = [str(v) for v in ds["variant"].values]
    vcolors = theme.palette(variants)
    with theme.style():
        fig, axes = theme.figure(1, len(shown) + 1)
        for ax, layer in zip(axes[0], shown, strict=False):
            i = layers.index(int(layer))
            for h in range(heads):
                ax.plot(x, err[i, h], marker="o", ms=3, color=colors[h], label=f"head {h}, measured")
                theme.theory_line(
                    ax,
                    x,
                    th[i, h],
                    theorem=f"T23:layer{layer}:head{h}",
                    label="closed form at the head's gate and beta",
                    color=colors[h],
                )
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("age (writes since; age 0 at 1/2)")
            ax.set_ylabel("recall error ||k S - v||^2 / ||v||^2")
            ax.set_title(f"layer {layer}: the head's own rule")
        ax = axes[0, -1]
        rule = ds["rule_error"]
        for dim in ("d", "n", "seed"):
            rule = rule.isel({dim: 0}) if dim in rule.dims else rule
        for v in variants:
            y = np.nanmean(
                np.asarray(rule.sel(variant=v).transpose("layer", "head", "age").values, dtype=float), axis=(0, 1)
            )
            ax.plot(x, y, marker="s", ms=3, color=vcolors[v], label=names.variant_name(v))
        ax.plot(x, np.nanmean(err, axis=(0, 1)), color="0.1", lw=2, label="the model's heads (mean)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylim(bottom=FLOOR)  # an exact read-back (1e-13) would flatten the rest
        ax.set_xlabel("age (writes since; age 0 at 1/2)")
        ax.set_title("same keys and values, other memories")
        theme.legend(fig, axes)
        theme.note(fig, _caption(ds))
    return theme.finish(fig, "model-recall")


def model_precision(ds: xr.Dataset) -> Figure:
    """The output error of each stored state format against float32, per layer."""
    _data.require(ds, "model_precision", variables=("precision_error",), dims=("layer",), allowed=_ALLOWED)
    e = _own(ds, "precision_error")  # [layer, head, format]
    formats = [str(f) for f in ds["format"].values]
    layers = [int(v) for v in ds["layer"].values]
    colors = theme.sequential(range(len(layers)))
    width = 0.8 / max(len(layers), 1)
    with theme.style():
        fig, axes = theme.figure(1, 1, width=1.2 * len(formats) + 4.0)
        ax = axes[0, 0]
        pos = np.arange(len(formats))
        for i, layer in enumerate(layers):
            mean = e[i].mean(axis=0)
            lo, hi = mean - e[i].min(axis=0), e[i].max(axis=0) - mean
            ax.bar(pos + i * width, mean, width, yerr=[lo, hi], color=colors[i], label=f"layer {layer}")
            for p, m in zip(pos + i * width, mean, strict=True):
                ax.text(p, m, f"{m:.2g}", ha="center", va="bottom", fontsize="x-small")
        ax.set_xticks(pos + width * (len(layers) - 1) / 2, formats)
        ax.set_yscale("log")
        ax.set_ylabel("output error vs float32 (relative RMS)")
        ax.set_title("the state as servers store it, replayed over the text")
        theme.legend(fig, axes)
        theme.note(fig, _caption(ds))
    return theme.finish(fig, "model-precision")


FIGURES = {"model-maps": model_maps, "model-recall": model_recall, "model-precision": model_precision}
