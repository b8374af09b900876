"""Training-free ceilings of the probe's memories on MAD's recall tasks (arXiv 2403.17844), printed as docs tables.

MAD's task rules are restated from athms/mad-lab, ``mad/data/instances.py`` (in-context recall, noisy in-context
recall, fuzzy in-context recall; test instances, ``multi_query=True``), and its settings are read from
``capacity/data/mad_settings.csv`` (the baselines and one-at-a-time changes of ``configs/tasks/*.yml``). Each
sequence is written pair by pair into a memory of MAD's width (d = dv = 128, one head, as MAD's default
linear-attention layer); at every pair whose key was shown before (a MAD target) the key is read first and decoded
as the argmax over the value vocabulary. Keys and values are random unit embeddings (seeded), one per token (fuzzy
recall: one per key motif and one per value motif, a memory that groups tokens perfectly). Noise pairs are written
like any other ("ungated"). A MAD score is the mean accuracy over a task's settings.

Run: ``python docs/scripts/mad_ceilings.py`` (a few minutes on one CPU core).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lacapacity import variants
from lacapacity.inputs import keys as key_families
from lacapacity.inputs import values
from lacapacity.tasks import published

D = 128
SEQUENCES = 32
# (label, memory, heads): one head of 128 x 128 (MAD's linear-attention and GLA layers: 16,384 numbers), 16 heads of
# 8 x 8 (its multi-head layers: 1,024 numbers, as many as its Mamba layer's 256 x 4 state); softmax keeps every pair
MEMORIES = {
    "linear, 1 x 128^2": ("linear", 1),
    "DeltaNet, 1 x 128^2": ("delta(beta=1)", 1),
    "linear, 16 x 8^2": ("linear", 16),
    "DeltaNet, 16 x 8^2": ("delta(beta=1)", 16),
    "softmax": ("softmax(scale=16)", 1),
}


def recall_sequence(rng, vocab, seq_len, noise_vocab=0, frac_noise=0.0):
    """MAD's in-context recall instance as (key, value, is_target) pairs; noise pairs have key and value >= the
    key/value vocabulary (noise tokens). Keys are 0 .. V'/2 - 1, values V'/2 .. V' - 1, V' = vocab - noise_vocab."""
    base = vocab - noise_vocab
    key_vocab, value_vocab = np.arange(base // 2), np.arange(base // 2, base)
    noise = np.arange(base, base + noise_vocab)
    pairs, kv, shown = [], {}, set()
    keep = rng.choice(seq_len // 2)
    for i in range(seq_len // 2 - 1):
        if frac_noise > 0 and i != keep and rng.random() < frac_noise:
            a, b = rng.choice(noise, size=2, replace=True)
            pairs.append((int(a), int(b), False))
            continue
        k = int(rng.choice(key_vocab))
        if k not in kv:
            kv[k] = int(rng.choice(value_vocab))
        pairs.append((k, kv[k], k in shown))
        shown.add(k)
    k = int(rng.choice(sorted(shown)))
    pairs.append((k, kv[k], True))
    return pairs


def fuzzy_sequence(rng, vocab, seq_len, k_motif=3, v_motif=3):
    """MAD's fuzzy recall test instance as (key motif, value motif, is_target, tokens of the value): keys always of
    k_motif tokens, values of 1 .. v_motif tokens, each motif uniform among the ordered tuples of distinct tokens of its
    size (as MAD's choice among the permutations); motifs as indices (value motifs of size m after those below m).
    Returns the pairs and the numbers of key and value motifs."""
    base = vocab - 1  # multi_query: one pad token
    nk, nv = base // 2, base - base // 2
    perms = lambda n, m: math.perm(n, m)
    n_keys = perms(nk, k_motif)
    offsets = np.cumsum([0] + [perms(nv, m) for m in range(1, v_motif + 1)])
    pairs, kv, shown, length = [], {}, set(), 0
    while length < seq_len - 2 * (k_motif + v_motif):
        k = int(rng.integers(n_keys))
        if k not in kv:
            size = int(rng.integers(1, v_motif + 1))
            kv[k] = (int(offsets[size - 1] + rng.integers(perms(nv, size))), size)
        v, size = kv[k]
        pairs.append((k, v, k in shown, size))
        shown.add(k)
        length += k_motif + size
    k = sorted(shown)[int(rng.integers(len(shown)))]
    pairs.append((k, kv[k][0], True, kv[k][1]))
    return pairs, n_keys, int(offsets[-1])


def _compact(seqs, n_keys):
    """Relabel each sequence's key motifs 0..m-1 (only the keys written need an embedding; values keep theirs)."""
    out = []
    for s in seqs:
        ids = {k: i for i, k in enumerate(dict.fromkeys(p[0] for p in s))}
        out.append([(ids[p[0]], *p[1:]) for p in s])
    return out, max(len({p[0] for p in s}) for s in out)


def accuracy(memory, seqs, n_keys, n_values, seed, heads=1):
    """Fraction of target tokens answered right, over sequences of (key, value, target, weight) pairs: one batch when
    the sequences have equal length, else one sequence at a time."""
    if len({len(s) for s in seqs}) > 1:
        parts = [_accuracy(memory, [s], n_keys, n_values, seed + j, heads) for j, s in enumerate(seqs)]
        return sum(r for r, _ in parts) / sum(t for _, t in parts)
    right, total = _accuracy(memory, seqs, n_keys, n_values, seed, heads)
    return right / total


def _accuracy(memory, seqs, n_keys, n_values, seed, heads):
    """``heads`` memories of (D / heads) x (D / heads) per sequence, each with its own key and value embeddings; the
    read is their concatenation, decoded against the concatenated value embeddings."""
    B, dh = len(seqs), D // heads
    steps = len(seqs[0])
    K = key_families.make("gaussian", n_keys, dh, batch=B * heads, seed=seed)  # [B H, n_keys, dh]
    V = values.make("gaussian", n_values, dh, batch=B * heads, seed=seed + 1)  # [B H, n_values, dh]
    Vcat = V.reshape(B, heads, n_values, dh).transpose(1, 2).reshape(B, n_values, heads * dh)
    item = torch.arange(B * heads)
    mem = variants.resolve(memory)
    state = mem.init_state(B * heads, dh, dh)
    right = total = 0.0
    for t in range(steps):
        rows = [s[t] for s in seqs]
        k = torch.tensor([r[0] for r in rows])
        v = torch.tensor([r[1] for r in rows])
        w = torch.tensor([float(r[3]) if r[2] else 0.0 for r in rows])
        kh, vh = k.repeat_interleave(heads), v.repeat_interleave(heads)
        kk, vv = K[item, kh][:, None], V[item, vh][:, None]  # [B H, 1, dh]
        if bool((w > 0).any()):
            r = mem.read(state, kk)[:, 0].reshape(B, heads * dh)  # [B, H dh]
            answer = (r[:, None] @ Vcat.transpose(1, 2))[:, 0].argmax(-1)
            right += float((w * (answer == v)).sum())
            total += float(w.sum())
        state = mem.write(state, kk, vv)
    return right, total


def main():
    torch.set_num_threads(1)
    settings = published.load("mad_settings")
    rows = []
    for i, s in settings.iterrows():
        rng = np.random.default_rng(12345 + i)
        if s["task"] == "fuzzy-in-context-recall":
            made = [fuzzy_sequence(rng, int(s["vocab_size"]), int(s["seq_len"])) for _ in range(SEQUENCES)]
            seqs, n_keys = _compact([m[0] for m in made], made[0][1])
            n_values = made[0][2]
        else:
            noise = int(s["noise_vocab_size"])
            seqs = [
                [
                    (k, v, tgt, 1)
                    for k, v, tgt in recall_sequence(
                        rng, int(s["vocab_size"]), int(s["seq_len"]), noise, float(s["frac_noise"])
                    )
                ]
                for _ in range(SEQUENCES)
            ]
            n_keys = n_values = int(s["vocab_size"])  # noise tokens get embeddings too
        distinct = np.mean([len({p[0] for p in q if p[0] < n_keys}) for q in seqs])
        accs = {name: accuracy(m, seqs, n_keys, n_values, i, heads) for name, (m, heads) in MEMORIES.items()}
        rows.append((s, distinct, accs))
        cells = " | ".join(f"{a:.3f}" for a in accs.values())
        print(f"| {s['task']} | {s['setting']} | {distinct:.1f} | {cells} |", flush=True)
    print()
    for task in dict.fromkeys(settings["task"]):
        mine = [accs for s, _, accs in rows if s["task"] == task]
        cells = " | ".join(f"{np.mean([a[m] for a in mine]):.3f}" for m in MEMORIES)
        print(f"| {task} (mean over {len(mine)} settings) | {cells} |")


if __name__ == "__main__":
    main()
