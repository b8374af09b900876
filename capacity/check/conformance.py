"""``check_variant``: a conformance suite for memory variants, in the spirit of scikit-learn's check_estimator.

Run it on your own variant before you probe it: it checks the contract the probe relies on and
two closed forms at d = 16, then measures the variant's capacity at d = 64 next to the bounds.
A variant that declares the key dimensions it takes (``Declares.dims``) is checked at the declared d
nearest 16 and measured at the declared d nearest 64. What a variant declares (``lacapacity.variants.Declares``, the
table in ``lacapacity.variants.declares``) decides which closed forms must hold; a variant that declares nothing has
T2 and T12 tried and reported, and T8 applied to a fixed-size state.

>>> from lacapacity import check_variant, variants
>>> report = check_variant(variants.get("delta"))
>>> report.passed, [r.check for r in report.results if r.status == "FAIL"]
(True, [])

The checks (each ``pass``, ``FAIL`` with the reason, or ``n/a`` with the reason):

- protocol: ``name`` and callable ``init_state``, ``write``, ``read``, ``state_numel``; a ``declares`` that is a
  ``Declares``; ``numel(state)`` exactly when it declares ``state="growing"``;
- shape and dtype: reads are float32 ``[B, m, dv]``; the state's tensors (found through dataclasses, tuples,
  lists and dicts) are floating point ``[B, ...]`` in any precision (float32, bfloat16, float16, float8: a state
  stored in low precision is accepted) and hold ``state_numel(d, dv)`` numbers per batch item (or
  ``numel(state)`` for a growing memory); the detail reports their dtypes and bytes;
- input dtypes: bfloat16 and float16 keys, values and queries are accepted and read as float32,
  close to the float32 read of the same (rounded) numbers;
- determinism: two runs on the same inputs give identical reads;
- batch independence: changing batch item 1's pairs leaves items 0 and 2's reads unchanged;
- chunked writes: writing the pairs in one call or in several gives the same reads (the probe
  writes in chunks, between checkpoints);
- device placement: the state and the reads stay on the inputs' device (every available device);
- T2 two pairs: k1 S = |k1|^2 v1 + (k1.k2) v2 for an additive variant; must hold when the
  variant declares ``additive=True``, is n/a when it declares False, and is tried otherwise;
- T12 last key: with unit keys and beta = 1 the last written key reads back exactly; must hold
  when the variant declares ``delta_rule=True`` and its beta is 1, tried when undeclared.
  beta is read from its parameters (``variants.params``: ``params``, else the constructor's arguments kept as
  attributes): ``beta``, or from_fla's ``per_token["beta"]``;
  a variant that records none is taken to have beta = 1;
- probe: ``lacapacity.probe.measure`` runs and gives finite errors; the capacity is measured there:
  the largest measured n with mse <= eps whose next n fails, found exactly (every n between the
  last grid point that meets eps and the first that fails is measured; the keys are a prefix
  family, so a refinement rewrites and rereads a prefix). No interpolation: the reported n is a
  measured point, so it never exceeds the capacity of a bound that every measured point respects.

Why one module of over 500 lines: ``check_variant`` is one report; its checks share the memory under test, its
draws and the bounds it is measured against, and each is a few lines that read in order.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lacapacity import theory, variants
from lacapacity.base import _random, _validate
from lacapacity.base._types import Seed
from lacapacity.errors import CapacityError, UserCodeError
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.variants import declares
from lacapacity.variants._guard import Guarded, guard

__all__ = ["check_variant", "Report", "Result"]

PASS, FAIL, NA = "pass", "FAIL", "n/a"
_REQUIRED = ("init_state", "write", "read", "state_numel")


@dataclass
class Result:
    """One check: ``status`` is ``pass``, ``FAIL`` or ``n/a``; ``detail`` says what was measured or why."""

    check: str
    status: str
    detail: str


@dataclass
class Report:
    """What ``check_variant`` found. ``passed`` is True when no check failed; ``str(report)`` is a table.

    ``capacity`` holds the measured capacity at ``d``: an int, the largest measured n with
    mse <= eps whose next n fails (gaussian keys, orthonormal values), or NaN when not determined
    on the grid (see ``capacity_note``); ``bounds`` holds the closed forms next to it.
    ``check_d`` is the key dimension of the contract checks.
    """

    variant: str
    params: dict[str, object]
    results: list[Result] = field(default_factory=list)
    d: int = 64
    eps: float = 0.5
    n_max: int = 256
    check_d: int = 16
    capacity: int | float = math.nan
    capacity_note: str = ""
    bounds: dict[str, float] = field(default_factory=dict)
    bound_notes: dict[str, str] = field(default_factory=dict)  # why a bound is n/a, by its row

    @property
    def passed(self) -> bool:
        """No check failed (a check that does not apply is not a failure)."""
        return all(r.status != FAIL for r in self.results)

    @property
    def failures(self) -> list[Result]:
        """The results that failed, in the order they ran."""
        return [r for r in self.results if r.status == FAIL]

    def __str__(self) -> str:
        width = max(len(r.check) for r in self.results)
        shown = json.dumps(self.params, sort_keys=True, default=str)
        lines = [f"check_variant: {self.variant} {shown} (checks at d = {self.check_d})"]
        lines += [f"  {r.status:4}  {r.check:{width}}  {r.detail}" for r in self.results]
        lines.append(
            f"capacity at d = {self.d}: largest n with mse <= {self.eps:g} (gaussian keys, orthonormal values, n <= {self.n_max})"
        )
        measured = f"{self.capacity} ({self.capacity_note})" if math.isfinite(self.capacity) else self.capacity_note
        rows = {"measured": measured} | {
            k: f"{v:.1f}" if math.isfinite(v) else self.bound_notes.get(k, "n/a") for k, v in self.bounds.items()
        }
        w = max(len(k) for k in rows)
        lines += [f"  {k:{w}}  {v}" for k, v in rows.items()]
        counts = {s: sum(r.status == s for r in self.results) for s in (PASS, FAIL, NA)}
        lines.append(f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[NA]} not applicable")
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the table
        p.text(str(self))


# ---------------------------------------------------------------------- helpers


# The helpers below take the memory under test as Any: check_variant exists to find out what it really does.


def _run(
    variant: Any,
    K: torch.Tensor,
    V: torch.Tensor,
    Q: torch.Tensor,
    *,
    chunks: list[int] | None = None,
    device: torch.device | str | None = None,
) -> tuple[Any, Any]:
    """Fresh state, write (K, V) in the given chunk sizes, read Q. Returns (state, reads)."""
    B, n, d = K.shape
    state = variant.init_state(B, d, V.shape[2], device=device if device is not None else K.device)
    sizes = chunks or [n]
    start = 0
    for size in sizes:
        state = variant.write(state, K[:, start : start + size], V[:, start : start + size])
        start += size
    return state, variant.read(state, Q)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max(max |b|, 1e-30), in float64 on the CPU."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def _state_tensors(state: object, skip: tuple[str, ...] | None = None) -> list[torch.Tensor]:
    """The tensors a state is made of: itself, or those of its dataclass fields, tuples, lists and dicts, nested;
    with ``skip`` (the memory's ``Declares.bookkeeping``), not those of the dataclass fields it names."""
    from lacapacity.variants.precision import StoredState, state_tensors

    if skip is None:
        return state_tensors(state)
    if isinstance(state, StoredState):
        state = state.inner
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        fields = [f for f in dataclasses.fields(state) if f.name not in skip]
        return [t for f in fields for t in _state_tensors(getattr(state, f.name), skip)]
    if isinstance(state, (tuple, list)):
        return [t for m in state for t in _state_tensors(m, skip)]
    if isinstance(state, dict):
        return [t for m in state.values() for t in _state_tensors(m, skip)]
    return state_tensors(state)


class _Inputs:
    """Small seeded inputs: keys [B, n, d] (unit rows), values [B, n, dv], queries [B, m, d]."""

    def __init__(self, seed: Seed, d: int = 16, dv: int = 8, B: int = 3, n: int = 12, m: int = 5) -> None:
        g = _random.generator(seed, "conformance")
        self.d, self.dv, self.B, self.n = d, dv, B, n
        k = torch.randn(B, n, d, generator=g)
        self.K = k / k.norm(dim=-1, keepdim=True)
        self.V = torch.randn(B, n, dv, generator=g)
        q = torch.randn(B, m, d, generator=g)
        self.Q = torch.cat([self.K[:, :3], q / q.norm(dim=-1, keepdim=True)], dim=1)  # stored keys and fresh ones
        self.K2 = torch.randn(B, n, d, generator=g)
        self.K2 = self.K2 / self.K2.norm(dim=-1, keepdim=True)
        self.V2 = torch.randn(B, n, dv, generator=g)


# ---------------------------------------------------------------------- the checks


def _shape_dtype(v: Any, x: _Inputs) -> Result:
    state, r = _run(v, x.K, x.V, x.Q)
    want = (x.B, x.Q.shape[1], x.dv)
    if not isinstance(r, torch.Tensor):
        return Result(
            "shape and dtype", FAIL, f"read returned {type(r).__name__}, expected a float32 tensor {list(want)}"
        )
    if tuple(r.shape) != want or r.dtype != torch.float32:
        return Result(
            "shape and dtype",
            FAIL,
            f"read returned {r.dtype} {list(r.shape)}, expected float32 [B, m, dv] = {list(want)}",
        )
    tensors = _state_tensors(state, declares.declared(v).bookkeeping)  # its bookkeeping fields are not counted
    grown = declares.numel(v, state)
    if grown is not None:
        expect, source = grown, "numel(state)"
    else:
        expect, source = v.state_numel(x.d, x.dv), f"state_numel(d={x.d}, dv={x.dv})"
    if isinstance(expect, bool) or not isinstance(expect, (int, np.integer)) or expect <= 0:
        return Result("shape and dtype", FAIL, f"{source} returned {expect!r}, expected a positive int")
    if not tensors:
        return Result(
            "shape and dtype",
            PASS,
            f"reads float32 [B, m, dv]; the state ({type(state).__name__}) holds no tensors to size",
        )
    bad = [t for t in tensors if not t.is_floating_point() or t.ndim == 0 or t.shape[0] != x.B]
    if bad:
        return Result(
            "shape and dtype",
            FAIL,
            f"the state holds a {bad[0].dtype} tensor {list(bad[0].shape)}; state tensors must be floating point (float32, bfloat16, float16, float8) with batch {x.B} first",
        )
    held = sum(t[0].numel() for t in tensors)
    if held != expect:
        return Result(
            "shape and dtype", FAIL, f"the state holds {held} numbers per batch item but {source} says {expect}"
        )
    kinds = sorted({str(t.dtype).replace("torch.", "") for t in tensors})
    nbytes = sum(t[0].numel() * t.element_size() for t in tensors)
    return Result(
        "shape and dtype",
        PASS,
        f"reads float32 [B, m, dv]; state {type(state).__name__} holds {source} = {held} numbers ({', '.join(kinds)}; {nbytes} bytes) per item",
    )


def _input_dtypes(v: Any, x: _Inputs) -> Result:
    worst = []
    for dt in (torch.bfloat16, torch.float16):
        K, V, Q = (t.to(dt) for t in (x.K, x.V, x.Q))
        _, r = _run(v, K, V, Q)
        _, ref = _run(v, K.float(), V.float(), Q.float())  # the same rounded numbers in float32
        if not isinstance(r, torch.Tensor) or r.dtype != torch.float32:
            got = r.dtype if isinstance(r, torch.Tensor) else type(r).__name__
            return Result(
                "input dtypes", FAIL, f"{dt} inputs read as {got}; reads must be float32 whatever the input dtype"
            )
        err = float((r.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30))
        worst.append(err)
        if not err <= 1e-2:
            return Result(
                "input dtypes",
                FAIL,
                f"{dt} inputs: read differs from the float32 read of the same numbers by {err:.2g} (relative, > 1e-2)",
            )
    return Result(
        "input dtypes", PASS, f"bfloat16 and float16 accepted; relative difference to float32 <= {max(worst):.1g}"
    )


def _determinism(v: Any, x: _Inputs) -> Result:
    _, r1 = _run(v, x.K, x.V, x.Q)
    _, r2 = _run(v, x.K, x.V, x.Q)
    if not torch.equal(r1, r2):
        return Result(
            "determinism", FAIL, f"two runs on the same inputs differ (max abs. {float((r1 - r2).abs().max()):.3g})"
        )
    return Result("determinism", PASS, "two runs give identical reads")


def _batch_independence(v: Any, x: _Inputs) -> Result:
    _, r = _run(v, x.K, x.V, x.Q)
    K, V = x.K.clone(), x.V.clone()
    K[1], V[1] = x.K2[1], x.V2[1]
    _, r2 = _run(v, K, V, x.Q)
    err = max(_rel(r2[0], r[0]), _rel(r2[2], r[2]))
    if not err <= 1e-5:
        return Result(
            "batch independence",
            FAIL,
            f"changing batch item 1's pairs changed items 0 and 2's reads (max rel. {err:.3g})",
        )
    if _rel(r2[1], r[1]) == 0.0:
        return Result("batch independence", FAIL, "changing batch item 1's pairs did not change its own reads")
    return Result("batch independence", PASS, "changing one item's pairs leaves the others' reads unchanged")


def _chunking(v: Any, x: _Inputs) -> Result:
    _, whole = _run(v, x.K, x.V, x.Q)
    _, parts = _run(v, x.K, x.V, x.Q, chunks=[1, 4, x.n - 5])
    err = _rel(parts, whole)
    if not err <= 1e-4:
        return Result(
            "chunked writes",
            FAIL,
            f"writing in chunks 1 + 4 + {x.n - 5} and in one call give different reads (max rel. {err:.3g})",
        )
    return Result("chunked writes", PASS, f"chunks 1 + 4 + {x.n - 5} read as one write (max rel. {err:.1g})")


def _device(v: Any, x: _Inputs) -> Result:
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        K, V, Q = (t.to(dev) for t in (x.K, x.V, x.Q))
        state, r = _run(v, K, V, Q, device=dev)
        where = {"reads": r.device} | {f"state tensor {i}": t.device for i, t in enumerate(_state_tensors(state))}
        wrong = {k: str(d) for k, d in where.items() if d.type != torch.device(dev).type}
        if wrong:
            return Result(
                "device placement", FAIL, f"inputs on {dev} but " + ", ".join(f"{k} on {d}" for k, d in wrong.items())
            )
    extra = "" if len(devices) > 1 else " (no CUDA device here to check)"
    return Result("device placement", PASS, f"state and reads stay on {', '.join(devices)}{extra}")


def _t2(v: Any, x: _Inputs) -> Result:
    declared = declares.declared(v).additive
    if declared is False:
        return Result("T2 two pairs", NA, "declared additive = False")
    g = _random.generator(0, "conformance/t2")
    k1 = torch.randn(x.B, x.d, generator=g, dtype=torch.float64)
    k1 = k1 / k1.norm(dim=-1, keepdim=True)
    u = torch.randn(x.B, x.d, generator=g, dtype=torch.float64)
    u = u - (u * k1).sum(-1, keepdim=True) * k1
    u = u / u.norm(dim=-1, keepdim=True)
    k2 = 0.6 * k1 + 0.8 * u  # unit, k1 . k2 = 0.6
    V = torch.randn(x.B, 2, x.dv, generator=g, dtype=torch.float64)
    K = torch.stack([k1, k2], dim=1)  # [B, 2, d]
    _, r = _run(v, K.float(), V.float(), K[:, :1].float())
    want = theory.two_pair_readout(k1, k2, V[:, 0], V[:, 1])  # [B, dv]
    err = _rel(r[:, 0], want)
    if err <= 1e-4:
        return Result(
            "T2 two pairs",
            PASS,
            f"k1 S = |k1|^2 v1 + (k1.k2) v2 (max rel. {err:.1g})" + ("" if declared else "; not declared, holds"),
        )
    if declared:
        return Result(
            "T2 two pairs",
            FAIL,
            f"declared additive, but k1 S differs from |k1|^2 v1 + (k1.k2) v2 by {err:.3g} (max rel.)",
        )
    return Result(
        "T2 two pairs", NA, f"not additive (k1 S misses T2 by {err:.2g}); declare Declares(additive=True) to require it"
    )


def _beta(v: Any) -> tuple[object, str | None]:
    """Where the variant records beta: (value, where), or (None, None) when it records none."""
    params = variants.params(v.inner if isinstance(v, Guarded) else v)
    for key, where in (("beta", 'params["beta"]'), ("per_token.beta", 'per_token["beta"]')):
        if key in params:
            return params[key], where
    return None, None


def _is_one(beta: object) -> bool | None:
    """True if beta is 1 (a number, every entry of a tensor or sequence), False if not, None if it cannot tell."""
    if isinstance(beta, bool):
        return None
    if isinstance(beta, numbers.Real):
        return float(beta) == 1.0
    if isinstance(beta, torch.Tensor):
        return bool((beta == 1).all())
    if isinstance(beta, (list, tuple, np.ndarray)) and len(beta) > 0:
        if all(isinstance(b, numbers.Real) and not isinstance(b, bool) for b in beta):
            return all(float(b) == 1.0 for b in beta)
        if isinstance(beta[0], str):  # a draw such as ("uniform", 0.5, 1.0): 1 only if every bound is
            return all(float(b) == 1.0 for b in beta[1:] if isinstance(b, numbers.Real))
    return None


def _t12(v: Any, x: _Inputs) -> Result:
    declared = declares.declared(v).delta_rule
    if declared is False:
        return Result("T12 last key", NA, "declared delta_rule = False")
    beta, where = _beta(v)
    one = True if where is None else _is_one(beta)
    if declared and one is False:
        shown = json.dumps(beta.tolist() if isinstance(beta, torch.Tensor) else beta, default=str)
        return Result("T12 last key", NA, f"beta = {shown[:60]} ({where}); T12 needs beta = 1")
    n = x.d + 8  # more pairs than dimensions: only the correction makes the last read exact
    g = _random.generator(0, "conformance/t12")
    K = torch.randn(x.B, n, x.d, generator=g)
    K = K / K.norm(dim=-1, keepdim=True)
    V = torch.randn(x.B, n, x.dv, generator=g)
    _, r = _run(v, K, V, K[:, -1:])
    err = float((r[:, 0] - V[:, -1]).abs().max())
    if err <= 1e-4:
        return Result(
            "T12 last key",
            PASS,
            f"beta = 1: the last of {n} unit keys reads back its value (max abs. {err:.1g})"
            + ("" if declared else "; not declared, holds"),
        )
    if declared and one is None:
        why = f"declared a delta rule, but beta ({where}) is not a number to compare with 1; the last key misses by "
        why += f"{err:.2g}"
        return Result("T12 last key", NA, why)
    if declared:
        return Result(
            "T12 last key",
            FAIL,
            f"declared a delta rule with beta = 1, but the last key reads back with error {err:.3g} (max abs.)",
        )
    return Result(
        "T12 last key",
        NA,
        f"not a delta rule with beta = 1 (last key misses by {err:.2g}); declare Declares(delta_rule=True) to require it",
    )


def _crossing(mse: dict[int, float], eps: float) -> tuple[int | None, int | None]:
    """(last, first): the largest measured n meeting eps before the first measured n that fails, and that n."""
    ns = sorted(mse)
    first = next((n for n in ns if not mse[n] <= eps), None)
    if first is None:
        return ns[-1], None
    earlier = [n for n in ns if n < first]
    return (earlier[-1] if earlier else None), first


def _capacity(v: Any, report: Report, seed: Seed) -> Result:
    d, n = report.d, report.n_max
    K = keys.make("gaussian", n, d, batch=4, seed=seed)  # [4, n, d]; every prefix is the same family
    V = values.make("orthonormal", n, n, batch=4, seed=seed)  # [4, n, n]
    cv = probe.measure(v, K, V, checkpoints=probe.default_checkpoints(n, count=32), decode=False)
    curve = cv.metrics["mse"].mean(1)  # [C], mean over the 4 draws
    if not bool(np.isfinite(curve).all()):
        bad = [c for c, y in zip(cv.checkpoints, curve) if not np.isfinite(y)][:5]
        return Result("probe", FAIL, f"probe.measure gave non-finite mse at n = {bad}")
    mse = dict(zip(cv.checkpoints, curve.tolist()))
    last, first = _crossing(mse, report.eps)
    for _ in range(3):  # refine: measure every n between the last grid point that meets eps and the first that fails
        if last is None or first is None or first - last <= 1:
            break
        fine = probe.measure(v, K[:, :first], V[:, :first], checkpoints=list(range(last, first + 1)), decode=False)
        mse.update(zip(fine.checkpoints, fine.metrics["mse"].mean(1).tolist()))
        last, first = _crossing(mse, report.eps)
    if first is None:
        report.capacity_note = f"> {n} (mse <= eps on the whole grid)"
    elif last is None:
        report.capacity_note = f"< {first} (mse > eps already at n = {first})"
    else:
        report.capacity = int(last)
        report.capacity_note = f"mse {mse[last]:.4g} at n = {last}, {mse[first]:.4g} at n = {first}"
    D = int(cv.feature_dim)
    grows = bool(cv.sizes)
    t8 = f"T8 any {D} x dv state, linear read: D / (1 - eps)"
    linear = declares.declared(v).linear_read
    report.bounds = {
        "T7 random keys, additive rule: 1 + eps d": float(theory.capacity_random_keys(report.eps, d)),
        "T5 tight frame, additive rule: d (1 + eps)": float(theory.capacity_tight_frame(report.eps, d)),
        t8: D / (1.0 - report.eps) if linear or (linear is None and not grows) else math.nan,
    }
    # T8 binds a read q W through one D x dv matrix W, whatever the state keeps: the declared linear_read decides
    if linear is False:
        report.bound_notes[t8] = "n/a: declared linear_read = False (the read is not q W for one D x dv matrix)"
    elif linear is None and grows:
        report.bound_notes[t8] = "n/a: the state grows and linear_read is not declared; declare it to apply T8"
    detail = f"probe.measure runs at d = {d}, n <= {n}: finite errors; mse at n = {n}: {curve[-1]:.3g}"
    return Result("probe", PASS, detail)


def _dims(variant: Any) -> tuple[int, ...] | str | None:
    """The variant's declared key dimensions: None (any d), a sorted tuple, or a str saying what is wrong with its
    declaration."""
    try:
        return declares.declared(variant).dims
    except CapacityError as exc:
        return str(exc)


def _nearest(dims: tuple[int, ...] | None, target: int) -> int:
    return target if dims is None else min(dims, key=lambda x: (abs(x - target), x))


_CHECKS: list[tuple[str, Callable[[Any, _Inputs], Result]]] = [
    ("shape and dtype", _shape_dtype),
    ("input dtypes", _input_dtypes),
    ("determinism", _determinism),
    ("batch independence", _batch_independence),
    ("chunked writes", _chunking),
    ("device placement", _device),
    ("T2 two pairs", _t2),
    ("T12 last key", _t12),
]


def check_variant(variant: object, *, d: int | None = None, eps: float = 0.5, seed: int = 0) -> Report:
    """Run the conformance checks on ``variant`` (an object or a registered name); return a Report.

    ``d`` and ``eps`` set the capacity measurement: the largest n with mse <= eps for ``d``-
    dimensional gaussian keys and orthonormal values, n up to 4 d, next to T7, T5 and T8.
    ``d`` defaults to 64, or to the declared d nearest 64 for a variant with ``dims``; the
    contract checks run at d = 16, or at the declared d nearest 16. A ``d`` outside the declared
    ``dims`` raises a CapacityError; nothing else raises for a failing variant: each failure is a
    row of the report, with its reason.
    """
    if isinstance(variant, (str, dict)):
        variant = variants.resolve(variant)  # a name, label or import path
    eps = _validate.in_range("eps", eps, 0.0, 1.0, low_open=True, high_open=True)
    dims = _dims(variant)
    if d is not None:
        d = _validate.positive_int("d", d, minimum=2)
        if isinstance(dims, tuple) and d not in dims:
            who = declares.name(variant)
            raise CapacityError(
                f"d = {d} is not a key dimension {who!r} takes: its dims are {list(dims)}; "
                "pass one of them, or leave d unset"
            )
    usable = dims if isinstance(dims, tuple) else None
    d = d if d is not None else _nearest(usable, 64)
    report = Report(
        variant=declares.name(variant),
        params=declares.params(variant) or {},
        d=d,
        eps=eps,
        n_max=4 * d,
        check_d=_nearest(usable, 16),
    )
    missing = [m for m in _REQUIRED if not callable(getattr(variant, m, None))]
    if not declares.has_name(variant):
        missing.insert(0, "name (a str)")
    unsaid = [] if isinstance(dims, str) else declares.unaccounted(variant)
    if missing or isinstance(dims, str) or unsaid:
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + ([dims] if isinstance(dims, str) else [])
        problems += unsaid
        report.results.append(Result("protocol", FAIL, "; ".join(problems)))
        report.results += [Result(name, NA, "protocol incomplete") for name, _ in _CHECKS] + [
            Result("probe", NA, "protocol incomplete")
        ]
        return report
    declared = f"; declares dims {list(dims)}" if dims is not None else ""
    report.results.append(Result("protocol", PASS, "name, init_state, write, read, state_numel" + declared))
    x, v = _Inputs(seed, d=report.check_d), guard(variant)  # its errors name the method (lacapacity.errors.user_code)

    def why(exc: Exception) -> str:
        return str(exc) if isinstance(exc, UserCodeError) else f"raised {type(exc).__name__}: {exc}"

    for name, check in _CHECKS:
        try:
            report.results.append(check(v, x))
        except Exception as exc:  # a failing variant is a report row, not a crash
            report.results.append(Result(name, FAIL, why(exc)))
    try:
        report.results.append(_capacity(v, report, seed))
    except Exception as exc:
        report.results.append(Result("probe", FAIL, why(exc)))
    return report
