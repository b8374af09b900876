"""The recall probe: write n key-value pairs in order, read back every stored key at checkpoints.

>>> from lacapacity import keys, values, variants, probe
>>> K = keys.make("gaussian", n=128, d=32, batch=4, seed=0)
>>> V = values.make("gaussian", n=128, dv=32, batch=4, seed=0)
>>> ds = probe.recall(variants.get("linear"), K, V, checkpoints=[16, 32, 128])
>>> ds.mse.dims, ds.n.values.tolist()
(('n', 'batch'), [16, 32, 128])

The state stays on the tensors' device; the per-checkpoint metrics are gathered there and
copied to the host once, at the end.

Why one module of over 500 lines: the write-and-read loop, its metrics and the Dataset it returns are one measurement; the exact decode it calls lives in ``decode``.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
import torch
import xarray as xr

from lacapacity import variants as _variants
from lacapacity.base import _random, _validate
from lacapacity.errors import CapacityError
from lacapacity.tasks.decode import _ks, argmax_correct, topk_correct
from lacapacity.variants import Variant, declares
from lacapacity.variants._guard import Guarded, guard

__all__ = [
    "recall",
    "measure",
    "Curves",
    "default_checkpoints",
    "age_edges",
    "peak_bytes",
    "METRICS",
    "PER_QUERY",
    "PER_AGE",
    "RECENT",
    "BLOCK",
]

# what the arguments take (see ``recall``)
Checkpoints: TypeAlias = "int | Sequence[int] | np.ndarray | torch.Tensor | None"
AgeBins: TypeAlias = "bool | Sequence[int] | np.ndarray | torch.Tensor | None"
TopK: TypeAlias = "int | list[int] | tuple[int, ...] | None"

BLOCK = 64  # pairs per write call: the state is built in whole blocks, so a checkpoint's numbers depend on n alone
TIMED = 15  # pairs of the longest write ``write_seconds`` times: the fingerprint's first write, no more

# name -> (long name, units, description); per checkpoint and batch item, means over the stored pairs
METRICS = {
    "mse": (
        "mean squared error",
        "value units^2",
        "mean over stored pairs i of ||r_i - v_i||^2 (squared L2 norm of the read error; T4)",
    ),
    "rel_error": ("relative squared error", "1", "mean over stored pairs of ||r_i - v_i||^2 / ||v_i||^2"),
    "cosine": ("cosine similarity", "1", "mean over stored pairs of cos(r_i, v_i)"),
    "recall": (
        "argmax recall",
        "fraction",
        "fraction of stored pairs whose read has its largest dot product with its own value among all stored values (T10)",
    ),
    "signal": (
        "signal coefficient",
        "1",
        "mean over stored pairs of a_i = <r_i, v_i> / ||v_i||^2, the coefficient of v_i in its read (G_ii for the additive rule and orthonormal values; T3)",
    ),
    "leak": (
        "leak energy",
        "value units^2",
        "mean over stored pairs of ||r_i - a_i v_i||^2, the part of the read not along v_i (sum_{j != i} G_ij v_j for the additive rule and orthonormal values; T3)",
    ),
}
# with top_k=[k, ...]: the listwise recall, over a dimension k (opt-in; T30)
RECALL_AT = (
    "recall at k",
    "fraction",
    "fraction of stored pairs whose own value is among the k values with the largest dot product with the read "
    "(the same exact decode as recall; recall_at at k = 1 is recall; T30)",
)
# with per_query=True, each metric's value per query is the variable <metric>_q over (n, batch, query);
# before docs/naming.md they were sq_error, rel_sq_error, cosine_q, correct, signal_q and leak_q
PER_QUERY = {m: f"{m}_q" for m in METRICS}
# with age_bins, each metric's mean over the stored pairs of each age bin is <metric>_age over (n, batch, age)
PER_AGE = {m: f"{m}_age" for m in METRICS}
# with recent=R, each metric's mean over the last R pairs written is <metric>_recent over (n, batch)
RECENT = {m: f"{m}_recent" for m in METRICS}
PAIRS_AGE = (
    "pairs per age bin",
    "pairs",
    "stored pairs in each age bin [age, age_end) at n (age = writes since stored)",
)


def age_meta(metric: str) -> tuple[str, str, str]:
    """(long name, units, description) of ``PER_AGE[metric]``, the metric's mean over each age bin's pairs."""
    ln, units, desc = METRICS[metric]
    return f"{ln} by age", units, desc.replace("mean over stored pairs", "mean over the stored pairs of each age bin")


def recent_meta(metric: str, recent: int) -> tuple[str, str, str]:
    """(long name, units, description) of ``<metric>_recent``, the metric's mean over the last ``recent`` pairs."""
    ln, units, desc = METRICS[metric]
    where = f"the last {recent} pairs written (ages 0 .. {recent - 1}; every stored pair while n <= {recent})"
    return f"{ln}, last {recent} pairs", units, desc.replace("stored pairs", where, 1)


