"""Rows of T12: the delta rule's exact read-backs and its mean error for random keys."""

from __future__ import annotations

import numpy as np
import torch

from capacity import keys, probe, theory, values, variants
from capacity.check._rows import eq, mean_se
from capacity.kernels import reference


def _t12(dev, seed, rows):
    """T12: delta rule, b = 1: the last key reads back exactly; orthonormal keys all do (n <= d)."""
    n, d, dv = 48, 24, 16
    V = values.make("gaussian", n, dv, batch=4, seed=seed, device=dev)
    K = keys.make("gaussian", n, d, batch=4, seed=seed, device=dev)
    S = reference.recurrence(K, V, mode="delta", beta=torch.ones(4, n, device=dev), normalize=False)
    rows.append(
        eq(
            "T12",
            "delta b = 1: last key reads back its value (max abs.)",
            float((K[:, -1:] @ S - V[:, -1:]).abs().max()),
            0.0,
            1e-5,
        )
    )
    delta = variants.get("delta", beta=1.0)
    ds = probe.recall(delta, K, V, checkpoints=[n], per_query=True)
    rows.append(
        eq(
            "T12",
            "delta variant via probe, b = 1: last key's squared error",
            float(ds.mse_q.isel(n=0, query=n - 1).max()),
            0.0,
            1e-10,
        )
    )
    Ko = keys.make("orthogonal", d, d, batch=4, seed=seed, device=dev)
    S = reference.recurrence(Ko, V[:, :d], mode="delta", beta=torch.ones(4, d, device=dev), normalize=False)
    rows.append(
        eq(
            "T12",
            "delta b = 1, orthonormal keys, n = d: all read back (max abs.)",
            float((Ko @ S - V[:, :d]).abs().max()),
            0.0,
            1e-5,
        )
    )
    ds = probe.recall(delta, Ko, V[:, :d], checkpoints=[d])
    rows.append(
        eq("T12", "delta variant via probe, orthonormal keys, n = d: worst mse", float(ds.mse.max()), 0.0, 1e-10)
    )


def _t12_random(dev, seed, rows):
    """T12: the delta rule with random unit keys against theory.delta_rule_error (exact expectation)."""
    n, d, dv, B = 128, 32, 16, 64
    K = keys.make("gaussian", n, d, batch=B, seed=seed, device=dev)
    V = values.make("gaussian", n, dv, batch=B, seed=seed, device=dev)
    for beta, c in ((0.5, 64), (1.0, 128)):
        ds = probe.recall(variants.get("delta", beta=beta), K, V, checkpoints=[1, c], decode=False)
        if beta != 1.0:
            first = float(np.abs(ds.mse.isel(n=0).values - theory.delta_rule_error(1, d, beta=beta)).max())
            rows.append(eq("T12", f"delta b = {beta}, n = 1: mse = (1 - b)^2 (worst item)", first, 0.0, 1e-6))
        m, se = mean_se(torch.as_tensor(ds.mse.isel(n=1).values))
        what = f"delta b = {beta}, d = {d}, n = {c}: mean mse = theory (3 s.e.)"
        rows.append(eq("T12", what, m, theory.delta_rule_error(c, d, beta=beta), 3 * se))


GROUPS = [
    (("T12",), _t12),
    (("T12",), _t12_random),
]
