"""Capture and replay of every linear head of a random hybrid model against the model's own forward pass, one run.

For a random Qwen3-Next config (``capacity.inputs.capture.tiny``; hidden size, layers and heads as given) on T
tokens of the shipped text (bytes): the median wall time of (a) the model's forward pass alone, (b) the same pass
with every linear layer captured (``capacity.inputs.capture.capture``), and (c) that pass with every layer also
replayed by the toolkit's recurrence (``capture.replay``, as the model task does before it uses a capture), and
their ratios; the largest one-layer capture in bytes (what the streaming holds at a time) against all layers'; the
process's peak resident memory after (a) and after (b, c) (``ru_maxrss``, which only grows).

    nice -n 10 .venv/bin/python benchmarks/model_capture.py [--hidden 256] [--layers 4] [--tokens 512] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time

import torch

from capacity.inputs import capture
from capacity.tasks.model import source


def _bytes(layer: capture.Layer) -> int:
    tensors = [layer.q, layer.k, layer.v, layer.alpha, layer.out, layer.state]
    tensors += [t for t in (layer.beta, layer.dt) if t is not None]
    return sum(t.numel() * t.element_size() for t in tensors)


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    # run as a script, this folder is sys.path[0], and its kernels.py would hide the kernels package that
    # transformers imports (when it first loads a model module, below)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4, help="linear key heads (value heads: twice as many)")
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    model = capture.tiny("qwen3_next", hidden=args.hidden, layers=args.layers, heads=args.heads, head_dim=args.head_dim)
    ids = torch.tensor([list(source.DEFAULT_TEXT.read_bytes()[: args.tokens])])
    params = sum(p.numel() for p in model.parameters())

    def forward() -> None:
        with torch.no_grad():
            model(input_ids=ids, use_cache=True)

    sizes: list[int] = []

    def captured() -> None:
        sizes.clear()
        capture.capture(model, ids, lambda layer: sizes.append(_bytes(layer)))

    worst = [0.0]

    def replayed() -> None:
        def check(layer: capture.Layer) -> None:
            out, S = capture.replay(layer)
            worst[0] = max(worst[0], capture.rel_rms(out, layer.out), capture.rel_rms(S, layer.state))

        capture.capture(model, ids, check)

    def timed(fn) -> float:  # type: ignore[no-untyped-def]  # a script
        fn()  # warm-up
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    t_forward = timed(forward)
    rss_forward = _rss_mib()
    t_capture = timed(captured)
    t_replay = timed(replayed)
    rss_after = _rss_mib()
    result = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, threads {torch.get_num_threads()}",
        "model": f"random qwen3_next, hidden {args.hidden}, {args.layers} layers, {args.heads} key heads x {args.head_dim}",
        "parameters": params,
        "tokens": args.tokens,
        "forward_s": round(t_forward, 4),
        "capture_s": round(t_capture, 4),
        "capture_and_replay_s": round(t_replay, 4),
        "capture_ratio": round(t_capture / t_forward, 3),
        "capture_and_replay_ratio": round(t_replay / t_forward, 3),
        "largest_layer_capture_bytes": max(sizes),
        "all_layers_capture_bytes": sum(sizes),
        "peak_rss_mib_after_forward": round(rss_forward, 1),
        "peak_rss_mib_after_capture_and_replay": round(rss_after, 1),
        "replay_worst_rel_rms": worst[0],
    }
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