def se_meta(metric: str, queries: int | None) -> tuple[str, str, str]:
    """(long name, units, description) of ``<metric>_se``, the standard error of a mean over ``queries`` samples."""
    ln, units, _ = METRICS[metric]
    desc = f"standard error of {metric} from its sample of {queries} queries; 0 where every stored pair was read"
    return f"standard error of the {ln}", units, desc


def age_edges(n: int) -> list[int]:
    """Geometric age bins for up to n stored pairs: edges 0, 1, 2, 4, ..., 2^k with 2^k >= n.

    Bin j holds the pairs of age in [edges[j], edges[j + 1]) (age = writes since the pair was stored; the last
    written pair has age 0): the first bin is age 0 alone, then [1, 2), [2, 4), [4, 8), ...

    >>> age_edges(10)
    [0, 1, 2, 4, 8, 16]
    """
    n = _validate.positive_int("n", n)
    edges = [0, 1]
    while edges[-1] < n:
        edges.append(edges[-1] * 2)
    return edges


def _age_bins(age_bins: AgeBins, n: int) -> list[int] | None:
    """The bin edges ``age_bins`` asks for: None (no bins), True (``age_edges(n)``) or increasing whole numbers from 0."""
    if age_bins is None or age_bins is False:
        return None
    if age_bins is True:
        return age_edges(n)
    if isinstance(age_bins, torch.Tensor):
        age_bins = age_bins.tolist()
    if not isinstance(age_bins, (Sequence, np.ndarray)) or isinstance(age_bins, str) or len(age_bins) < 2:
        raise CapacityError(
            f"age_bins must be True (geometric bins 0, 1, 2, 4, ...) or at least two increasing bin edges from 0, got {age_bins!r}"
        )
    edges = [_validate.positive_int("age bin edge", e, minimum=0) for e in age_bins]
    if edges[0] != 0 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise CapacityError(f"age_bins must be increasing whole numbers starting at 0, got {age_bins!r}")
    return edges


_AGE_ATTRS = {
    "long_name": "pair age",
    "units": "writes",
    "description": "first age of the bin; age = writes since the pair was stored (the last written pair has age 0)",
}
_AGE_END_ATTRS = {"long_name": "end of the age bin", "units": "writes", "description": "the bin holds ages < age_end"}


def default_checkpoints(n: int, count: int = 24) -> list[int]:
    """About ``count`` geometrically spaced checkpoints from 1 to n, always ending at n."""
    n = _validate.positive_int("n", n)
    count = _validate.positive_int("count", count)
    grid = np.unique(np.round(np.geomspace(1, n, count)).astype(int))
    return sorted(set(grid.tolist()) | {n})


def _checkpoints(checkpoints: Checkpoints, n: int) -> list[int]:
    if checkpoints is None:
        return default_checkpoints(n)
    if isinstance(checkpoints, torch.Tensor):
        checkpoints = checkpoints.tolist() if checkpoints.ndim == 1 else checkpoints
    if isinstance(checkpoints, (int, np.integer)):
        checkpoints = [checkpoints]
    if not isinstance(checkpoints, (Sequence, np.ndarray)) or len(checkpoints) == 0:
        raise CapacityError(f"checkpoints must be a non-empty sequence of pair counts in [1, {n}], got {checkpoints!r}")
    cps = sorted({_validate.positive_int("checkpoint", c) for c in checkpoints})
    if cps[-1] > n:
        raise CapacityError(f"checkpoints must lie in [1, n] = [1, {n}], got {cps[-1]}")
    return cps


