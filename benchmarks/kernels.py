#!/usr/bin/env python
"""Benchmark of the fused kernels (a benchmark, not a test): every figure is measured in this run.

For each case it times
  - the fused Triton update (``kernels.triton_update.update``, launched on pre-checked inputs);
  - the unfused torch path: for ``linear`` normalise + bmm (the reference), for the recurrent
    modes the reference loop over tokens (timed on the first ``--ref-tokens`` tokens and
    compared per token, since its cost per token does not depend on T);
  - the memory-bandwidth roofline: bytes the kernel must move (inputs once, the state read and
    written) divided by the device copy bandwidth measured in this run (a large tensor copy);
  - for the delta rule, flash-linear-attention's ``fused_recurrent_delta_rule`` when ``fla`` is
    importable (it also writes one output per token; its final state is checked against ours).
Each case also records the fused result's max error against the reference on the timed prefix.

On a machine without CUDA the same code runs at small sizes: the kernels under Triton's
interpreter (a correctness comparison; interpreter times are not performance figures) and
the torch-path timings on the CPU. GPU figures are then reported as not measured.

    python benchmarks/kernels.py --quick --out results/kernels.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

import torch

from lacapacity.kernels import reference, triton_update

MODES = reference.MODES


# ------------------------------------------------------------------ timing


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timeit(fn, device: torch.device, *, min_time: float = 0.25, max_reps: int = 50, warmup: int = 2) -> float:
    """Median wall time of fn() in seconds (CUDA events on a GPU), after warm-up runs (compilation)."""
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    start_all = time.perf_counter()
    while len(times) < max_reps and (len(times) < 3 or time.perf_counter() - start_all < min_time):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _reps(device: torch.device) -> dict:
    """Timing repetitions of a kernel: many on a GPU; one interpreter run on the CPU (not a performance figure)."""
    return {} if device.type == "cuda" else {"warmup": 0, "max_reps": 1}


def copy_bandwidth(device: torch.device, nbytes: int) -> float:
    """Device copy bandwidth in bytes/s: a large tensor copied (read once, written once)."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    t = timeit(lambda: dst.copy_(src), device, min_time=0.5, max_reps=30)
    return 2 * nbytes / t


# ------------------------------------------------------------------ inputs


def inputs(mode: str, B: int, T: int, d: int, dv: int, dtype, device, seed: int = 0):
    g = torch.Generator(device=device).manual_seed(seed)  # drawn on the device: GiBs of inputs in milliseconds
    k = torch.randn(B, T, d, generator=g, device=device).to(dtype)
    v = torch.randn(B, T, dv, generator=g, device=device).to(dtype)
    params = {}
    if mode in reference.USES_BETA:
        params["beta"] = torch.full((B, T), 0.9, device=device)
    if mode in reference.SCALAR_GATE:
        params["gate"] = torch.full((B, T), 0.99, device=device)
    if mode in reference.CHANNEL_GATE:
        params["gate"] = torch.full((B, T, d), 0.99, device=device)
    return k, v, params


def _prefix(params: dict, n: int) -> dict:
    return {name: p[:, :n] for name, p in params.items()}


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-30))


# ------------------------------------------------------------------ cases


def bench_update(mode, B, T, d, dtype, device, bw, ref_tokens, fla_fn=None) -> dict:
    dv = d
    k, v, params = inputs(mode, B, T, d, dv, dtype, device)
    state = torch.zeros(B, d, dv, device=device)
    fused = timeit(
        lambda: triton_update.update(state, k, v, mode=mode, normalize=True, **params), device, **_reps(device)
    )

    n_ref = T if mode == "linear" else min(T, ref_tokens)
    kp, vp, pp = k[:, :n_ref], v[:, :n_ref], _prefix(params, n_ref)
    s0 = torch.zeros(B, d, dv, device=device)
    torch_t = timeit(
        lambda: reference.recurrence(kp, vp, mode=mode, initial_state=s0, normalize=True, **pp),
        device,
        max_reps=5,
        warmup=1,
    )
    want = reference.recurrence(kp, vp, mode=mode, initial_state=s0, normalize=True, **pp)
    got = triton_update.update(s0.clone(), kp, vp, mode=mode, normalize=True, **pp)
    err = _rel_err(got, want)

    elem = k.element_size()
    nbytes = B * T * (d + dv) * elem + 2 * B * d * dv * 4
    nbytes += sum(p.numel() * 4 for p in params.values())  # beta, gates: float32 per token
    row = {
        "kind": "update",
        "mode": mode,
        "B": B,
        "T": T,
        "d": d,
        "dv": dv,
        "dtype": str(dtype).replace("torch.", ""),
        "fused_s": fused,
        "tokens_per_s": B * T / fused,
        "torch_s": torch_t,
        "torch_tokens": n_ref,
        "bytes": nbytes,
        "max_rel_err_vs_reference": err,
    }
    if device.type == "cuda":  # interpreter times are no performance figures: no ratio on the CPU
        row["speedup_vs_torch"] = (torch_t / n_ref) / (fused / T)
    if bw:
        row["roofline_s"] = nbytes / bw
        row["roofline_fraction"] = row["roofline_s"] / fused
    if fla_fn is not None and mode == "delta":
        row.update(_bench_fla(fla_fn, k, v, params["beta"], B, d, device, fused))
    return row


