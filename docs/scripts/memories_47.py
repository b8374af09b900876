"""Numbers and figures of docs/memories.md for issue 47's claims, measured without training.

1. The window, a state and the hybrid at equal bytes: argmax recall against n for ``swa(window=16)`` (16 (d + dv)
   numbers = a 32 x 32 state at d = dv = 32), ``linear`` and ``gated_delta(alpha=0.99)`` (32 x 32), and
   ``hybrid(window=8, state=gated_delta(alpha=0.99))``, with the window's closed form min(w, n) / n (exact inside
   the window, nothing outside).
2. Mamba-3 with half the state: ``mamba3`` at d = 32 and 64 against ``mamba2`` at d = 64 (the paper's claim,
   equal quality at state 64 against Mamba-2 at 128, here as the recall ceiling of the memory itself).
3. Atlas's Omega rule and polynomial features: recall of ``delta`` at d against ``omega`` over c pairs, without and
   with the degree-2 map ``taylor2`` (D = 1 + d + d (d + 1) / 2 rows), at d = 8 and 16, n from d to 8 d.

4. The frontier of the new memories at their true bytes (d = 16, 1 seed).
5. The window, the states and the hybrids on the recall-memory frontier: capacity n* (recall >= 0.9) against the
   bytes held there, each memory at several sizes (dv = 32), beside the window's closed form n* = w / 0.9.
6. MQAR at equal state bytes: ``cyfa`` (whole and fractional clock steps) against ``swa`` holding as many numbers,
   64 pairs, beside the window's closed form and what a memory with 8 times the window's state efficiency (the
   claim arXiv 2606.09862 makes for Blurry Window Attention, which is not built) would reach.

Gaussian unit keys and values, 4 batch items. Writes ``docs/figures/memories-47_*.png``: ``window``, ``mamba3``,
``atlas``, ``frontier``, ``window-frontier`` and ``mqar-bytes``.

    python docs/scripts/memories_47.py [--out docs/figures] [--only N[,N]]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from lacapacity import mqar, sweep, variants
from lacapacity.inputs import keys, values
from lacapacity.plots.frontier import _bytes, frontier
from lacapacity.plots.render import save_all
from lacapacity.tasks import metrics, probe

B = 4


def recall(label: str, d: int, ns: list[int], dv: int | None = None) -> list[float]:
    """Mean argmax recall after each n in ns (one write pass, reads of every stored key)."""
    dv = d if dv is None else dv
    K = keys.make("gaussian", ns[-1], d, batch=B, seed=0)
    V = values.make("gaussian", ns[-1], dv, batch=B, seed=1)
    ds = probe.recall(variants.resolve(label), K, V, checkpoints=ns)
    return [float(x) for x in ds.recall.mean("batch").values]


def window(out: Path) -> None:
    d, w = 32, 16
    ns = [8, 16, 24, 32, 48, 64, 96, 128]
    rows = {
        "swa(window=16, scale=50)": recall("swa(window=16, scale=50.0)", d, ns),
        "linear": recall("linear", d, ns),
        "gated_delta(alpha=0.99)": recall("gated_delta(alpha=0.99)", d, ns),
        "hybrid(window=8, state=gated_delta(alpha=0.99), scale=50)": recall(
            "hybrid(window=8, state='gated_delta(alpha=0.99)', scale=50.0)", d, ns
        ),
    }
    closed = [min(w, n) / n for n in ns]
    print("\n1. recall at d = dv = 32 (numbers kept at n = 128: swa 1024, linear and gated_delta 1024, hybrid 1536)")
    print(f"{'memory':60}" + "".join(f"{n:>7}" for n in ns))
    print(f"{'window closed form min(w, n) / n':60}" + "".join(f"{x:7.3f}" for x in closed))
    for name, r in rows.items():
        print(f"{name:60}" + "".join(f"{x:7.3f}" for x in r))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, r in rows.items():
        ax.plot(ns, r, marker="o", label=name)
    ax.plot(ns, closed, "k--", label="window closed form min(w, n) / n")
    _recall_axes(ax, "window, state and hybrid, d = dv = 32 (equal bytes at n >= 16 for swa)")
    _save(fig, out, "memories-47_window")


def _recall_axes(ax: plt.Axes, title: str) -> None:
    """Recall against n on a log2 axis, titled, with its legend."""
    ax.set_xscale("log", base=2)
    ax.set_xlabel("pairs written n")
    ax.set_ylabel("argmax recall")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)


def _save(fig: plt.Figure, out: Path, stem: str, *, legend_rows: int = 0, columns: int = 2) -> None:
    """Write ``<stem>.png``; ``legend_rows`` > 0 puts the first axes' legend under the panels in ``columns``."""
    if legend_rows:
        handles, names = fig.axes[0].get_legend_handles_labels()
        fig.legend(handles, names, loc="lower center", ncol=columns, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.045 * legend_rows, 1, 1))
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / f"{stem}.png", dpi=110)
    plt.close(fig)
    print(f"wrote {out / (stem + '.png')}")


