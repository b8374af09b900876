"""Train a tiny OLMo-Hybrid (Gated DeltaNet + attention) on the shipped text, on the CPU, and save it and its
random initialisation with ``save_pretrained`` (docs/models.md).

No package ships trained linear-attention weights and these machines reach no model hub, so the model task's docs
show a model trained here beside the random initialisation it started from: the same config
(``lacapacity.inputs.capture.tiny("olmo_hybrid", ...)``: hidden size 128, 4 layers alternating Gated DeltaNet and
full attention, 2 key heads and 4 value heads of dimension 32), byte-level (ids 0..255, the text's UTF-8 bytes, as
the task reads a folder without a tokenizer), trained to predict the next byte of
``capacity/data/pretrained_text.txt`` (Alice in Wonderland, chapters I-II) with AdamW for ``--seconds`` of wall
time. It is a toy: a few minutes of next-byte prediction, not a language model.

    nice -n 10 .venv/bin/python scripts/train_tiny_hybrid.py --out results/tiny-hybrid --seconds 270
    capacity run model --set model=results/tiny-hybrid/trained --out results/trained-model
    capacity run model --set model=results/tiny-hybrid/init --out results/init-model

Writes ``<out>/init`` and ``<out>/trained`` (each a model folder) and ``<out>/training.json`` (the settings, the
loss every 10 steps, steps done, seconds, the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from lacapacity.inputs import capture
from lacapacity.tasks.model import source


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/tiny-hybrid", help="folder for init/, trained/ and training.json")
    ap.add_argument("--seconds", type=float, default=270.0, help="wall time of training (at most 300)")
    ap.add_argument("--seq", type=int, default=64, help="bytes per training sequence")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    seconds = min(float(args.seconds), 300.0)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    out = Path(args.out)
    model = capture.tiny("olmo_hybrid", hidden=128, layers=4, heads=2, head_dim=32, seed=args.seed)
    model.save_pretrained(out / "init")
    data = torch.tensor(list(source.DEFAULT_TEXT.read_bytes()), dtype=torch.int64)
    gen = torch.Generator().manual_seed(args.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    model.train()
    losses: list[tuple[int, float]] = []
    start, step = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        starts = torch.randint(0, len(data) - args.seq - 1, (args.batch,), generator=gen)
        x = torch.stack([data[s : s + args.seq] for s in starts.tolist()])
        y = torch.stack([data[s + 1 : s + args.seq + 1] for s in starts.tolist()])
        logits = model(input_ids=x, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 10 == 0:
            losses.append((step, float(loss.detach())))
            print(f"step {step:4d}  loss {float(loss):.3f}  ({time.perf_counter() - start:.0f} s)", flush=True)
        step += 1
    model.eval()
    model.save_pretrained(out / "trained")
    record = {
        "config": "lacapacity.inputs.capture.tiny('olmo_hybrid', hidden=128, layers=4, heads=2, head_dim=32)",
        "text": str(source.DEFAULT_TEXT.name),
        "seq": args.seq,
        "batch": args.batch,
        "lr": args.lr,
        "seed": args.seed,
        "steps": step,
        "seconds": round(time.perf_counter() - start, 1),
        "loss": losses,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    (out / "training.json").write_text(json.dumps(record, indent=1))
    print(f"saved {out / 'init'} and {out / 'trained'}: {step} steps, loss {losses[0][1]:.3f} -> {float(loss):.3f}")


if __name__ == "__main__":
    main()
