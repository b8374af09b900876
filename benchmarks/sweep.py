"""Sweep benchmarks: the default study's wall time, its throughput against a per-point torch loop,
the achieved GFLOP/s of the probe work next to torch.matmul's, and Dask scaling (2 workers vs 1).

    .venv/bin/python benchmarks/sweep.py            # everything (several minutes on 2 cores)
    .venv/bin/python benchmarks/sweep.py --only dask
    .venv/bin/python benchmarks/sweep.py --quick    # small grids: checks that the script runs

Every ratio is measured against its baseline in the same run. The baseline loop computes the
same metrics as the probe for every grid point on its own (one key draw, one write pass and
one read per point), and its numbers are checked against the sweep's; the throughput is
measured with the argmax decode on both sides and without it on both sides.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from loop_baseline import point  # the per-point loop a user writes (a script beside this one)

from lacapacity import studies, sweep
from lacapacity.sweep.jobs import measure
from lacapacity.sweep.plan import Plan

ROOT = Path(__file__).resolve().parents[1]


def machine() -> str:
    model = "unknown CPU"
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {len(os.sched_getaffinity(0))} cores, torch {torch.__version__}, {torch.get_num_threads()} torch threads, Python {platform.python_version()}"


def load_avg() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


# ---------------------------------------------------------------- the baseline: one point at a time


def baseline(study, delta: str = "loop") -> tuple[float, dict]:
    """Every point of the study's grid through ``loop_baseline.point`` (dv = d), timed: (seconds, key -> metrics)."""
    g = study.grid
    out = {}
    t0 = time.perf_counter()
    for v in g.variant:
        for k in g.keys:
            for d in g.d:
                for n in g.ns(d):
                    for s in g.seed:
                        out[(v.label, k.label, d, n, s)] = point(v.name, k.name, d, n, s, delta, study.task.decode)
    return time.perf_counter() - t0, out


# ---------------------------------------------------------------- flops of the probe work


def probe_flops(study) -> float:
    """Multiply-adds x 2 of the probe: writes (linear 2 n d dv; delta 4 d dv per token), reads 2 c d dv and argmax scores 2 c^2 dv per checkpoint."""
    total = 0.0
    for p in _passes(study):  # one write pass each, with its checkpoints
        cps = sorted(set(p.ns))
        d, dv = p.cell.d, p.cell.dv
        total += (2 if p.cell.variant.name == "linear" else 4) * cps[-1] * d * dv
        total += sum(2 * c * d * dv + (2 * c * c * dv if study.task.decode else 0) for c in cps)
    return total * len(study.grid.seed)


def _passes(study) -> list:
    """The write passes of a study with nothing stored (the engine's own plan)."""
    return Plan(study, torch.device("cpu")).passes({})


def matmul_gflops(shape_a, shape_b, reps: int = 5) -> float:
    a, b = torch.randn(*shape_a), torch.randn(*shape_b)
    torch.matmul(a, b)
    best = math.inf
    for _ in range(reps):
        t = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - t)
    flops = 2 * math.prod(shape_a) * shape_b[-1]
    return flops / best / 1e9


# ---------------------------------------------------------------- parts


def part_default(study_sets: list[str]) -> list[str]:
    """`capacity run capacity-vs-d` as a user runs it (fresh output folder), with the default (auto) and the serial executor."""
    rows = []
    for executor in ("auto", "serial"):
        with tempfile.TemporaryDirectory() as out:
            cmd = [
                sys.executable,
                "-m",
                "lacapacity.cli",
                "run",
                "capacity-vs-d",
                "--out",
                out,
                "--quiet",
                "--executor",
                executor,
                "--device",
                "cpu",
            ]
            for s in study_sets:
                cmd += ["--set", s]
            before = load_avg()
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, cwd=out)
            wall = time.perf_counter() - t
            rows.append(
                f"| `capacity run capacity-vs-d --executor {executor}` (wall, process start included) | {wall:.1f} s | {before} |"
            )
    return rows