def mamba(out: Path) -> None:
    ns = [16, 32, 64, 128, 256]
    print("\n2. recall, Mamba-3 (lam = 1/2, omega = 1) against Mamba2, defaults A = 1, dt = 0.01")
    print(f"{'memory':40}" + "".join(f"{n:>7}" for n in ns))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    styles = {("mamba2", 64): "C0-", ("mamba3", 32): "C1-", ("mamba3", 64): "C1--", ("mamba3(omega=0.0)", 32): "C2:"}
    for label, d in (("mamba2", 64), ("mamba3", 32), ("mamba3", 64), ("mamba3(omega=0.0)", 32), ("mamba2", 32)):
        r = recall(label, d, ns, dv=32)
        print(f"{label + f', d = {d}':40}" + "".join(f"{x:7.3f}" for x in r))
        ax.plot(ns, r, styles.get((label, d), "C0:"), marker="o", label=f"{label}, state d = {d} (x dv = 32)")
    _recall_axes(ax, "Mamba-3 at half the state against Mamba-2 (paper: equal quality at state 64 vs 128)")
    _save(fig, out, "memories-47_mamba3")


def atlas(out: Path) -> None:
    print("\n3. recall, the delta rule against the Omega rule over c pairs, without and with the degree-2 map taylor2")
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 5.0), sharey=True)
    labels = (
        "delta(beta=1.0)",
        "omega(context=8, beta=0.2)",
        "omega(context=1, beta=0.3, feature=taylor2)",
        "omega(context=8, beta=0.05, feature=taylor2)",
        "omega(context=16, beta=0.05, feature=taylor2)",
    )
    for ax, d in zip(axes, (8, 16), strict=True):
        ns = [d * f for f in (1, 2, 3, 4, 6, 8)]
        print(f"  d = {d}: {'memory':46} {'D':>5}" + "".join(f"{n:>7}" for n in ns))
        for label in labels:
            mem = variants.resolve(label)
            D = mem.feature_dim(d) if hasattr(mem, "feature_dim") else d
            r = recall(label, d, ns, dv=16)
            print(f"         {label:46} {D:5}" + "".join(f"{x:7.3f}" for x in r))
            ax.plot([n / d for n in ns], r, marker="o", ls="--" if "taylor2" in label else "-", label=label)
        ax.set_xlabel("pairs written n / d")
        ax.set_title(f"d = {d}, dv = 16; state rows D = {d}, with taylor2 {d + 1 + d * (d + 1) // 2}", fontsize=9)
    axes[0].set_ylabel("argmax recall")
    fig.suptitle("Atlas: the Omega rule over c pairs and the degree-2 map against the delta rule", fontsize=10)
    _save(fig, out, "memories-47_atlas", legend_rows=3)


FRONTIER = (
    "linear",
    "gated_delta(alpha=0.99)",
    "swa(window=16, scale=50.0)",
    "hybrid(window=8, state='gated_delta(alpha=0.99)', scale=50.0)",
    "mamba3",
    "mom(memories=4, top=1)",
    "mesa(alpha=0.99)",
    "gka(alpha=0.99)",
    "omega",
    "lattice",
    "cyfa(slots=15, scale=50.0)",
)


