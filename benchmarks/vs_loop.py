"""The main job against the loops a researcher would write instead, side by side, as whole processes.

    .venv/bin/python benchmarks/vs_loop.py                 # the default study, best of 3 (several minutes)
    .venv/bin/python benchmarks/vs_loop.py --quick         # a small grid, one repeat (under a minute)
    .venv/bin/python benchmarks/vs_loop.py --set d=16,32,64,128,256,512 --set seed=0,1,2,3,4,5,6,7
    .venv/bin/python benchmarks/vs_loop.py --json results/vs_loop-default.json   # also every figure, for time_parts.py
    .venv/bin/python benchmarks/vs_loop.py --before /tmp/basepkg --pairs 8   # the main job against an earlier version

Commands, alternated in every repeat (fresh output folder each time), best wall time of ``--repeats``:
(a) ``capacity run capacity-vs-d --out TMP`` with the default executor and with ``--executor serial``,
(b) ``benchmarks/checkpointed_loop.py`` on the same grid (``--set`` is applied to the study and the grid handed to
the loop): seeds batched, each state written once, read at every checkpoint, the baseline of the ratios; with
torch's default thread count and with one thread,
(c) ``benchmarks/loop_baseline.py``, the per-point loop (a state rebuilt for every n), as a second line.
The checkpointed loop's numbers are held against the main job's (largest relative difference, recall mismatches).
Also printed: the work alone (the sweep in-process against the loop's own timer), the main job cut into its parts,
and the probe's counted flops (writes, reads and the argmax decode's scores) over the work's wall time, next to
torch.matmul's float32 GFLOP/s measured here on 1 thread and on torch's default thread count.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from lacapacity import studies

ROOT = Path(__file__).resolve().parents[1]
QUICK = ["d=16,32", "load=1/4,1,4", "seed=0,1"]


def study_for(sets: list[str]):
    return studies.get("capacity-vs-d").with_overrides(sets)


def loop_args(study) -> list[str]:
    """The study's grid as loop_baseline.py arguments (linear and the delta rule, beta = 1, only)."""
    g = study.grid
    for v in g.variant:
        if v.name not in ("linear", "delta") or dict(v.params).get("beta", 1.0) != 1.0:
            raise SystemExit(f"the loop baseline writes linear and delta (beta = 1) memories only, got {v.label}")
    if study.task.values != "gaussian" or not g.load or g.dv:
        raise SystemExit("the loop baseline needs gaussian values, dv = d and a load axis")
    return (
        ["--variants"]
        + [v.name for v in g.variant]
        + ["--keys"]
        + [k.name for k in g.keys]
        + ["--d"]
        + [str(d) for d in g.d]
        + ["--loads"]
        + [repr(float(x)) for x in g.load]
        + ["--seeds"]
        + [str(s) for s in g.seed]
    )


def probe_flops(study, decode: bool = True) -> float:
    """Multiply-adds x 2 of the main job's probe work on the grid (dv = d).

    Gaussian keys: one write pass of n_max per (variant, d, seed), read at every n (their prefixes
    are draws too); other key families: one pass per n. Writes: linear 2 n d dv, delta rule
    4 n d dv (k S and the outer product per token); reads 2 c d dv; argmax scores 2 c^2 dv per
    checkpoint c.
    """
    g = study.grid
    total = 0.0
    for v in g.variant:
        w = 2 if v.name == "linear" else 4
        for k in g.keys:
            for d in g.d:
                ns = sorted(set(g.ns(d)))
                passes = [ns] if k.name == "gaussian" else [[n] for n in ns]
                for cps in passes:
                    total += w * cps[-1] * d * d + sum(2 * c * d * d + (2 * c * c * d if decode else 0) for c in cps)
    return total * len(g.seed)


