"""Rows of T21-T24: forgetting per age of a pair (delta, decay, gated delta, mamba2) against the exact expectations.

Each rule is probed with ``probe.recall(..., age_bins=...)`` through its registered variant, and its trace energy is
read off the variant's state: a marker column of the values that only one pair writes (1 there, 0 elsewhere) holds
omega_i Q k_i^T, the pair's trace (every rule here is linear in the values). Tolerances are 3 standard errors over
independent batch items (decay's trace energy is exact for unit keys: there float32 rounding, 1e-5 relative).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from capacity import keys, probe, theory, values, variants
from capacity.check._rows import eq, mean_se

# rule, variant label, theory parameters, d, n, batch, signal/error bins (first ages, ends), marker ages
_CASES = {
    "T21": ("delta", "delta(beta=0.5)", {"beta": 0.5}, 32, 192, 256, ((32, 64), (64, 128)), (48, 96)),
    "T22": ("decay", "decay(alpha=0.97)", {"alpha": 0.97}, 32, 128, 512, ((16, 32), (32, 64)), (24, 48)),
    "T23": (
        "gated_delta",
        "gated_delta(alpha=0.99, beta=0.5)",
        {"alpha": 0.99, "beta": 0.5},
        32,
        128,
        256,
        ((16, 32), (32, 64)),
        (24, 48),
    ),
    "T24": (
        "mamba2",
        "mamba2(A=1.0, dt=0.02, w_std=1.0)",
        {"A": 1.0, "dt": 0.02, "w_std": 1.0},
        32,
        128,
        512,
        ((16, 32), (32, 64)),
        (24, 48),
    ),
}
_DV = 64


def _edges(bins) -> list[int]:
    edges = sorted({0, *(a for b in bins for a in b)})
    return edges


def _rows_for(thm: str, dev, seed, rows) -> None:
    rule, label, params, d, n, B, bins, marks = _CASES[thm]
    mem = variants.resolve(label)
    K = keys.make("gaussian", n, d, batch=B, seed=seed, device=dev)
    V = values.make("gaussian", n, _DV, batch=B, seed=seed + 1, device=dev)
    edges = _edges(bins)
    ds = probe.recall(mem, K, V, checkpoints=[n], decode=False, age_bins=edges)
    tau = theory.forgetting_horizon(d, rule, **params)
    omega = theory.forgetting_signal(0, d, rule, **params)
    for lo, hi in bins:
        j = edges.index(lo)
        ages = np.arange(lo, hi)
        m, se = mean_se(torch.as_tensor(ds.signal_age.isel(n=0, age=j).values))
        want = omega * float(np.exp(-ages / tau).mean())
        rows.append(eq(thm, f"{label}: signal, ages {lo}-{hi - 1} = s0 exp(-age/tau) (3 s.e.)", m, want, 3 * se))
        if rule != "mamba2":  # the error is exact for the other three (first order in 1/d for mamba2)
            m, se = mean_se(torch.as_tensor(ds.mse_age.isel(n=0, age=j).values))
            want = float(np.mean(theory.forgetting_error(ages, n, d, rule, **params)))
            rows.append(eq(thm, f"{label}: mse, ages {lo}-{hi - 1}, n = {n} = theory (3 s.e.)", m, want, 3 * se))
    # the trace a pair leaves in the state: marker columns, one per marked pair
    P = len(marks)
    M = torch.zeros(B, n, P, device=dev)
    for j, age in enumerate(marks):
        M[:, n - 1 - age, j] = 1.0
    S = mem.write(mem.init_state(B, d, _DV + P, device=dev), K, torch.cat([V, M], dim=-1))
    trace = S[:, :, _DV:].double()  # [B, d, P]
    energy = (trace * trace).sum(1)  # [B, P]
    if rule == "mamba2":  # divide by the pair's own dt^2, which is independent of the later steps
        dt = mem.steps(K).double()  # [B, n]
        moments = theory.mamba2_step_moments(d, **params)
        for name, x in (("E dt", dt), ("E exp(-A dt)", torch.exp(-params["A"] * dt))):
            m, se = mean_se(x.mean(1))  # over the tokens of each item, then over items
            key = "omega" if name == "E dt" else "alpha"
            rows.append(eq(thm, f"{label}: {name} over unit keys = quadrature (3 s.e.)", m, moments[key], 3 * se))
        own = torch.stack([dt[:, n - 1 - age] for age in marks], dim=1)
        energy, scale = energy / own**2, 1.0
    else:
        scale = omega**2
    tau_e = theory.forgetting_horizon(d, rule, quantity="energy", **params)
    for j, age in enumerate(marks):
        m, se = mean_se(energy[:, j])
        what = f"{label}: trace energy at age {age} = w^2 exp(-age/tau_energy) (3 s.e.)"
        want = scale * math.exp(-age / tau_e)
        rows.append(eq(thm, what, m, want, max(3 * se, 1e-5 * want)))  # decay's is exact: float32 rounding only


def _t21(dev, seed, rows):
    """T21: the delta rule forgets its signal with tau = -1/ln(1 - b/d), its trace energy with -1/ln(1 - b(2-b)/d)."""
    _rows_for("T21", dev, seed, rows)


def _t22(dev, seed, rows):
    """T22: scalar decay: signal alpha^age, tau = -1/ln(alpha)."""
    _rows_for("T22", dev, seed, rows)


def _t23(dev, seed, rows):
    """T23: gated delta: signal b (alpha (1 - b/d))^age."""
    _rows_for("T23", dev, seed, rows)


def _t24(dev, seed, rows):
    """T24: mamba2: signal E[dt] E[exp(-A dt)]^age."""
    _rows_for("T24", dev, seed, rows)


GROUPS = [
    (("T21",), _t21),
    (("T22",), _t22),
    (("T23",), _t23),
    (("T24",), _t24),
]
