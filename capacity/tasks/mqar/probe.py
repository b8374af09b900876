"""Multi-query associative recall (zoology's MQAR) measured directly on a memory, without training.

A vocabulary of ``vocab`` key tokens and ``vocab`` value tokens, each embedded once per batch item
(keys from a seeded key family in R^d, values gaussian unit rows in R^dv). One sequence per batch
item, written in order into the memory:

1. ``pairs`` distinct key tokens (a seeded random subset of the vocabulary), each with a random value
   token (drawn with replacement from the value vocabulary);
2. overwrites, placed after all of step 1: ``round(overwrite * pairs)`` of those keys (a seeded random
   subset, in random order) written once more, each with a new value token different from its first;
3. ``distractors`` tokens interleaved at seeded random positions of the whole sequence: key tokens drawn
   with replacement from the vocabulary tokens *not* written in step 1 (so they are never queried and
   never collide with a queried key) and random value tokens.

Then the queries: every written key (or a seeded subsample of ``queries`` of them), read once after all
writes. A query is correct when ``argmax_l  read . value_embedding[l]`` over the WHOLE value vocabulary
is the key's latest value token.

>>> from lacapacity import mqar, variants
>>> ds = mqar.mqar(variants.get("delta", beta=1.0), vocab=32, pairs=16, d=32, keys="orthogonal",
...                overwrite=0.5, batch=2, seed=0)
>>> ds.accuracy.dims, ds.accuracy.values.tolist()        # orthonormal keys, beta = 1: exact (T12)
(('pairs', 'batch'), [[1.0, 1.0]])
>>> lin = mqar.mqar(variants.get("linear"), vocab=32, pairs=16, d=32, keys="orthogonal", overwrite=0.5, seed=0)
>>> bool(lin.accuracy.item() < 1), bool(lin.stale.item() == 1)    # reads v_old + v_new: wrong answers are stale
(True, True)

zoology's own generator, exactly as zoology draws it, is ``lacapacity.tasks.mqar.zoology``.

Why one module of over 500 lines: the sequences, the write-and-read loop and the accuracy it predicts are one
measurement (zoology's own generator lives in ``zoology.py``, the tokens in ``_tokens.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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
from lacapacity.tasks.mqar.zoology import (
    ZOOLOGY_BASED_FIGURE2_TEST as ZOOLOGY_BASED_FIGURE2_TEST,  # lacapacity.mqar's too
)
from lacapacity.tasks.mqar.zoology import ZOOLOGY_VOCAB as ZOOLOGY_VOCAB
from lacapacity.tasks.mqar.zoology import ZoologyTask as ZoologyTask
from lacapacity.tasks.mqar.zoology import zoology as zoology
from lacapacity.tasks.mqar.zoology import zoology_task as zoology_task
from lacapacity.variants import declares
from lacapacity.variants._guard import guard

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import NDArray

    from lacapacity.base._types import Device, Seed
    from lacapacity.variants import Variant


# name -> (long name, units, description); per pairs value and batch item
METRICS = {
    "accuracy": (
        "MQAR accuracy",
        "fraction",
        "fraction of queries whose argmax over the whole value vocabulary is the key's latest value",
    ),
    "mse": (
        "squared error",
        "value units^2",
        "mean over queries of ||r - v_latest||^2, v_latest the embedding of the latest value",
    ),
    "stale": (
        "stale fraction",
        "fraction",
        (
            "fraction of the wrong answers that are the queried key's overwritten (earlier) value; "
            "NaN without wrong answers"
        ),
    ),
    "overwritten_accuracy": (
        "accuracy on overwritten keys",
        "fraction",
        "accuracy over the queried keys that were overwritten; NaN when none was queried",
    ),
}


@dataclass
class Task:
    """One drawn MQAR task per batch item (B items, T writes, Q queries).

    ``key_emb`` float32 ``[B, vocab, d]``, ``value_emb`` float32 ``[B, vocab, dv]``: the embeddings;
    ``keys``, ``values`` int64 ``[B, T]``: the token written at each step;
    ``queries`` int64 ``[B, Q]``: the key tokens read; ``target`` int64 ``[B, Q]``: their latest value tokens;
    ``stale`` int64 ``[B, Q]``: their overwritten value token, -1 for keys written once.
    """

    key_emb: torch.Tensor
    value_emb: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    queries: torch.Tensor
    target: torch.Tensor
    stale: torch.Tensor

    def embed(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The written keys ``[B, T, d]``, written values ``[B, T, dv]`` and query keys ``[B, Q, d]``."""
        return _take(self.key_emb, self.keys), _take(self.value_emb, self.values), _take(self.key_emb, self.queries)