def matmul_gflops(threads: int, n: int = 1024, reps: int = 5) -> float:
    """Best-of-``reps`` float32 torch.matmul GFLOP/s at n x n x n on ``threads`` threads."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b
        best = math.inf
        for _ in range(reps):
            t = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t)
    finally:
        torch.set_num_threads(old)
    return 2 * n**3 / best / 1e9


LOOP = "checkpointed torch loop (checkpointed_loop.py)"


def commands(
    sets: list[str], study, out: str, before: str | None = None, per_point: bool = True
) -> dict[str, tuple[list[str], dict]]:
    """name -> (command, environment overrides)."""
    loop = [sys.executable, str(ROOT / "benchmarks" / "loop_baseline.py")] + loop_args(study)
    checkpointed = [sys.executable, str(ROOT / "benchmarks" / "checkpointed_loop.py")] + loop_args(study)
    run = [sys.executable, "-m", "lacapacity.cli", "run", "capacity-vs-d", "--out", out, "--quiet", "--device", "cpu"]
    for s in sets:
        run += ["--set", s]
    out = {
        "capacity run (default executor)": (run, {}),
        "capacity run --executor serial": (run + ["--executor", "serial"], {}),
    }
    if before:  # the same command from an earlier version installed into the folder ``before``
        # under its own import name: capacity before the rename to lacapacity (README, "Names")
        old = "lacapacity" if (Path(before) / "lacapacity").is_dir() else "capacity"
        out[f"capacity run, before ({Path(before).name})"] = (
            [*run[:2], f"{old}.cli", *run[3:]],
            {"PYTHONPATH": before},
        )
    out[LOOP] = (checkpointed, {})
    out["checkpointed torch loop, 1 torch thread"] = (checkpointed + ["--threads", "1"], {})
    if per_point:
        out["per-point torch loop (loop_baseline.py)"] = (loop, {})
    return out


def timed(cmd: list[str], env: dict) -> tuple[float, str]:
    """(wall seconds, stdout) of one command."""
    t = time.perf_counter()
    cwd = tempfile.gettempdir() if env.get("PYTHONPATH") else ROOT  # not the source tree: it would shadow the install
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=cwd, env={**os.environ, **env})
    return time.perf_counter() - t, done.stdout


def loop_work(stdout: str) -> float:
    """The loop's own timer (its work, without start-up): "N points in X s"."""
    return float(re.search(r"points in ([0-9.]+) s", stdout).group(1))


def agreement(study, loop_json: str, results: str) -> tuple[float, int, int]:
    """(largest relative difference of the five error metrics, recall values that differ, points compared) between
    the checkpointed loop's numbers and the main job's results file; relative to max(|value|, 1e-4)."""
    import numpy as np
    import xarray as xr

    ds = xr.open_dataset(results).load()
    worst, recall_off, count = 0.0, 0, 0
    for row in json.load(open(loop_json)):
        variant, family, d, n = row["point"]
        for load in ds["load"].values:
            if max(1, round(float(load) * d)) != n:
                continue
            at = dict(variant=variant, key_family=family, d=d, load=load)
            count += len(row["recall"])
            recall_off += int((ds["recall"].sel(at).values != np.array(row["recall"])).sum())
            for m in ("mse", "rel_error", "cosine", "signal", "leak"):
                ours, theirs = ds[m].sel(at).values, np.array(row[m])
                worst = max(worst, float(np.max(np.abs(ours - theirs) / np.maximum(np.abs(ours), 1e-4))))
    return worst, recall_off, count


_PARTS = """
import os, sys, time
t = [time.perf_counter()]
import torch
t.append(time.perf_counter())
from lacapacity import studies, sweep
import xarray
t.append(time.perf_counter())
runner = sys.modules["lacapacity.sweep.runner"]
inner = {"measure": 0.0, "assemble": 0.0, "write": 0.0}
def timing(name, fn):
    def wrapped(*a, **k):
        s = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            inner[name] += time.perf_counter() - s
    return wrapped
busy = []
def cores_busy(fn):  # CPU seconds of this process and its joined workers over the wall seconds of the call
    def wrapped(*a, **k):
        c0, w0 = os.times(), time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            c1 = os.times()
            cpu = sum(getattr(c1, f) - getattr(c0, f) for f in ("user", "system", "children_user", "children_system"))
            busy.append(cpu / (time.perf_counter() - w0))
    return wrapped
runner._measure = cores_busy(timing("measure", runner._measure))
runner.assemble = timing("assemble", runner.assemble)
runner._files.atomic_netcdf = timing("write", runner._files.atomic_netcdf)
study = studies.get("capacity-vs-d").with_overrides(sys.argv[2:])
res = sweep.run(study, out=sys.argv[1], device="cpu", progress=False)
t.append(time.perf_counter())
from lacapacity import plots
t.append(time.perf_counter())
plots.render(res.dataset, out=sys.argv[1] + "/figures")
t.append(time.perf_counter())
run = t[3] - t[2]
split = [t[1] - t[0], t[2] - t[1], run - sum(inner.values()), inner["measure"], inner["assemble"], inner["write"]]
print(" ".join(f"{x:.3f}" for x in split + [t[4] - t[3], t[5] - t[4]]), f"{sum(busy):.3f}", flush=True)
os._exit(0)  # as the command line leaves (lacapacity.cli.entry): without the interpreter's teardown
"""