def _query_metrics(
    r: torch.Tensor, v: torch.Tensor, block: int, decode: bool, top_k: tuple[int, ...] = ()
) -> dict[str, torch.Tensor]:
    """Per-query metrics of reads r [B, c, dv] against values v [B, c, dv]; each [B, c] float32.

    ``decode``: also the argmax recall, whose scores cost c^2 dv (the rest costs c dv); see ``lacapacity.tasks.decode``.
    ``top_k``: also ``recall_at``, [B, c, K] (``lacapacity.tasks.decode.topk_correct``, one item at a time like recall).
    """
    diff = r - v
    sq = (diff * diff).sum(-1)
    vv = (v * v).sum(-1)
    rv = (r * v).sum(-1)
    rr = (r * r).sum(-1)
    a = rv / vv
    leak_vec = r - a[..., None] * v
    cos = torch.where(rr > 0, rv / (rr.sqrt() * vv.sqrt()), torch.zeros_like(rv))
    out = {"mse": sq, "rel_error": sq / vv, "cosine": cos, "signal": a, "leak": (leak_vec * leak_vec).sum(-1)}
    if decode:
        # exact, and one item at a time so that an item's answer does not depend on the rest of the batch
        out["recall"] = torch.cat([argmax_correct(r[i : i + 1], v[i : i + 1], block=block) for i in range(r.shape[0])])
    if top_k:
        out["recall_at"] = torch.cat(
            [topk_correct(r[i : i + 1], v[i : i + 1], list(top_k), block=block) for i in range(r.shape[0])]
        )
    return out


@dataclass
class Curves:
    """The probe's numbers before they become a Dataset (see ``measure``).

    ``metrics``: name -> float64 ``[C, B]`` (checkpoint, batch item), means over the stored pairs (``recall_at``:
    ``[C, B, K]``); ``per_query``: name -> float64 ``[C, B, n]`` (``recall_at``: ``[C, B, n, K]``; NaN past each
    checkpoint), or empty; ``top_k``: the k of ``recall_at`` (empty without it);
    ``sizes``: measured state sizes after each checkpoint (memories that grow), or empty;
    ``checkpoints``, ``feature_dim``: as in the Dataset;
    ``per_age``: name -> float64 ``[C, B, A]``, means over the pairs of each age bin (NaN where a bin is empty), and
    ``age_edges`` the A + 1 bin edges, or both empty (no ``age_bins``).
    ``se``: with ``queries``, name -> float64 ``[C, B]``, the standard error of each mean over its sampled queries
    (0 where every stored pair was read), else empty.
    ``recent``: with ``recent=R``, name -> float64 ``[C, B]``, each metric's mean over the last R pairs written
    (all of them where fewer are stored), and ``recent_pairs`` R; else empty and 0.
    """

    checkpoints: list[int]
    metrics: dict[str, np.ndarray]
    per_query: dict[str, np.ndarray]
    sizes: list[int]
    feature_dim: int
    per_age: dict[str, np.ndarray] = field(default_factory=dict)
    age_edges: list[int] = field(default_factory=list)
    top_k: tuple[int, ...] = ()
    se: dict[str, np.ndarray] = field(default_factory=dict)
    recent: dict[str, np.ndarray] = field(default_factory=dict)
    recent_pairs: int = 0


