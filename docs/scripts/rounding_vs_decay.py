"""The figure a server engineer choosing how to round a decaying state reads: round to nearest, stochastic rounding
and error feedback against decay (docs/precision.md, "Rounding against decay").

A decaying memory (RetNet's S = alpha S + k^T v) at d = dv = 32 (one head) is stored as int8, int4 and fp8
(float8_e4m3fn, vLLM #52962's format) with one scale per (head, dim) row (``/row``; at d = dv the engines' [dv, d]
row, ``/col`` here, is the same), rounded after every write (decode), three ways: round to nearest (``int8/row``,
``step``), stochastic rounding (``step+stochastic``) and error feedback (``int8/row+ef``: the last rounding's error
added back before the next). A grey line: the float32 read's own mean square, E ||S||^2 / d (T22's moment), so a
deviation can be read against the signal it perturbs. Measured through ``lacapacity.variants.precision.stored`` on random unit
keys and values after n = 8 / (1 - alpha) writes (steady state; at most 2048): the mean squared deviation of a unit
query's read from the float32 read (16 batch items; bars: one standard error). Lines: T32
(``theory.quantised_step_error``). Writes ``docs/figures/rounding-vs-decay.png`` and prints the numbers.

    python docs/scripts/rounding_vs_decay.py [--out docs/figures]
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from lacapacity import theory, variants
from lacapacity.inputs import keys, values
from lacapacity.variants import precision

ALPHAS = (0.9, 0.95, 0.99, 0.995)
WAYS = (
    ("round to nearest", "", "step"),
    ("stochastic rounding", "", "step+stochastic"),
    ("error feedback", "+ef", "step"),
)


def deviation(alpha, dtype, rounding, n, d=32, B=16, seed=0):
    K = keys.make("gaussian", n, d, batch=B, seed=seed)
    V = values.make("gaussian", n, d, batch=B, seed=seed)
    base = variants.resolve(f"decay(alpha={alpha})")
    mem = precision.stored(base, dtype, rounding, seed=seed)
    eye = torch.eye(d).expand(B, d, d)
    ref = base.read(base.write(base.init_state(B, d, d), K, V), eye)
    got = mem.read(mem.write(mem.init_state(B, d, d), K, V), eye)
    x = ((got.double() - ref.double()) ** 2).sum(-1).mean(-1)
    return float(x.mean()), float(x.std() / math.sqrt(B))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="docs/figures")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.4), sharey=False)
    colours = {"round to nearest": "C0", "stochastic rounding": "C3", "error feedback": "C2"}
    for ax, bits in zip(axes, (8, 4, "fp8")):
        name = bits if bits == "fp8" else f"int{bits}"
        for way, fb, rounding in WAYS:
            dtype = f"{name}/row{fb}"
            meas, want = [], []
            for a in ALPHAS:
                n = min(2048, int(8 / (1 - a)))
                meas.append(deviation(a, dtype, rounding, n))
                want.append(
                    float(
                        theory.quantised_step_error(
                            n,
                            32,
                            32,
                            bits,
                            "row",
                            feedback=bool(fb),
                            memory="decay",
                            alpha=a,
                            stochastic=rounding.endswith("stochastic"),
                        )
                    )
                )
                print(
                    f"{name}/row {way:20s} alpha {a}: measured {meas[-1][0]:.4g} +- {meas[-1][1]:.2g}, "
                    f"T32 {want[-1]:.4g}, ratio {meas[-1][0] / want[-1]:.3f}",
                    flush=True,
                )
            x = [1 - a for a in ALPHAS]
            c = colours[way]
            ax.errorbar(x, [m for m, _ in meas], yerr=[s for _, s in meas], fmt="o", color=c, label=f"{way} (measured)")
            ax.plot(x, want, "-", color=c, alpha=0.6, label=f"{way} (T32)")
        signal = [(1 - a ** (2 * min(2048, int(8 / (1 - a))))) / (1 - a * a) / 32 for a in ALPHAS]
        ax.plot([1 - a for a in ALPHAS], signal, ":", color="0.4", label="the read itself, E ||S||^2 / d")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.invert_xaxis()
        ax.set_xticks([1 - a for a in ALPHAS], [f"{a:g}" for a in ALPHAS])
        ax.minorticks_off()
        ax.set_xlabel("decay alpha (longer memory to the right)")
        ax.set_ylabel("read deviation from float32 (value units^2)")
        ax.set_title(f"{name}{' (float8_e4m3fn)' if bits == 'fp8' else ''}, a scale per (head, dim) row", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, 0.05))
    fig.suptitle("Rounding a decaying state at every write: round to nearest, stochastic rounding, error feedback")
    fig.text(
        0.01,
        0.01,
        "d = dv = 32. Steady state (n = 8 / (1 - alpha) writes, at most 2048); 16 items, bars one standard error. Lines: T32 "
        f"(lacapacity.theory.quantised_step_error). {time.strftime('%Y-%m-%d')}, {platform.machine()}.",
        fontsize=7,
    )
    fig.tight_layout(rect=(0, 0.16, 1, 0.95))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "rounding-vs-decay.png", dpi=110)
    print(f"wrote {out / 'rounding-vs-decay.png'} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