def frontier_figure(out: Path) -> None:
    """Each new memory's capacity (recall >= 0.9) at the bytes its state holds there, d = 16, 1 seed."""
    with tempfile.TemporaryDirectory() as tmp:
        res = sweep.compare(
            list(FRONTIER), d=(16,), load=(1 / 4, 1 / 2, 1, 3 / 2, 2, 3, 4), seeds=1, out=tmp, progress=False
        )
    fds = res.dataset
    cap = metrics.capacity(fds.squeeze("key_family", drop=True), metric="recall", threshold=0.9).mean("seed")
    print("\n4. the frontier at d = 16 (1 seed): n* with recall >= 0.9 and the float32 bytes held there")
    for label in [str(v) for v in fds.variant.values]:
        n = float(cap.sel(variant=label, d=16))
        kept, _ = _bytes(variants.resolve(label), 16, 16, "float32")
        print(
            f"  {label:62} n* = {n:6.1f}  bytes {kept(n):8.0f}" if np.isfinite(n) else f"  {label:62} not on the grid"
        )
    paths = save_all([("memories-47_frontier", lambda: frontier(fds))], out)
    for p in paths:
        if p.suffix == ".pdf":
            p.unlink()
    print("figures:", ", ".join(p.name for p in paths if p.suffix == ".png"))


TAU = 0.9
FRONTIER_NS = sorted({int(x) for x in np.round(np.geomspace(1, 512, 96))})


def capacity_at(label: str, d: int, dv: int = 32) -> tuple[float, float]:
    """(n*, bytes): the largest n with mean argmax recall >= TAU (interpolated in log n between grid points, as
    lacapacity.metrics does) and the float32 bytes the memory holds there."""
    K = keys.make("gaussian", FRONTIER_NS[-1], d, batch=B, seed=0)
    V = values.make("gaussian", FRONTIER_NS[-1], dv, batch=B, seed=1)
    mem = variants.resolve(label)
    ds = probe.recall(mem, K, V, checkpoints=FRONTIER_NS).mean("batch")
    n = float(metrics.capacity(ds, metric="recall", threshold=TAU))
    kept, _ = _bytes(mem, d, dv, "float32")
    return n, float(kept(n)) if np.isfinite(n) else float("nan")


def window_frontier(out: Path) -> None:
    """Section 5: capacity against bytes for windows, fixed states, hybrids and CyFA at several sizes, dv = 32."""
    dv = 32
    families = {
        "swa(window=w, scale=50)": [(f"swa(window={w}, scale=50.0)", 32) for w in (4, 8, 16, 32, 64)],
        "linear (d x 32)": [("linear", d) for d in (8, 16, 32, 64, 128)],
        "gated_delta(alpha=0.99) (d x 32)": [("gated_delta(alpha=0.99)", d) for d in (8, 16, 32, 64, 128)],
        "hybrid(window=w, state=linear, scale=50), d = 32": [
            (f"hybrid(window={w}, state='linear', scale=50.0)", 32) for w in (4, 8, 16, 32)
        ],
        "hybrid(window=w, state=gated_delta(alpha=0.99), scale=50), d = 32": [
            (f"hybrid(window={w}, state='gated_delta(alpha=0.99)', scale=50.0)", 32) for w in (4, 8, 16, 32)
        ],
        "cyfa(slots=P, scale=50), d = 32": [(f"cyfa(slots={p}, scale=50.0)", 32) for p in (3, 7, 15, 31, 63)],
    }
    print(f"\n5. capacity n* (recall >= {TAU}) and float32 bytes held there, dv = {dv}, 1 seed x {B} batch items")
    fig, ax = plt.subplots(figsize=(7.2, 6.0))
    for i, (family, members) in enumerate(families.items()):
        xs, ys = [], []
        for label, d in members:
            n, b = capacity_at(label, d, dv)
            print(f"  {label:62} d = {d:3}  n* = {n:7.1f}  bytes {b:8.0f}")
            xs.append(b)
            ys.append(n)
        ax.plot(xs, ys, marker="o", color=f"C{i}", label=family)
    w = np.array([4, 8, 16, 32, 64])
    ax.plot(4 * w * (32 + dv), w / TAU, "k--", lw=1, label=f"window closed form: n* = w / {TAU} at w (d + dv) numbers")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("float32 bytes the state holds at its capacity")
    ax.set_ylabel(f"capacity n* (argmax recall >= {TAU})")
    ax.set_title("the window, the states and the hybrids on the recall-memory frontier (dv = 32)", fontsize=9)
    _save(fig, out, "memories-47_window-frontier", legend_rows=4)