def part_throughput(study, threads: int) -> list[str]:
    """The sweep's probe work and the per-point loops side by side, ``threads`` torch threads each.

    Twice: with the argmax decode on both sides (all six metrics), and without it on both sides
    (the issue's baseline: normalise keys, K.T @ V, K @ S, error; the five cheap metrics).
    """
    torch.set_num_threads(threads)
    rows = []
    for decode in (True, False):
        st = study.with_overrides([f"decode={'true' if decode else 'false'}"])
        what_metrics = (
            "six metrics, argmax decode included"
            if decode
            else "no argmax decode: mse, rel_error, cosine, signal, leak"
        )
        plan = Plan(st, torch.device("cpu"))
        todo = plan.passes({})
        points = sum(len(p.seeds) * len(set(p.ns)) for p in todo)
        before = load_avg()
        t = time.perf_counter()
        results = {}
        for p in todo:
            task = {"imports": [], "passes": [("p", p, None)]}
            results[p] = measure(task)[0][1]
        sweep_s = time.perf_counter() - t
        rows.append(
            f"| sweep probe work ({what_metrics}), in-process, {threads} torch thread(s) ({points} points, {len(results)} write passes) | {sweep_s:.1f} s = {points / sweep_s:.0f} points/s | {before} |"
        )
        for write, delta, what in (
            ("loop", "loop", "delta as an in-place loop written in the benchmark"),
            ("library", "kernels", "delta through the same kernels.update as the sweep"),
        ):
            before = load_avg()
            base_s, base = baseline(st, delta)
            worst, recall_diff = 0.0, 0.0
            for p, measured in results.items():  # each variable over (n in increasing order, seed as given)
                for i, n in enumerate(sorted(set(p.ns))):
                    for j, s in enumerate(p.seeds):
                        for m, want in base[(p.cell.variant.label, p.cell.keys.label, p.cell.d, n, s)].items():
                            diff = abs(float(measured.values[m][i, j]) - want)
                            if m == "recall":  # a near-tie may break the other way in the last float bit
                                recall_diff = max(recall_diff, diff)
                            else:
                                worst = max(worst, diff / max(1.0, abs(want)))
            rows += [
                f"| per-point torch loop ({what}), same grid and metrics, {threads} thread(s) | {base_s:.1f} s = {points / base_s:.0f} points/s | {before}; metrics vs the sweep: max relative difference {worst:.1e}"
                + (f", recall {recall_diff:.1e}" if decode else "")
                + " |",
                f"| throughput ratio sweep / per-point loop ({write}; {what_metrics}), {threads} thread(s) | **{base_s / sweep_s:.2f}x** | goal >= 2x |",
            ]
        flops = probe_flops(st)
        rows.append(
            f"| probe work ({what_metrics}), {threads} thread(s): counted flops / wall | {flops / 1e9:.0f} GFLOP in {sweep_s:.1f} s = **{flops / sweep_s / 1e9:.1f} GFLOP/s** | writes, reads"
            + (" and argmax scores" if decode else "")
            + " (see probe_flops) |"
        )
    return rows


def part_matmul(threads: int) -> list[str]:
    torch.set_num_threads(threads)
    sq = matmul_gflops((2048, 2048), (2048, 2048))
    rec = matmul_gflops((4, 1024, 256), (4, 256, 4096))
    return [
        f"| torch.matmul fp32 2048 x 2048 x 2048, {threads} thread(s) (best of 5) | **{sq:.1f} GFLOP/s** | {load_avg()} |",
        f"| torch.matmul fp32 [4, 1024, 256] @ [4, 256, 4096] (the recall's score shape), {threads} thread(s) | **{rec:.1f} GFLOP/s** | |",
    ]


def _cpu_seconds() -> float:
    """CPU time (user + system) of the calling process, children excluded."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def part_dask(study) -> list[str]:
    """The same study on a local Dask cluster of 1 and of 2 worker processes, one torch thread each (started beforehand, not timed)."""
    from distributed import Client, LocalCluster

    todo = _passes(study)
    points = sum(len(p.seeds) * len(set(p.ns)) for p in todo)
    rows, walls = [], {}
    for workers in (1, 2):
        with LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            env={"OMP_NUM_THREADS": "1"},
        ) as cluster:
            client = Client(cluster)
            with tempfile.TemporaryDirectory() as out:
                before = load_avg()
                cpu0 = sum(client.run(_cpu_seconds).values())
                t = time.perf_counter()
                sweep.run(
                    study, out=out, device="cpu", executor="dask", scheduler=cluster.scheduler_address, progress=False
                )
                walls[workers] = time.perf_counter() - t
                cpu = sum(client.run(_cpu_seconds).values()) - cpu0
            client.close()
        rows.append(
            f"| Dask LocalCluster, {workers} worker process(es) x 1 torch thread, {points} points in {len(todo)} write passes | {walls[workers]:.1f} s | {before}; the workers got {cpu:.1f} CPU s = {cpu / walls[workers]:.2f} cores on average |"
        )
    rows.append(f"| Dask speed-up, 2 workers / 1 worker | **{walls[1] / walls[2]:.2f}x** | goal >= 1.6x |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["default", "throughput", "matmul", "dask"], action="append")
    ap.add_argument("--quick", action="store_true", help="small grids, to check the script")
    ap.add_argument(
        "--threads",
        type=int,
        action="append",
        help="torch threads for the in-process parts (default: 1, the per-worker setting of the default executor)",
    )
    args = ap.parse_args()
    parts = args.only or ["default", "throughput", "matmul", "dask"]
    small = ["d=16,32", "load=1/4,1,4", "seed=0,1"] if args.quick else []
    default = studies.get("capacity-vs-d").with_overrides(small)
    dask_sets = small or ["d=32,48,64,96,128", "seed=0,1,2,3"]  # 4 x 5 groups, 1200 points
    print(f"machine: {machine()}; date {datetime.date.today()}")
    rows = ["| what | measured | notes |", "|---|---|---|"]
    if "default" in parts:
        rows += part_default(small)
    for threads in args.threads or [1]:
        if "throughput" in parts:
            rows += part_throughput(default, threads)
        if "matmul" in parts:
            rows += part_matmul(threads)
    if "dask" in parts:
        rows += part_dask(studies.get("capacity-vs-d").with_overrides(dask_sets))
    print("\n".join(rows))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
