"""State precision: any memory with its state stored in bfloat16, float16 or float8 (docs/precision.md, T14-T19).

``stored(memory, state_dtype, rounding)`` returns a memory whose state is rounded to ``state_dtype`` as a deployed
model stores it; every floating tensor of the state is rounded (a tensor, the tensor fields of a dataclass such as
``TokenState`` or lsq's ``LsqState``, tuples, lists, dicts), so it works for every built-in and for user memories;
the dataclass fields a memory declares bookkeeping (``Declares.bookkeeping``: a token counter) are neither rounded
nor counted in the bytes.

- ``rounding="step"``: the tokens are written one at a time and the state rounded after every write (decode with a
  low-precision state cache);
- ``"chunk=C"``: float32 within chunks of C tokens (counted from the first token), rounded when a chunk is stored
  (what chunked kernels do between chunks; a read inside a chunk sees the stored state plus the chunk's float32
  writes, as a chunked kernel's intra-chunk outputs do). On a CPU, ``chunk=64`` stands in for the fused chunk
  kernels of flash-linear-attention;
- ``"final"``: float32 writes, the state rounded once before each read (a float32 prefill stored for decoding).

Append ``+stochastic`` (``"step+stochastic"``) for stochastic rounding: x goes to one of its two neighbours in the
format with the probabilities that make the result unbiased, from seeded streams (``seed``: one seed for the batch,
or one per batch item, or one per equal group of consecutive items, as the sweep passes its seeds; a stream per
item and block of tokens, so an item's draws depend neither on the rest of its batch nor on how the writes are
chunked). The default is
round-to-nearest-even (the cast ``x.to(dtype)``). Values beyond the format's largest finite number saturate to it
(float8_e4m3fn has no infinity; the others would overflow to inf): ``saturated(state)`` is not tracked, the docs
give each format's range. Reads use the stored state. The stored numbers are kept in float32 tensors (the memory's
own code runs unchanged); ``state_bytes`` counts them at the state dtype.

``state_dtype="float32"`` returns the memory itself: results are bit-identical to an unwrapped memory's.

>>> import torch
>>> from lacapacity import variants, keys, values, probe
>>> from lacapacity.variants import precision
>>> mem = precision.stored(variants.get("linear"), "bfloat16", "step")
>>> K = keys.make("gaussian", n=64, d=16, batch=2, seed=0); V = values.make("gaussian", 64, 16, batch=2, seed=0)
>>> ds = probe.recall(mem, K, V, checkpoints=[64])
>>> S = mem.write(mem.init_state(2, 16, 16), K, V)
>>> bool((S.inner.to(torch.bfloat16).float() == S.inner).all())      # every entry is a bfloat16 number
True
>>> mem.state_bytes(16, 16), variants.get("linear").state_numel(16, 16) * 4
(512, 1024)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch

from lacapacity.base import _random, _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.variants import declares
from lacapacity.variants._rounding import DTYPES, TORCH_DTYPES, _Rounder, _seeds
from lacapacity.variants._rounding import StoredState as StoredState  # the state a stored memory holds: its home here
from lacapacity.variants._rounding import state_tensors as state_tensors

if TYPE_CHECKING:  # pragma: no cover
    from lacapacity.variants import Variant
    from lacapacity.variants.recurrent import Recurrent


def _dtype(state_dtype: object) -> str:  # a name or a torch.dtype, checked here
    name = str(state_dtype).replace("torch.", "")
    if name not in TORCH_DTYPES:
        from lacapacity.variants import quantise

        if quantise.is_quantised(name):  # int8 / int4 with scales (lacapacity.variants.quantise): its canonical label
            return quantise.parse(name).label
        raise CapacityError(
            f"state_dtype must be one of {', '.join(DTYPES)}, or {quantise.SPELLING}; got {state_dtype!r}"
        )
    return name


def itemsize(state_dtype: object) -> int:
    """Bytes per number of ``state_dtype`` (4, 2, 2, 1, 1; int8: 1, its scales and residual not counted)."""
    name = _dtype(state_dtype)
    if name not in TORCH_DTYPES:
        from lacapacity.variants import quantise

        if quantise.parse(name).bits != 8:
            raise CapacityError(f"{name} keeps half a byte a number: count its bytes with state_bytes")
        return 1
    return torch.empty(0, dtype=TORCH_DTYPES[name]).element_size()


def _rounder_for(
    state_dtype: str, stochastic: bool, seed: object, *, feedback: bool = True, skip: tuple[str, ...] = ()
) -> _Rounder:
    """The rounder of ``state_dtype`` (a checked name): a float format's, or an integer format's with its
    feedback residuals (``lacapacity.variants.quantise``; ``feedback=False``: none kept). ``skip``: the state's
    bookkeeping fields, never rounded."""
    if state_dtype in TORCH_DTYPES:
        return _Rounder(state_dtype, stochastic, seed, skip)
    from lacapacity.variants.quantise import Quantiser

    return Quantiser(state_dtype, stochastic, seed, feedback=feedback, skip=skip)


@dataclass(frozen=True)
class Rounding:
    """When the state is rounded: ``kind`` step | chunk | final, ``chunk`` C (chunk only), ``stochastic``."""

    kind: str = "step"
    chunk: int | None = None
    stochastic: bool = False

    @classmethod
    def parse(cls, spec: object) -> Rounding:
        """From ``"step"``, ``"final"``, ``"chunk=C"``, each optionally with ``+stochastic``, or a Rounding."""
        if isinstance(spec, Rounding):
            return spec
        allowed = "step, final or chunk=C (C a whole number >= 1), optionally followed by +stochastic"
        if not isinstance(spec, str):
            raise CapacityError(f"rounding must be {allowed}; got {spec!r}")
        base, plus, mode = spec.strip().partition("+")
        if plus and mode.strip() != "stochastic":
            raise CapacityError(f"rounding must be {allowed}; got {spec!r}")
        base = base.strip()
        if base in ("step", "final"):
            return cls(base, None, bool(plus))
        name, eq, size = base.partition("=")
        if name.strip() == "chunk" and eq:
            try:
                c = int(size.strip())
            except ValueError:
                raise CapacityError(f"rounding must be {allowed}; got {spec!r}") from None
            if c < 1:
                raise CapacityError(f"rounding must be {allowed}; got {spec!r}")
            return cls("chunk", c, bool(plus))
        raise CapacityError(f"rounding must be {allowed}; got {spec!r}")

    @property
    def label(self) -> str:
        base = f"chunk={self.chunk}" if self.kind == "chunk" else self.kind
        return base + ("+stochastic" if self.stochastic else "")

    def __str__(self) -> str:
        return self.label


def round_(
    state: Any,
    state_dtype: object,
    *,
    stochastic: bool = False,
    seed: object = 0,
    token: int = 0,
    bookkeeping: tuple[str, ...] = (),
) -> Any:
    """Round every floating tensor of ``state`` to ``state_dtype`` in place (kept as float32 numbers); returns it.

    Stochastic rounding draws from the seeded stream of (``seed``, ``token``) for each batch item. The dataclass
    fields named in ``bookkeeping`` (a memory's ``Declares.bookkeeping``) are left as they are. (``state``: any
    memory's state, hence Any; ``seed``: one seed or one per batch item.)
    """
    _rounder_for(_dtype(state_dtype), bool(stochastic), seed, feedback=False, skip=bookkeeping).round_(state, token)
    return state


def _fast_mode(memory: object) -> str | None:
    """The recurrence a built-in memory applies token by token in ``_fast_step`` (None: write through it)."""
    from lacapacity.variants.recurrent import Recurrent

    if type(memory).__module__.split(".")[:2] != ["lacapacity", "variants"] or not isinstance(memory, Recurrent):
        return None
    if memory.feature is not None or memory.normalize_read or memory.drawn:
        return None
    if memory.mode not in ("linear", "decay", "delta", "gated_delta", "gla", "kda"):
        return None
    return memory.mode


class Stored:
    """``memory`` with its state stored in ``state_dtype``, rounded as ``rounding`` says (see the module)."""

    def __init__(self, memory: Variant, state_dtype: object, rounding: object = "step", *, seed: object = 0) -> None:
        from lacapacity import variants

        if not variants.is_variant(memory):
            raise CapacityError(f"stored() takes a variant object (see lacapacity.variants.resolve), got {memory!r}")
        self.memory = memory
        self.state_dtype = _dtype(state_dtype)
        self.rounding = Rounding.parse(rounding)
        self.seed = _seeds(seed)
        self.name = declares.name(memory)
        self._fast = _fast_mode(memory)
        shown = declares.display(memory)
        if shown is not None:
            self.display = shown
        inner = declares.declared(memory)
        # the memory's read, state and dims; rounding breaks T2's exact identity and T12's exact read-back
        self.declares = declares.wrapped(inner)
        if inner.state == "growing":  # numel exactly where the declaration says the state grows
            self.numel: Callable[[Any], int] = lambda state: int(
                declares.numel(memory, state.inner if isinstance(state, StoredState) else state) or 0
            )

    def feature_dim(self, d: int) -> int:
        return declares.feature_dim(self.memory, d)

    @property
    def params(self) -> dict[str, object]:
        return {
            **(declares.params(self.memory) or {}),
            "state_dtype": self.state_dtype,
            "rounding": self.rounding.label,
        }

    def __repr__(self) -> str:
        return f"precision.stored({self.memory!r}, {self.state_dtype!r}, {self.rounding.label!r})"

    def state_numel(self, d: int, dv: int, *args: Any, **kwargs: Any) -> int:  # Any: what the memory's takes (n=)
        return self.memory.state_numel(d, dv, *args, **kwargs)

    def state_bytes(self, d: int, dv: int, dtype: object = None, **kwargs: Any) -> int:  # Any: state_bytes's n=
        """Bytes the stored state keeps per batch item: its numbers at ``dtype`` (default: the state dtype)."""
        return state_bytes(self.memory, d, dv, self.state_dtype if dtype is None else dtype, **kwargs)

    def _rounder(self, state: StoredState) -> _Rounder:
        r = getattr(state, "_rounder", None)
        if r is None:
            # under final the state is rounded afresh for each read: nothing to feed back
            r = _rounder_for(
                self.state_dtype,
                self.rounding.stochastic,
                self.seed,
                feedback=self.rounding.kind != "final",
                skip=self.declares.bookkeeping,
            )
            object.__setattr__(state, "_rounder", r)
        return r

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> StoredState:
        st = StoredState(self.memory.init_state(batch, d, dv, device=device), 0)
        if self.rounding.kind != "final":
            self._rounder(st).round_(st.inner, 0)
        return st

    def _check(self, state: object) -> StoredState:
        return _validate.state(f"{self.name} ({self.state_dtype} state)", state, StoredState)

    def write(self, state: StoredState, k: torch.Tensor, v: torch.Tensor) -> StoredState:
        """Write the tokens in order, rounding the state as ``rounding`` says. k ``[B, t, d]``, v ``[B, t, dv]``."""
        st = self._check(state)
        _validate.tensor("k", k, ndim=3, finite=False)
        _validate.tensor("v", v, ndim=3, finite=False)
        T, kind = k.shape[1], self.rounding.kind
        if T == 0:
            return st
        rounder = self._rounder(st)
        if kind == "final":
            st.inner = self.memory.write(st.inner, k, v)
        elif kind == "step":
            if self._fast is not None and isinstance(st.inner, torch.Tensor):
                self._fast_step(st, k, v, rounder)
            else:
                for t in range(T):
                    st.inner = self.memory.write(st.inner, k[:, t : t + 1], v[:, t : t + 1])
                    rounder.round_(st.inner, st.tokens + t)
        else:  # chunks of C tokens counted from the first token; stored (rounded) at each chunk's end
            C, t = cast(int, self.rounding.chunk), 0  # a chunk rounding has its C
            while t < T:
                pos = st.tokens + t
                take = min(T - t, C - pos % C)
                st.inner = self.memory.write(st.inner, k[:, t : t + take], v[:, t : t + take])
                if (pos + take) % C == 0:
                    rounder.round_(st.inner, (pos + take) // C - 1)
                t += take
        st.tokens += T
        return st

    def _fast_step(self, st: StoredState, k: torch.Tensor, v: torch.Tensor, rounder: _Rounder) -> None:
        """Token-by-token writes of the built-in linear, decay, gla, delta, gated_delta and kda memories, in place.

        The additive and decaying writes are those of the memory's own kernels bit for bit (an outer product is one
        product per entry); the delta rule's k S is summed in another order than their matmul (a last-bit
        difference before rounding), and every batch item is computed by itself. gla and kda (a constant gate per
        key channel: a number or one value per row) scale row i of the state by alpha_i before the write, as their
        kernels do (Diag(alpha) S); through their chunked kernels one token at a time they were 6-8 times slower.
        """
        # _fast is set for a built-in Recurrent only, and called with its tensor state
        mem, S = cast("Recurrent", self.memory), cast(torch.Tensor, st.inner)
        if k.shape[0] != S.shape[0] or k.shape[2] != S.shape[1] or v.shape[2] != S.shape[2] or k.shape[1] != v.shape[1]:
            raise CapacityError(
                f"{self.name}: shapes do not match: state [B, d, dv] = {list(S.shape)}, k [B, t, d] = {list(k.shape)}, v [B, t, dv] = {list(v.shape)}"
            )
        _validate.same_device(state=S, k=k, v=v)
        kf = k.float()
        if mem.normalize:
            kf = kf / kf.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        vf = v.float()
        col = kf.unsqueeze(-1)  # [B, T, d, 1]: k_t^T
        row_v = vf.unsqueeze(-2)  # [B, T, 1, dv]
        # constants (_fast_mode excludes draws): floats, or for gla and kda a [D] vector, made a column below
        a = cast("float | torch.Tensor", mem._params["alpha"].value) if "alpha" in mem._params else 1.0
        b = cast(float, mem._params["beta"].value) if "beta" in mem._params else 1.0
        mode, stochastic = self._fast, rounder.stochastic
        if mode in ("gla", "kda"):  # Diag(alpha) S: one gate per row, [D, 1] (a constant or a vector, never drawn)
            a = torch.as_tensor(mem._params["alpha"].values(S.shape[0], 0, 1, S.shape[1], mem.seed, S.device))
            a = a.to(S.device, torch.float32).expand(S.shape[1]).reshape(S.shape[1], 1)
        for t in range(k.shape[1]):  # one token at a time, in place
            if mode in ("decay", "gated_delta", "gla", "kda"):
                S.mul_(a)
            # an outer product k^T v is one product per entry: elementwise, the same bits as a matmul of depth 1
            if mode in ("linear", "decay", "gla"):
                S.add_(col[:, t] * row_v[:, t])
            else:  # S + k^T (b (v - k S)); k S summed over d elementwise: each item alone, whatever the batch
                w = b * (row_v[:, t] - (col[:, t] * S).sum(1, keepdim=True))
                S.add_(col[:, t] * w)
            if stochastic:
                rounder.stochastic_(S, 0, st.tokens + t)
            else:
                rounder.nearest(S)

    def read(self, state: StoredState, q: torch.Tensor) -> torch.Tensor:
        """The memory's read of the stored state (for ``final``, of the float32 state rounded now)."""
        st = self._check(state)
        if self.rounding.kind != "final":
            return self.memory.read(st.inner, q)
        import copy

        snapshot = copy.deepcopy(st.inner)
        self._rounder(st).round_(snapshot, 0)
        return self.memory.read(snapshot, q)


