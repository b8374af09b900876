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

>>> from capacity import mqar, variants
>>> ds = mqar.mqar(variants.get("delta", beta=1.0), vocab=32, pairs=16, d=32, keys="orthogonal",
...                overwrite=0.5, batch=2, seed=0)
>>> ds.accuracy.dims, ds.accuracy.values.tolist()        # orthonormal keys, beta = 1: exact (T12)
(('pairs', 'batch'), [[1.0, 1.0]])
>>> lin = mqar.mqar(variants.get("linear"), vocab=32, pairs=16, d=32, keys="orthogonal", overwrite=0.5, seed=0)
>>> bool(lin.accuracy.item() < 1), bool(lin.stale.item() == 1)    # reads v_old + v_new: wrong answers are stale
(True, True)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import xarray as xr

from capacity import variants as variant_registry
from capacity.base import _random, _validate, labels
from capacity.errors import CapacityError
from capacity.inputs import keys as key_families
from capacity.inputs import values as value_families
from capacity.variants._guard import guard

__all__ = [
    "METRICS",
    "Task",
    "grid",
    "mqar",
    "predicted_accuracy",
    "task",
    "ZOOLOGY_VOCAB",
    "ZOOLOGY_BASED_FIGURE2_TEST",
    "ZoologyTask",
    "zoology_task",
    "zoology",
]

# zoology's experiment behind Based's Fig. 2 (HazyResearch/zoology, zoology/experiments/arxiv24_based_figure2/configs.py):
# vocabulary 8,192; test sets of 1,000 sequences each at these (sequence length, key-value pairs)
ZOOLOGY_VOCAB = 8192
ZOOLOGY_BASED_FIGURE2_TEST = ((64, 4), (64, 8), (64, 16), (128, 32), (256, 64), (512, 128), (1024, 256))

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


