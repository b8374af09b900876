"""Capture and replay of every linear head of a random hybrid model against the model's own forward pass, one run.

Two sizes:

- ``--size small`` (default): a random Qwen3-Next (``lacapacity.inputs.capture.tiny("qwen3_next", hidden=256,
  layers=4, heads=4, head_dim=64)``, 4.1 M parameters, 2 Gated DeltaNet layers of 8 value heads, d = dv = 64) on
  512 bytes of the shipped text;
- ``--size 0.5b``: a random Qwen3.5 text model built from ``Qwen3_5TextConfig`` (hidden size 1024, 24 layers, three
  Gated DeltaNet layers to each full-attention one: 18 linear layers of 16 heads with d = dv = 128, MLP 4096, a
  byte vocabulary: 0.51 B parameters) on 2048 bytes of the shipped text.

Timed, interleaved ``--repeats`` times after a warm-up forward pass on 64 tokens: (a) the model's forward pass alone, (b) the same
pass with every linear layer captured (``capture.capture``, the layer handed over and dropped), (c) the pass with
every layer captured and replayed (``capture.replay`` and ``capture.proof``, what the model task does before it uses
a capture). Reported: the medians, their ratios, and the ratio of each repeat's (c) to its own (a) (the load of a
shared machine moves both). Memory: the bytes of the largest one-layer capture and of all layers' together; the
process's peak resident memory (``ru_maxrss``, which only grows) after the first full forward pass (before any
capture) and after everything,
and the difference (what the capture and replay added to the forward pass's own peak).

    nice -n 10 .venv/bin/python benchmarks/model_capture.py [--size small|0.5b] [--repeats 3] [--threads 1] [--out F.json]
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
from typing import Any

import torch

from lacapacity.inputs import capture
from lacapacity.tasks.model import source


def _bytes(layer: capture.Layer) -> int:
    tensors = [layer.q, layer.k, layer.v, layer.alpha, layer.out, layer.state]
    tensors += [t for t in (layer.beta, layer.dt, layer.skip) if t is not None]
    return sum(t.numel() * t.element_size() for t in tensors)


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _model(size: str) -> tuple[torch.nn.Module, str, int]:
    """The random model, its description and the default number of tokens."""
    if size == "small":
        model = capture.tiny("qwen3_next", hidden=256, layers=4, heads=4, head_dim=64)
        return model, "random qwen3_next, hidden 256, 4 layers (2 linear), 4 key heads x 64, 8 value heads", 512
    import transformers

    torch.manual_seed(0)
    config = transformers.Qwen3_5TextConfig(
        vocab_size=256,
        hidden_size=1024,
        intermediate_size=4096,
        num_hidden_layers=24,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=128,
        linear_num_key_heads=16,
        linear_num_value_heads=16,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 6,
        pad_token_id=0,
    )
    model = transformers.Qwen3_5ForCausalLM(config).float().eval()
    return model, "random qwen3_5_text, hidden 1024, 24 layers (18 linear), 16 heads x 128, MLP 4096, vocab 256", 2048


def main() -> None:
    # run as a script, this folder is sys.path[0], and its kernels.py would hide the kernels package that
    # transformers imports (when it first loads a model module, below)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=["small", "0.5b"], default="small")
    ap.add_argument(
        "--tokens", type=int, default=None, help="tokens of the shipped text (default: 512 small, 2048 0.5b)"
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model, described, tokens = _model(args.size)
    built_s = time.perf_counter() - t0
    tokens = args.tokens or tokens
    ids = torch.tensor([list(source.DEFAULT_TEXT.read_bytes()[:tokens])])
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
            worst[0] = max(worst[0], capture.proof(layer))

        capture.capture(model, ids, check)

    def timed(fn: Any) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    with torch.no_grad():  # warm-up on a few tokens (code paths, allocator), below the full pass's peak
        model(input_ids=ids[:, :64], use_cache=True)
    times: dict[str, list[float]] = {"forward": [], "capture": [], "replay": []}
    rss_forward = 0.0
    for r in range(args.repeats):
        times["forward"].append(timed(forward))
        if r == 0:
            rss_forward = _rss_mib()
        times["capture"].append(timed(captured))
        times["replay"].append(timed(replayed))
    rss_after = _rss_mib()
    med = {k: statistics.median(v) for k, v in times.items()}
    pairs = [r / f for r, f in zip(times["replay"], times["forward"], strict=True)]
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, threads {torch.get_num_threads()}",
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "model": described,
        "parameters": params,
        "build_s": round(built_s, 1),
        "tokens": tokens,
        "forward_s": [round(x, 3) for x in times["forward"]],
        "capture_s": [round(x, 3) for x in times["capture"]],
        "capture_and_replay_s": [round(x, 3) for x in times["replay"]],
        "capture_ratio": round(med["capture"] / med["forward"], 3),
        "capture_and_replay_ratio": round(med["replay"] / med["forward"], 3),
        "capture_and_replay_ratio_per_repeat": [round(x, 3) for x in pairs],
        "largest_layer_capture_mib": round(max(sizes) / 2**20, 1),
        "all_layers_capture_mib": round(sum(sizes) / 2**20, 1),
        "linear_layers": len(sizes),
        "peak_rss_mib_after_forward": round(rss_forward, 1),
        "peak_rss_mib_after_capture_and_replay": round(rss_after, 1),
        "peak_rss_added_mib": round(rss_after - rss_forward, 1),
        "replay_worst_rel_rms": worst[0],
    }
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
