"""Rows of T21-T24: forgetting per age of a pair (delta, decay, gated delta, mamba2) against the exact expectations.

Each rule is probed with ``probe.recall(..., age_bins=...)`` through its registered variant, and its trace energy is
read off the variant's state: a marker column of the values that only one pair writes (1 there, 0 elsewhere) holds
omega_i Q k_i^T, the pair's trace (every rule here is linear in the values). Tolerances are 3 standard errors over
independent batch items (decay's trace energy is exact for unit keys: there float32 rounding, 1e-5 relative).

Each row names the closed form it holds (``Check.function``): the signal per age bin ``forgetting_signal``, the oldest
bin's signal as s0 exp(-age/tau) and the trace energy over a window of ages ``forgetting_horizon``, the error
``forgetting_error``, mamba2's step moments ``mamba2_step_moments``; each is sized (batch, window) so that the row
fails when its function is 3% off (``scripts/perturb_check.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
import torch

from lacapacity import theory, variants
from lacapacity.check._rows import Check, eq, mean_se, measured
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.theory._common import Floats
from lacapacity.variants import Variant
from lacapacity.variants.mamba2 import Mamba2

Bins = tuple[tuple[int, int], ...]  # (first age, end) of each bin or window

# rule, variant label, theory parameters, d, n, batch, signal/error bins (first ages, ends), marker windows
# (first ages, ends: one marker column per age; the energy is averaged over the window). mamba2's signal scatters
# with its own step dt_i (coefficient of variation about 1.3 per pair), so it draws 8x the batch, in chunks.
_CASES: dict[str, tuple[str, str, dict[str, float], int, int, int, Bins, Bins]] = {
    "T21": ("delta", "delta(beta=0.5)", {"beta": 0.5}, 32, 192, 512, ((32, 64), (64, 128)), ((40, 56), (88, 104))),
    "T22": ("decay", "decay(alpha=0.97)", {"alpha": 0.97}, 32, 128, 512, ((16, 32), (32, 64)), ((24, 25), (48, 49))),
    "T23": (
        "gated_delta",
        "gated_delta(alpha=0.99, beta=0.5)",
        {"alpha": 0.99, "beta": 0.5},
        32,
        128,
        256,
        ((16, 32), (32, 64)),
        ((16, 32), (40, 56)),
    ),
    "T24": (
        "mamba2",
        "mamba2(A=1.0, dt=0.02, w_std=1.0)",
        {"A": 1.0, "dt": 0.02, "w_std": 1.0},
        32,
        128,
        4096,
        ((16, 32), (32, 64)),
        ((16, 32), (40, 56)),
    ),
}
_DV = 64
_CHUNK = 1024  # batch items per probe call


def _edges(bins: Bins) -> list[int]:
    edges = sorted({0, *(a for b in bins for a in b)})
    return edges


def _ages(lo: int, hi: int) -> str:
    return f"age {lo}" if hi == lo + 1 else f"ages {lo}-{hi - 1}"


def _measure(
    mem: Variant, d: int, n: int, B: int, edges: Sequence[int], windows: Bins, dev: torch.device, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, list[int]]:
    """Per batch item: the probe's signal and mse per age bin ``[B, bins]`` each; the trace energy of the pairs of
    each marker window ``[B, markers]``; for a variant with steps (mamba2), the steps ``[B, n]``."""
    marks = [age for lo, hi in windows for age in range(lo, hi)]
    P = len(marks)
    signal: list[torch.Tensor] = []
    mse: list[torch.Tensor] = []
    energy: list[torch.Tensor] = []
    steps: list[torch.Tensor] = []
    for c, start in enumerate(range(0, B, _CHUNK)):
        b = min(_CHUNK, B - start)
        s = seed + 7919 * c  # chunk 0 draws what a single call would
        K = keys.make("gaussian", n, d, batch=b, seed=s, device=dev)
        V = values.make("gaussian", n, _DV, batch=b, seed=s + 1, device=dev)
        ds = probe.recall(mem, K, V, checkpoints=[n], decode=False, age_bins=edges)
        signal.append(torch.as_tensor(ds.signal_age.isel(n=0).transpose("batch", "age").values))
        mse.append(torch.as_tensor(ds.mse_age.isel(n=0).transpose("batch", "age").values))
        # the trace a pair leaves in the state: marker columns, one per marked pair
        M = torch.zeros(b, n, P, device=dev)
        for j, age in enumerate(marks):
            M[:, n - 1 - age, j] = 1.0
        S = mem.write(mem.init_state(b, d, _DV + P, device=dev), K, torch.cat([V, M], dim=-1))
        trace = S[:, :, _DV:].double()  # [b, d, P]
        energy.append((trace * trace).sum(1).cpu())  # [b, P]
        if isinstance(mem, Mamba2):
            steps.append(mem.steps(K).double().cpu())  # [b, n]
    cat: Callable[[list[torch.Tensor]], torch.Tensor | None] = lambda xs: torch.cat(xs) if xs else None
    # B >= 1: one chunk at least, so signal, mse and energy are tensors
    return (
        cast(torch.Tensor, cat(signal)),
        cast(torch.Tensor, cat(mse)),
        cast(torch.Tensor, cat(energy)),
        cat(steps),
        marks,
    )


def _rows_for(thm: str, dev: torch.device, seed: int, rows: list[Check]) -> None:
    rule, label, params, d, n, B, bins, windows = _CASES[thm]
    mem = variants.resolve(label)
    edges = _edges(bins)
    signal, mse, energy, dt, marks = measured("probe", lambda: _measure(mem, d, n, B, edges, windows, dev, seed))
    s0 = theory.forgetting_signal(0, d, rule, **params)
    for lo, hi in bins:
        j = edges.index(lo)
        ages = np.arange(lo, hi)
        m, se = mean_se(signal[:, j])
        want: Floats = float(np.mean(theory.forgetting_signal(ages, d, rule, **params)))
        what = f"{label}: signal, ages {lo}-{hi - 1} = forgetting_signal (3 s.e.)"
        rows.append(eq(thm, what, m, want, 3 * se, function="forgetting_signal"))
        if hi == bins[-1][1]:  # the oldest bin, where the horizon matters most (age / tau about 1.2-1.5)
            tau = theory.forgetting_horizon(d, rule, **params)  # type: ignore[arg-type]  # params: the rule's
            want = s0 * float(np.exp(-ages / tau).mean())
            what = f"{label}: signal, ages {lo}-{hi - 1} = s0 exp(-age/tau) (3 s.e.)"
            rows.append(eq(thm, what, m, want, 3 * se, function="forgetting_horizon"))
        if rule != "mamba2":  # the error is exact for the other three (first order in 1/d for mamba2)
            m, se = mean_se(mse[:, j])
            want = float(np.mean(theory.forgetting_error(ages, n, d, rule, **params)))
            what = f"{label}: mse, ages {lo}-{hi - 1}, n = {n} = forgetting_error (3 s.e.)"
            rows.append(eq(thm, what, m, want, 3 * se, function="forgetting_error"))
    scale: Floats
    if rule == "mamba2":  # divide by the pair's own dt^2, which is independent of the later steps
        dt = cast(torch.Tensor, dt)  # mamba2 has steps: a tensor
        moments = theory.mamba2_step_moments(d, **params)
        for name, x in (("E dt", dt), ("E exp(-A dt)", torch.exp(-params["A"] * dt))):
            m, se = mean_se(x.mean(1))  # over the tokens of each item, then over items
            key = "omega" if name == "E dt" else "alpha"
            what = f"{label}: {name} over unit keys = quadrature (3 s.e.)"
            rows.append(eq(thm, what, m, moments[key], 3 * se, function="mamba2_step_moments"))
        own = torch.stack([dt[:, n - 1 - age] for age in marks], dim=1)
        energy, scale = energy / own**2, 1.0
    else:
        scale = s0**2
    tau_e = theory.forgetting_horizon(d, rule, quantity="energy", **params)
    for lo, hi in windows:
        cols = [marks.index(age) for age in range(lo, hi)]
        m, se = mean_se(energy[:, cols].mean(1))  # over the window's pairs of each item, then over items
        what = f"{label}: trace energy, {_ages(lo, hi)} = w^2 exp(-age/tau_energy) (3 s.e.)"
        want = scale * float(np.exp(-np.arange(lo, hi) / tau_e).mean())
        # decay's is exact: float32 rounding only
        rows.append(eq(thm, what, m, want, max(3 * se, 1e-5 * want), function="forgetting_horizon"))


# forgetting_hypothesis (the outside analyses' time constants) is the first-order form of forgetting_horizon: delta's is
# the trace energy's, decay's the signal's, gated delta's the trace's; at d = 4096 and alpha = 0.999 the two agree to
# within 1e-3 (the first-order terms dropped are ~1/(2 tau))
_FIRST_ORDER = {"T21": ("delta", "energy", {"beta": 0.5}), "T22": ("decay", "signal", {"alpha": 0.999})}
_FIRST_ORDER["T23"] = ("gated_delta", "trace", {"alpha": 0.999, "beta": 0.5})
FIRST_ORDER_D, FIRST_ORDER_TOL = 4096, 1e-3


def _hypothesis(thm: str, rows: list[Check]) -> None:
    rule, quantity, params = _FIRST_ORDER[thm]
    want = theory.forgetting_horizon(FIRST_ORDER_D, rule, quantity=quantity, **params)
    got = theory.forgetting_hypothesis(FIRST_ORDER_D, rule, **params)
    what = f"{rule}, d = {FIRST_ORDER_D}: forgetting_hypothesis = first-order {quantity} horizon ({FIRST_ORDER_TOL:.0e} rel.)"
    rows.append(eq(thm, what, float(cast(float, got)), want, FIRST_ORDER_TOL * want, function="forgetting_hypothesis"))


def _t21(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T21: the delta rule forgets its signal with tau = -1/ln(1 - b/d), its trace energy with -1/ln(1 - b(2-b)/d)."""
    _rows_for("T21", dev, seed, rows)
    _hypothesis("T21", rows)


def _t22(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T22: scalar decay: signal alpha^age, tau = -1/ln(alpha)."""
    _rows_for("T22", dev, seed, rows)
    _hypothesis("T22", rows)


def _t23(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T23: gated delta: signal b (alpha (1 - b/d))^age."""
    _rows_for("T23", dev, seed, rows)
    _hypothesis("T23", rows)


def _t24(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T24: mamba2: signal E[dt] E[exp(-A dt)]^age."""
    _rows_for("T24", dev, seed, rows)


GROUPS = [
    (("T21",), _t21),
    (("T22",), _t22),
    (("T23",), _t23),
    (("T24",), _t24),
]