def _bench_fla(fla_fn, k, v, beta, B, d, device, fused) -> dict:
    """flash-linear-attention's fused recurrent delta rule on the same tokens, one head per state."""
    try:
        q4, k4, v4, b3 = (
            k[:, :, None],
            k[:, :, None],
            v[:, :, None],
            beta[:, :, None].to(k.dtype),
        )  # [B, T, 1, d], [B, T, 1]
        h0 = torch.zeros(B, 1, d, v.shape[-1], device=device)
        run = lambda: fla_fn(
            q4, k4, v4, b3, scale=1.0, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True
        )
        t = timeit(run, device, **_reps(device))
        _, final = run()
        ours = triton_update.update(
            torch.zeros(B, d, v.shape[-1], device=device), k, v, mode="delta", beta=beta, normalize=True
        )
        return {"fla_s": t, "speedup_vs_fla": t / fused, "fla_state_max_rel_diff": _rel_err(ours, final[:, 0])}
    except Exception as exc:  # an fla version with another signature: record it, keep the run
        return {"fla_error": f"{type(exc).__name__}: {exc}"}


# ------------------------------------------------------------------ plans


def plan(device: torch.device, quick: bool) -> dict:
    """The cases of a run: full and quick on a GPU; small ones on the CPU (interpreter)."""
    if device.type == "cuda":
        if quick:
            return {
                "update": [
                    (mode, B, T, d, dt)
                    for mode in ("linear", "delta", "kda")
                    for d in (64, 128)
                    for B, T in ((1, 4096), (64, 1024))
                    for dt in (torch.bfloat16,)
                ],
                "ref_tokens": 128,
                "copy_bytes": 1 << 30,
            }
        # the goals first (linear, delta), so that a --budget-s cut keeps them
        shapes = ((1, 65536), (1024, 1024))
        dims = (64, 128, 256)
        upd = [
            (mode, B, T, d, dt)
            for mode in ("linear", "delta")
            for dt in (torch.bfloat16, torch.float32)
            for d in dims
            for B, T in shapes
        ]
        upd += [
            (mode, B, T, d, torch.bfloat16)
            for mode in ("decay", "gla", "gated_delta", "kda")
            for d in dims
            for B, T in shapes
        ]
        return {"update": upd[:24], "more_update": upd[24:], "ref_tokens": 256, "copy_bytes": 2 << 30}
    # CPU: the interpreter runs each program in Python, so a few small cases prove the path
    if quick:
        return {
            "update": [(mode, 2, 24, 16, torch.float32) for mode in MODES],
            "ref_tokens": 24,
            "copy_bytes": 0,
        }
    upd = [
        (mode, 2, 40, d, dt)
        for mode in MODES
        for d in (16, 48)
        for dt in (torch.float32, torch.bfloat16, torch.float16)
    ]
    return {"update": upd, "ref_tokens": 40, "copy_bytes": 0}


def torch_path_cpu(quick: bool) -> list[dict]:
    """CPU timings of the unfused torch path alone (sizes the interpreter could not run)."""
    rows = []
    cpu = torch.device("cpu")
    for d in (64,) if quick else (64, 128, 256):
        for mode in ("linear", "delta"):
            B, T = (16, 4096) if mode == "linear" else (16, 256)
            k, v, params = inputs(mode, B, T, d, d, torch.float32, cpu)
            s0 = torch.zeros(B, d, d)
            t = timeit(
                lambda k=k, v=v, mode=mode, s0=s0, params=params: reference.recurrence(
                    k, v, mode=mode, initial_state=s0, **params
                ),
                cpu,
                max_reps=5,
                warmup=1,
            )
            rows.append(
                {
                    "kind": "torch_path_cpu",
                    "mode": mode,
                    "B": B,
                    "T": T,
                    "d": d,
                    "dv": d,
                    "dtype": "float32",
                    "torch_s": t,
                    "tokens_per_s": B * T / t,
                }
            )
    return rows


# ------------------------------------------------------------------ report