def stored(memory: Variant, state_dtype: object = "float32", rounding: object = "step", *, seed: object = 0) -> Variant:
    """``memory`` with its state stored in ``state_dtype`` (see the module); ``memory`` itself for float32."""
    if _dtype(state_dtype) == "float32":
        Rounding.parse(rounding)  # checked all the same
        return memory
    return Stored(memory, state_dtype, rounding, seed=seed)


def state_bytes(memory: Variant, d: int, dv: int, dtype: object = "float32", *, n: int | None = None) -> int:
    """Bytes one batch item's state keeps at ``dtype``, every state tensor counted.

    Uses the memory's own ``state_bytes(d, dv, dtype)`` where it declares one (a memory with a state in mixed
    precision, or one that keeps what its tensors do not show); otherwise measures the tensors of
    ``init_state(1, d, dv)`` (after ``n`` writes of random pairs for a memory that grows, ``numel``) and counts
    their numbers at ``dtype``. A memory that grows needs ``n``.
    """
    from lacapacity import variants

    d = _validate.positive_int("d", d)
    dv = _validate.positive_int("dv", dv)
    quantised = _dtype(dtype) not in TORCH_DTYPES
    size = 1 if quantised else itemsize(dtype)
    own = declares.own_state_bytes(memory)
    if own is not None and not isinstance(memory, Stored):
        kwargs = {"n": n} if n is not None else {}
        try:
            got = own(d, dv, _dtype(dtype), **kwargs)
        except TypeError:
            got = own(d, dv, _dtype(dtype))
        if isinstance(got, bool) or not isinstance(got, int) or got < 0:
            raise CapacityError(f"{variants.label(memory)}: state_bytes returned {got!r}, expected a whole number >= 0")
        return got
    if isinstance(memory, Stored):
        memory = memory.memory
    grows = declares.declared(memory).state == "growing"
    if grows and n is None:
        raise CapacityError(f"{declares.name(memory)!r} keeps every pair: state_bytes needs n")
    state = memory.init_state(1, d, dv, device="cpu")
    if grows and n:
        g = _random.generator(0, "precision/state_bytes")
        state = memory.write(state, torch.randn(1, int(n), d, generator=g), torch.randn(1, int(n), dv, generator=g))
        if not quantised:
            return int(declares.numel(memory, state) or 0) * size
    tensors = state_tensors(state, stored=True, skip=declares.declared(memory).bookkeeping)
    if quantised:  # integers, scales and residuals (lacapacity.variants.quantise.nbytes)
        from lacapacity.variants import quantise

        return quantise.nbytes(_dtype(dtype), [t.shape[1:] for t in tensors])
    return sum(t[0].numel() for t in tensors) * size
