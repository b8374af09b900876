"""The argmax decode before and after lacapacity.tasks.decode, on the main job's shapes, in one run.

    .venv/bin/python benchmarks/decode.py [--d 16 32 64 128 256] [--repeats 3] [--threads 1]

For each d: B = 4 seeds, linear memory reads of gaussian keys (r = K K^T V) at every checkpoint
of the capacity-vs-d study (n = load d for its 15 loads), the decode of all n reads against the n
stored values. Old: float32 scores of a block of reads, argmax (what the probe did). New:
``argmax_correct`` with the screen this machine picks (``auto``) and with a float32 screen. The two
are alternated, best of ``--repeats`` per shape; every answer is checked against the old one.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from lacapacity.inputs import keys, values
from lacapacity.studies import get as get_study
from lacapacity.tasks.decode import argmax_correct, screen_precision


def old_decode(r: torch.Tensor, v: torch.Tensor, block: int) -> torch.Tensor:
    """The probe's decode before lacapacity.tasks.decode: float32 scores, torch.argmax; [B, c]."""
    B, c, _ = r.shape
    correct = torch.empty(B, c, dtype=torch.float32)
    own = torch.arange(c)
    for start in range(0, c, block):
        scores = r[:, start : start + block] @ v.transpose(1, 2)  # [B, blk, c]
        correct[:, start : start + block] = (scores.argmax(-1) == own[start : start + block]).float()
    return correct


def best_of(fn, repeats: int) -> tuple[float, torch.Tensor]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", nargs="+", type=int, default=[16, 32, 64, 128, 256])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    auto = f"{screen_precision('cpu', dv=16)} at dv < 128, {screen_precision('cpu', dv=256)} at dv >= 128"
    B = 4
    print(
        f"{os.cpu_count()} cores, {a.threads} torch thread(s), torch {torch.__version__}, auto screen: {auto}, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        "| d | n (checkpoints) | old float32 decode | new, auto screen | new, float32 screen | old / new (auto) | recall range |"
    )
    print("|---|---|---|---|---|---|---|")
    tot = [0.0, 0.0, 0.0]
    for d in a.d:
        ns = sorted(set(get_study("capacity-vs-d").grid.ns(d)))
        K = keys.make("gaussian", ns[-1], d, batch=B, seed=list(range(B))).float()
        K = K / K.norm(dim=-1, keepdim=True)
        V = values.make("gaussian", ns[-1], d, batch=B, seed=list(range(B))).float()
        t = [0.0, 0.0, 0.0]
        recalls = []
        for n in ns:
            k, v = K[:, :n], V[:, :n]
            r = k @ (k.transpose(1, 2) @ v)  # [B, n, d] reads of a linear memory
            block = max(1, (1 << 24) // (B * n))  # the probe's block
            t_old, want = best_of(lambda: old_decode(r, v, block), a.repeats)  # noqa: B023 - called at once
            t_new, got = best_of(lambda: argmax_correct(r, v, block=block), a.repeats)  # noqa: B023
            t_32, got32 = best_of(lambda: argmax_correct(r, v, block=block, precision="float32"), a.repeats)  # noqa: B023
            if not (torch.equal(got, want) and torch.equal(got32, want)):
                print(
                    f"  d {d}, n {n}: the decodes differ in {int((got != want).sum())} / {int((got32 != want).sum())} reads"
                )
            t = [t[0] + t_old, t[1] + t_new, t[2] + t_32]
            recalls.append(float(want.mean()))
        tot = [x + y for x, y in zip(tot, t)]
        print(
            f"| {d} | {ns[0]}..{ns[-1]} ({len(ns)}) | {t[0]:.3f} s | {t[1]:.3f} s | {t[2]:.3f} s | {t[0] / t[1]:.2f}x | "
            f"{min(recalls):.3f}..{max(recalls):.3f} |"
        )
    print(f"| all | | {tot[0]:.3f} s | {tot[1]:.3f} s | {tot[2]:.3f} s | **{tot[0] / tot[1]:.2f}x** | |")


if __name__ == "__main__":
    main()