def _overwrites(pairs: int, overwrite: float) -> int:
    return round(overwrite * pairs)


def _draw_tokens(
    g: torch.Generator, items: int, vocab: int, pairs: int, m: int, distractors: int, queries: int | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The token sequences of ``items`` batch items from one generator; all int64 on the CPU.

    The first four draws have fixed sizes (vocab), so the sequence for ``pairs`` = p without overwrites or
    distractors is the prefix of the one for any larger p (``mqar`` reads a list of pairs from one pass).
    """
    order = torch.argsort(torch.rand(items, vocab, generator=g), dim=1)  # key token of each slot
    first = torch.randint(0, vocab, (items, vocab), generator=g)  # first value token of each slot
    new = (first + torch.randint(1, vocab, (items, vocab), generator=g)) % vocab  # != first
    priority = torch.rand(items, vocab, generator=g)  # the m slots of lowest priority are overwritten
    ow_slots = torch.argsort(priority[:, :pairs], dim=1)[:, :m]  # [items, m]
    overwritten = torch.zeros(items, pairs, dtype=torch.bool)
    overwritten.scatter_(1, ow_slots, True)
    real_keys = torch.cat([order[:, :pairs], order.gather(1, ow_slots)], dim=1)  # [items, pairs + m]
    real_vals = torch.cat([first[:, :pairs], new.gather(1, ow_slots)], dim=1)
    if distractors:
        T = pairs + m + distractors
        pick = torch.randint(0, vocab - pairs, (items, distractors), generator=g)
        d_keys = order[:, pairs:].gather(1, pick)  # tokens never written in step 1
        d_vals = torch.randint(0, vocab, (items, distractors), generator=g)
        slots = torch.argsort(torch.rand(items, T, generator=g), dim=1)[:, :distractors]
        is_d = torch.zeros(items, T, dtype=torch.bool)
        is_d.scatter_(1, slots, True)
        seq_k = torch.empty(items, T, dtype=torch.int64)
        seq_v = torch.empty(items, T, dtype=torch.int64)
        seq_k[~is_d], seq_v[~is_d] = real_keys.flatten(), real_vals.flatten()  # row-major: each row in order
        seq_k[is_d], seq_v[is_d] = d_keys.flatten(), d_vals.flatten()
    else:
        seq_k, seq_v = real_keys, real_vals
    if queries is None:
        qs = torch.arange(pairs).expand(items, pairs)
    else:
        qs = torch.sort(torch.argsort(torch.rand(items, pairs, generator=g), dim=1)[:, :queries], dim=1).values
    was = overwritten.gather(1, qs)
    target = torch.where(was, new.gather(1, qs), first.gather(1, qs))
    stale = torch.where(was, first.gather(1, qs), torch.full_like(qs, -1))
    return seq_k, seq_v, order.gather(1, qs), target, stale


def _check(
    vocab: int,
    pairs: int | Sequence[int] | NDArray[np.integer[Any]],
    d: int,
    dv: int | None,
    overwrite: float,
    distractors: int,
    queries: int | None,
    batch: int,
) -> tuple[int, list[int], int, int, float, int, int | None, int]:
    vocab = _validate.positive_int("vocab", vocab, minimum=2)
    if isinstance(pairs, (Sequence, np.ndarray)) and not isinstance(pairs, str):
        if len(pairs) == 0:
            raise CapacityError(
                f"pairs must be a whole number in [1, vocab] = [1, {vocab}] or a non-empty list of them, got []"
            )
        plist = sorted({_validate.positive_int("pairs", p) for p in pairs})
    else:
        plist = [_validate.positive_int("pairs", pairs)]
    if plist[-1] > vocab:
        raise CapacityError(
            f"pairs must be at most vocab = {vocab} (each pair writes a distinct key token), got {plist[-1]}"
        )
    d = _validate.positive_int("d", d)
    dv = d if dv is None else _validate.positive_int("dv", dv)
    overwrite = _validate.in_range("overwrite", overwrite, 0.0, 1.0)
    distractors = _validate.positive_int("distractors", distractors, minimum=0)
    if distractors and plist[-1] >= vocab:
        raise CapacityError(
            f"distractors use key tokens never written as pairs, so they need pairs < vocab = {vocab}, "
            f"got pairs = {plist[-1]}"
        )
    if queries is not None:
        queries = _validate.positive_int("queries", queries)
        if queries > plist[0]:
            raise CapacityError(
                f"queries must be at most pairs = {plist[0]} (a subsample of the written keys), got {queries}"
            )
    batch = _validate.positive_int("batch", batch)
    return vocab, plist, d, dv, overwrite, distractors, queries, batch


def task(
    *,
    vocab: int,
    pairs: int,
    d: int,
    dv: int | None = None,
    keys: str = "gaussian",
    key_params: Mapping[str, Any] | None = None,
    overwrite: float = 0.0,
    distractors: int = 0,
    queries: int | None = None,
    batch: int = 1,
    seed: Seed = 0,
    device: Device = None,
) -> Task:
    """Draw the MQAR task that ``mqar`` measures (same arguments, one whole number ``pairs``); see the module docstring.

    ``seed`` is an int, a CPU torch.Generator or a sequence of ints (one batch item per seed: item b equals
    the task drawn with ``seed=seed[b]``, as in ``lacapacity.keys.make``).
    """
    vocab, plist, d, dv, overwrite, distractors, queries, batch = _check(
        vocab, pairs, d, dv, overwrite, distractors, queries, batch
    )
    if len(plist) != 1 or isinstance(pairs, (Sequence, np.ndarray)):
        raise CapacityError(f"task draws one sequence: pairs must be a whole number, got {pairs!r}")
    p = plist[0]
    dev = _validate.device(device)
    T = p + _overwrites(p, overwrite) + distractors  # tokens written
    # token draws (about six int64 [B, T] at once), then the embedded sequence [B, T, d + dv] float32 on the device
    _validate.check_alloc("mqar: token sequences", (batch, T), torch.int64, "cpu", copies=6.0)
    _validate.check_alloc("mqar: embedded sequence", (batch, T, d + dv), torch.float32, dev)
    kp = _key_params(key_params)
    key_emb = key_families.make(keys, n=vocab, d=d, batch=batch, seed=seed, device=dev, **kp)  # [B, vocab, d]
    value_emb = value_families.make("gaussian", n=vocab, dv=dv, batch=batch, seed=seed, device=dev)  # [B, vocab, dv]
    seeds = _random.seeds_for_batch(seed, batch)
    items = batch if len(seeds) == 1 else 1
    parts = [
        _draw_tokens(
            _random.generator(s, "mqar/tokens"), items, vocab, p, _overwrites(p, overwrite), distractors, queries
        )
        for s in seeds
    ]
    seq_k, seq_v, q, target, stale = (torch.cat(xs).to(dev) for xs in zip(*parts))
    return Task(key_emb, value_emb, seq_k, seq_v, q, target, stale)


def _scores(
    r: torch.Tensor, value_emb: torch.Tensor, target: torch.Tensor, stale: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Per batch item metrics of reads r ``[B, Q, dv]`` decoded over value_emb ``[B, vocab, dv]``; each ``[B]``."""
    B, Q, _ = r.shape
    vocab = value_emb.shape[1]
    answer = torch.empty(B, Q, dtype=torch.int64, device=r.device)
    block = max(1, (1 << 24) // max(1, B * vocab))  # bounds the score block to ~16M floats
    for s in range(0, Q, block):
        scores = r[:, s : s + block] @ value_emb.transpose(1, 2)  # [B, blk, vocab]
        answer[:, s : s + block] = scores.argmax(-1)
    correct = answer == target
    wrong = (~correct).sum(-1)
    diff = r - _take(value_emb, target)
    was = stale >= 0
    nan = torch.tensor(float("nan"), device=r.device)
    return {
        "accuracy": correct.double().mean(-1),
        "mse": (diff * diff).sum(-1).double().mean(-1),
        "stale": torch.where(
            wrong > 0, (~correct & (answer == stale)).sum(-1).double() / wrong.clamp_min(1), nan.double()
        ),
        "overwritten_accuracy": torch.where(
            was.any(-1), (correct & was).sum(-1).double() / was.sum(-1).clamp_min(1), nan.double()
        ),
    }


def measure(
    variant: Variant,
    *,
    vocab: int,
    pairs: int | Sequence[int] | NDArray[np.integer[Any]],
    d: int,
    dv: int | None = None,
    keys: str = "gaussian",
    key_params: Mapping[str, Any] | None = None,
    overwrite: float = 0.0,
    distractors: int = 0,
    queries: int | None = None,
    batch: int = 1,
    seed: Seed = 0,
    device: Device = None,
) -> tuple[dict[str, NDArray[np.float64]], dict[str, Any]]:
    """``mqar``'s numbers without its Dataset (the mqar task's pass): (metric -> float64 array over (pairs, batch),
    pairs increasing, with ``writes`` and ``overwrites`` over pairs; the checked arguments ``mqar`` records:
    ``vname``, ``plist`` (the pairs, increasing), ``common``, ...)."""
    vname = _check_variant(variant)
    variant = guard(variant)
    vocab, plist, d, dv, overwrite, distractors, queries, batch = _check(
        vocab, pairs, d, dv, overwrite, distractors, queries, batch
    )
    common: dict[str, Any] = {  # the keyword arguments of task() besides pairs
        "vocab": vocab,
        "d": d,
        "dv": dv,
        "keys": keys,
        "key_params": key_params,
        "overwrite": overwrite,
        "distractors": distractors,
        "queries": queries,
        "batch": batch,
        "seed": seed,
        "device": device,
    }
    rows: list[dict[str, torch.Tensor]] = []
    writes = []
    if overwrite == 0 and distractors == 0 and queries is None:  # one pass, read at checkpoints
        t = task(pairs=plist[-1], **common)
        k, v, q = t.embed()
        state = variant.init_state(t.keys.shape[0], d, dv, device=k.device)
        done = 0
        for p in plist:
            state = variant.write(state, k[:, done:p], v[:, done:p])
            done = p
            r = _read(variant, vname, state, q[:, :p], dv)
            rows.append(_scores(r, t.value_emb, t.target[:, :p], t.stale[:, :p]))
            writes.append(p)
    else:
        for p in plist:
            t = task(pairs=p, **common)
            k, v, q = t.embed()
            state = variant.write(variant.init_state(k.shape[0], d, dv, device=k.device), k, v)
            rows.append(_scores(_read(variant, vname, state, q, dv), t.value_emb, t.target, t.stale))
            writes.append(k.shape[1])
    out = {m: torch.stack([row[m] for row in rows]).cpu().numpy() for m in METRICS}
    out["writes"] = np.asarray(writes)
    out["overwrites"] = np.asarray([_overwrites(p, overwrite) for p in plist])
    checked = {"vname": vname, "variant": variant, "plist": plist, "common": common, "vocab": vocab, "d": d, "dv": dv}
    return out, {**checked, "overwrite": overwrite, "distractors": distractors}


def mqar(
    variant: Variant,
    *,
    vocab: int,
    pairs: int | Sequence[int] | NDArray[np.integer[Any]],
    d: int,
    dv: int | None = None,
    keys: str = "gaussian",
    key_params: Mapping[str, Any] | None = None,
    overwrite: float = 0.0,
    distractors: int = 0,
    queries: int | None = None,
    batch: int = 1,
    seed: Seed = 0,
    device: Device = None,
) -> xr.Dataset:
    """MQAR recall of ``variant`` (any object with init_state, write, read): an xarray.Dataset over (pairs, batch).

    ``vocab``: key and value tokens (>= 2); ``pairs``: distinct keys written (<= vocab), a whole number or a list
    (one result per value); ``d``, ``dv`` (default d): key and value dimensions; ``keys``: a key family of
    ``lacapacity.keys`` for the key embeddings, with ``key_params`` (e.g. ``{"rho": 0.5}``); ``overwrite``: fraction
    of the written keys written again with a new value, after all first writes; ``distractors``: unqueried tokens
    interleaved at random positions; ``queries``: read a seeded subsample of this many written keys (default all);
    ``seed`` as in ``task``. With ``overwrite == 0``, no distractors and all keys queried, a list of ``pairs``
    is measured from one pass (the task for p pairs is the prefix of the task for the largest p); otherwise each
    value is drawn and written separately. Variables: see ``METRICS``; ``writes`` and ``overwrites`` count the
    tokens written and the keys overwritten, per pairs value. With int seeds, each pairs value equals a separate call.
    """
    out, checked = measure(
        variant,
        vocab=vocab,
        pairs=pairs,
        d=d,
        dv=dv,
        keys=keys,
        key_params=key_params,
        overwrite=overwrite,
        distractors=distractors,
        queries=queries,
        batch=batch,
        seed=seed,
        device=device,
    )
    vname, variant, plist, common = checked["vname"], checked["variant"], checked["plist"], checked["common"]
    vocab, d, dv, overwrite, distractors = (checked[k] for k in ("vocab", "d", "dv", "overwrite", "distractors"))
    B = out["accuracy"].shape[1]
    data: dict[str, tuple[str | tuple[str, ...], NDArray[Any], dict[str, str]]] = {
        m: (("pairs", "batch"), out[m], dict(zip(("long_name", "units", "description"), spec)))
        for m, spec in METRICS.items()
    }
    data["writes"] = ("pairs", out["writes"], {"long_name": "tokens written", "units": "tokens"})
    data["overwrites"] = ("pairs", out["overwrites"], {"long_name": "keys overwritten", "units": "keys"})
    params = declares.params(variant) or {}
    seed_json = seed if not isinstance(seed, torch.Generator) else "generator"
    config = {
        **common,
        "pairs": plist,
        "seed": seed_json,
        "key_params": _key_params(key_params),
        "device": str(_validate.device(device)),
    }
    return xr.Dataset(
        data,
        coords={
            "pairs": ("pairs", np.asarray(plist), {"long_name": "distinct keys written", "units": "pairs"}),
            "batch": ("batch", np.arange(B), {"long_name": "batch item"}),
        },
        attrs={
            "variant": vname,
            "variant_params": json.dumps(params, sort_keys=True, default=str),
            "vocab": vocab,
            "d": d,
            "dv": dv,
            "keys": keys,
            "overwrite": overwrite,
            "distractors": distractors,
            "config": json.dumps(config, sort_keys=True, default=str),
        },
    )


# ---------------------------------------------------------------- zoology's MQAR, exactly as its generator defines it