PART_NAMES = [
    "interpreter start",
    "import torch",
    "import lacapacity, xarray",
    "plan, stored points, checks",
    "measuring (default executor)",
    "assembling the Dataset",
    "writing the results file",
    "import the plotting stack",
    "figures drawn and written",
]


def parts(sets: list[str], repeats: int) -> tuple[dict[str, float], list[float]]:
    """The main job's wall time cut into its parts (best of ``repeats`` fresh processes, each part's own best), and
    in each process the cores kept busy while measuring (CPU seconds of the process and its workers / wall)."""
    names = PART_NAMES
    best, busy = [math.inf] * len(names), []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", _PARTS, tmp, *sets], check=True, capture_output=True, text=True, cwd=tmp
            )
            total = time.perf_counter() - t
        *split, cores = [float(x) for x in done.stdout.split()]
        busy.append(cores)
        for i, x in enumerate([total - sum(split), *split]):  # start-up: what the timestamps inside do not cover
            best[i] = min(best[i], x)
    return dict(zip(names, best)), busy


def sweep_work(study) -> float:
    """Seconds of ``sweep.run`` in this process with the serial executor (no start-up, no figures), best of 2."""
    from lacapacity import sweep

    best = math.inf
    for _ in range(2):
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            sweep.run(study, out=tmp, device="cpu", executor="serial", progress=False)
            best = min(best, time.perf_counter() - t)
    return best


