"""Numbers and figures of docs/memories.md for the memories of 2025-2026.

1. The ``log-linear`` study (studies/log_linear.py): argmax recall of log-linear attention against n, at and between
   powers of two, next to linear attention and the gated delta rule at d = 32 and at the same state bytes (3 seeds);
   its figure goes to docs/figures/ (``log-linear_log-linear.png``).
2. The frontier of every new memory beside the older ones at their true state bytes (d = 16, 32; 2 seeds):
   ``docs/figures/memories-2026_frontier.png``, and each memory's capacity (mean error <= 0.5) with its bytes.

    python docs/scripts/memories_2026.py [--out docs/figures] [--only log-linear|frontier]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from lacapacity import plots, studies, sweep, variants
from lacapacity.plots.frontier import _bytes, frontier
from lacapacity.plots.log_linear import equal_bytes
from lacapacity.plots.render import save_all
from lacapacity.tasks import metrics

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
    ap.add_argument("--only", choices=("log-linear", "frontier"), default=None)
    args = ap.parse_args()
    out = Path(args.out)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}")
    if args.only != "frontier":
        log_linear(out)
    if args.only != "log-linear":
        frontier_table(out)


def log_linear(out: Path) -> None:
    """The log-linear study: recall at d = 32 and at the same bytes, and its figure."""
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        res = sweep.run(studies.get("log-linear"), out=tmp, device="cpu", progress=False)
    ds = res.dataset.squeeze("key_family", drop=True)
    print(f"## log-linear study ({time.time() - t0:.0f} s): mean recall over 3 seeds, d = 32 and at the same bytes")
    pairs = [("log_linear", "linear"), ("log_linear(alpha=0.99, base=gated_delta)", "gated_delta(alpha=0.99)")]
    same = {ll: equal_bytes(ds, ll, base) for ll, base in pairs}
    head = ["n", "log-linear KiB"]
    for ll, base in pairs:
        head += [f"{base}, d = 32", ll, f"{base}, same bytes (d)"]
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    rec = ds.recall.mean("seed")
    for i, n in enumerate(ds.n.values):
        power = f" (2^{int(np.log2(n))})" if int(n) & (int(n) - 1) == 0 else ""
        cells = [f"{int(n)}{power}", f"{same[pairs[0][0]][1][i] * 4 / 1024:g}"]
        for ll, base in pairs:
            dd = int(same[ll][0][i])
            cells += [
                f"{float(rec.sel(variant=base, d=32, n=n)):.4f}",
                f"{float(rec.sel(variant=ll, d=32, n=n)):.4f}",
                f"{float(rec.sel(variant=base, d=dd, n=n)):.4f} ({dd})" if dd else "-",
            ]
        print("| " + " | ".join(cells) + " |")
    paths = plots.render(res.dataset, out=out)
    for p in paths:  # docs/figures keeps the PNGs
        if p.suffix == ".pdf":
            p.unlink()
    print("figures:", ", ".join(p.name for p in paths if p.suffix == ".png"))


def frontier_table(out: Path) -> None:
    """Every memory's capacity at its bytes, and the frontier figure."""
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
