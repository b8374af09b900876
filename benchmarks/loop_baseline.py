"""The alternative to ``capacity run``: a plain per-point torch loop, as a user would write it.

For every (variant, key family, d, load n/d, seed): draw n keys and n unit gaussian values, write
them into a d x d state (linear: S = K^T V; delta rule with beta = 1: a loop over tokens, or
``lacapacity.kernels.update``), read every key back (R = K S), and compute the probe's six metrics
(mean squared error, relative error, cosine, signal, leak, argmax recall). No figures.

    python benchmarks/loop_baseline.py --d 16 32 --loads 1/4 1 4 --seeds 0 1 [--delta loop|kernels] [--out m.json]

The draws are the library's (``lacapacity.keys.make``, ``lacapacity.values.make``) so that the numbers
can be held against the sweep's; n = max(1, round(load d)) as in the study.
"""

from __future__ import annotations

from fractions import Fraction

import torch
from checkpointed_loop import parser, timed_run  # the shared command line of the two loops (a script beside this one)

from lacapacity import kernels
from lacapacity.inputs import keys, values


def point(
    variant: str, family: str, d: int, n: int, seed: int, delta: str = "loop", decode: bool = True
) -> dict[str, float]:
    """The six metrics of one point (dv = d), each a mean over the n stored pairs (five without ``decode``, the argmax
    recall, which scores every read against every stored value)."""
    K = keys.make(family, n, d, seed=seed)[0].float()  # [n, d]
    V = values.make("gaussian", n, d, seed=seed)[0].float()  # [n, dv]
    K = K / K.norm(dim=1, keepdim=True)
    if variant == "linear":
        S = K.T @ V  # [d, dv]
    elif delta == "kernels":
        S = kernels.update(torch.zeros(1, d, d), K[None], V[None], mode="delta", beta=1.0)[0]
    else:  # delta rule, beta = 1: S += k^T (v - k S), token by token
        S = torch.zeros(d, d)
        for t in range(n):
            S += torch.outer(K[t], V[t] - K[t] @ S)
    R = K @ S  # [n, dv]
    sq = ((R - V) ** 2).sum(1)
    vv, rv, rr = (V * V).sum(1), (R * V).sum(1), (R * R).sum(1)
    a = rv / vv
    out = {
        "mse": float(sq.mean()),
        "rel_error": float((sq / vv).mean()),
        "cosine": float((rv / (rr.sqrt() * vv.sqrt())).mean()),
        "signal": float(a.mean()),
        "leak": float(((R - a[:, None] * V) ** 2).sum(1).mean()),
    }
    if decode:
        out["recall"] = float(((R @ V.T).argmax(1) == torch.arange(n)).float().mean())
    return out


def run(variants, families, ds, loads, seeds, delta: str = "loop") -> dict[tuple, dict[str, float]]:
    """Every point of the grid, one at a time: (variant, family, d, load, seed) -> metrics."""
    out = {}
    for variant in variants:
        for family in families:
            for d in ds:
                for load in loads:
                    n = max(1, round(float(Fraction(load)) * d))
                    for seed in seeds:
                        out[(variant, family, d, load, seed)] = point(variant, family, d, n, seed, delta)
    return out


def main(argv=None) -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--delta",
        default="loop",
        choices=["loop", "kernels"],
        help="delta rule as a token loop or lacapacity.kernels.update",
    )
    a = p.parse_args(argv)
    timed_run(a, lambda: run(a.variants, a.keys, a.d, a.loads, a.seeds, a.delta))


if __name__ == "__main__":
    main()
