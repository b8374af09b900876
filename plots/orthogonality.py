"""Retrieval error against how orthogonal the keys are: mean squared coherence and effective rank.

Each point is one run (variant, key family, d, load, seed): its measured mean error against the
statistics of its keys (``lacapacity.keys.describe``). Colour: load n/d; marker: key family.
For unit keys the additive memory's error is a function of the keys' frame potential
||G||_F^2 (T4), which both statistics measure, so each load has one exact curve:

- against mean squared coherence mu^2 = mean_{i != j} (k_i . k_j)^2: error = (n - 1) mu^2
  (``theory.crosstalk_from_coherence``);
- against effective rank r = n^2 / ||G||_F^2: error = n / r - 1 (``theory.crosstalk_from_effective_rank``).

(Exact for orthonormal values, the expectation over values for random ones.) Whatever the
family (correlated, anisotropic, random, tight frame), the points fall on these curves: what
matters for the additive memory is the frame potential, nothing else about the keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lacapacity import theory
from lacapacity.plots import _data, names, theme
from lacapacity.plots.error_vs_load import FLOOR

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure


_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">"]


PANELS = [  # statistic, T4 as a function of (n, it), the legend's text
    ("mean_sq_coherence", theory.crosstalk_from_coherence, "T4: (n − 1) · mean (k_i·k_j)²"),
    ("effective_rank", theory.crosstalk_from_effective_rank, "T4: n / (effective rank) − 1"),
]


def orthogonality(ds: xr.Dataset, *, metric: str = "mse") -> Figure:
    """The orthogonality figure of a result Dataset with key statistics (dims ``key_family``, ``d``, ``load``)."""
    stats = tuple(p[0] for p in PANELS)
    _data.require(ds, "orthogonality", variables=(metric, *stats), coords=("n",), dims=("key_family", "d", "load"))
    variants, thinned_v = _data.panels(ds, "variant")  # a row per (variant, d): at most MAX_PANELS of each
    d_grid, thinned_d = _data.panels(ds, "d")
    rows = [(v, int(d)) for v in variants for d in d_grid]
    base_of = {str(k): _data.spec(ds, "keys", k)[0] for k in ds["key_family"].values}
    fam_bases = theme.ordered(base_of.values())  # legend order
    markers = {b: _MARKERS[i % len(_MARKERS)] for i, b in enumerate(fam_bases)}
    loads = [float(x) for x in ds["load"].values]
    colors = theme.sequential(loads)
    exact = 0
    with theme.style():
        fig, axes = theme.figure(len(rows), len(PANELS), sharey=True)
        for r, (variant, d) in enumerate(rows):
            sub = _data.sel(ds, variant=variant, d=d)
            table = sub[[metric, *stats]].to_dataframe().reset_index()
            table = table[np.isfinite(table[metric])]
            additive = _data.reads(ds, variant)[0]
            for c, (stat, law, law_label) in enumerate(PANELS):
                ax = axes[r, c]
                ok = table[np.isfinite(table[stat]) & (table[stat] > 0) & (table[metric] >= FLOOR)]
                exact += int((table[metric] < FLOOR).sum()) if c == 0 else 0
                for load in loads:
                    at = ok[ok["load"] == load]
                    for base in fam_bases:
                        pts = at[at["key_family"].map(lambda s: base_of[str(s)]) == base]
                        if len(pts):
                            h = ax.scatter(
                                pts[stat],
                                pts[metric],
                                s=16,
                                marker=markers[base],
                                color=colors[load],
                                linewidths=0,
                                alpha=0.85,
                                label=f"_{base}",
                            )
                            h.set_gid(f"measured:{base}:load={load:g}")
                    if additive and len(at):
                        n = int(sub["n"].sel(load=load))
                        lo, hi = float(at[stat].min()) / 1.3, float(at[stat].max()) * 1.3
                        x = np.geomspace(lo, hi, 64)
                        theme.theory_line(
                            ax,
                            x,
                            law(n, x),
                            theorem=f"T4:{stat}:n={n}",
                            label=f"_T4 n/d = {load:g}",
                            color=colors[load],
                            ls="--",
                            lw=1.0,
                        )
                if additive:
                    ax.text(
                        0.97,
                        0.04,
                        f"dashed: {law_label}",
                        transform=ax.transAxes,
                        ha="right",
                        va="bottom",
                        fontsize="x-small",
                        color="0.3",
                    )
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_ylim(bottom=FLOOR)
                ax.set_xlabel(names.AXIS[stat])
                ax.set_ylabel(names.AXIS.get(metric, metric))
                head = f"d = {d}" if variant is None else f"{names.variant_name(variant)}, d = {d}"
                ax.set_title(head)
        _legend(fig, axes, loads, colors, fam_bases, markers)
        note = "One point per run (key family, load, seed). Dashed: T4 for unit keys at each load, exact for orthonormal values and the expectation over random values (drawn for the additive memory)."
        if exact:
            note += f" {exact} runs with error below {FLOOR:g} (exact recall, e.g. orthogonal keys with n <= d) are not drawn."
        theme.note(fig, " ".join(t for t in (note, thinned_v, thinned_d) if t))
    return theme.finish(fig, "orthogonality")


def _legend(
    fig: Figure,
    axes: theme.AxesGrid,
    loads: list[float],
    colors: dict[float, theme.RGB],
    fam_bases: list[str],
    markers: dict[str, str],
) -> None:
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], ls="--", marker="o", color=colors[x], markeredgewidth=0, label=f"n/d = {x:g}") for x in loads
    ]
    handles += [
        Line2D([], [], ls="", marker=markers[b], color="0.35", markeredgewidth=0, label=names.keys_name(b))
        for b in fam_bases
    ]
    handles.append(Line2D([], [], ls="--", color="0.35", label="T4 at that load (dashed)"))
    fig.legend(
        handles=handles, loc="outside right upper", title="load, key family", fontsize="small", title_fontsize="small"
    )