def paired(sets: list[str], before: str, pairs: int) -> None:
    """The main job against an earlier version, ``pairs`` times, alternating which runs first (the machine's drift
    falls on both): each pair's walls, their difference, and the median difference with a sign count."""
    import statistics

    study = study_for(sets)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {pairs} pairs; before = {before}")
    import resource

    def cpu() -> float:  # CPU seconds of the finished child processes (user + system), whole process trees
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    diffs, cpu_diffs = [], []
    for i in range(pairs):
        walls, cpus = {}, {}
        with tempfile.TemporaryDirectory() as tmp:
            cmds = commands(sets, study, tmp, before, per_point=False)
            after_name = "capacity run (default executor)"
            before_name = next(name for name in cmds if name.startswith("capacity run, before"))
            order = [after_name, before_name] if i % 2 == 0 else [before_name, after_name]
            for j, name in enumerate(order):
                cmd, env = commands(sets, study, str(Path(tmp) / f"out{j}"), before, per_point=False)[name]
                c0 = cpu()
                walls[name] = timed(cmd, env)[0]
                cpus[name] = cpu() - c0
        diffs.append(walls[after_name] - walls[before_name])
        cpu_diffs.append(cpus[after_name] - cpus[before_name])
        print(
            f"pair {i + 1}: wall after {walls[after_name]:.2f} s, before {walls[before_name]:.2f} s ({diffs[-1]:+.2f}); "
            f"CPU after {cpus[after_name]:.2f} s, before {cpus[before_name]:.2f} s ({cpu_diffs[-1]:+.2f})"
        )
    print(
        f"median difference (after - before): wall {statistics.median(diffs):+.2f} s (after slower in "
        f"{sum(d > 0 for d in diffs)} of {pairs} pairs), CPU {statistics.median(cpu_diffs):+.2f} s (more in "
        f"{sum(d > 0 for d in cpu_diffs)} of {pairs}); load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="runs of each command, alternated; best counts (default 3, 1 with --quick)",
    )
    p.add_argument("--quick", action="store_true", help=f"a small grid ({' '.join(QUICK)}), one repeat: a smoke test")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="study override, as in capacity run")
    p.add_argument(
        "--before",
        default=None,
        metavar="DIR",
        help="also time an earlier version installed in DIR (pip install --no-deps --target DIR <checkout>)",
    )
    p.add_argument("--no-per-point", dest="per_point", action="store_false", help="leave out the per-point loop")
    p.add_argument(
        "--pairs",
        type=int,
        default=None,
        metavar="N",
        help="with --before: only the main job, before and after, N pairs in alternating order; prints each pair and "
        "the median of the differences (after - before), with how many pairs came out slower after",
    )
    p.add_argument("--json", default=None, metavar="FILE", help="also write every measurement to FILE (time_parts.py)")
    a = p.parse_args(argv)
    sets = (QUICK if a.quick else []) + a.set
    if a.pairs:
        if not a.before:
            p.error("--pairs needs --before DIR")
        return paired(sets, a.before, a.pairs)
    repeats = a.repeats or (1 if a.quick else 3)
    study = study_for(sets)
    g = study.grid
    points = len(g.variant) * len(g.keys) * len(g.seed) * sum(len(g.ns(d)) for d in g.d)
    print(
        f"grid: {', '.join(v.label for v in g.variant)}; {', '.join(k.label for k in g.keys)}; d {list(g.d)}; "
        f"{len(g.load)} loads; {len(g.seed)} seeds: {points} points; {repeats} repeat(s)"
    )
    print(
        f"machine: {os.cpu_count()} cores, torch {torch.__version__}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    times: dict[str, list[float]] = {}
    work_runs: list[float] = []
    for repeat in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            for i, name in enumerate(commands(sets, study, tmp, a.before, a.per_point)):
                out = str(Path(tmp) / f"out{i}")  # a fresh output folder
                cmd, env = commands(sets, study, out, a.before, a.per_point)[name]
                wall, stdout = timed(cmd, env)
                times.setdefault(name, []).append(wall)
                if name == LOOP:
                    work_runs.append(loop_work(stdout))
                if name == "capacity run --executor serial":
                    results = str(Path(out) / f"{study.name}.nc")
            if repeat == 0:  # the loop's numbers against the main job's just written (not timed)
                loop_cmd, _ = commands(sets, study, tmp, None)[LOOP]
                timed(loop_cmd + ["--out", str(Path(tmp) / "loop.json")], {})
                worst, recall_off, compared = agreement(study, str(Path(tmp) / "loop.json"), results)
    flops = probe_flops(study)
    loop_best = min(times[LOOP])
    print()
    print("| command | best wall | all runs | checkpointed loop / command | probe GFLOP/s |")
    print("|---|---|---|---|---|")
    for name, ts in times.items():
        best = min(ts)
        rate = f"{flops / best / 1e9:.3g}" if name.startswith("capacity") else "-"  # whole process
        print(f"| {name} | {best:.1f} s | {', '.join(f'{t:.1f}' for t in ts)} | {loop_best / best:.2f}x | {rate} |")
    one, many = matmul_gflops(1), matmul_gflops(torch.get_num_threads())
    work = sweep_work(study)
    threads = torch.get_num_threads()
    print(
        f"| sweep work alone: sweep.run in-process, serial, {threads} threads (no start-up, no figures) | {work:.1f} s | | {min(work_runs) / work:.2f}x (against the loop's work) | {flops / work / 1e9:.3g} |"
    )
    print(
        f"| checkpointed loop's work alone (its own timer) | {min(work_runs):.1f} s | {', '.join(f'{t:.1f}' for t in work_runs)} | | |"
    )
    print()
    print(
        f"the checkpointed loop against the main job: {compared} points; largest relative difference of mse, rel_error, "
        f"cosine, signal, leak {worst:.1e} (relative to max(|value|, 1e-4)); recall values that differ: {recall_off}"
    )
    print()
    print("The main job cut into parts (best of the repeats for each part, separate processes):")
    print()
    print("| part | best |")
    print("|---|---|")
    cut, busy = parts(sets, repeats)
    for name, x in cut.items():
        print(f"| {name} | {x:.2f} s |")
    print()
    print(
        f"cores busy while measuring (CPU seconds / wall, {os.cpu_count()} cores): {', '.join(f'{b:.2f}' for b in busy)}"
    )
    print()
    print(
        f"probe work counted: {flops / 1e9:.3g} GFLOP (writes, reads, argmax scores; {probe_flops(study, False) / 1e9:.3g} without the scores); "
        f"GFLOP/s above = counted flops / wall time (whole process for commands)"
    )
    print(f"torch.matmul float32 1024^3: {one:.1f} GFLOP/s on 1 thread, {many:.1f} GFLOP/s on {threads} threads")
    if a.json:
        record = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{os.cpu_count()} cores, torch {torch.__version__}",
            "load_average_end": os.getloadavg(),
            "sets": sets,
            "points": points,
            "commands": times,
            "loop_work": work_runs,
            "sweep_work": work,
            "parts": cut,
            "cores_busy_measuring": busy,
            "flops": flops,
            "matmul_gflops": {"1": one, str(threads): many},
            "agreement": {"max_rel": worst, "recall_differ": recall_off, "points": compared},
        }
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
