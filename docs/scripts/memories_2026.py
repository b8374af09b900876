"""Numbers and figures of docs/memories.md for the memories of 2025-2026.

1. The ``log-linear`` study (studies/log_linear.py): argmax recall and mean error of log-linear attention against n,
   at and between powers of two, next to linear attention and the gated delta rule (d = 32, 3 seeds); its figures go
   to docs/figures/ (``log-linear_*.png``).
2. The frontier of every new memory beside the older ones at their true state bytes (d = 16, 32; 2 seeds):
   ``docs/figures/memories-2026_frontier.png``, and each memory's capacity (mean error <= 0.5) with its bytes.

    python docs/scripts/memories_2026.py [--out docs/figures]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from capacity.plots.frontier import _bytes, frontier
from capacity.plots.render import save_all

from capacity import plots, studies, sweep, variants
from capacity.tasks import metrics

FRONTIER = (  # ten bases: the palette's ten colours (kda and precond_kda at a scalar gate are their scalar twins)
    "linear",
    "gated_delta(alpha=0.99)",
    "gdn2(alpha=0.99, gamma=0.5)",
    "comba(alpha=0.99)",
    "gated_oja(alpha=0.99)",
    "precond_gated_delta(alpha=0.99)",
    "titans",
    "ttt",
    "log_linear(lam=0.5)",
    "log_linear(lam=1.0)",
    "lsq",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "figures"))
    args = ap.parse_args()
    out = Path(args.out)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}")

    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        res = sweep.run(studies.get("log-linear"), out=tmp, device="cpu", progress=False)
    ds = res.dataset.squeeze("key_family", drop=True).sel(d=32)
    print(f"## log-linear study ({time.time() - t0:.0f} s): mean recall over 3 seeds, d = 32")
    labels = [str(v) for v in ds.variant.values]
    print("| n | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for n in ds.n.values:
        row = ds.recall.sel(n=n).mean("seed")
        power = f" (2^{int(np.log2(n))})" if int(n) & (int(n) - 1) == 0 else ""
        print(f"| {int(n)}{power} | " + " | ".join(f"{float(row.sel(variant=v)):.4f}" for v in labels) + " |")
    paths = plots.render(res.dataset, out=out)
    for p in paths:  # docs/figures keeps the PNGs
        if p.suffix == ".pdf":
            p.unlink()
    print("figures:", ", ".join(p.name for p in paths if p.suffix == ".png"))

    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        res = sweep.compare(
            list(FRONTIER),
            d=(16, 32),
            load=(1 / 4, 1 / 2, 3 / 4, 1, 5 / 4, 3 / 2, 2, 3, 4),
            seeds=2,
            out=tmp,
            device="cpu",
            progress=False,
        )
    fds = res.dataset
    print(f"## frontier ({time.time() - t0:.0f} s): capacity (mean of 2 seeds) and the state bytes there (float32)")
    sub = fds.squeeze("key_family", drop=True)
    caps = {
        "mse": metrics.capacity(sub, metric="mse", threshold=0.5).mean("seed"),
        "recall": metrics.capacity(sub, metric="recall", threshold=0.9).mean("seed"),
    }
    print("| memory | d | n*, error <= 0.5 | bytes | n*, recall >= 0.9 | bytes |")
    print("|---|---|---|---|---|---|")
    for label in [str(v) for v in fds.variant.values]:
        for d in (16, 32):
            kept, _ = _bytes(variants.resolve(label), d, d, "float32")
            cells = []
            for cap in caps.values():
                n = float(cap.sel(variant=label, d=d))
                cells += [f"{n:.1f}", f"{kept(n):.0f}"] if np.isfinite(n) else ["not on the grid", "-"]
            print(f"| `{label}` | {d} | " + " | ".join(cells) + " |")
    paths = save_all([("memories-2026_frontier", lambda: frontier(fds))], out)
    for p in paths:
        if p.suffix == ".pdf":
            p.unlink()
    print("figures:", ", ".join(p.name for p in paths if p.suffix == ".png"))


if __name__ == "__main__":
    main()
