"""Scaled state formats: int8, int4 and fp8 with symmetric scales, and error feedback (docs/precision.md, T31-T33).

``precision.stored(memory, "int8/row+ef", rounding)`` stores any memory's state as servers quantise it: every
floating tensor of the state is kept as numbers q of a small format times a scale, one scale for each group of
entries, the group's largest magnitude over Q (symmetric, no zero point), so the largest entry of a group is kept
exactly. For ``int8`` / ``int4`` q is a whole number in [-Q, Q] (Q = 127, 7); for ``fp8`` q is a float8_e4m3fn
number and Q the target the largest magnitude maps to (448, the format's largest, or ``@<T>``: SGLang's FP8 state
pool takes amax / 240). A state dtype is spelled ``int<bits>[/<scope>][+<feedback>]`` or
``fp8[/<scope>][@<T>][+<feedback>]``:

- element: ``int8``, ``int4``, or ``fp8`` (float8_e4m3fn; ``@<T>``: scale amax / T, T a float8_e4m3fn number up to
  448, 448 by default);
- scope (which entries share a scale; tensors are ``[B, ...]``, batch first, so a scale never spans batch items):
  none or ``/tensor``: one scale per batch item and tensor; ``/row``: one per row (every index but the last, the
  dv entries of a row of a ``[B, d, dv]`` state); ``/col``: one per column (every index but the second last: the
  d entries of a column; a tensor ``[B, m]`` has one column per item, so per tensor); ``/g<N>``: groups of N
  consecutive entries along the last dimension (N must divide it); ``/c<N>``: N consecutive columns together (a
  d x N tile of a ``[B, d, dv]`` state; N must divide the last dimension). Engines store a head's state as
  ``[dv, d]`` (value rows, key columns): vLLM's scale per (head, dim) row is ``/col`` here, SGLang's per
  (head, 32-row V-tile x K) is ``/c32``;
- feedback: none; ``+ef``: error feedback, the quantisation error x - fl(x) kept in a float32 residual of the
  tensor's shape and added to the tensor before its next rounding (after the next write or chunk); ``+int4`` (or
  ``+int8``): the same residual stored itself in that integer format, with the same scope and scales of its own
  (the int8 + int4-residual scheme). Reads see the quantised state only; the residual is fed back, never read.

The canonical label drops ``/tensor`` (``"int8/tensor"`` is ``"int8"``). Rounding follows ``rounding`` as for the
float formats (``step``, ``chunk=C``, ``final``; ``+stochastic``: q = floor(x / scale + U), U uniform on [0, 1)
from the same seeded streams; fp8: x / scale goes up to its next float8_e4m3fn neighbour with probability its
distance from the lower one over their spacing). Under ``final`` the state is rounded once for each read and nothing is fed back.
The scales are float32 numbers (4 bytes each); ``nbytes`` counts the integers (bits / 8 a number, rounded up
per tensor), the scales and the residual (4 bytes a number for ``+ef``, its integers and scales for ``+int4``).
A residual follows its tensor by position in the state; a tensor that grows keeps its residual in the old
positions (zero in the new ones), one whose shape changes otherwise restarts it at zero.

>>> import torch
>>> from lacapacity.variants import quantise
>>> spec = quantise.parse("int8/row+ef"); spec.label, spec.qmax, spec.scales((32, 32))
('int8/row+ef', 127, 32)
>>> x = torch.tensor([[[1.0, -0.6, 0.25, 0.0]]])          # one item, one row of 4
>>> quantise.quantise(x, quantise.parse("int4/row"))[0, 0]  # scale 1/7: -0.6 = -4.2/7 -> -4/7, 0.25 -> 2/7
tensor([ 1.0000, -0.5714,  0.2857,  0.0000])
>>> quantise.nbytes(quantise.parse("int8/row+int4"), [(32, 32)])  # 1024 + 32*4 + 512 + 32*4
1792
>>> spec = quantise.parse("fp8/c2@240"); spec.label, spec.qmax, spec.scales((4, 8))  # d x 2 tiles of a 4 x 8 state
('fp8/c2@240', 240.0, 4)
>>> quantise.quantise(x, "fp8/row")[0, 0]  # scale 1/448: -0.6 * 448 = -268.8 -> -256 (spacing 32 above 256)
tensor([ 1.0000, -0.5714,  0.2500,  0.0000])
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import torch

from lacapacity.errors import CapacityError
from lacapacity.variants._rounding import _Rounder, _seeds, ulp

SPELLING = (
    "int8, int4 or fp8, optionally /row, /col, /tensor, /g<N> (a group of N entries along the last dimension) or "
    "/c<N> (N consecutive columns), for fp8 optionally @<T> (scale amax / T, T a float8_e4m3fn number up to 448), "
    "optionally +ef (a float32 residual fed back) or +int4 / +int8 (the residual stored in that format)"
)
_PATTERN = re.compile(
    r"^(?:int(?P<bits>\d+)|(?P<fp8>fp8))(?:/(?P<scope>[a-z0-9]+))?(?:@(?P<target>[0-9.e+]+))?(?:\+(?P<fb>[a-z0-9]+))?$"
)
_SCALE_BYTES = 4  # scales are float32 numbers
FP8 = torch.float8_e4m3fn  # the fp8 element format
FP8_MAX = float(torch.finfo(FP8).max)  # 448


@dataclass(frozen=True)
class Spec:
    """A scaled state format: ``bits`` 8 | 4 (integers; 8 for fp8), ``scope`` tensor | row | col | group (``group``
    N entries of a row) | cols (``group`` N columns), ``feedback`` None | "ef" | "int8" | "int4", ``fp8``
    (float8_e4m3fn numbers, the scale amax / ``target``: 448 when None)."""

    bits: int
    scope: str = "tensor"
    group: int | None = None
    feedback: str | None = None
    fp8: bool = False
    target: float | None = None

    @property
    def qmax(self) -> float:
        """Q, the number a group's largest magnitude is stored as: 2^(bits - 1) - 1 for integers (the whole
        numbers kept are -Q .. Q: 127 int8, 7 int4); for fp8 the target (448 unless ``@T``)."""
        if self.fp8:
            return FP8_MAX if self.target is None else self.target
        return (1 << (self.bits - 1)) - 1

    @property
    def label(self) -> str:
        scope = {"tensor": "", "row": "/row", "col": "/col", "cols": f"/c{self.group}"}.get(
            self.scope, f"/g{self.group}"
        )
        if self.fp8:
            at = "" if self.target is None else f"@{self.target:g}"
            return f"fp8{scope}{at}" + (f"+{self.feedback}" if self.feedback else "")
        return f"int{self.bits}{scope}" + (f"+{self.feedback}" if self.feedback else "")

    @property
    def residual(self) -> Spec | None:
        """The format the residual is stored in (None: float32 for ``+ef``, or no feedback)."""
        if self.feedback in ("int8", "int4"):
            return Spec(int(self.feedback[3:]), self.scope, self.group, None)
        return None

    def scales(self, shape: Sequence[int]) -> int:
        """How many scales a tensor of ``shape`` (one batch item: the shape without its batch dimension) keeps."""
        shape = tuple(int(s) for s in shape)
        numel = math.prod(shape)
        if numel == 0:
            return 0
        if self.scope == "tensor" or not shape:
            return 1
        if self.scope == "row":
            return numel // shape[-1]
        if self.scope == "col":
            return numel // shape[-2] if len(shape) >= 2 else 1
        group = cast(int, self.group)  # scope group or cols: its size is set
        _group_fits(group, shape, self.label)
        if self.scope == "cols":
            return numel // (shape[-2] * group) if len(shape) >= 2 else 1
        return numel // group

    def __str__(self) -> str:
        return self.label


def is_quantised(name: object) -> bool:
    """Whether ``name`` is spelled as a scaled format (``int...`` or ``fp8...``), valid or not."""
    return isinstance(name, str) and name.strip().startswith(("int", "fp8"))


def parse(name: object) -> Spec:
    """A Spec from its spelling (``"int8"``, ``"int8/row"``, ``"int4/col+ef"``, ``"int8/g32+int4"``, ``"fp8/col"``,
    ``"fp8/c32@240"``, a Spec)."""
    if isinstance(name, Spec):
        return name
    bad = CapacityError(f"a scaled state_dtype must be {SPELLING}; got {name!r}")
    if not isinstance(name, str):
        raise bad
    m = _PATTERN.match(name.strip().replace(" ", ""))
    fp8 = m is not None and m["fp8"] is not None
    if m is None or (not fp8 and m["bits"] not in ("8", "4")) or (m["target"] is not None and not fp8):
        raise bad
    scope, group = m["scope"] or "tensor", None
    if scope[:1] in ("g", "c") and scope != "col":
        if not scope[1:].isdigit() or int(scope[1:]) < 1:
            raise bad
        scope, group = {"g": "group", "c": "cols"}[scope[0]], int(scope[1:])
    elif scope not in ("tensor", "row", "col"):
        raise bad
    fb = m["fb"]
    if fb is not None and fb not in ("ef", "int8", "int4"):
        raise bad
    target = None
    if m["target"] is not None:
        try:
            target = float(m["target"])
        except ValueError:
            raise bad from None
        exact = float(torch.tensor(target).to(FP8).float()) == target
        if not (0 < target <= FP8_MAX and exact):
            raise CapacityError(
                f"fp8 scale target @{m['target']}: T must be a float8_e4m3fn number in (0, 448] (240, 448, ...), so "
                "that a group's largest entry is kept exactly"
            )
        target = None if target == FP8_MAX else target
    return Spec(8 if fp8 else int(m["bits"]), scope, group, fb, fp8, target)


def _group_fits(group: int, shape: Sequence[int], label: str) -> None:
    last = int(shape[-1]) if len(shape) else 1
    if last % group:
        raise CapacityError(
            f"{label} state: the group size {group} must divide the last dimension of every state tensor, "
            f"which is {last} here"
        )


def _grouped(t: torch.Tensor, spec: Spec) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    """``t`` [B, ...] as groups ``[G, m]`` (each row one scale's entries) and the function that puts a ``[G, m]``
    tensor back in ``t``'s shape."""
    shape = t.shape
    if t.ndim <= 1:  # [B] or a scalar: every entry of an item is one group
        g = t.reshape(max(1, shape[0] if t.ndim else 1), -1)
        return g, lambda x: x.reshape(shape)
    if spec.scope == "tensor":
        return t.reshape(shape[0], -1), lambda x: x.reshape(shape)
    if spec.scope == "row":
        return t.reshape(-1, shape[-1]), lambda x: x.reshape(shape)
    if spec.scope == "col":
        if t.ndim == 2:  # [B, m]: one column per item
            return t.reshape(shape[0], -1), lambda x: x.reshape(shape)
        moved = t.transpose(-1, -2)
        mshape = moved.shape
        return moved.reshape(-1, mshape[-1]), lambda x: x.reshape(mshape).transpose(-1, -2)
    group = cast(int, spec.group)  # scope group or cols: its size is set
    _group_fits(group, shape[1:], spec.label)
    if spec.scope == "cols":  # [..., r, c] -> [..., c / N, r, N]: each d x N tile one group
        tiles = t.reshape(*shape[:-1], shape[-1] // group, group).transpose(-2, -3)
        tshape = tiles.shape
        return tiles.reshape(-1, shape[-2] * group), lambda x: x.reshape(tshape).transpose(-2, -3).reshape(shape)
    return t.reshape(-1, group), lambda x: x.reshape(shape)


def quantise(x: torch.Tensor, spec: Spec | str, uniform: torch.Tensor | None = None) -> torch.Tensor:
    """``x`` [B, ...] rounded to the scaled format ``spec`` (feedback aside): q scale with scale the group's
    largest magnitude over Q and q = round(x / scale) (half to even), or floor(x / scale + uniform) for stochastic
    rounding (``uniform``: U[0, 1) draws of x's shape); fp8: q = x / scale rounded to float8_e4m3fn (to nearest
    even, or stochastically: floor(y / ulp + uniform) ulp, ulp the spacing at y). A group of zeros stays zero;
    non-finite entries make their group's scale non-finite (NaN out). Returns a new float32 tensor of x's shape."""
    spec = parse(spec)
    xf = x.float()
    g, back = _grouped(xf, spec)
    scale = g.abs().amax(-1, keepdim=True) / spec.qmax  # [G, 1]
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    y = (g / safe).clamp_(-spec.qmax, spec.qmax)  # the largest entry at Q (one last bit of division aside)
    step = ulp(y, FP8) if spec.fp8 else torch.ones_like(y)
    if uniform is None:
        q = y.to(FP8).float() if spec.fp8 else torch.round(y)
    else:
        u, _ = _grouped(uniform.to(xf.device, torch.float32), spec)
        q = torch.floor(y / step + u) * step
    q = q.clamp_(-spec.qmax, spec.qmax)
    return back(q * scale)


def nbytes(spec: Spec | str, shapes: Iterable[Sequence[int]]) -> int:
    """Bytes of tensors of ``shapes`` (each one batch item's shape) stored in ``spec``: the integers (bits / 8 a
    number, rounded up to whole bytes per tensor), a float32 scale per group, and the residual (+ef: float32;
    +int4 / +int8: its integers and scales)."""
    spec = parse(spec)
    total = 0
    for shape in shapes:
        numel = math.prod(int(s) for s in shape)
        total += -(-numel * spec.bits // 8) + _SCALE_BYTES * spec.scales(shape)
        if spec.feedback == "ef":
            total += 4 * numel
        elif spec.residual is not None:
            r = spec.residual
            total += -(-numel * r.bits // 8) + _SCALE_BYTES * r.scales(shape)
    return total


class Quantiser(_Rounder):
    """Rounds a state's float32 tensors in place to an integer format, keeping the feedback residuals (one per
    tensor position) between roundings. ``feedback=False``: the residuals are neither used nor kept."""

    def __init__(
        self, spec: Spec | str, stochastic: bool, seed: object, *, feedback: bool = True, skip: Collection[str] = ()
    ) -> None:
        self.spec, self.skip = parse(spec), skip
        self.stochastic, self.seed = bool(stochastic), _seeds(seed)
        self.feedback = bool(feedback) and self.spec.feedback is not None
        self._streams: dict[tuple[int | str, int], tuple[int, torch.Tensor]] = {}
        self._residual: dict[int, torch.Tensor] = {}  # tensor position -> float32 residual (its stored value for +int4)
        self._next: int | None = None  # position of the next tensor met inside round_

    def round_(self, state: object, token: int) -> None:
        self._next = 0
        try:
            super().round_(state, token)
        finally:
            self._next = None

    def nearest(self, t: torch.Tensor) -> None:
        which = 0
        if self._next is not None:
            which, self._next = self._next, self._next + 1
        self._apply(t, which, None)

    def stochastic_(self, t: torch.Tensor, which: int, token: int) -> None:
        if self._next is not None:
            self._next += 1
        self._apply(t, which, token)

    def _draws(self, t: torch.Tensor, which: int | str, token: int) -> torch.Tensor:
        if t.ndim == 0:
            raise CapacityError("stochastic rounding needs state tensors with a batch dimension first")
        B = t.shape[0]
        return torch.stack([self._uniform(which, b, token, t.shape[1:], t.device, B) for b in range(B)])

    def _apply(self, t: torch.Tensor, which: int, token: int | None) -> None:
        x = t
        if self.feedback:
            r = self._residual_for(which, t)
            if r is not None:
                x = t + r
        u = None if token is None else self._draws(t, which, token)
        q = quantise(x, self.spec, u)
        if self.feedback:
            err = x - q
            rs = self.spec.residual
            if rs is not None:  # the residual stored in an integer format of its own
                ur = None if token is None else self._draws(t, f"residual/{which}", token)
                err = quantise(err, rs, ur)
            self._residual[which] = err
        t.copy_(q)

    def _residual_for(self, which: int, t: torch.Tensor) -> torch.Tensor | None:
        r = self._residual.get(which)
        if r is None or r.shape == t.shape:
            return r
        if r.ndim == t.ndim and all(a <= b for a, b in zip(r.shape, t.shape)):
            grown = torch.zeros_like(t, dtype=torch.float32)
            grown[tuple(slice(0, s) for s in r.shape)] = r
            return grown
        return None
