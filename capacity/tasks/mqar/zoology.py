"""zoology's MQAR exactly as zoology's generator defines it (HazyResearch/zoology), measured on a memory.

``zoology_task`` draws zoology's sequences (keys and values from disjoint halves of the vocabulary, queries at
positions drawn by zoology's power law, -100 labels elsewhere) with seeded generators; ``zoology`` writes them into
a memory token by token and reads at every query position, as a one-layer model whose mixer is the memory and whose
embeddings are fixed would. The probe of ``lacapacity.tasks.mqar.probe`` is the cleaner setting this one is compared
with (docs/mqar.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import xarray as xr

from lacapacity.base import _random, _validate
from lacapacity.errors import CapacityError
from lacapacity.inputs import keys as key_families
from lacapacity.inputs import values as value_families
from lacapacity.tasks.mqar._tokens import _check_variant, _key_params, _read, _take
from lacapacity.variants import declares

if TYPE_CHECKING:  # pragma: no cover
    from lacapacity.base._types import Device, Seed
    from lacapacity.variants import Variant


# zoology's experiment behind Based's Fig. 2 (HazyResearch/zoology, zoology/experiments/arxiv24_based_figure2/configs.py):
# vocabulary 8,192; test sets of 1,000 sequences each at these (sequence length, key-value pairs)
ZOOLOGY_VOCAB = 8192
ZOOLOGY_BASED_FIGURE2_TEST = ((64, 4), (64, 8), (64, 16), (128, 32), (256, 64), (512, 128), (1024, 256))


@dataclass
class ZoologyTask:
    """Token sequences of zoology's multi-query associative recall (arXiv 2312.04927), one per batch item.

    ``inputs`` int64 ``[B, L]``: the sequence (pairs k_1 v_1 ... k_n v_n, then the query region); ``labels`` int64
    ``[B, L]``: the value token at each query position, -100 elsewhere; ``keys``, ``values`` int64 ``[B, n]``: the
    pairs in writing order; ``positions`` int64 ``[B, n]``: where key i is queried.
    """

    inputs: torch.Tensor
    labels: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    positions: torch.Tensor


def _distinct(g: torch.Generator, items: int, low: int, high: int, size: int) -> torch.Tensor:
    """``size`` distinct tokens of [low, high) in a uniformly random order, per item: [items, size]."""
    return torch.argsort(torch.rand(items, high - low, generator=g), dim=1)[:, :size] + low


def _weighted_without_replacement(g: torch.Generator, p: torch.Tensor, size: int) -> torch.Tensor:
    """``size`` distinct indices drawn as numpy's legacy ``choice(len(p), size, replace=False, p=p)`` draws them.

    That sampler draws the ``size - found`` missing indices independently from p renormalised over the indices not
    yet found, keeps the new distinct ones in order of first appearance, and repeats: a stream of independent draws
    with repeats dropped, so in distribution it is sequential sampling without replacement (each new index
    proportional to p among those not drawn). Returns int64 [size] in the order found.
    """
    found: list[int] = []
    weights = p.double().clone()
    while len(found) < size:
        if found:
            weights[found] = 0.0
        cdf = torch.cumsum(weights, 0)
        cdf = cdf / cdf[-1]
        u = torch.rand(size - len(found), generator=g, dtype=torch.float64)
        draws = torch.searchsorted(cdf, u, right=True).clamp_max(len(p) - 1).tolist()
        for x in draws:
            if x not in found:
                found.append(x)
    return torch.tensor(found, dtype=torch.int64)


def zoology_task(
    *,
    vocab: int = ZOOLOGY_VOCAB,
    seq_len: int = 64,
    pairs: int = 4,
    power_a: float = 0.01,
    random_non_queries: bool = True,
    batch: int = 1,
    seed: Seed = 0,
) -> ZoologyTask:
    """Draw zoology's MQAR sequences (``zoology.data.associative_recall.multiquery_ar``'s rules, restated).

    Keys: ``pairs`` distinct tokens of [1, vocab/2), in random order; values: ``pairs`` distinct tokens of
    [vocab/2, vocab). The sequence opens with k_1 v_1 ... k_n v_n; the rest, (seq_len - 2n)/2 slots of two tokens,
    holds one query per key: key i sits at position 2n + 2 g_i with the gaps g_i distinct, drawn from
    P(g) ~ (g + 1)^(power_a - 1), g = 0 .. slots - 1, by numpy's legacy weighted sampler without replacement
    (``_weighted_without_replacement``), and labelled with v_i. Every other token of the query region is 0, or with
    ``random_non_queries`` a uniform token of [0, vocab) (filler, which may repeat a key or value). Needs seq_len even,
    vocab > seq_len and 4 pairs <= seq_len, as zoology asserts. ``seed`` as in ``lacapacity.keys.make``.
    """
    vocab = _validate.positive_int("vocab", vocab, minimum=4)
    seq_len = _validate.positive_int("seq_len", seq_len, minimum=2)
    pairs = _validate.positive_int("pairs", pairs)
    batch = _validate.positive_int("batch", batch)
    power_a = _validate.in_range("power_a", power_a, 0.0, math.inf, low_open=True, high_open=True)
    _validate.flag("random_non_queries", random_non_queries)
    if seq_len % 2 or vocab <= seq_len or 4 * pairs > seq_len:
        raise CapacityError(
            f"zoology's MQAR needs an even seq_len, vocab > seq_len and 4 pairs <= seq_len; got seq_len={seq_len}, "
            f"vocab={vocab}, pairs={pairs}"
        )
    if pairs > vocab // 2 - 1:
        raise CapacityError(f"pairs must be at most vocab/2 - 1 = {vocab // 2 - 1} distinct keys, got {pairs}")
    slots = (seq_len - 2 * pairs) // 2
    p = power_a * torch.arange(1, slots + 1, dtype=torch.float64) ** (power_a - 1.0)
    p = p / p.sum()
    seeds = _random.seeds_for_batch(seed, batch)
    parts = []
    for s in seeds:
        g = _random.generator(s, "mqar/zoology")
        items = batch if len(seeds) == 1 else 1
        keys = _distinct(g, items, 1, vocab // 2, pairs)  # [items, n]
        vals = _distinct(g, items, vocab // 2, vocab, pairs)
        gaps = torch.stack([_weighted_without_replacement(g, p, pairs) for _ in range(items)])  # [items, n]
        inputs = torch.zeros(items, seq_len, dtype=torch.int64)
        inputs[:, 0 : 2 * pairs : 2], inputs[:, 1 : 2 * pairs : 2] = keys, vals
        pos = 2 * pairs + 2 * gaps
        inputs.scatter_(1, pos, keys)
        labels = torch.full((items, seq_len), -100, dtype=torch.int64)
        labels.scatter_(1, pos, vals)
        if random_non_queries:
            fill = torch.randint(0, vocab, (items, seq_len), generator=g)
            inputs = torch.where(inputs == 0, fill, inputs)
        parts.append((inputs, labels, keys, vals, pos))
    return ZoologyTask(*(torch.cat(xs) for xs in zip(*parts)))


def zoology(
    variant: Variant,
    *,
    d: int,
    dv: int | None = None,
    keys: str = "gaussian",
    key_params: Mapping[str, Any] | None = None,
    vocab: int = ZOOLOGY_VOCAB,
    seq_len: int = 64,
    pairs: int = 4,
    power_a: float = 0.01,
    random_non_queries: bool = True,
    filler: str = "write",
    batch: int = 1,
    seed: Seed = 0,
    device: Device = None,
) -> xr.Dataset:
    """zoology's MQAR measured on a memory without training: accuracy and squared error per batch item.

    The sequence is ``zoology_task``'s. Every token has a key embedding (a seeded key family in R^d) and a value
    embedding (gaussian unit rows in R^dv); the memory reads the sequence as bigrams, writing the pair
    (key_emb[x_2t], value_emb[x_2t+1]) at t = 0, 1, ...: the n stored pairs first, then the query region. At a query
    position 2t the read of key_emb[x_2t] comes before that bigram is written, and is decoded as the argmax of its dot
    products with the value embeddings of all ``vocab`` tokens (zoology's models predict over the whole vocabulary).
    ``filler="write"`` writes the query region's bigrams too (what a layer that writes every token does: filler and
    (query, filler) pairs interfere with later queries); ``"skip"`` writes only the n stored pairs (a perfectly
    gated memory). Variables over ``batch``: ``accuracy`` (zoology's valid/accuracy: the fraction of query positions
    answered right) and ``mse`` (mean ||r - v||^2 over the queries).
    """
    vname = _check_variant(variant)
    d = _validate.positive_int("d", d)
    dv = d if dv is None else _validate.positive_int("dv", dv)
    if filler not in ("write", "skip"):
        raise CapacityError(f"filler must be 'write' or 'skip', got {filler!r}")
    t = zoology_task(
        vocab=vocab,
        seq_len=seq_len,
        pairs=pairs,
        power_a=power_a,
        random_non_queries=random_non_queries,
        batch=batch,
        seed=seed,
    )
    dev = _validate.device(device)
    kp = _key_params(key_params)
    B = t.inputs.shape[0]
    key_emb = key_families.make(keys, n=vocab, d=d, batch=B, seed=seed, device=dev, **kp)  # [B, vocab, d]
    value_emb = value_families.make("gaussian", n=vocab, dv=dv, batch=B, seed=seed, device=dev)  # [B, vocab, dv]
    inputs, labels = t.inputs.to(dev), t.labels.to(dev)
    k_all, v_all = _take(key_emb, inputs[:, 0::2]), _take(value_emb, inputs[:, 1::2])  # [B, L/2, d], [B, L/2, dv]
    state = variant.write(variant.init_state(B, d, dv, device=dev), k_all[:, :pairs], v_all[:, :pairs])
    correct = torch.zeros(B, dtype=torch.float64, device=dev)
    sq = torch.zeros(B, dtype=torch.float64, device=dev)
    for step in range(pairs, seq_len // 2):
        at = labels[:, 2 * step]  # [B]: the value token where a query sits, else -100
        asked = at >= 0
        if bool(asked.any()):
            r = _read(variant, vname, state, k_all[:, step : step + 1], dv)[:, 0]  # [B, dv]
            answer = (r[:, None, :] @ value_emb.transpose(1, 2))[:, 0].argmax(-1)  # [B]
            target = value_emb.gather(1, at.clamp_min(0)[:, None, None].expand(B, 1, dv))[:, 0]
            correct += (asked & (answer == at)).double()
            sq += torch.where(asked, ((r - target) ** 2).sum(-1).double(), torch.zeros_like(sq))
        if filler == "write":
            state = variant.write(state, k_all[:, step : step + 1], v_all[:, step : step + 1])
    spec: Callable[[str, str, str], dict[str, str]] = lambda name, units, desc: {
        "long_name": name,
        "units": units,
        "description": desc,
    }
    return xr.Dataset(
        {
            "accuracy": (
                ("batch",),
                (correct / pairs).cpu().numpy(),
                spec(
                    "MQAR accuracy", "fraction", "fraction of query positions whose argmax over the vocabulary is right"
                ),
            ),
            "mse": (
                ("batch",),
                (sq / pairs).cpu().numpy(),
                spec("squared error", "value units^2", "mean over queries of ||r - v||^2"),
            ),
        },
        coords={"batch": ("batch", np.arange(B), {"long_name": "batch item"})},
        attrs={
            "variant": vname,
            "variant_params": json.dumps(declares.params(variant) or {}, sort_keys=True, default=str),
            "task": "zoology multiquery_ar",
            "vocab": vocab,
            "seq_len": seq_len,
            "pairs": pairs,
            "power_a": power_a,
            "random_non_queries": int(random_non_queries),
            "filler": filler,
            "d": d,
            "dv": dv,
            "keys": keys,
        },
    )
