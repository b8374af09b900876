"""Rows of T34: log-linear attention's error with random keys, over all pairs and level by level.

The built-in ``log_linear`` memory (over linear attention with a constant gate) is written with random unit keys
and values and read back through the probe; the mean per-pair error over the batch, and the mean over each Fenwick
level's pairs, are compared with ``lacapacity.theory.log_linear_error`` and ``log_linear_level_error`` within 3
standard errors. The batch is sized so that a form 3% off fails every row: at n = 22 (levels of 16, 4 and 2 pairs),
d = 16, dv = 64, 1024 draws, 3 s.e. is 0.2%-1% of the prediction.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import numpy.typing as npt
import torch

from lacapacity import theory, variants
from lacapacity.check._rows import Check, eq, mean_se, measured
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.theory.log_linear import buckets


def _errors(
    n: int, d: int, dv: int, B: int, lam: float, alpha: float, seed: int, dev: torch.device
) -> npt.NDArray[np.float64]:
    """Per-pair squared read errors of the log_linear memory, float64 ``[B, n]`` (numpy)."""
    K = keys.make("gaussian", n, d, batch=B, seed=seed, device=dev)
    V = values.make("gaussian", n, dv, batch=B, seed=seed + 1, device=dev)
    mem = variants.get("log_linear", alpha=alpha, lam=lam)
    ds = probe.recall(mem, K, V, checkpoints=[n], per_query=True, decode=False)
    return cast(
        "npt.NDArray[np.float64]", ds.mse_q.isel(n=0).values.astype("float64")
    )  # (xarray types a variable by name Any)


def _t34(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T34: the mean error and each level's, at n = 22 between powers of two, lam = 0.5, alpha = 0.97; and T7 as
    the limit lam = alpha = 1."""
    n, d, dv, B, lam, alpha = 22, 16, 64, 1024, 0.5, 0.97
    err = measured(("log_linear", n, d, dv, B, lam, alpha), lambda: _errors(n, d, dv, B, lam, alpha, seed, dev))
    setting = f"log_linear lam = {lam:g}, alpha = {alpha:g}, d = {d}, n = {n}"
    m, se = mean_se(err.mean(1))
    want = theory.log_linear_error(n, d, lam, alpha)
    rows.append(eq("T34", f"{setting}: mean error (3 s.e.)", m, want, 3 * se, function="log_linear_error"))
    per = theory.log_linear_level_error(n, d, lam, alpha)
    for level, start, size in buckets(n):
        m, se = mean_se(err[:, start : start + size].mean(1))
        what = f"{setting}: error of level {level} ({size} pairs, 3 s.e.)"
        rows.append(eq("T34", what, m, per[level], 3 * se, function="log_linear_level_error"))
    rows.append(
        eq(
            "T34",
            f"lam = alpha = 1, d = {d}, n = {n}: the levels drop out, T7's (n - 1)/d",
            theory.log_linear_error(n, d, 1.0, 1.0),
            theory.random_keys_error(n, d),
            1e-12,
            function="log_linear_error",
        )
    )


GROUPS = [
    (("T34",), _t34),
]