def measure(
    variant: Variant | str,
    keys: torch.Tensor,
    values: torch.Tensor,
    *,
    checkpoints: Checkpoints = None,
    per_query: bool = False,
    decode: bool = True,
    age_bins: AgeBins = None,
    top_k: TopK = None,
    queries: int | None = None,
    query_seed: int = 0,
    recent: int | None = None,
) -> Curves:
    """The work of ``recall`` without building the Dataset: for loops that assemble their own (the sweep).

    Same arguments, checks and numbers as ``recall``.
    """
    if isinstance(variant, (str, dict)):
        variant = _variants.resolve(variant)  # a name, label or import path
    for name in ("init_state", "write", "read", "state_numel"):
        if not callable(getattr(variant, name, None)):
            raise CapacityError(
                f"variant {variant!r} has no method {name}(); a variant needs init_state, write, read and state_numel"
            )
    _validate.tensor("keys", keys, ndim=3)
    _validate.tensor("values", values, ndim=3)
    _validate.flag("decode", decode)
    _validate.flag("per_query", per_query)
    ks = () if top_k is None else tuple(_ks(top_k))
    if queries is not None:
        queries = _validate.positive_int("queries", queries)
        if per_query:
            raise CapacityError("per_query=True reads every stored pair; it does not combine with queries=")
        if ks or age_bins is not None:
            raise CapacityError(
                "queries= reads a sample of the stored pairs; it does not combine with top_k= or age_bins="
            )
    query_seed = _random.check_seed("query_seed", query_seed)
    if recent is not None:
        recent = _validate.positive_int("recent", recent)
    device = _validate.same_device(keys=keys, values=values)
    B, n, d = keys.shape
    if values.shape[:2] != (B, n):
        raise CapacityError(
            f"keys [B, n, d] = {list(keys.shape)} and values [B, n, dv] = {list(values.shape)} must share B and n"
        )
    dv = values.shape[2]
    cps = _checkpoints(checkpoints, n)
    edges = _age_bins(age_bins, n)
    vname = declares.name(variant)
    names = [m for m in METRICS if decode or m != "recall"]
    # reads and per-query metrics at the last checkpoint: about ten [B, n, dv] float32 tensors at once
    _validate.check_alloc("probe: reads and metrics", (B, min(n, queries or n), dv), torch.float32, device, copies=10.0)
    if per_query:
        _validate.check_alloc("probe: per-query metrics", (len(cps), B, n), torch.float32, device, copies=len(names))
    try:
        return _measure(
            guard(variant), keys, values, cps, vname, names, per_query, decode, edges, ks, queries, query_seed, recent
        )
    except Exception as exc:
        if _validate.is_alloc_failure(exc):
            raise _validate.alloc_error("probe", (B, n, dv), torch.float32, device, exc) from None
        raise


def _by_age(x: torch.Tensor, edges: list[int]) -> torch.Tensor:
    """Means of per-query metrics x ``[B, c]`` (query i has age c - 1 - i) over the age bins: ``[B, A]``, NaN if empty."""
    c = x.shape[1]
    age = torch.arange(c - 1, -1, -1, device=x.device)  # [c]
    which = torch.bucketize(age, torch.as_tensor(edges[1:], device=x.device), right=True)  # [c], bin of each query
    A = len(edges) - 1
    inside = which < A  # ages past the last edge are in no bin
    sums = torch.zeros(x.shape[0], A, dtype=torch.float64, device=x.device)
    sums.index_add_(1, which[inside], x[:, inside].double())
    counts = torch.bincount(which[inside], minlength=A).double()  # [A]
    return torch.where(counts > 0, sums / counts.clamp_min(1), torch.full_like(sums, float("nan")))


def _sample(c: int, m: int, seed: int, device: torch.device) -> torch.Tensor:
    """m of the stored pairs 0 .. c-1, uniformly without replacement, sorted: the same for (seed, c) on any batch."""
    g = _random.generator(seed, f"probe/queries/{c}")
    return torch.randperm(c, generator=g)[:m].sort().values.to(device)