def _take(emb: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return torch.take_along_dim(emb, tokens.unsqueeze(-1), dim=1)  # [B, vocab, e] at [B, t] -> [B, t, e]


def _overwrites(pairs: int, overwrite: float) -> int:
    return round(overwrite * pairs)


def _draw_tokens(g: torch.Generator, items: int, vocab: int, pairs: int, m: int, distractors: int, queries):
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


def _key_params(key_params) -> dict:
    if key_params is None:
        return {}
    if not isinstance(key_params, Mapping):
        raise CapacityError(
            f"key_params must be a dict of the key family's parameters (e.g. {{'rho': 0.5}}), got {key_params!r}"
        )
    return dict(key_params)


def _check(vocab, pairs, d, dv, overwrite, distractors, queries, batch):
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
    dv=None,
    keys: str = "gaussian",
    key_params=None,
    overwrite: float = 0.0,
    distractors: int = 0,
    queries=None,
    batch: int = 1,
    seed=0,
    device=None,
) -> Task:
    """Draw the MQAR task that ``mqar`` measures (same arguments, one whole number ``pairs``); see the module docstring.

    ``seed`` is an int, a CPU torch.Generator or a sequence of ints (one batch item per seed: item b equals
    the task drawn with ``seed=seed[b]``, as in ``capacity.keys.make``).
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


def _scores(r: torch.Tensor, value_emb: torch.Tensor, target, stale) -> dict[str, torch.Tensor]:
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


def _check_variant(variant) -> str:
    for name in ("init_state", "write", "read"):
        if not callable(getattr(variant, name, None)):
            raise CapacityError(
                f"variant {variant!r} has no method {name}(); a variant needs init_state, write and read"
            )
    return getattr(variant, "name", type(variant).__name__)


def _read(variant, vname, state, q, dv):
    r = variant.read(state, q)
    if not isinstance(r, torch.Tensor) or tuple(r.shape) != (q.shape[0], q.shape[1], dv):
        got = tuple(r.shape) if isinstance(r, torch.Tensor) else type(r).__name__
        raise CapacityError(
            f"variant {vname!r}: read returned {got}, expected a tensor of shape [B, m, dv] = "
            f"{(q.shape[0], q.shape[1], dv)}"
        )
    return r.float()


def mqar(
    variant,
    *,
    vocab: int,
    pairs,
    d: int,
    dv=None,
    keys: str = "gaussian",
    key_params=None,
    overwrite: float = 0.0,
    distractors: int = 0,
    queries=None,
    batch: int = 1,
    seed=0,
    device=None,
) -> xr.Dataset:
    """MQAR recall of ``variant`` (any object with init_state, write, read): an xarray.Dataset over (pairs, batch).

    ``vocab``: key and value tokens (>= 2); ``pairs``: distinct keys written (<= vocab), a whole number or a list
    (one result per value); ``d``, ``dv`` (default d): key and value dimensions; ``keys``: a key family of
    ``capacity.keys`` for the key embeddings, with ``key_params`` (e.g. ``{"rho": 0.5}``); ``overwrite``: fraction
    of the written keys written again with a new value, after all first writes; ``distractors``: unqueried tokens
    interleaved at random positions; ``queries``: read a seeded subsample of this many written keys (default all);
    ``seed`` as in ``task``. With ``overwrite == 0``, no distractors and all keys queried, a list of ``pairs``
    is measured from one pass (the task for p pairs is the prefix of the task for the largest p); otherwise each
    value is drawn and written separately. Variables: see ``METRICS``; ``writes`` and ``overwrites`` count the
    tokens written and the keys overwritten, per pairs value. With int seeds, each pairs value equals a separate call.
    """
    vname = _check_variant(variant)
    variant = guard(variant)
    vocab, plist, d, dv, overwrite, distractors, queries, batch = _check(
        vocab, pairs, d, dv, overwrite, distractors, queries, batch
    )
    common = {
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
    B = rows[0]["accuracy"].shape[0]
    data = {
        m: (
            ("pairs", "batch"),
            torch.stack([row[m] for row in rows]).cpu().numpy(),
            dict(zip(("long_name", "units", "description"), spec)),
        )
        for m, spec in METRICS.items()
    }
    data["writes"] = ("pairs", np.asarray(writes), {"long_name": "tokens written", "units": "tokens"})
    data["overwrites"] = (
        "pairs",
        np.asarray([_overwrites(p, overwrite) for p in plist]),
        {"long_name": "keys overwritten", "units": "keys"},
    )
    params = getattr(variant, "params", {})
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


def _variants(variants) -> dict:
    """Labels -> variant objects, from a mapping {label: variant} or a list of labels 'name(k=v)' / variant objects."""
    if isinstance(variants, Mapping):
        if not variants:
            raise CapacityError("variants must not be empty: give at least one {label: variant}")
        for v in variants.values():
            _check_variant(v)
        return {str(label): v for label, v in variants.items()}
    if isinstance(variants, str) or not isinstance(variants, Sequence) or len(variants) == 0:
        raise CapacityError(
            "variants must be a non-empty list of labels like 'delta(beta=0.5)' or variant objects, "
            f"or a dict {{label: variant}}; got {variants!r}"
        )
    out = {}
    for v in variants:
        if isinstance(v, str):
            name, params = labels.parse(v)
            out[labels.format(name, params)] = variant_registry.resolve(v)
        else:
            _check_variant(v)
            out[variant_registry.label(v)] = v
    return out


def grid(
    variants,
    *,
    pairs,
    overwrite=(0.0,),
    d: int,
    vocab: int,
    seeds=(0,),
    dv=None,
    keys: str = "gaussian",
    key_params=None,
    distractors: int = 0,
    queries=None,
    device=None,
) -> xr.Dataset:
    """``mqar`` over variants x overwrite fractions x pairs x seeds: a Dataset over (variant, overwrite, pairs, seed).

    ``variants``: labels such as ``"delta(beta=0.5)"`` (registry names with parameters), variant objects, or a
    dict ``{label: variant}``. Each seed is one batch item (the seeds' results equal separate runs).
    """
    table = _variants(variants)
    seeds = [
        int(_validate.positive_int("seed", s, minimum=0))
        for s in (seeds if isinstance(seeds, (Sequence, np.ndarray)) else [seeds])
    ]
    if not seeds:
        raise CapacityError("seeds must be a non-empty list of whole numbers >= 0")
    ows = [float(x) for x in (overwrite if isinstance(overwrite, (Sequence, np.ndarray)) else [overwrite])]
    if not ows:
        raise CapacityError("overwrite must be a fraction in [0, 1] or a non-empty list of them")
    metrics = list(METRICS)
    per_variant = []
    for var in table.values():
        parts = []
        for ow in ows:
            ds = mqar(
                var,
                vocab=vocab,
                pairs=pairs,
                d=d,
                dv=dv,
                keys=keys,
                key_params=key_params,
                overwrite=ow,
                distractors=distractors,
                queries=queries,
                batch=len(seeds),
                seed=seeds,
                device=device,
            )
            parts.append(ds.rename(batch="seed").assign_coords(seed=("seed", seeds, {"long_name": "seed"})))
        per_variant.append(
            xr.concat(parts, dim=xr.DataArray(ows, dims="overwrite", name="overwrite"), combine_attrs="drop")
        )
    out = xr.concat(
        per_variant,
        dim=xr.DataArray(list(table), dims="variant", name="variant"),
        data_vars=metrics,
        combine_attrs="drop",
    )
    out["overwrite"].attrs = {"long_name": "fraction of keys overwritten", "units": "fraction"}
    params = {label: getattr(v, "params", {}) for label, v in table.items()}
    out.attrs = {
        "study": "mqar",
        "vocab": int(vocab),
        "d": int(d),
        "dv": int(d if dv is None else dv),
        "keys": keys,
        "key_params": json.dumps(_key_params(key_params), sort_keys=True),
        "distractors": int(distractors),
        "queries": "all" if queries is None else int(queries),
        "variant_params": json.dumps(params, sort_keys=True, default=str),
    }
    return out


def predicted_accuracy(n, d, dv, vocab):
    """T10 over a vocabulary: predicted MQAR accuracy of the additive memory (random keys and values, no overwrites).

    ``capacity.theory.argmax_recall`` decodes over the n stored values; here the decode runs over all ``vocab``
    values. The read r = v_i + sum_{j != i} G_ij v_j scores N(1, s_c^2) on its own value, N(0, s_w^2) on each of
    the n - 1 other stored values (s_c, s_w as in T10) and N(0, s_u^2), s_u^2 = (1 + (n - 1)/d)/dv, on each of
    the vocab - n values never stored; treating the wrong scores as independent,

        P(correct) = E_z [ Phi((1 + s_c z)/s_w)^(n - 1) Phi((1 + s_c z)/s_u)^(vocab - n) ],   z ~ N(0, 1).

    Equals ``argmax_recall(n, d, dv)`` at vocab = n; conservative like it (measured accuracy runs above).
    """
    from scipy import integrate, special  # here, not at import: the start-up needs no scipy

    n, d, dv, vocab = (np.asarray(x, dtype=np.float64) for x in np.broadcast_arrays(n, d, dv, vocab))
    for name, a in (("n", n), ("d", d), ("dv", dv), ("vocab", vocab)):
        if not np.all(np.isfinite(a)) or np.any(a < 1):
            raise CapacityError(f"{name} must be >= 1 (finite), got {a!r}")
    if np.any(vocab < n):
        raise CapacityError("vocab must be >= n (the stored values are part of the vocabulary)")
    shape = n.shape
    n, d, dv, vocab = (a.ravel() for a in (n, d, dv, vocab))
    s_c = np.sqrt((n - 1.0) / (d * dv))
    s_w = np.sqrt(1.0 / dv + 1.0 / d + np.maximum(n - 2.0, 0.0) / (d * dv))
    s_u = np.sqrt((1.0 + (n - 1.0) / d) / dv)

    def integrand(z):
        mean = 1.0 + s_c * z
        log_p = (n - 1.0) * special.log_ndtr(mean / s_w) + (vocab - n) * special.log_ndtr(mean / s_u)
        return np.exp(-0.5 * z * z + log_p) / math.sqrt(2.0 * math.pi)

    value, _ = integrate.quad_vec(integrand, -12.0, 12.0, epsabs=1e-10, epsrel=1e-8)
    value = np.clip(value, 0.0, 1.0).reshape(shape)
    return float(value) if value.ndim == 0 else value


# ---------------------------------------------------------------- zoology's MQAR, exactly as its generator defines it


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
    seed=0,
) -> ZoologyTask:
    """Draw zoology's MQAR sequences (``zoology.data.associative_recall.multiquery_ar``'s rules, restated).

    Keys: ``pairs`` distinct tokens of [1, vocab/2), in random order; values: ``pairs`` distinct tokens of
    [vocab/2, vocab). The sequence opens with k_1 v_1 ... k_n v_n; the rest, (seq_len - 2n)/2 slots of two tokens,
    holds one query per key: key i sits at position 2n + 2 g_i with the gaps g_i distinct, drawn from
    P(g) ~ (g + 1)^(power_a - 1), g = 0 .. slots - 1, by numpy's legacy weighted sampler without replacement
    (``_weighted_without_replacement``), and labelled with v_i. Every other token of the query region is 0, or with
    ``random_non_queries`` a uniform token of [0, vocab) (filler, which may repeat a key or value). Needs seq_len even,
    vocab > seq_len and 4 pairs <= seq_len, as zoology asserts. ``seed`` as in ``capacity.keys.make``.
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
    variant,
    *,
    d: int,
    dv=None,
    keys: str = "gaussian",
    key_params=None,
    vocab: int = ZOOLOGY_VOCAB,
    seq_len: int = 64,
    pairs: int = 4,
    power_a: float = 0.01,
    random_non_queries: bool = True,
    filler: str = "write",
    batch: int = 1,
    seed=0,
    device=None,
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
    spec = lambda name, units, desc: {"long_name": name, "units": units, "description": desc}
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
            "variant_params": json.dumps(getattr(variant, "params", {}), sort_keys=True, default=str),
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
