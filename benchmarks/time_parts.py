"""Where the main job's time goes, beside the checkpointed loop's: a figure from ``vs_loop.py --json`` files.

    .venv/bin/python benchmarks/time_parts.py results/vs_loop-default.json results/vs_loop-large.json \\
        --out docs/figures/benchmark_time_parts.png

One row pair per file (a grid): the main job's parts as measured by ``vs_loop.parts`` (best of the repeats, each
part's own best, so the stack can be a little shorter than the best whole run), and the checkpointed loop as its
start-up and exit (best whole run minus its best work) and its work (its own timer). The title of each panel gives
the grid, the date and the machine as recorded in the file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import seaborn as sns

LOOP = "checkpointed torch loop (checkpointed_loop.py)"


def _colours():
    grey, blue, orange = sns.color_palette("Greys", 5), sns.color_palette("Blues", 4), sns.color_palette("Oranges", 5)
    return [grey[1], grey[2], grey[3], blue[1], blue[3], orange[1], orange[2], orange[3], orange[4]]


def draw(records: list[dict], out: Path) -> None:
    colours = _colours()
    fig, axes = plt.subplots(len(records), 1, figsize=(8.5, 1.9 * len(records) + 0.9), squeeze=False)
    for ax, rec in zip(axes[:, 0], records):
        left = 0.0
        for (name, seconds), colour in zip(rec["parts"].items(), colours):
            ax.barh(1, seconds, left=left, color=colour, edgecolor="white", linewidth=0.5, label=name)
            if seconds > 0.06 * sum(rec["parts"].values()):
                ax.text(left + seconds / 2, 1, f"{seconds:.1f}", ha="center", va="center", fontsize=8)
            left += seconds
        whole, work = min(rec["commands"][LOOP]), min(rec["loop_work"])
        ax.barh(0, whole - work, color=colours[1], edgecolor="white", linewidth=0.5)
        ax.barh(0, work, left=whole - work, color=colours[4], edgecolor="white", linewidth=0.5)
        ax.text(whole - work + work / 2, 0, f"{work:.1f}", ha="center", va="center", fontsize=8)
        main = min(rec["commands"]["capacity run (default executor)"])
        ax.set_yticks(
            [1, 0], [f"capacity run\n(best whole {main:.1f} s)", f"checkpointed loop\n(best whole {whole:.1f} s)"]
        )
        grid = ", ".join(rec["sets"]) or "the default grid (d 16..256, 4 seeds)"
        load = rec.get("load_average_end", [float("nan")])[0]
        title = f"{rec['points']} points: {grid}\n{rec['date']}, {rec['machine']}, load average {load:.1f} at the end"
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_xlabel("wall time (s)")
        ax.grid(axis="x", alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    handles.append(plt.Rectangle((0, 0), 1, 1, color=colours[1]))
    labels.append("loop: start-up and exit (whole minus work)")
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7.5, frameon=False)
    fig.tight_layout(rect=(0, 0.16 if len(records) > 1 else 0.3, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130, metadata={"Software": None})
    print(out)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", help="vs_loop.py --json files, one per grid")
    p.add_argument("--out", default="docs/figures/benchmark_time_parts.png")
    a = p.parse_args(argv)
    draw([json.loads(Path(f).read_text()) for f in a.files], Path(a.out))


if __name__ == "__main__":
    main()
