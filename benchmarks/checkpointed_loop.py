"""The loop a researcher writes instead of ``capacity run``: seeds batched, each state written once, read at checkpoints.

For each key family and d: draw the keys and values of all seeds at once ([seeds, N, d]), write each memory's
state in order (linear: one matmul per stretch; the delta rule, beta = 1: token by token), and at every checkpoint
n read all n stored keys and compute the probe's six metrics, means over the stored pairs (mean squared error,
relative error, cosine, signal, leak, argmax recall over the n stored values). Keys whose prefixes are not draws
of their family (the tight frame, built for one n) are drawn and written once per n, as the main job does.
Plain torch; only the draws are the library's (``lacapacity.keys``, ``lacapacity.values``), so that every number can
be held against the main job's (``benchmarks/vs_loop.py`` does).

    python benchmarks/checkpointed_loop.py [--d 16 32 ...] [--seeds 0 1 2 3] [--threads 1] [--out metrics.json]
"""

import argparse
import json
import time
from fractions import Fraction

import torch

from lacapacity.inputs import keys, values

LOADS = ["1/8", "3/16", "1/4", "3/8", "1/2", "3/4", "1", "3/2", "2", "3", "4", "6", "8", "12", "16"]


def metrics(R, V):
    """R, V [S, n, dv] -> {metric: [S]}: the probe's six means over the n stored pairs."""
    sq, vv, rv, rr = ((R - V) ** 2).sum(-1), (V * V).sum(-1), (R * V).sum(-1), (R * R).sum(-1)
    a = rv / vv
    hit = (R @ V.mT).argmax(-1) == torch.arange(V.shape[1])
    leak = ((R - a[..., None] * V) ** 2).sum(-1)
    out = dict(mse=sq, rel_error=sq / vv, cosine=rv / (rr.sqrt() * vv.sqrt()), signal=a, leak=leak, recall=hit)
    return {m: x.float().mean(-1) for m, x in out.items()}


def run(variants, families, ds, loads, seeds):
    """(variant, family, d, n) -> {metric: [S] list}, every checkpoint of the grid."""
    out = {}
    for family in families:
        for d in ds:
            ns = sorted({max(1, round(float(Fraction(x)) * d)) for x in loads})
            passes = [ns] if family == "gaussian" else [[n] for n in ns]
            for at in passes:
                K = keys.make(family, at[-1], d, batch=len(seeds), seed=seeds).float()  # [S, N, d]
                K = K / K.norm(dim=-1, keepdim=True)
                V = values.make("gaussian", at[-1], d, batch=len(seeds), seed=seeds)  # [S, N, dv]
                for variant in variants:
                    S, done = torch.zeros(len(seeds), d, d), 0  # [S, d, dv]
                    for n in at:
                        if variant == "linear":
                            S += K[:, done:n].mT @ V[:, done:n]
                        else:
                            for t in range(done, n):  # S += k^T (v - k S)
                                k = K[:, t]
                                S += k[:, :, None] * (V[:, t] - (k[:, None] @ S)[:, 0])[:, None]
                        done = n
                        m = metrics(K[:, :n] @ S, V[:, :n])
                        out[(variant, family, d, n)] = {name: x.tolist() for name, x in m.items()}
    return out


def parser(description: str) -> argparse.ArgumentParser:
    """The grid's arguments, shared with loop_baseline.py."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--variants", nargs="+", default=["linear", "delta"], choices=["linear", "delta"])
    p.add_argument("--keys", nargs="+", default=["gaussian", "orthogonal"])
    p.add_argument("--d", nargs="+", type=int, default=[16, 32, 64, 128, 256])
    p.add_argument("--loads", nargs="+", default=LOADS)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    p.add_argument("--out", default=None, help="write the metrics to this JSON file")
    return p


def timed_run(a, run_grid) -> None:
    """Run ``run_grid()`` on ``a.threads``, print "N points in X s" (vs_loop.py reads it), write ``a.out``."""
    if a.threads:
        torch.set_num_threads(a.threads)
    t = time.perf_counter()
    res = run_grid()
    points = sum(len(m["mse"]) if isinstance(m["mse"], list) else 1 for m in res.values())
    print(f"{points} points in {time.perf_counter() - t:.2f} s")
    if a.out:
        with open(a.out, "w") as f:
            json.dump([{"point": list(k), **m} for k, m in res.items()], f)


def main(argv=None):
    a = parser(__doc__.splitlines()[0]).parse_args(argv)
    timed_run(a, lambda: run(a.variants, a.keys, a.d, a.loads, a.seeds))


if __name__ == "__main__":
    main()
