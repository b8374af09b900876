"""Rows of T11: the decaying memory against its closed form."""

from __future__ import annotations

import numpy as np
import torch

from lacapacity import theory, variants
from lacapacity.check._rows import Check, eq
from lacapacity.inputs import keys, values
from lacapacity.kernels import reference
from lacapacity.tasks import probe


def _t11(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T11: decay, the oracle recurrence against the closed form."""
    n, d, dv, a = 48, 24, 16, 0.93
    K = keys.make("gaussian", n, d, batch=4, seed=seed, device=dev)
    V = values.make("gaussian", n, dv, batch=4, seed=seed, device=dev)
    S = reference.recurrence(K, V, mode="decay", gate=torch.full((4, n), a, device=dev), normalize=False)
    want = theory.decay_readout(K.double(), V.double(), a)
    rows.append(
        eq(
            "T11",
            "oracle recurrence, decay alpha=0.93: reads = sum_j alpha^(n-j) G_ij v_j (max rel.)",
            float(((K.double() @ S.double()) - want).abs().max() / want.abs().max()),
            0.0,
            1e-5,
            function="decay_readout",
        )
    )
    ds = probe.recall(variants.get("decay", alpha=a), K, V, checkpoints=[n], per_query=True)
    brute = ((want - V.double()) ** 2).sum(-1).cpu().numpy()  # [B, n]
    rows.append(
        eq(
            "T11",
            "decay variant via probe: per-query error = closed form (max rel.)",
            float(np.abs(ds.mse_q.isel(n=0).values - brute).max() / brute.max()),
            0.0,
            1e-5,
            function="decay_readout",
        )
    )


GROUPS = [
    (("T11",), _t11),
]
