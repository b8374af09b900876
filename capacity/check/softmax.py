"""Rows of T13: softmax attention's exact reads, and its bill measured on the variants themselves.

The counts of ``theory.bill`` are held to what the memories keep (the softmax variant's measured cache,
the linear variant's state tensor) and spend (matrix-multiply FLOPs counted by torch's
``FlopCounterMode`` while the variants write and read one token); the break-even n is where the
measured costs cross.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.flop_counter import FlopCounterMode

from lacapacity import theory, variants
from lacapacity.check._rows import Check, eq, measured
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe


def _t13(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T13: softmax attention keeps every pair: exact as the scale grows for distinct keys."""
    n, d = 64, 64
    K = keys.make("gaussian", n, d, batch=4, seed=seed, device=dev)
    V = values.make("gaussian", n, d, batch=4, seed=seed, device=dev)
    mem = variants.get("softmax", scale=200.0)
    reads = mem.read(mem.write(mem.init_state(4, d, d, device=dev), K, V), K)
    what = "softmax variant, scale = 200, distinct unit keys: reads = values (max abs.)"
    rows.append(eq("T13", what, float((reads - V).abs().max()), 0.0, 1e-6, function="variants.softmax"))
    ds = probe.recall(mem, K, V, checkpoints=[n])
    rows.append(
        eq(
            "T13",
            "softmax variant via probe, scale = 200: worst mse",
            float(ds.mse.max()),
            0.0,
            1e-10,
            function="probe.recall",
        )
    )
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
            function="variants.softmax",
        )
    )


_D, _DV = 48, 80  # d != dv, so that n (d + dv), d dv and the break-even d dv / (d + dv) = 30 differ
_N = (8, 16, 40)


def _flops(fn: Callable[[], object]) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


class _Costs(TypedDict):
    cache: npt.NDArray[np.float64]  # [len(_N)]: numbers the softmax cache keeps
    state: float  # numbers the linear state keeps
    cache_flops: npt.NDArray[np.float64]  # [len(_N)]: FLOPs of one softmax read
    linear_flops: float  # FLOPs of one linear write and read


def _costs(dev: torch.device, seed: int) -> _Costs:
    """What the softmax and linear variants keep and spend at each n of _N, measured."""
    n = max(_N)
    K = keys.make("gaussian", n + 1, _D, batch=1, seed=seed, device=dev)
    V = values.make("gaussian", n + 1, _DV, batch=1, seed=seed, device=dev)
    ds = probe.recall(variants.get("softmax"), K[:, :n], V[:, :n], checkpoints=list(_N), decode=False)
    soft = variants.get("softmax")
    cache_flops = []
    for m in _N:  # the cost of decoding token m + 1: its read over the m cached pairs
        state = soft.write(soft.init_state(1, _D, _DV, device=dev), K[:, :m], V[:, :m])
        cache_flops.append(_flops(lambda state=state, m=m: soft.read(state, K[:, m : m + 1])))  # type: ignore[misc]  # a lambda binding a loop variable by default: mypy cannot infer it
    lin = variants.get("linear")
    state = lin.write(lin.init_state(1, _D, _DV, device=dev), K[:, :n], V[:, :n])
    box: dict[str, Any] = {}  # the linear state after the write (Any: the memory's state)
    write = _flops(lambda: box.update(s=lin.write(state, K[:, n : n + 1], V[:, n : n + 1])))
    read = _flops(lambda: lin.read(box["s"], K[:, n : n + 1]))
    return {
        "cache": ds.state_numel.values.astype(np.float64),  # [len(_N)], numel of the cached keys and values
        "state": float(state.numel()),  # the linear state tensor, one batch item
        "cache_flops": np.asarray(cache_flops, dtype=np.float64),
        "linear_flops": float(write + read),
    }


def _bill(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T13: theory.bill and theory.break_even_n against the variants' measured sizes and FLOPs."""
    c = measured("costs", lambda: _costs(dev, seed))
    b = theory.bill(np.asarray(_N), _D, _DV)
    rel: Callable[[object, npt.ArrayLike], float] = lambda got, want: float(
        np.max(np.abs(np.asarray(got) - want) / np.abs(want))
    )
    n_list = ", ".join(map(str, _N))
    what = f"softmax variant, d = {_D}, dv = {_DV}, n = {n_list}: measured cache = n (d + dv) (max rel.)"
    rows.append(eq("T13", what, rel(c["cache"], b["softmax_cache"]), 0.0, 0.0, function="bill"))
    what = f"linear variant, d = {_D}, dv = {_DV}: state tensor = d dv numbers (max rel.)"
    rows.append(eq("T13", what, rel(c["state"], b["linear_state"]), 0.0, 0.0, function="bill"))
    what = f"softmax variant, n = {n_list}: counted decode FLOPs = 2 n (d + dv) (max rel.)"
    rows.append(eq("T13", what, rel(c["cache_flops"], b["softmax_decode_flops"]), 0.0, 0.0, function="bill"))
    what = "linear variant: counted FLOPs of one write and one read = 4 d dv (max rel.)"
    rows.append(eq("T13", what, rel(c["linear_flops"], b["linear_decode_flops"]), 0.0, 0.0, function="bill"))
    # where the measured costs cross: the softmax costs are lines in n (fitted), the linear ones constants
    n = np.asarray(_N, dtype=np.float64)
    slope, icept = np.polyfit(n, c["cache"], 1)
    what = f"d = {_D}, dv = {_DV}: n where the measured cache = the state = d dv / (d + dv)"
    even = (c["state"] - icept) / slope
    rows.append(eq("T13", what, even, theory.break_even_n(_D, _DV), 1e-9, function="break_even_n"))
    slope, icept = np.polyfit(n, c["cache_flops"], 1)
    what = f"d = {_D}, dv = {_DV}: n where the counted decode FLOPs cross = 2 d dv / (d + dv)"
    even = (c["linear_flops"] - icept) / slope
    want = theory.break_even_n(_D, _DV, measure="flops")
    rows.append(eq("T13", what, even, want, 1e-9, function="break_even_n"))


GROUPS = [
    (("T13",), _t13),
    (("T13",), _bill),
]
