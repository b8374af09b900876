"""Forgetting against age (T21-T24): what each rule keeps of a pair as later writes arrive, one colour per memory.

Panels, each against the age of a pair (writes since it was stored, 0 = the last written pair; geometric bins, drawn
at the mean age of each bin): the signal E <k_i S, v_i> relative to that of a fresh pair, the squared error and the
argmax recall. Dashed in each memory's colour: its exact expectation (``theory.forgetting_signal``,
``theory.forgetting_error``; mamba2's error to first order in 1/d) where the memory is one of the four rules with
constant parameters and the keys are random; dotted verticals: its signal horizon tau
(``theory.forgetting_horizon``), where the signal has fallen by e; triangles on the top edge: the outside analyses'
hypotheses (delta d/(b(2-b)), decay 1/(1-alpha), gated delta 1/((1-alpha) + b(2-b)/(2d))).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, TypedDict, cast

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.ticker import FixedLocator, FuncFormatter

from lacapacity import theory
from lacapacity.errors import CapacityError
from lacapacity.plots import _data, names, theme

if TYPE_CHECKING:
    import numpy.typing as npt
    from matplotlib.figure import Figure


# the declared family (lacapacity.variants.Declares.form) -> its rule's name in theory.forgetting_*
_RULE_OF = {"delta": "delta", "decay": "decay", "gated_delta": "gated_delta", "selective": "mamba2"}
_RULES = {"delta": ("beta",), "decay": ("alpha",), "gated_delta": ("alpha", "beta"), "mamba2": ("A", "dt", "w_std")}
AGE = "pair age (writes since stored)"


class RuleParams(TypedDict, total=False):
    """The constant parameters of a T21-T24 rule (those ``_RULES`` names for it), as theory.forgetting_* take them."""

    alpha: float
    beta: float
    A: float
    dt: float
    w_std: float


def rule_of(label: str, ds: xr.Dataset | None = None) -> tuple[str, RuleParams] | None:
    """The T21-T24 rule and parameters of the memory labelled ``label`` (its parameters as ``ds`` records them, or as
    the registry builds them: ``plots._data.memory``), or None (another memory, or a gate drawn per token)."""
    found = _data.memory(ds if ds is not None else xr.Dataset(), label)
    base = _RULE_OF.get(str(found[0].form)) if found is not None else None
    if found is None or base is None:
        return None
    params = found[1]
    if params.get("feature") is not None or params.get("normalize_read"):  # unit keys: normalize changes nothing
        return None
    out: dict[str, Any] = {k: params.get(k) for k in _RULES[base]}  # a label's parameters: any literal
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in out.values()):
        return None  # drawn per token
    return base, cast(RuleParams, {k: float(v) for k, v in out.items()})  # the keys are _RULES[base]'s


def _bins(ds: xr.Dataset) -> tuple[npt.NDArray[np.int_], npt.NDArray[np.int_]]:
    lo = np.asarray(ds["age"].values, dtype=int)
    hi = np.asarray(ds["age_end"].values, dtype=int) if "age_end" in ds.coords else np.r_[lo[1:], 2 * lo[-1]]
    return lo, hi


def forgetting(ds: xr.Dataset, *, d: int | None = None, n: int | None = None) -> Figure:
    """The forgetting figure of a result Dataset with age bins (``Recall(age_bins=True)`` or ``probe.recall(age_bins=True)``).

    Needs ``signal_age`` and ``mse_age`` (``recall_age`` if decoded) over ``variant`` and ``age``; draws one key
    dimension ``d`` (default the first) at one pair count ``n`` (default the largest).
    """
    _data.require(
        ds,
        "forgetting",
        variables=("signal_age", "mse_age"),
        dims=("variant", "age"),
        allowed=("variant", "key_family", "d", "load", "n", "seed", "batch", "age"),
    )
    if ds.sizes.get("key_family", 1) > 1:
        raise CapacityError("the forgetting figure draws one key family; select one first, e.g. ds.sel(key_family=...)")
    sub = ds.squeeze([x for x in ("key_family",) if x in ds.dims])
    if "d" in sub.dims:
        sub = sub.sel(d=int(sub["d"].values[0]) if d is None else d)
    dd = int(sub["d"]) if "d" in sub.coords else int(ds.attrs.get("d", 0))
    curve = "load" if "load" in sub.dims else ("n" if "n" in sub.dims else None)
    if curve is not None:
        ns = np.asarray(sub["n"].values).ravel()
        at = int(np.argmax(ns)) if n is None else int(np.flatnonzero(ns == n)[0]) if n in ns else None
        if at is None:
            raise CapacityError(f"n = {n} was not measured; the Dataset has n {ns.tolist()}")
        sub = sub.isel({curve: at})
    nn = int(np.asarray(sub["n"].values).ravel()[0])
    keys = str(np.asarray(ds["key_family"].values).ravel()[0]) if "key_family" in ds.coords else "gaussian"
    random_keys = _data.spec(ds, "keys", keys)[0] == "gaussian"
    seeds = "seed" if "seed" in sub.dims else "batch"
    lo, hi = _bins(sub)
    mid = np.array([(a + min(b, nn) - 1) / 2 for a, b in zip(lo, hi)])
    labels = [str(v) for v in sub["variant"].values]
    colors = theme.palette(labels)
    metrics = [("signal_age", "signal / fresh pair's (ratio)"), ("mse_age", names.AXIS["mse"])]
    if "recall_age" in sub:
        metrics.append(("recall_age", names.AXIS["recall"]))
    rules = {lab: rule_of(lab, ds) if random_keys else None for lab in labels}
    with theme.style():
        fig, axes = theme.figure(1, len(metrics))
        for c, (var, ylabel) in enumerate(metrics):
            ax = axes[0, c]
            rows: list[dict[str, object]] = []
            for lab in labels:
                rule = rules[lab]
                s0 = theory.forgetting_signal(0, dd, rule[0], **rule[1]) if rule and var == "signal_age" else 1.0
                x = sub[var].sel(variant=lab).transpose(seeds, "age").values / s0  # [seeds, A]
                for si, row in enumerate(x):
                    rows += [{"variant": lab, "seed": si, "age": m, var: y} for m, y in zip(mid, row) if np.isfinite(y)]
            df = pd.DataFrame(rows)
            theme.curves(ax, df, x="age", y=var, hue="variant", name=names.variant_name, colors=colors)
            for lab in labels:
                rule = rules[lab]
                if rule is None or var == "recall_age":
                    continue
                kind, p = rule
                ages = [np.arange(a, min(b, nn)) for a, b in zip(lo, hi) if a < nn]
                if var == "signal_age":
                    y = [
                        np.mean(theory.forgetting_signal(a, dd, kind, **p)) / theory.forgetting_signal(0, dd, kind, **p)
                        for a in ages
                    ]
                else:
                    y = [np.mean(theory.forgetting_error(a, nn, dd, kind, **p)) for a in ages]
                thm = {"delta": "T21", "decay": "T22", "gated_delta": "T23", "mamba2": "T24"}[kind]
                theory_label = "exact expectation (T21-T24)"
                theme.theory_line(ax, mid[: len(y)], y, theorem=thm, label=theory_label, color=colors[lab])
                tau = theory.forgetting_horizon(dd, kind, **p)
                if math.isfinite(tau) and tau < nn:
                    line = ax.axvline(tau, color=colors[lab], lw=0.9, ls=":", zorder=1, label="signal horizon τ")
                    line.set_gid(f"horizon:{lab}")
                guess = theory.forgetting_hypothesis(dd, kind, **p)
                if var == "signal_age" and guess is not None and math.isfinite(guess) and guess < nn:
                    (mark,) = ax.plot(
                        [guess],
                        [1.0],
                        marker="v",
                        ms=6,
                        color=colors[lab],
                        ls="none",
                        transform=ax.get_xaxis_transform(),
                        clip_on=False,
                        label="hypothesis (outside analyses)",
                    )
                    mark.set_gid(f"hypothesis:{lab}")
            ax.set_xscale("symlog", base=2, linthresh=1, linscale=0.5)
            ax.set_xlim(0, nn)
            ax.xaxis.set_major_locator(FixedLocator([0] + [4**k for k in range(int(math.log(nn, 4)) + 1)]))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
            ax.set_xlabel(AGE)
            ax.set_ylabel(ylabel)
            if var == "signal_age":
                ax.set_yscale("log")
                ax.set_ylim(1e-3, 2.0)
            if var == "recall_age":
                ax.set_ylim(-0.03, 1.03)
        theme.legend(fig, axes, title="memory / theory")
        nseeds = sub.sizes.get(seeds, 1)
        theme.note(
            fig,
            theme.SEEDS_NOTE
            + f" ({nseeds} {'seeds' if seeds == 'seed' else 'batch items'}; d = {dd}, n = {nn} pairs, keys: {names.keys_name(keys)}). "
            "Signal: the read's coefficient along the pair's value, over the fresh pair's expected coefficient "
            "(E omega: beta, 1, beta, E dt). Ages in geometric bins, drawn at each bin's mean age. "
            "Dotted: the signal horizon tau = -1/ln(E alpha (1 - b/d)); triangles: the hypotheses, which for the delta "
            "rule give the trace energy's tau and for the gated delta rule the trace's root-mean-square tau (T21, T23).",
        )
    return theme.finish(fig, "forgetting")