def mqar_bytes(out: Path) -> None:
    """Section 6: MQAR accuracy at 64 pairs against the state's bytes, cyfa against swa holding as many numbers."""
    d, pairs, vocab = 32, 64, 256
    sizes = (3, 7, 15, 31, 63)  # window w = slots P: both hold w (d + dv) numbers
    rows = {
        "swa(window=w, scale=50)": [f"swa(window={w}, scale=50.0, normalize=true)" for w in sizes],
        "cyfa(slots=P, scale=50), whole steps": [f"cyfa(slots={w}, scale=50.0)" for w in sizes],
        "cyfa(slots=P, scale=50, delta=P/64): 64 pairs spread over P slots": [
            f"cyfa(slots={w}, scale=50.0, delta={w / pairs})" for w in sizes
        ],
    }
    nbytes = [4 * w * (d + d) for w in sizes]
    print(f"\n6. MQAR accuracy, {pairs} pairs, vocab {vocab}, d = dv = {d}, {B} batch items; bytes = 4 w (d + dv)")
    print(f"{'memory':70}" + "".join(f"{b:>8}" for b in nbytes))
    fig, ax = plt.subplots(figsize=(7.2, 5.2))
    for i, (name, labels) in enumerate(rows.items()):
        acc = [
            float(mqar.mqar(variants.resolve(lab), vocab=vocab, pairs=pairs, d=d, batch=B, seed=0).accuracy.mean())
            for lab in labels
        ]
        print(f"{name:70}" + "".join(f"{a:8.3f}" for a in acc))
        ax.plot(nbytes, acc, marker="o", color=f"C{i}", label=name)
    closed = [min(w, pairs) / pairs for w in sizes]
    claim = [min(8 * w, pairs) / pairs for w in sizes]
    print(f"{'window closed form min(w, n) / n':70}" + "".join(f"{a:8.3f}" for a in closed))
    print(
        f"{'8x the window state efficiency (the BLA paper): min(8 w, n) / n':70}" + "".join(f"{a:8.3f}" for a in claim)
    )
    ax.plot(nbytes, closed, "k--", lw=1, label="window closed form min(w, n) / n")
    ax.plot(nbytes, claim, "k:", lw=1.5, label="8x the window's state efficiency (arXiv 2606.09862's claim for BLA)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("float32 bytes of state, w (d + dv) numbers")
    ax.set_ylabel(f"MQAR accuracy, {pairs} pairs")
    ax.set_title("MQAR at equal state bytes, untrained: CyFA against the window (d = dv = 32)", fontsize=9)
    _save(fig, out, "memories-47_mqar-bytes", legend_rows=5, columns=1)


SECTIONS = {"1": window, "2": mamba, "3": atlas, "4": lambda out: frontier_figure(out), "5": window_frontier}
SECTIONS["6"] = mqar_bytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "figures"))
    ap.add_argument("--only", default=",".join(SECTIONS), help="the sections to run, e.g. 5,6")
    args = ap.parse_args()
    out = Path(args.out)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}")
    t0 = time.time()
    for key in args.only.split(","):
        if key not in SECTIONS:
            raise SystemExit(f"--only: unknown section {key!r}; known: {', '.join(SECTIONS)}")
        SECTIONS[key](out)
    print(f"\n{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