def _measure(
    variant: Guarded,
    keys: torch.Tensor,
    values: torch.Tensor,
    cps: list[int],
    vname: str,
    names: list[str],
    per_query: bool,
    decode: bool,
    edges: list[int] | None = None,
    ks: tuple[int, ...] = (),
    queries: int | None = None,
    query_seed: int = 0,
    recent: int | None = None,
) -> Curves:
    """The probe's loop over checkpoints, its arguments checked (see ``measure``).

    The state takes whole blocks of ``BLOCK`` tokens; a checkpoint inside a block writes the rest of its pairs
    into a copy. So the calls that build the state up to any n are the same whichever other checkpoints are asked
    for, and every checkpoint's numbers depend on n alone (the sweep stores them point by point).
    """
    B, n, d = keys.shape
    dv = values.shape[2]
    device = keys.device
    state = variant.init_state(B, d, dv, device=device)
    measures_size = declares.declared(variant).state == "growing"
    sizes: list[int] = []  # numel(state) after each checkpoint, for memories that grow
    names = [*names, "recall_at"] if ks else list(names)
    rows: dict[str, list[torch.Tensor]] = {m: [] for m in names}
    full: dict[str, torch.Tensor] = {}
    if per_query:
        full = {
            m: torch.full((len(cps), B, n, *((len(ks),) if m == "recall_at" else ())), float("nan"), device=device)
            for m in names
        }
    ages: dict[str, list[torch.Tensor]] = {m: [] for m in names if m != "recall_at"} if edges is not None else {}
    errs: dict[str, list[torch.Tensor]] = {m: [] for m in names} if queries is not None else {}
    last: dict[str, list[torch.Tensor]] = {m: [] for m in names if m != "recall_at"} if recent is not None else {}
    written = 0  # pairs in `state`: a multiple of BLOCK
    for ci, c in enumerate(cps):
        while written + BLOCK <= c:
            state = variant.write(state, keys[:, written : written + BLOCK], values[:, written : written + BLOCK])
            written += BLOCK
        at = state if written == c else variant.write(_copy(state, vname), keys[:, written:c], values[:, written:c])
        if measures_size:
            sizes.append(int(declares.numel(variant, at) or 0))
        idx = _sample(c, queries, query_seed, device) if queries is not None and queries < c else None
        m_c = c if idx is None else idx.numel()
        r = _read(variant, at, keys[:, :c] if idx is None else keys[:, idx], vname, (B, m_c, dv))
        # the decode's score block bounds it to ~16M floats (one batch item at a time); from c alone, never from B
        if idx is None:
            per = _query_metrics(r.float(), values[:, :c].float(), max(1, (1 << 24) // c), decode, ks)
        else:
            per = _query_metrics(r.float(), values[:, idx].float(), max(1, (1 << 24) // c), False)
            if decode:
                per["recall"] = argmax_correct(r.float(), values[:, :c].float(), own=idx)
        for m, x in per.items():
            rows[m].append(x.mean(1))  # [B] ([B, K] for recall_at)
            if per_query:
                full[m][ci, :, :c] = x
            if m in ages and edges is not None:  # ages is empty without edges
                ages[m].append(_by_age(x, edges))  # [B, A]
            if queries is not None:  # s.e. of a mean of m_c of c draws without replacement (0 when all are read)
                fpc = (c - m_c) / (c - 1) if c > 1 else 0.0
                errs[m].append(x.double().std(-1, correction=1).nan_to_num(0.0) * math.sqrt(fpc / m_c))
        if recent is not None:  # the last `recent` pairs written, each decoded against all c stored values
            own = torch.arange(max(0, c - recent), c, device=device)
            rr = _read(variant, at, keys[:, own], vname, (B, own.numel(), dv)).float()
            near = _query_metrics(rr, values[:, own].float(), max(1, (1 << 24) // c), False)
            if decode:
                near["recall"] = argmax_correct(rr, values[:, :c].float(), own=own)
            for m, x in near.items():
                last[m].append(x.double().mean(1))  # [B]
    feature_dim = declares.feature_dim(variant, d)
    return Curves(
        checkpoints=cps,
        metrics={
            m: torch.stack(xs).cpu().numpy().astype(np.float64) for m, xs in rows.items()
        },  # [C, B] each, one copy to the host
        per_query={m: x.cpu().numpy().astype(np.float64) for m, x in full.items()},
        sizes=sizes,
        feature_dim=int(feature_dim),
        per_age={m: torch.stack(xs).cpu().numpy() for m, xs in ages.items()},  # [C, B, A] each
        age_edges=list(edges) if edges is not None else [],
        top_k=ks,
        se={m: torch.stack(xs).cpu().numpy().astype(np.float64) for m, xs in errs.items()},
        recent={m: torch.stack(xs).cpu().numpy() for m, xs in last.items()},  # [C, B] each
        recent_pairs=recent or 0,
    )


def _read(variant: Guarded, state: object, k: torch.Tensor, vname: str, shape: tuple[int, int, int]) -> torch.Tensor:
    """``variant.read(state, k)``, checked to be a tensor of ``shape`` ``[B, m, dv]``."""
    r = variant.read(state, k)
    if not isinstance(r, torch.Tensor) or tuple(r.shape) != shape:
        got = tuple(r.shape) if isinstance(r, torch.Tensor) else type(r).__name__
        raise CapacityError(f"variant {vname!r}: read returned {got}, expected a tensor of shape [B, m, dv] = {shape}")
    return r


def _copy(state: object, vname: str) -> object:
    """A copy of a state (tensors cloned, containers and dataclasses copied deeply)."""
    if isinstance(state, torch.Tensor):
        return state.clone()
    try:
        return copy.deepcopy(state)
    except Exception as exc:
        raise CapacityError(
            f"variant {vname!r}: its state cannot be copied ({type(exc).__name__}: {exc}); the probe reads a checkpoint "
            "inside a block of writes from a copy: make the state tensors, or containers and dataclasses of them"
        ) from None


def write_seconds(variant: Variant, d: int, dv: int, device: str | torch.device = "cpu") -> tuple[float, float]:
    """Seconds of the probe's writes on one thread of this machine, as loaded as it is now, for one batch item:
    ``(per_call, per_token)``. Timed on a fresh state: a write of one pair, then of ``TIMED`` pairs where the first
    took under 10 ms, else of two (each the fastest of three where they are quick); ``per_token`` the difference per
    pair more (about 0 for a memory that writes a block at once), ``per_call`` the rest of the one-pair write (a
    copy of the state, say). It runs the memory's code (under the guard) at the sizes given, with no more pairs a
    call than the behavioural fingerprint writes (``lacapacity.sweep.provenance.behaviour``: 15, then 9): call it
    after the sizes are checked. A memory that fails here gives ``(0.0, 0.0)``: the
    measurement reports it. Torch's global random state is left as it was."""
    import time

    run = guard(variant)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            gen = torch.Generator().manual_seed(0)
            k = torch.randn(1, TIMED, d, generator=gen).to(device)
            v = torch.randn(1, TIMED, dv, generator=gen).to(device)
            state = run.init_state(1, d, dv, device=device)

            def best(t: int) -> float:
                fastest = math.inf
                for _ in range(3):
                    start = time.perf_counter()
                    run.write(state, k[:, :t], v[:, :t])
                    if torch.device(device).type == "cuda":
                        torch.cuda.synchronize()
                    fastest = min(fastest, time.perf_counter() - start)
                    if fastest > 0.05:  # slow enough that one try is the time
                        break
                return fastest

            if torch.device(device).type == "cuda":  # the device's own start-up (context, kernels) is not a write's
                best(1)
            one = best(1)
            more = TIMED if one < 0.01 else 2
            per_token = max(best(more) - one, 0.0) / (more - 1)
    except Exception:  # the memory's own fault: reported where it measures
        return 0.0, 0.0
    finally:
        torch.set_num_threads(threads)
    return max(one - per_token, 0.0), per_token


def peak_bytes(variant: Variant, batch: int, n: int, d: int, dv: int, key_stats: bool = False) -> int:
    """An upper estimate of the probe's peak memory in bytes for ``batch`` items and ``n`` pairs.

    Keys and values drawn in float64 and kept in float32 ``[B, n, d + dv]``; features ``[B, n, D]``; reads, their
    errors and per-query metrics ``[B, n, dv]`` four times; the state three times (a copy at a checkpoint inside a
    block); the decode's score block of 2^24 floats; key statistics' Gram blocks ``[B, 2048, n]`` in float64.
    """
    D = declares.feature_dim(guard(variant), d)
    state = guard(variant).state_numel(D, dv, n=n)  # n for a memory that grows (softmax)
    total = 12 * batch * n * (d + dv) + 4 * batch * n * D + 16 * batch * n * dv + 12 * batch * state + 4 * (1 << 24)
    return int(total + (8 * batch * min(n, 2048) * n if key_stats else 0))


def recall(
    variant: Variant | str,
    keys: torch.Tensor,
    values: torch.Tensor,
    *,
    checkpoints: Checkpoints = None,
    per_query: bool = False,
    decode: bool = True,
    age_bins: AgeBins = None,
    top_k: TopK = None,
    queries: int | None = None,
    query_seed: int = 0,
    recent: int | None = None,
) -> xr.Dataset:
    """Write the n pairs into ``variant`` in order; at each checkpoint n_c read back keys 1..n_c.

    ``variant``: a variant object, or anything ``lacapacity.variants.resolve`` takes (``"delta(beta=0.5)"``,
    ``"mypkg.memories:Longhorn(beta=0.5)"``).
    Shapes: keys ``[B, n, d]``, values ``[B, n, dv]`` on one device (the state lives there too).
    ``checkpoints``: pair counts in [1, n] (default: ``default_checkpoints(n)``).

    Returns an xarray.Dataset over ``n`` (the checkpoints) and ``batch`` with the variables of
    ``METRICS`` (mse, rel_error, cosine, recall, signal, leak), each a mean over the n_c stored
    pairs. With ``per_query=True`` it also holds each metric per query, named like the metric with ``_q``
    (``PER_QUERY``: ``mse_q``, ``rel_error_q``, ``cosine_q``, ``recall_q``, ``signal_q``, ``leak_q``) over
    (n, batch, query), NaN where query >= n_c; ``recall_q`` is 1 where the query's argmax decode is right.
    ``top_k``: a whole number or a list of distinct ones (opt-in): also ``recall_at`` over (n, batch, k), the
    fraction of stored pairs whose value is among the top k of the same exact decode (T30), with ``recall_at_q``
    under ``per_query``; ``recall`` is unchanged by it. ``decode=False`` skips the argmax decode (no ``recall``/``recall_q``): at large n it is most
    of the work, c^2 dv per checkpoint against c d dv for the reads. The configuration is the
    JSON attr ``config``. The attr ``feature_dim`` is the number of state rows per key
    (``variant.feature_dim(d)`` where the variant has a feature map, else d). For a variant
    whose memory grows (one that declares ``state="growing"``, such as softmax) the Dataset also
    holds ``state_numel`` over n, the measured size after each checkpoint, and the attr
    ``state_numel`` is its last value.

    ``age_bins``: True (geometric bins, ``age_edges(n)``: age 0, [1, 2), [2, 4), ...) or a list of increasing bin
    edges from 0 adds each metric's mean over the stored pairs of each age bin (age = writes since the pair was
    stored; the last written pair has age 0), named like the metric with ``_age`` (``PER_AGE``: ``mse_age``,
    ``recall_age``, ...) over (n, batch, age), NaN where a bin holds no pair yet; the coordinate ``age`` is each
    bin's first age, ``age_end`` its end (exclusive), and ``pairs_age`` over (n, age) counts its pairs.
    ``queries=m`` reads, at each checkpoint n_c > m, a fixed seeded sample of m of the n_c stored pairs
    (uniform without replacement, from ``query_seed``; the same for every batch item) instead of all of them, and
    decodes each against all n_c stored values: every metric is then an unbiased estimate of the full mean, and the
    Dataset holds its standard error as ``<metric>_se`` (the sample's standard deviation / sqrt(m), times the
    finite-population factor sqrt((n_c - m)/(n_c - 1)); 0 at checkpoints with n_c <= m, which read every pair).
    It makes long sequences affordable: the reads cost m d dv and the decode m n_c dv per checkpoint.
    ``recent=R`` also reads the last R pairs written at each checkpoint (ages 0 .. R - 1, every one of them; all the
    stored pairs while n_c <= R), each decoded against all n_c stored values: each metric's mean over them is
    ``<metric>_recent`` over (n, batch), the pairs a memory that forgets still holds (a decaying memory's recall over
    all pairs falls to chance whatever it keeps of its last pairs).
    """
    if isinstance(variant, (str, dict)):
        variant = _variants.resolve(variant)
    cv = measure(
        variant,
        keys,
        values,
        checkpoints=checkpoints,
        per_query=per_query,
        decode=decode,
        age_bins=age_bins,
        top_k=top_k,
        queries=queries,
        query_seed=query_seed,
        recent=recent,
    )
    B, n, d = keys.shape
    dv = values.shape[2]
    device = keys.device
    vname = declares.name(variant)
    params = declares.params(variant) or {}
    config = {
        "variant": vname,
        "variant_params": params,
        "d": d,
        "dv": dv,
        "batch": B,
        "n": n,
        "checkpoints": cv.checkpoints,
        "decode": decode,
        **({"top_k": list(cv.top_k)} if cv.top_k else {}),
        **({"queries": queries, "query_seed": query_seed} if queries is not None else {}),
        **({"recent": recent} if recent is not None else {}),
        "dtype": str(keys.dtype).replace("torch.", ""),
        "device": str(device),
    }
    if cv.age_edges:
        config["age_bins"] = cv.age_edges
    meta = {**METRICS, "recall_at": RECALL_AT}
    data: dict[str, tuple[tuple[str, ...], np.ndarray, dict[str, str]]] = {
        m: (
            ("n", "batch", "k") if m == "recall_at" else ("n", "batch"),
            x,
            dict(zip(("long_name", "units", "description"), meta[m])),
        )
        for m, x in cv.metrics.items()
    }
    for m, x in cv.per_query.items():
        ln, u, desc = meta[m]
        data[f"{m}_q"] = (
            ("n", "batch", "query", "k") if m == "recall_at" else ("n", "batch", "query"),
            x,
            {
                "long_name": f"{ln} per query",
                "units": u,
                "description": desc.replace("mean over stored pairs of ", "").replace(
                    "mean over stored pairs i of ", ""
                ),
            },
        )

    def as_attrs(meta: tuple[str, str, str]) -> dict[str, str]:
        return dict(zip(("long_name", "units", "description"), meta))

    for m, x in cv.per_age.items():
        data[PER_AGE[m]] = (("n", "batch", "age"), x, as_attrs(age_meta(m)))
    if cv.age_edges:
        e = np.asarray(cv.age_edges)
        age = np.arange(n)
        # ages 0 .. c - 1 at checkpoint c, bins half-open [e_j, e_j+1)
        counts = [((age[:c, None] >= e[None, :-1]) & (age[:c, None] < e[None, 1:])).sum(0) for c in cv.checkpoints]
        data["pairs_age"] = (("n", "age"), np.asarray(counts, dtype=np.int64), as_attrs(PAIRS_AGE))
    for m, x in cv.se.items():
        data[f"{m}_se"] = (("n", "batch"), x, as_attrs(se_meta(m, queries)))
    for m, x in cv.recent.items():
        data[RECENT[m]] = (("n", "batch"), x, as_attrs(recent_meta(m, cv.recent_pairs)))
    if cv.sizes:
        data["state_numel"] = (
            ("n",),
            np.asarray(cv.sizes, dtype=np.int64),
            {
                "long_name": "state size",
                "units": "numbers per batch item",
                "description": "numbers the memory keeps after n writes (variant.numel(state))",
            },
        )
    coords = {
        "n": ("n", np.asarray(cv.checkpoints), {"long_name": "pairs written", "units": "pairs"}),
        "batch": ("batch", np.arange(B), {"long_name": "batch item"}),
    }
    if per_query:
        coords["query"] = ("query", np.arange(n), {"long_name": "stored pair index (0-based)"})
    if cv.age_edges:
        coords["age"] = ("age", np.asarray(cv.age_edges[:-1]), _AGE_ATTRS)
        coords["age_end"] = ("age", np.asarray(cv.age_edges[1:]), _AGE_END_ATTRS)
    if cv.top_k:
        coords["k"] = ("k", np.asarray(cv.top_k), {"long_name": "candidate list length", "units": "values"})
    return xr.Dataset(
        data,
        coords=coords,
        attrs={
            "variant": vname,
            "variant_params": json.dumps(params, sort_keys=True, default=str),
            "d": d,
            "dv": dv,
            "state_numel": cv.sizes[-1] if cv.sizes else guard(variant).state_numel(d, dv),
            "feature_dim": cv.feature_dim,
            "device": str(device),
            "config": json.dumps(config, sort_keys=True, default=str),
        },
    )