def machine(device: torch.device) -> dict:
    import triton

    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "triton": triton.__version__,
    }
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(gpu=p.name, gpu_memory_GiB=round(p.total_memory / 2**30, 1), sm_count=p.multi_processor_count)
    return info


def table(rows: list[dict]) -> str:
    head = f"{'kind':10} {'mode':11} {'dtype':8} {'B':>6} {'T':>6} {'d':>4} {'fused ms':>9} {'torch ms':>9} {'x torch':>8} {'roof%':>6} {'x fla':>6} {'rel.err':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        fused = f"{r['fused_s'] * 1e3:9.3f}" if "fused_s" in r else f"{'-':>9}"
        xt = f"{r['speedup_vs_torch']:8.2f}" if "speedup_vs_torch" in r else f"{'-':>8}"
        roof = f"{100 * r['roofline_fraction']:6.1f}" if "roofline_fraction" in r else f"{'-':>6}"
        xf = f"{r['speedup_vs_fla']:6.2f}" if "speedup_vs_fla" in r else f"{'-':>6}"
        err = f"{r['max_rel_err_vs_reference']:8.1e}" if "max_rel_err_vs_reference" in r else f"{'-':>8}"
        lines.append(
            f"{r['kind'][:10]:10} {r['mode']:11} {r['dtype']:8} {r['B']:6d} {r['T']:6d} {r['d']:4d} {fused} {r['torch_s'] * 1e3:9.3f} {xt} {roof} {xf} {err}"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small run (a minute on a GPU)")
    ap.add_argument("--out", help="write the results as JSON to this path")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when present)")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="start no new case after this many seconds (the JSON says which were left out)",
    )
    args = ap.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        print("kernels benchmark: error: --device cuda asked for but no CUDA device is present", file=sys.stderr)
        return 2
    p = plan(device, args.quick)
    fla_fn = None
    fla_note = "flash-linear-attention not importable: no comparison"
    if device.type == "cuda":
        try:
            import fla
            from fla.ops.delta_rule import fused_recurrent_delta_rule as fla_fn

            fla_note = f"flash-linear-attention {getattr(fla, '__version__', '?')}: fused_recurrent_delta_rule"
        except Exception as exc:  # ImportError, or fla failing on import
            fla_note = f"flash-linear-attention not importable ({type(exc).__name__}): no comparison"
    gpu = device.type == "cuda"
    t_start = time.perf_counter()
    bw = copy_bandwidth(device, p["copy_bytes"]) if gpu else None
    result = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(device),
        "device": str(device),
        "gpu_measured": gpu,
        "copy_bandwidth_GBps": bw / 1e9 if bw else None,
        "fla": fla_note if gpu else "not run (no GPU)",
        "quick": args.quick,
        "complete": False,
        "rows": [],
        "left_out": [],
        "torch_path_cpu": [],
    }
    rows = result["rows"]
    for case in [*p["update"], *p.get("more_update", [])]:
        if args.budget_s is not None and time.perf_counter() - t_start > args.budget_s:
            result["left_out"].append(["update", *[str(x).replace("torch.", "") for x in case]])
            continue
        rows.append(bench_update(*case[:4], case[4], device, bw, p["ref_tokens"], fla_fn))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
        _write(args.out, result)  # what is measured so far survives a timeout
    if not gpu:
        result["torch_path_cpu"] = torch_path_cpu(args.quick)
    result["complete"] = not result["left_out"]
    result["wall_s"] = time.perf_counter() - t_start
    extra = result["torch_path_cpu"]
    print()
    print(
        f"kernels benchmark, {result['date']}, {result['machine'].get('gpu', platform.processor() or 'CPU')}, torch {torch.__version__}"
    )
    if gpu:
        print(f"device copy bandwidth: {result['copy_bandwidth_GBps']:.0f} GB/s; {fla_note}")
    else:
        print("GPU figures: not measured (no CUDA device). Fused times below are Triton-interpreter runs on the CPU:")
        print("a correctness comparison against the reference, not performance figures.")
    print(table(rows))
    if extra:
        print("\nunfused torch path on the CPU:")
        for r in extra:
            print(
                f"  {r['mode']:7} B={r['B']:<4} T={r['T']:<5} d={r['d']:<4} {r['torch_s'] * 1e3:9.2f} ms  {r['tokens_per_s']:12.0f} tokens/s"
            )
    worst = max(r["max_rel_err_vs_reference"] for r in rows)
    print(f"\nworst max error of the fused kernels against the reference (relative to the result's scale): {worst:.2e}")
    if result["left_out"]:
        print(f"left out after --budget-s {args.budget_s:g}: {len(result['left_out'])} cases (listed in the JSON)")
    if args.out:
        _write(args.out, result)
        print(f"wrote {args.out}")
    return 0


def _write(path, result) -> None:
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
