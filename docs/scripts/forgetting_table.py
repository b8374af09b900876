"""Print the horizon table of docs/theory.md (T21-T24): derived time constants, the hypotheses, and the probe's fit.

For each rule (the settings of ``studies/forgetting.py``, d = 64) the probe writes n = 1024 random unit keys and
values for 64 seeds and reads every stored pair back (``per_query=True``); the measured signal time constant is the
least-squares slope of log(mean signal) against age over ages 0 .. 2 tau (tau: the derived signal horizon).

    python docs/scripts/forgetting_table.py
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np
import torch

from lacapacity import theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe

RULES = [
    ("delta", "delta(beta=1.0)", {"beta": 1.0}),
    ("delta", "delta(beta=0.5)", {"beta": 0.5}),
    ("decay", "decay(alpha=0.99)", {"alpha": 0.99}),
    ("gated_delta", "gated_delta(alpha=0.99, beta=0.5)", {"alpha": 0.99, "beta": 0.5}),
    ("mamba2", "mamba2(A=1.0, dt=0.01, w_std=1.0)", {"A": 1.0, "dt": 0.01, "w_std": 1.0}),
]


def fitted(label: str, d: int, n: int, batch: int, tau: float) -> float:
    K = keys.make("gaussian", n, d, batch=batch, seed=list(range(batch)))
    V = values.make("gaussian", n, d, batch=batch, seed=list(range(batch, 2 * batch)))
    ds = probe.recall(variants.resolve(label), K, V, checkpoints=[n], per_query=True, decode=False)
    signal = ds.signal_q.isel(n=0).mean("batch").values[::-1]  # index = age
    ages = np.arange(min(n, int(2 * tau) + 1))
    slope = np.polyfit(ages, np.log(signal[ages]), 1)[0]
    return -1.0 / slope


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args(argv)
    d = args.d
    t0 = time.perf_counter()
    print("| memory | signal tau (T21-T24) | energy tau | trace tau | hypothesis | measured signal tau (probe fit) |")
    print("|---|---|---|---|---|---|")
    for rule, label, p in RULES:
        tau = theory.forgetting_horizon(d, rule, **p)
        te = theory.forgetting_horizon(d, rule, quantity="energy", **p)
        tt = theory.forgetting_horizon(d, rule, quantity="trace", **p)
        guess = theory.forgetting_hypothesis(d, rule, **p)
        meas = fitted(label, d, args.n, args.batch, tau)
        g = f"{guess:.1f}" if guess is not None and math.isfinite(guess) else "none"
        print(f"| `{label}` | {tau:.1f} | {te:.1f} | {tt:.1f} | {g} | {meas:.1f} |")
    print(
        f"\nd = dv = {d}, n = {args.n}, {args.batch} seeds, random unit keys and values; "
        f"torch {torch.__version__}, {platform.machine()}, {time.perf_counter() - t0:.1f} s"
    )


if __name__ == "__main__":
    main()
