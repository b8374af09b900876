"""Rows of T10: argmax recall of the linear memory against the refined prediction and the Gaussian bound.

The refined prediction is held to the measured recall and capacity within 3 standard errors plus its
stated accuracy; the Gaussian ``argmax_recall`` is a bound on the memory (rows with their margin) and is held
exactly to its own model: scores drawn as that model states them, decoded by ``decode.argmax_correct``.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
import numpy.typing as npt
import torch

from lacapacity import theory, variants
from lacapacity.base import _random
from lacapacity.check._rows import Check, capacity_se, eq, ge, mean_se, measured
from lacapacity.inputs import keys, values
from lacapacity.tasks import decode, probe

TAU = 0.9
D = DV = 64
# checkpoints 0.9-1.1 times the refined prediction of the 90%-recall capacity at d = dv = 64 (188.4) and the
# Gaussian one (162.2); fixed numbers, so that a wrong closed form cannot move the measurement
MEMORY_GRID = (170, 179, 188, 198, 207)
MODEL_GRID = (146, 154, 162, 170, 178)
BATCH = 512
REFINED_RECALL = 0.006  # accuracy of argmax_recall_refined (docs/theory-delta.md: within 0.006 of measured recall)
REFINED_CAPACITY = 0.01  # accuracy of argmax_capacity_refined at d = dv = 64 (measured / refined 0.993-1.004)


def _memory(dev: torch.device, seed: int) -> npt.NDArray[np.float64]:
    """The probe's argmax recall of the linear memory at MEMORY_GRID, ``[C, BATCH]``."""
    n = MEMORY_GRID[-1]
    K = keys.make("gaussian", n, D, batch=BATCH, seed=seed, device=dev)
    V = values.make("gaussian", n, DV, batch=BATCH, seed=seed, device=dev)
    ds = probe.recall(variants.get("linear"), K, V, checkpoints=list(MEMORY_GRID))
    return cast("npt.NDArray[np.float64]", ds.recall.values)  # (xarray types a variable by name Any)


def _gaussian_model(dev: torch.device, seed: int, batch: int = 256) -> npt.NDArray[np.float64]:
    """Recall of argmax_recall's model, ``[C, batch]`` at MODEL_GRID: scores drawn as the model states them.

    Read i's own score is 1 + s_c z, each of its n - 1 others s_w z' (all z independent standard normal),
    s_c^2 = (n - 1)/(d dv), s_w^2 = 1/dv + 1/d + (n - 2)/(d dv). The reads are these scores against the
    values e_1..e_n (so r_i . v_l is score l), decoded by the package's exact argmax decode.
    """
    g = _random.generator(seed, "check/t10-model")
    out = []
    for n in MODEL_GRID:
        sc = math.sqrt((n - 1) / (D * DV))
        sw = math.sqrt(1 / DV + 1 / D + (n - 2) / (D * DV))
        r = sw * torch.randn(batch, n, n, generator=g, dtype=torch.float64)
        r.diagonal(dim1=1, dim2=2).copy_(1 + sc * torch.randn(batch, n, generator=g, dtype=torch.float64))
        eye = torch.eye(n, dtype=torch.float64).expand(batch, n, n)
        out.append(decode.argmax_correct(r.to(dev), eye.to(dev)).double().mean(-1).cpu().numpy())
    return np.stack(out)  # [C, batch]


VOCAB_N, VOCAB = 162, 512


def _vocab_model(seed: int, batch: int = 128) -> npt.NDArray[np.float64]:
    """Recall of vocab_argmax_recall's model at n = VOCAB_N over VOCAB values, ``[batch]``: each read's own score
    1 + s_c z, its n - 1 other stored values' s_w z', the vocab - n unstored values' s_u z'' (all independent
    standard normal; s_u^2 = (1 + (n - 1)/d)/dv), correct where its own score is the largest."""
    g = _random.generator(seed, "check/t10-vocab")
    n = VOCAB_N
    sc, su = math.sqrt((n - 1) / (D * DV)), math.sqrt((1 + (n - 1) / D) / DV)
    sw = math.sqrt(1 / DV + 1 / D + (n - 2) / (D * DV))
    own = 1 + sc * torch.randn(batch, n, generator=g, dtype=torch.float64)
    stored = sw * torch.randn(batch, n, n - 1, generator=g, dtype=torch.float64)
    unstored = su * torch.randn(batch, n, VOCAB - n, generator=g, dtype=torch.float64)
    best = torch.maximum(stored.amax(-1), unstored.amax(-1))
    return cast("npt.NDArray[np.float64]", (own > best).double().mean(-1).numpy())


def _argmax(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T10 at d = dv = 64: the memory's recall and capacity, and the Gaussian model's."""
    rec = measured("memory", lambda: _memory(dev, seed))  # [C, B]
    i = MEMORY_GRID.index(188)
    m, se = mean_se(rec[i])
    want = theory.argmax_recall_refined(188, D, DV)
    what = f"d = dv = {D}, n = 188: recall = refined prediction (3 s.e. + {REFINED_RECALL})"
    rows.append(eq("T10", what, m, want, 3 * se + REFINED_RECALL, function="argmax_recall_refined"))
    cap, se = capacity_se(rec, MEMORY_GRID, metric="recall", threshold=TAU)
    want = theory.argmax_capacity_refined(D, DV, tau=TAU)
    what = f"d = dv = {D}: 90%-recall capacity = refined prediction (3 s.e. + {REFINED_CAPACITY:.0%})"
    rows.append(eq("T10", what, cap, want, 3 * se + REFINED_CAPACITY * want, function="argmax_capacity_refined"))
    bound = theory.argmax_capacity(D, DV, tau=TAU)
    what = f"d = dv = {D}: 90%-recall capacity >= Gaussian bound (margin {cap / bound:.2f}x)"
    rows.append(ge("T10", what, cap, bound, 0.0, function="argmax_capacity"))
    bound = theory.argmax_recall(188, D, DV)
    what = f"d = dv = {D}, n = 188: recall >= Gaussian bound (margin {m - bound:+.3f})"
    rows.append(ge("T10", what, m, bound, 0.0, function="argmax_recall"))

    model = measured("model", lambda: _gaussian_model(dev, seed))  # [C, batch]
    j = MODEL_GRID.index(162)
    m, se = mean_se(model[j])
    what = "Gaussian model's scores, decoded, n = 162: recall = argmax_recall (3 s.e.)"
    rows.append(eq("T10", what, m, theory.argmax_recall(162, D, DV), 3 * se, function="argmax_recall"))
    cap, se = capacity_se(model, MODEL_GRID, metric="recall", threshold=TAU)
    what = "Gaussian model's scores, decoded: 90%-recall capacity = argmax_capacity (3 s.e.)"
    rows.append(eq("T10", what, cap, theory.argmax_capacity(D, DV, tau=TAU), 3 * se, function="argmax_capacity"))
    m, se = mean_se(measured("vocab", lambda: _vocab_model(seed)))
    want = theory.vocab_argmax_recall(VOCAB_N, D, DV, VOCAB)
    what = f"the vocabulary model's scores, n = {VOCAB_N}, vocab = {VOCAB}: recall = vocab_argmax_recall (3 s.e.)"
    rows.append(eq("T10", what, m, float(want), 3 * se, function="vocab_argmax_recall"))


GROUPS = [
    (("T10",), _argmax),
]
