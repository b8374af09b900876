"""Rows of T13: softmax attention's exact reads and its bill."""

from __future__ import annotations

import numpy as np
import torch

from capacity import keys, probe, theory, values, variants
from capacity.check._rows import eq


def _t13(dev, seed, rows):
    """T13: softmax attention keeps every pair: exact as the scale grows for distinct keys."""
    n, d = 64, 64
    K = keys.make("gaussian", n, d, batch=4, seed=seed, device=dev)
    V = values.make("gaussian", n, d, batch=4, seed=seed, device=dev)
    out = torch.softmax(200.0 * K.double() @ K.double().transpose(1, 2), dim=-1) @ V.double()
    rows.append(
        eq(
            "T13",
            "softmax scale = 200, distinct unit keys: reads = values (max abs.)",
            float((out - V.double()).abs().max()),
            0.0,
            1e-6,
        )
    )
    ds = probe.recall(variants.get("softmax", scale=200.0), K, V, checkpoints=[n])
    rows.append(eq("T13", "softmax variant via probe, scale = 200: worst mse", float(ds.mse.max()), 0.0, 1e-10))
    brute = (
        ((torch.softmax(8.0 * K.double() @ K.double().transpose(1, 2), dim=-1) @ V.double() - V.double()) ** 2)
        .sum(-1)
        .mean(-1)
        .cpu()
        .numpy()
    )
    ds = probe.recall(variants.get("softmax", scale=8.0), K, V, checkpoints=[n])
    rows.append(
        eq(
            "T13",
            "softmax variant via probe, scale = 8: mse = brute force (max rel.)",
            float(np.abs(ds.mse.isel(n=0).values - brute).max() / brute.max()),
            0.0,
            1e-5,
        )
    )
    rows.append(
        eq(
            "T13",
            "softmax variant via probe: cache after n pairs = n (d + dv)",
            float(ds.attrs["state_numel"]),
            float(theory.bill(n, d, d)["softmax_cache"]),
            0.0,
        )
    )
    n_even = int(theory.break_even_n(d))  # d/2: a cache of n_even keys and values holds as many numbers as the state
    state = variants.get("linear").init_state(1, d, d, device=dev).numel()
    ds = probe.recall(variants.get("softmax", scale=8.0), K[:1, :n_even], V[:1, :n_even], checkpoints=[n_even])
    rows.append(
        eq(
            "T13",
            "softmax cache at break-even n = d/2 (d = dv = 64) = linear state d dv",
            float(ds.attrs["state_numel"]),
            state,
            0,
        )
    )


GROUPS = [
    (("T13",), _t13),
]
