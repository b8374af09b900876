"""Rows of T12: the delta rule's exact read-backs, its mean error for random keys, and its capacity."""

from __future__ import annotations

from typing import cast

import numpy as np
import numpy.typing as npt
import torch

from lacapacity import theory, variants
from lacapacity.check._rows import Check, eq, inside, mean_se, measured
from lacapacity.inputs import keys, values
from lacapacity.kernels import reference
from lacapacity.tasks import metrics, probe


def _t12(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T12: delta rule, b = 1: the last key reads back exactly; orthonormal keys all do (n <= d)."""
    n, d, dv = 48, 24, 16
    V = values.make("gaussian", n, dv, batch=4, seed=seed, device=dev)
    K = keys.make("gaussian", n, d, batch=4, seed=seed, device=dev)
    S = reference.recurrence(K, V, mode="delta", beta=torch.ones(4, n, device=dev), normalize=False)
    rows.append(
        eq(
            "T12",
            "oracle recurrence, delta b = 1: last key reads back its value (max abs.)",
            float((K[:, -1:] @ S - V[:, -1:]).abs().max()),
            0.0,
            1e-5,
            function="kernels.reference",
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
            function="variants.delta",
        )
    )
    Ko = keys.make("orthogonal", d, d, batch=4, seed=seed, device=dev)
    S = reference.recurrence(Ko, V[:, :d], mode="delta", beta=torch.ones(4, d, device=dev), normalize=False)
    rows.append(
        eq(
            "T12",
            "oracle recurrence, delta b = 1, orthonormal keys, n = d: all read back (max abs.)",
            float((Ko @ S - V[:, :d]).abs().max()),
            0.0,
            1e-5,
            function="kernels.reference",
        )
    )
    ds = probe.recall(delta, Ko, V[:, :d], checkpoints=[d])
    what = "delta variant via probe, orthonormal keys, n = d: worst mse"
    rows.append(eq("T12", what, float(ds.mse.max()), 0.0, 1e-10, function="variants.delta"))


def _t12_random(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T12: the delta rule with random unit keys against theory.delta_rule_error (an exact expectation).

    512 draws put 3 standard errors of the mean near 0.5%, so that a formula 1% off fails.
    """
    n, d, dv, B = 128, 32, 16, 512

    def run(beta: float, c: int) -> npt.NDArray[np.float64]:
        K = keys.make("gaussian", n, d, batch=B, seed=seed, device=dev)
        V = values.make("gaussian", n, dv, batch=B, seed=seed, device=dev)
        ds = probe.recall(variants.get("delta", beta=beta), K, V, checkpoints=[1, c], decode=False)
        return cast("npt.NDArray[np.float64]", ds.mse.values)  # (xarray types a variable by name Any)

    for beta, c in ((0.5, 64), (1.0, 128)):
        mse = measured((beta, c), lambda beta=beta, c=c: run(beta, c))  # type: ignore[misc]  # [2, B]; a lambda binding a loop variable by default: mypy cannot infer it
        if beta != 1.0:
            want = theory.delta_rule_error(1, d, beta=beta)
            first = float(mse[0][np.argmax(np.abs(mse[0] - want))])
            what = f"delta b = {beta}, n = 1: mse = (1 - b)^2 (worst item)"
            rows.append(eq("T12", what, first, want, 1e-6, function="delta_rule_error"))
        m, se = mean_se(mse[1])
        what = f"delta b = {beta}, d = {d}, n = {c}: mean mse = theory (3 s.e.)"
        rows.append(eq("T12", what, m, theory.delta_rule_error(c, d, beta=beta), 3 * se, function="delta_rule_error"))

    def capacity(d: int, eps: float, B: int) -> npt.NDArray[np.float64]:
        grid = list(range(d // 2, d + d // 4 + 1))  # around delta_rule_capacity(0.5, 64) = 53
        K = keys.make("gaussian", grid[-1], d, batch=B, seed=seed, device=dev)
        V = values.make("gaussian", grid[-1], 16, batch=B, seed=seed, device=dev)
        ds = probe.recall(variants.get("delta", beta=1.0), K, V, checkpoints=grid, decode=False)
        return metrics.capacity(ds, metric="mse", threshold=eps).values  # [B], one per draw, real-valued

    d, eps, B = 64, 0.5, 256
    m, se = mean_se(measured(("capacity", d, eps, B), lambda: capacity(d, eps, B)))
    want = theory.delta_rule_capacity(eps, d, beta=1.0)  # whole: the measured crossing lies in [want, want + 1]
    what = f"delta b = 1, d = {d}: capacity at mse <= {eps} in [n*, n* + 1] (mean of {B} draws, 3 s.e.)"
    rows.append(inside("T12", what, m, want - 3 * se, want + 1 + 3 * se, function="delta_rule_capacity"))


GROUPS = [
    (("T12",), _t12),
    (("T12",), _t12_random),
]
