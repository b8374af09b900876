"""The needle probe: a few key-value pairs written among L haystack tokens, queried after the haystack.

A training-free version of the needle-in-a-haystack tests (RULER's S-NIAH): each sequence of ``L`` tokens is a
haystack with ``needles`` pairs written consecutively at depth ``depth`` (0: the first tokens, 1: the last), and
after all L writes the memory is read with each needle's key. Haystacks (``HAYSTACKS``):

- ``random``: i.i.d. unit keys uniform on the sphere, random unit values (the T7/T21 setting);
- ``repeat``: one short pattern of ``period`` random unit keys and values written over and over (a rank-``period``
  haystack, like S-NIAH-1's repeated sentence, which is 24 tokens of the model below);
- ``text``: the keys of consecutive tokens of a real text (``lacapacity.inputs.pretrained``: all-MiniLM-L6-v2, layer
  ``layer``, all 12 heads, 384 numbers) mapped to R^d by a seeded orthonormal projection (d <= 384) and normalised,
  with random unit values, like S-NIAH-2's essays. The text's last ``HELD_OUT`` tokens are kept out of the haystacks
  and give the needles' keys (a needle is a word of the same text, never a copy of a haystack token); haystack
  windows start at seeded offsets and wrap around the rest of the text (about 5,200 tokens: longer haystacks read it
  again).

Needle keys are random unit keys (``text``: held-out text keys), their values random unit vectors. An answer is
decoded by argmax among ``candidates`` values: the needle's own and candidates - 1 others drawn independently and
uniformly on the unit sphere in R^dv (like the numbers of S-NIAH-1/2, or S-NIAH-3's UUIDs). That recall is computed
exactly in expectation over the other candidates, without drawing them: the read r picks the needle's value when
cos(r, v) exceeds the cosine of r with every other candidate, each independently below x with probability
F(x) = P(u_1 < x) for a coordinate u_1 of a uniform unit vector (an incomplete beta function), so

    recall = F(cos(r, v))^(candidates - 1),

which holds for any number of candidates (2^122 for a random UUID). Error, signal and cosine are those of
``lacapacity.probe`` for the needle's read.

>>> from lacapacity.tasks.needle import probe as needle
>>> ds = needle.needle("delta(beta=1.0)", lengths=[64, 256], depths=[0.0, 1.0], d=32, batch=2, seed=0)
>>> ds.recall.dims, ds.recall.sel(depth=1.0, candidates=1024).values.round(3).tolist()   # the last write reads back
(('length', 'depth', 'batch', 'candidates'), [[1.0, 1.0], [1.0, 1.0]])
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import xarray as xr

from lacapacity import variants as _variants
from lacapacity.base import _random, _validate
from lacapacity.errors import CapacityError
from lacapacity.inputs import pretrained
from lacapacity.variants import declares

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import ArrayLike, NDArray

    from lacapacity.base._types import Device
    from lacapacity.variants import Variant


HAYSTACKS = {
    "random": "i.i.d. random unit keys and values",
    "repeat": "a pattern of `period` random unit keys and values repeated (low rank, like S-NIAH-1)",
    "text": "keys of consecutive tokens of a real text (all-MiniLM-L6-v2), projected to d (like S-NIAH-2)",
}
HELD_OUT = 256  # last tokens of the text kept for the needles' keys
METRICS = {
    "recall": (
        "needle recall",
        "fraction",
        "probability that the needle's read decodes to its value by argmax among `candidates` unit values (exact expectation over the other candidates)",
    ),
    "mse": ("needle squared error", "value units^2", "||r - v||^2 of the needle's read r against its value v"),
    "signal": ("needle signal coefficient", "1", "<r, v> / ||v||^2, the coefficient of the needle's value in its read"),
    "cosine": ("needle cosine similarity", "1", "cos(r, v)"),
}


def _floats(name: str, xs: object, low: float, high: float) -> list[float]:  # checked here
    if isinstance(xs, (int, float, np.number)):
        xs = [xs]
    if not isinstance(xs, (Sequence, np.ndarray)) or isinstance(xs, str) or len(xs) == 0:
        raise CapacityError(f"{name} must be a non-empty list of numbers in [{low:g}, {high:g}], got {xs!r}")
    out = [_validate.in_range(name, x, low, high) for x in xs]
    if len(set(out)) != len(out):
        raise CapacityError(f"{name} lists a value more than once: {xs!r}")
    return out


def _counts(name: str, xs: object, minimum: int = 1) -> list[int]:  # checked here
    if isinstance(xs, (int, np.integer)):
        xs = [xs]
    if not isinstance(xs, (Sequence, np.ndarray)) or isinstance(xs, str) or len(xs) == 0:
        raise CapacityError(f"{name} must be a non-empty list of whole numbers >= {minimum}, got {xs!r}")
    out = [_validate.positive_int(name, x, minimum=minimum) for x in xs]
    if len(set(out)) != len(out):
        raise CapacityError(f"{name} lists a value more than once: {xs!r}")
    return out


def _candidates(xs: object) -> list[float]:  # checked here
    if isinstance(xs, (int, float, np.number)):
        xs = [xs]
    if not isinstance(xs, (Sequence, np.ndarray)) or isinstance(xs, str) or len(xs) == 0:
        raise CapacityError(f"candidates must be a non-empty list of numbers >= 2, got {xs!r}")
    out = []
    for x in xs:
        if isinstance(x, bool) or not isinstance(x, (int, float, np.number)) or not math.isfinite(x) or x < 2:
            raise CapacityError(
                f"candidates must be numbers >= 2 (the needle's value and at least one other), got {x!r}"
            )
        out.append(float(x))
    if len(set(out)) != len(out):
        raise CapacityError(f"candidates lists a value more than once: {xs!r}")
    return out


def recall_among(cosine: ArrayLike, dv: int, candidates: float | Sequence[float] | NDArray[Any]) -> NDArray[np.float64]:
    """Probability that argmax among ``candidates`` unit values picks the right one, given cos(r, v) (exact).

    The other candidates - 1 values are independent and uniform on the unit sphere in R^dv; each has cosine with
    r below x with probability F(x), F the CDF of one coordinate of a uniform unit vector, so the answer is
    F(cos)^(candidates - 1). ``cosine``: any shape; ``candidates``: a number or a 1-D list; returns
    ``[*cosine.shape, len(candidates)]`` (or ``cosine``'s shape for one number) in float64.

    >>> round(float(recall_among(0.0, 64, 2)), 6), round(float(recall_among(1.0, 64, 10**30)), 6)
    (0.5, 1.0)
    """
    from scipy import special

    dv = _validate.positive_int("dv", dv, minimum=2)
    single = np.ndim(candidates) == 0
    m = np.asarray(_candidates(candidates), dtype=np.float64)
    x = np.clip(np.asarray(cosine, dtype=np.float64), -1.0, 1.0)
    a = (dv - 1) / 2.0
    upper = 0.5 * special.betainc(a, 0.5, 1.0 - x * x)  # P(u_1 > |x|)
    tail = np.where(x >= 0, upper, 1.0 - upper)  # P(u_1 > x)
    with np.errstate(divide="ignore"):
        log_f = np.log1p(-tail)  # log F(x); -inf at x = -1
    out: NDArray[np.float64] = np.exp(log_f[..., None] * (m - 1.0))  # annotated: scipy is untyped
    return out[..., 0] if single else out


def _unit(x: torch.Tensor) -> torch.Tensor:
    norms: torch.Tensor = x.norm(dim=-1, keepdim=True)  # annotated: torch leaves Tensor.norm untyped
    return x / norms


def _projection(d: int, seed: int) -> torch.Tensor | None:
    """The seeded orthonormal map R^384 -> R^d of the text haystack, float64 ``[384, d]`` (None for d = 384)."""
    full = pretrained.HEADS * pretrained.HEAD_DIM
    if d > full:
        raise CapacityError(f"the text haystack has keys of {full} numbers; d must be <= {full}, got {d}")
    if d == full:
        return None
    q: torch.Tensor  # annotated: torch leaves linalg.qr untyped
    q, _ = torch.linalg.qr(_random.normal(full, d, generator=_random.generator(seed, "needle/text/projection")))
    return q


def _text_keys(positions: torch.Tensor, d: int, layer: int, seed: int) -> torch.Tensor:
    """Unit keys of the default text's tokens at ``positions`` (any shape S), mapped to R^d: float64 ``[*S, d]``."""
    proj = _projection(d, seed)
    raw = pretrained.token_keys(layer=layer, head="all", positions=positions).double()  # [*S, 384]
    return _unit(raw if proj is None else raw @ proj)


def haystack(
    kind: str, B: int, L: int, d: int, dv: int, *, seed: int, period: int = 24, layer: int = 2, needles: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw one batch: haystack keys ``[B, L, d]``, values ``[B, L, dv]``, needle keys ``[B, k, d]`` and values ``[B, k, dv]``.

    float32, unit rows. Streams are seeded by ``(seed, kind, L)``; ``needles`` = k.
    """
    if kind not in HAYSTACKS:
        raise CapacityError(f"unknown haystack {kind!r}; known: {', '.join(HAYSTACKS)}")
    k = _validate.positive_int("needles", needles)
    g = _random.generator(seed, f"needle/{kind}/{L}")
    NV = _unit(_random.normal(B, k, dv, generator=g))
    if kind == "random":
        HK = _unit(_random.normal(B, L, d, generator=g))
        HV = _unit(_random.normal(B, L, dv, generator=g))
        NK = _unit(_random.normal(B, k, d, generator=g))
    elif kind == "repeat":
        P = _validate.positive_int("period", period)
        pattern = _unit(_random.normal(B, P, d, generator=g)), _unit(_random.normal(B, P, dv, generator=g))
        idx = torch.arange(L) % P
        HK, HV = pattern[0][:, idx], pattern[1][:, idx]
        NK = _unit(_random.normal(B, k, d, generator=g))
    else:
        _projection(d, seed)  # d is checked before the model is loaded
        T = pretrained.token_count() - HELD_OUT
        if T < 1 or k > HELD_OUT:
            raise CapacityError(f"the text haystack keeps {HELD_OUT} tokens for needles; needles must be <= {HELD_OUT}")
        start = torch.randint(0, T, (B,), generator=g)
        HK = _text_keys((start[:, None] + torch.arange(L)) % T, d, layer, seed)  # [B, L, d], the text as a ring
        HV = _unit(_random.normal(B, L, dv, generator=g))
        pick = torch.stack([torch.randperm(HELD_OUT, generator=g)[:k] for _ in range(B)])  # distinct per sequence
        NK = _text_keys(T + pick, d, layer, seed)
    return HK.float(), HV.float(), NK.float(), NV.float()


def _position(depth: float, L: int, k: int) -> int:
    """First needle's index among the L tokens at ``depth`` in [0, 1]."""
    return int(round(depth * (L - k)))


def measure(
    variant: Variant,
    *,
    kind: str,
    lengths: Sequence[int],
    depths: Sequence[float],
    d: int,
    dv: int,
    needles: int,
    candidates: Sequence[float],
    seeds: Sequence[int],
    device: torch.device,
    period: int = 24,
    layer: int = 2,
) -> dict[str, NDArray[np.float64]]:
    """The numbers of ``needle`` as numpy arrays: name -> ``[len(lengths), len(depths), len(seeds)]`` (recall with a last
    axis over ``candidates``), means over the needles. Each length is one write pass of ``len(depths) * len(seeds)``
    sequences."""
    from lacapacity.variants._guard import guard

    variant = guard(variant)  # the memory's methods run as user code: a fault names the memory and the method
    D, S, k = len(depths), len(seeds), needles
    out = {m: np.empty((len(lengths), D, S)) for m in METRICS if m != "recall"}
    out["recall"] = np.empty((len(lengths), D, S, len(candidates)))
    for li, L in enumerate(lengths):
        if L < k:
            raise CapacityError(f"a haystack of L = {L} tokens cannot hold {k} needles")
        parts = [haystack(kind, D, L, d, dv, seed=s, period=period, layer=layer, needles=k) for s in seeds]
        HK, HV, NK, NV = (torch.cat([p[i] for p in parts]).to(device) for i in range(4))  # batch = seed-major
        for j, depth in enumerate(depths):  # row s * D + j holds depth j
            p = _position(depth, L, k)
            rows = torch.arange(S, device=device) * D + j
            HK[rows, p : p + k], HV[rows, p : p + k] = NK[rows], NV[rows]
        state = variant.init_state(S * D, d, dv, device=device)
        state = variant.write(state, HK, HV)
        r = variant.read(state, NK).double()  # [S*D, k, dv]
        v = NV.double()
        rv, rr = (r * v).sum(-1), (r * r).sum(-1)
        cos = torch.where(rr > 0, rv / rr.clamp_min(1e-300).sqrt(), torch.zeros_like(rv))
        per = {"mse": ((r - v) ** 2).sum(-1), "signal": rv, "cosine": cos}
        for m, x in per.items():
            out[m][li] = x.mean(-1).reshape(S, D).T.cpu().numpy()
        rec = recall_among(cos.cpu().numpy(), dv, candidates).mean(1)  # [S*D, C]
        out["recall"][li] = rec.reshape(S, D, -1).transpose(1, 0, 2)
    return out


def needle(
    variant: Variant | str | dict[str, object],
    *,
    lengths: int | Sequence[int] | NDArray[Any],
    depths: float | Sequence[float] | NDArray[Any] = (0.0, 0.25, 0.5, 0.75, 1.0),
    d: int = 64,
    dv: int | None = None,
    haystack: str = "random",
    needles: int = 1,
    candidates: float | Sequence[float] | NDArray[Any] = (1024,),
    batch: int = 4,
    seed: int = 0,
    device: Device = None,
    period: int = 24,
    layer: int = 2,
) -> xr.Dataset:
    """Write ``needles`` pairs at each depth among L haystack tokens, for each L of ``lengths``; read each needle after.

    ``variant``: a variant or anything ``lacapacity.variants.resolve`` takes. ``depths`` in [0, 1] (0: the needle is
    written first, 1: last); ``haystack``: one of ``HAYSTACKS``; ``candidates``: how many values the answer is
    decoded among (numbers >= 2, may be huge); ``batch`` sequences per (length, depth), seeded by ``seed`` + item.
    ``dv`` defaults to d. ``period``: the repeat haystack's pattern length; ``layer``: the text haystack's layer.

    Returns an xarray.Dataset over ``length``, ``depth``, ``batch`` (and ``candidates`` for ``recall``) with
    ``METRICS`` (recall, mse, signal, cosine; means over the needles) and the coordinate ``age`` (length, depth):
    writes after the first needle.
    """
    var = _variants.resolve(variant) if isinstance(variant, (str, dict)) else variant
    if not _variants.is_variant(var):
        raise CapacityError(f"needle takes a variant (init_state, write, read, state_numel), got {variant!r}")
    if haystack not in HAYSTACKS:
        raise CapacityError(f"unknown haystack {haystack!r}; known: {', '.join(HAYSTACKS)}")
    lengths = _counts("lengths", lengths)
    depths = _floats("depths", depths, 0.0, 1.0)
    d = _validate.positive_int("d", d, minimum=2)
    dv = d if dv is None else _validate.positive_int("dv", dv, minimum=2)
    needles = _validate.positive_int("needles", needles)
    cands = _candidates(candidates)
    batch = _validate.positive_int("batch", batch)
    seed = _random.check_seed("seed", seed)
    dev = _validate.device(device)
    seeds = [seed + i for i in range(batch)]
    nums = measure(
        var,
        kind=haystack,
        lengths=lengths,
        depths=depths,
        d=d,
        dv=dv,
        needles=needles,
        candidates=cands,
        seeds=seeds,
        device=dev,
        period=period,
        layer=layer,
    )
    attrs: Callable[[str], dict[str, str]] = lambda m: dict(zip(("long_name", "units", "description"), METRICS[m]))
    data: dict[str, tuple[tuple[str, ...], NDArray[np.float64], dict[str, str]]] = {
        m: (("length", "depth", "batch"), x, attrs(m)) for m, x in nums.items() if m != "recall"
    }
    data["recall"] = (("length", "depth", "batch", "candidates"), nums["recall"], attrs("recall"))
    age = [[L - 1 - _position(x, L, needles) for x in depths] for L in lengths]
    coords = {
        "length": ("length", lengths, {"long_name": "tokens written (haystack and needles)", "units": "tokens"}),
        "depth": ("depth", depths, {"long_name": "needle depth", "units": "1", "description": "0: first, 1: last"}),
        "batch": ("batch", np.arange(batch), {"long_name": "sequence"}),
        "candidates": ("candidates", cands, {"long_name": "values decoded among", "units": "values"}),
        "age": (("length", "depth"), np.asarray(age), {"long_name": "needle age", "units": "writes"}),
    }
    config = {
        "variant": declares.name(var),
        "variant_params": declares.params(var) or {},
        "haystack": haystack,
        "d": d,
        "dv": dv,
        "needles": needles,
        "period": period,
        "layer": layer,
        "seed": seed,
    }
    return xr.Dataset(data, coords=coords, attrs={"config": json.dumps(config, sort_keys=True, default=str)})
