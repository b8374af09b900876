"""Wrap a function with the flash-linear-attention calling convention into a variant.

flash-linear-attention (fla) ops look like ``fn(q, k, v, ..., initial_state=None,
output_final_state=True) -> (o, final_state)`` with tokens in ``[B, T, H, K]`` (most ops and
their naive references) or ``[B, H, T, K]`` (``layout="BHTK"``, e.g.
``fla.ops.delta_rule.naive.delta_rule_recurrence``) and the state ``[B, H, K, V]``, the same
[K, V] orientation as ours. The wrapper uses one head, H = 1, and translates at the boundary:

- write(state, k, v): call ``fn(q=k, k, v, **per_token, **fixed_kwargs,
  initial_state=state[:, None], output_final_state=True)`` and keep ``final_state[:, 0]``;
  the output o is not used;
- read(state, q): ``q @ state``, our read, not a call of fn.

Why the read does not call fn: fla's output o_t is the *causal* output of token t, computed
after token t was written (o_t = scale q_t S_t), so it mixes a write into every read; it is
multiplied by the op's attention ``scale`` (K^-1/2 by default), which would shrink every read;
and reading through fn would mean writing dummy tokens, which gated ops would decay. The
memory's content is the state, and every fla op reads a state linearly as (a multiple of) q S,
so q S is what the probe should score.

Inputs drawn up for every token go in ``per_token`` (beta, log-gates g, IPLR's a and b):

- a number: one value per token, ``[B, T, H]`` (or ``[B, H, T]``);
- a sequence of K numbers: one value per key channel, ``[B, T, H, K]`` (or ``[B, H, T, K]``);
  it fixes d = K, and the variant then declares ``dims = (K,)``;
- a callable of the keys: it gets k ``[B, T, d]`` and returns ``[B, T]`` (per token) or
  ``[B, T, d]`` (per key channel), so it follows d, e.g. ``lambda k: -k`` for IPLR's ``a``.

Keys are passed as given: give unit keys (``lacapacity.keys.make`` does) or set the op's own
normalisation flag. By default the state is one ``[B, H, K, V]`` tensor: an op that returns more
state (a tuple final_state, or a third output such as an extra ``[B, H, K]`` state) is refused with a
CapacityError rather than have a part silently dropped.

Ops with other conventions are mapped, not adapted by hand:

- ``names``: the op's names for the query, key and value, e.g. ``{"q": "r"}`` for RWKV-7's receptance;
  the tokens then go as keyword arguments;
- ``states``: the op's initial-state arguments in order, each with its shape as letters of ``K`` (d),
  ``V`` (dv) and ``1``, e.g. ``{"initial_S": "KV", "initial_M": "KV"}`` (the momentum delta rule),
  ``{"h_kk_init": "KK", "h_kv_init": "KV"}`` (MesaNet), ``{"initial_state": "KV",
  "initial_state_bias": "1V"}`` (TTT-linear). The op's final states are read back in the same order:
  one output per state after o, or one tuple of them, or one tensor stacked along a first axis. The
  variant's state is then a dict name -> tensor ``[B, *shape]``; the first is the memory that the
  default read q S uses;
- ``read``: ``read(q, state) -> [B, m, dv]`` for an op whose state is not read as q S (MesaNet solves
  with its key covariance first), with q ``[B, m, d]`` and ``state`` the tensor (one state) or dict.

``output_final_state=True`` is passed only to an op whose signature takes it (MesaNet's reference
returns its states always). A variant pickles (for worker
processes) when ``fn`` and every callable in ``per_token`` are importable module-level
functions; otherwise pickling raises a CapacityError that names the culprit.

Why one module of over 500 lines: one calling convention's adapters (layouts, per-token arguments, gates,
refusals) and the table of fla's ops that use it.
"""

from __future__ import annotations

import copy
import inspect
import math
import numbers
import pickle
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, cast

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.variants.declares import Declares

LAYOUTS = ("BTHK", "BHTK")
_LAYOUT_WORDS = {"BTHK": "tokens [B, T, H, K]", "BHTK": "tokens [B, H, T, K]"}

# what per_token takes: a number (one per token), K numbers (one per key channel), or a callable of the keys
PerToken: TypeAlias = "float | Sequence[float] | torch.Tensor | Callable[[torch.Tensor], torch.Tensor]"
# a state: one float32 [B, d, dv] tensor, or with several ``states`` a dict name -> [B, *shape]
FlaState: TypeAlias = "torch.Tensor | dict[str, torch.Tensor]"
Reader: TypeAlias = "Callable[[torch.Tensor, Any], torch.Tensor]"  # read(q, state): Any, the user's state type


def _label(fn: object) -> str:
    return f"{getattr(fn, '__module__', None) or '?'}.{getattr(fn, '__qualname__', None) or type(fn).__name__}"


def _jsonable(x: object) -> object:
    if isinstance(x, (str, bool, int, float)) or x is None:
        return x
    if isinstance(x, torch.Tensor):
        if x.ndim == 0:
            return float(x)
        return x.tolist() if x.numel() <= 64 else f"tensor{tuple(x.shape)}"
    if isinstance(x, (list, tuple)):
        return [_jsonable(y) for y in x]
    if callable(x):
        return _label(x)
    return repr(x)


def _describe(x: object) -> str:
    """'tensor (2, 1, 8)', 'tuple of 2', 'NoneType': what an op returned, for error messages."""
    if isinstance(x, torch.Tensor):
        return f"tensor {tuple(x.shape)}"
    if isinstance(x, (tuple, list)):
        return f"{type(x).__name__} of {len(x)} (" + ", ".join(_describe(y) for y in x) + ")"
    return type(x).__name__


class _LayoutError(Exception):
    """A call or its result did not fit the layout; carries the CapacityError message."""


class FlaVariant:
    """A variant around an fla-style function; build it with ``from_fla``."""

    def __init__(
        self,
        fn: Callable[..., object],
        *,
        name: str | None,
        layout: str,
        per_token: Mapping[str, PerToken] | None,
        dims: int | Sequence[int] | None,
        additive: bool | None,
        delta_rule: bool | None,
        fixed_kwargs: dict[str, Any],
        names: dict[str, str] | None = None,
        states: dict[str, str] | None = None,
        read: Reader | None = None,
    ) -> None:
        if not callable(fn):
            raise CapacityError(
                "from_fla needs a callable with the fla convention fn(q, k, v, ..., initial_state=, "
                f"output_final_state=), got {fn!r}"
            )
        self.fn = fn
        self.name = name if name is not None else f"fla:{getattr(fn, '__name__', type(fn).__name__)}"
        if not isinstance(self.name, str) or not self.name:
            raise CapacityError(f"from_fla: name must be a non-empty string, got {name!r}")
        if layout not in LAYOUTS:
            raise CapacityError(
                f"{self.name}: unknown layout {layout!r}; known: {', '.join(LAYOUTS)} (tokens [B, T, H, K] or [B, H, "
                "T, K])"
            )
        self.layout = layout
        self.names, self.states, self.reader = self._mapping(names, states, read)
        reserved = {"q", "k", "v", "initial_state", "output_final_state"} | set(self.names.values()) | set(self.states)
        reserved &= set(fixed_kwargs) | set(per_token or {})
        if reserved:
            raise CapacityError(
                f"{self.name}: {', '.join(sorted(reserved))} are set by the wrapper; pass only the function's other "
                "arguments"
            )
        both = set(fixed_kwargs) & set(per_token or {})
        if both:
            raise CapacityError(
                f"{self.name}: {', '.join(sorted(both))} given both in per_token and as a fixed keyword argument; "
                "give each once"
            )
        self.fixed_kwargs = dict(fixed_kwargs)
        self.per_token: dict[str, torch.Tensor | Callable[[torch.Tensor], torch.Tensor]] = {}
        channel_lengths: dict[str, int] = {}
        for key, value in (per_token or {}).items():
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                self.per_token[key] = torch.tensor(float(value))
            elif callable(value) and not isinstance(value, torch.Tensor):
                self.per_token[key] = value
                continue
            elif isinstance(value, (Sequence, torch.Tensor)) and not isinstance(value, str):
                vec = torch.as_tensor(value, dtype=torch.float32)
                if vec.ndim == 0:
                    vec = vec.reshape(())
                else:
                    vec = vec.flatten()
                    if vec.numel() == 0:
                        raise CapacityError(f"{self.name}: per_token[{key!r}] must not be empty")
                    channel_lengths[key] = vec.numel()
                self.per_token[key] = vec
            else:
                raise CapacityError(
                    f"{self.name}: per_token[{key!r}] must be a number (one per token), a sequence of K numbers (one "
                    "per key "
                    "channel; fixes d = K) or a callable of the keys k [B, T, d] returning [B, T] or [B, T, d], got "
                    f"{value!r}"
                )
            if not bool(torch.isfinite(cast(torch.Tensor, self.per_token[key])).all()):  # a tensor: callables went on
                raise CapacityError(f"{self.name}: per_token[{key!r}] must be finite, got {value!r}")
        if len(set(channel_lengths.values())) > 1:
            listed = ", ".join(f"per_token[{k!r}] has {n}" for k, n in channel_lengths.items())
            raise CapacityError(f"{self.name}: per-channel inputs must all have K = d entries, but {listed}")
        for flag, given in (("additive", additive), ("delta_rule", delta_rule)):
            if given is not None and not isinstance(given, bool):
                raise CapacityError(f"{self.name}: {flag} must be True, False or None, got {given!r}")
        # what the caller says of the op (T2, T12; unsaid: check_variant measures); the d a per-channel input fixes
        self.declares = Declares(additive=additive, delta_rule=delta_rule, dims=self._dims(dims, channel_lengths))

    def _mapping(
        self, names: object, states: object, read: object
    ) -> tuple[dict[str, str], dict[str, str], Reader | None]:
        """Check ``names``, ``states`` and ``read``; returns (names, states, read) with the defaults filled in."""
        if names is None:
            names = {}
        if not isinstance(names, dict) or not set(names) <= {"q", "k", "v"}:
            raise CapacityError(
                f"{self.name}: names maps q, k, v to the op's own argument names, e.g. {{'q': 'r'}}, got {names!r}"
            )
        for role, arg in names.items():
            if not isinstance(arg, str) or not arg.isidentifier():
                raise CapacityError(f"{self.name}: names[{role!r}] must be an argument name, got {arg!r}")
        if len(set(names.values())) != len(names):
            raise CapacityError(f"{self.name}: names gives one argument name to two roles: {names!r}")
        if states is None:
            states = {"initial_state": "KV"}
        if not isinstance(states, dict) or not states:
            raise CapacityError(
                f"{self.name}: states maps the op's initial-state arguments to their shapes, e.g. "
                f"{{'initial_S': 'KV', 'initial_M': 'KV'}}, got {states!r}"
            )
        for arg, code in states.items():
            if not isinstance(arg, str) or not arg.isidentifier():
                raise CapacityError(f"{self.name}: states has a key {arg!r} that is not an argument name")
            if not isinstance(code, str) or not code or set(code) - {"K", "V", "1"}:
                raise CapacityError(
                    f"{self.name}: the shape of state {arg!r} is letters K (d), V (dv) and 1, e.g. 'KV' or '1V', "
                    f"got {code!r}"
                )
        if read is not None and not callable(read):
            raise CapacityError(f"{self.name}: read must be a callable read(q, state) -> [B, m, dv], got {read!r}")
        first = next(iter(states.values()))
        if read is None and first != "KV":
            raise CapacityError(
                f"{self.name}: the first state has shape {first!r}; the default read q S needs a 'KV' state first, "
                "or give read="
            )
        return dict(names), dict(states), cast("Reader | None", read)  # checked callable above

    @property
    def _multi(self) -> bool:
        return len(self.states) > 1

    @staticmethod
    def _shape(code: str, d: int, dv: int) -> tuple[int, ...]:
        return tuple({"K": int(d), "V": int(dv), "1": 1}[c] for c in code)

    def _dims(self, dims: object, channel_lengths: dict[str, int]) -> tuple[int, ...] | None:
        """The key dimensions d this variant takes: None (any), or a tuple."""
        if dims is not None:
            if isinstance(dims, numbers.Integral) and not isinstance(dims, bool):
                dims = (dims,)
            if not isinstance(dims, (Sequence, set, frozenset)) or isinstance(dims, str) or len(dims) == 0:
                raise CapacityError(
                    f"{self.name}: dims must be a whole number or a non-empty sequence of them (the key dimensions d "
                    f"the op accepts), got {dims!r}"
                )
            dims = tuple(sorted({_validate.positive_int("dims", x) for x in dims}))
        if channel_lengths:
            key, K = next(iter(channel_lengths.items()))
            if dims is not None and K not in dims:
                raise CapacityError(
                    f"{self.name}: per_token[{key!r}] has {K} entries, so the variant takes only d = {K}, but dims = "
                    f"{list(dims)}"
                )
            dims = (K,)
        return dims

    @property
    def params(self) -> dict[str, object]:
        out: dict[str, object] = {"fn": _label(self.fn), "layout": self.layout}
        out.update({f"per_token.{k}": _jsonable(v) for k, v in self.per_token.items()})
        out.update({k: _jsonable(v) for k, v in self.fixed_kwargs.items()})
        if self.declares.dims is not None:
            out["dims"] = list(self.declares.dims)
        if self.names:
            out["names"] = dict(self.names)
        if self.states != {"initial_state": "KV"}:
            out["states"] = dict(self.states)
        if self.reader is not None:
            out["read"] = _label(self.reader)
        return out

    def __repr__(self) -> str:
        return f"from_fla({_label(self.fn)}, name={self.name!r}, layout={self.layout!r})"

    def __getstate__(self) -> dict[str, object]:
        readers = [("read", self.reader)] if self.reader is not None else []
        for what, obj in [("fn", self.fn), *readers] + [
            (f"per_token[{k!r}]", v)
            for k, v in self.per_token.items()
            if callable(v) and not isinstance(v, torch.Tensor)
        ]:
            try:
                pickle.dumps(obj)
            except (
                pickle.PicklingError,
                AttributeError,
                TypeError,
            ) as exc:  # lambdas and local functions: AttributeError
                raise CapacityError(
                    f"{self.name}: cannot be pickled (to send it to worker processes): {what} = {_label(obj)} is not "
                    "importable "
                    f"by module and name ({type(exc).__name__}: {exc}); define it as a module-level function, not a "
                    "lambda "
                    "or a function inside another"
                ) from None
        return dict(self.__dict__)

    def __deepcopy__(
        self, memo: dict[int, object]
    ) -> FlaVariant:  # copies need no pickling: lambdas are copied by reference, as copy does for functions
        new = object.__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update({k: copy.deepcopy(v, memo) for k, v in self.__dict__.items()})
        return new

    def state_numel(self, d: int, dv: int) -> int:
        return sum(math.prod(self._shape(code, d, dv)) for code in self.states.values())

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> FlaState:
        """Zeros: a float32 ``[batch, d, dv]`` tensor, or with several ``states`` a dict name -> ``[batch, *shape]``."""
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        if not self._multi:
            return torch.zeros(batch, d, dv, dtype=torch.float32, device=dev)
        return {
            name: torch.zeros(batch, *self._shape(code, d, dv), dtype=torch.float32, device=dev)
            for name, code in self.states.items()
        }

    # ------------------------------------------------------------------ the call

    @staticmethod
    def _tokens(x: torch.Tensor, layout: str) -> torch.Tensor:
        """[B, T, C] -> [B, T, 1, C] (BTHK) or [B, 1, T, C] (BHTK); [B, T] -> [B, T, 1] or [B, 1, T]."""
        return x.unsqueeze(2) if layout == "BTHK" else x.unsqueeze(1)

    def _per_token(
        self, key: str, value: torch.Tensor | Callable[[torch.Tensor], torch.Tensor], k: torch.Tensor, layout: str
    ) -> torch.Tensor:
        B, T, d = k.shape
        if callable(value) and not isinstance(value, torch.Tensor):
            out = value(k)
            if not isinstance(out, torch.Tensor) or tuple(out.shape) not in ((B, T), (B, T, d)):
                got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                raise CapacityError(
                    f"{self.name}: per_token[{key!r}] = {_label(value)} returned {got} for keys k [B, T, d] = "
                    f"{(B, T, d)}; "
                    f"a callable of the keys must return [B, T] = {(B, T)} (one per token) or [B, T, d] = "
                    f"{(B, T, d)} (one per key channel)"
                )
            return self._tokens(out, layout)
        if value.ndim == 0:
            return self._tokens(value.to(k.device).expand(B, T), layout)  # [B, T, 1] or [B, 1, T]
        if value.numel() != d:
            raise CapacityError(
                f"{self.name}: per_token[{key!r}] has {value.numel()} entries (one per key channel), so this variant "
                "takes only "
                f"d = {value.numel()}, got keys with d = {d}; to follow d, give a callable of the keys returning [B, "
                "T, d], "
                "e.g. lambda k: torch.full_like(k, x)"
            )
        return self._tokens(value.to(k.device).expand(B, T, d), layout)  # [B, T, 1, d] or [B, 1, T, d]

    def _convention(self) -> str:
        names = ", ".join(list(self.per_token) + [f"{k}=" for k in self.fixed_kwargs])
        middle = f", {names}" if names else ""
        if self.names or self._multi:
            qkv = ", ".join(f"{self.names.get(r, r)}=" for r in ("q", "k", "v"))
            init = ", ".join(f"{a}=[B, H, {', '.join(c)}]" for a, c in self.states.items())
            try:
                sig = f"; its signature is {self.fn.__name__}{inspect.signature(self.fn)}"
            except (TypeError, ValueError, AttributeError):
                sig = ""
            return (
                f"from_fla calls it as fn({qkv}{middle}, {init}, output_final_state=True) with "
                f"{_LAYOUT_WORDS[self.layout]}{sig}"
            )
        try:
            sig = f"; its signature is {self.fn.__name__}{inspect.signature(self.fn)}"
        except (TypeError, ValueError, AttributeError):
            sig = ""
        return (
            f"from_fla calls it as fn(q, k, v{middle}, initial_state=[B, H, K, V], output_final_state=True) with "
            f"{_LAYOUT_WORDS[self.layout]}{sig}; give its other inputs in per_token (one per token or key channel) "
            "or as "
            "keyword arguments of from_fla (fixed)"
        )

    def _call(self, state: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: str) -> torch.Tensor:
        """One call of fn in ``layout``; returns final_state[:, 0]. Raises _LayoutError for a shape problem."""
        B, d, dv = state.shape
        T = k.shape[1]
        extra = {key: self._per_token(key, val, k, layout) for key, val in self.per_token.items()}
        kt, vt = self._tokens(k, layout), self._tokens(v, layout)
        kwargs = {**extra, **self.fixed_kwargs, "initial_state": state.unsqueeze(1), "output_final_state": True}
        label = _label(self.fn)
        try:
            inspect.signature(self.fn).bind(kt, kt, vt, **kwargs)
        except TypeError as exc:
            raise CapacityError(
                f"{self.name}: {label} does not take these arguments ({exc}); {self._convention()}"
            ) from None
        except ValueError:  # no signature to inspect: the call will tell
            pass
        try:
            out = self.fn(kt, kt, vt, **kwargs)
        except TypeError as exc:
            raise CapacityError(f"{self.name}: {label} raised TypeError: {exc}; {self._convention()}") from None
        except (RuntimeError, IndexError, AssertionError, ValueError) as exc:
            raise _LayoutError(f"{self.name}: {label} raised {type(exc).__name__}: {exc}") from None
        if not isinstance(out, (tuple, list)) or len(out) < 2:
            raise CapacityError(
                f"{self.name}: {label} returned {_describe(out)}; the fla convention returns (o, final_state)"
            )
        if len(out) > 2:
            raise CapacityError(
                f"{self.name}: {label} returned {len(out)} outputs ({_describe(out)}); from_fla keeps one state, "
                "final_state "
                "[B, H, K, V], and passes it back as initial_state, so an op with more state (e.g. a second final "
                "state) is "
                "refused rather than have a part dropped; wrap an op whose whole state is one [B, H, K, V] tensor"
            )
        o, final = out
        if isinstance(final, (tuple, list)):
            raise CapacityError(
                f"{self.name}: {label} returned final_state as a {_describe(final)}; from_fla keeps a single [B, H, "
                "K, V] "
                "tensor state and refuses a state of several parts rather than drop some (e.g. call the op without the "
                "option that adds a second state, such as normalize=True)"
            )
        want_o = (B, T, 1, dv) if layout == "BTHK" else (B, 1, T, dv)
        if isinstance(o, torch.Tensor) and tuple(o.shape) != want_o:
            raise _LayoutError(
                f"{self.name}: {label} returned o of shape {tuple(o.shape)}, expected {layout} = {want_o}"
            )
        if not isinstance(final, torch.Tensor):
            raise CapacityError(
                f"{self.name}: {label} returned final_state {type(final).__name__}, expected a tensor [B, H, K, V] = "
                f"{(B, 1, d, dv)} (called with output_final_state=True)"
            )
        if tuple(final.shape) != (B, 1, d, dv):
            raise _LayoutError(
                f"{self.name}: {label} returned final_state of shape {tuple(final.shape)}, expected [B, H, K, V] = "
                f"{(B, 1, d, dv)}"
            )
        return final[:, 0].to(torch.float32).contiguous()

    @property
    def _plain(self) -> bool:
        """The default convention: q, k, v by position, one state named initial_state."""
        return not self.names and self.states == {"initial_state": "KV"}

    def _takes_final_flag(self) -> bool:
        try:
            params = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            return True
        return "output_final_state" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())

    def _call_mapped(self, state: FlaState, k: torch.Tensor, v: torch.Tensor, layout: str) -> FlaState:
        """One call of fn with ``names`` and ``states`` mapped; returns the new state. _LayoutError for shapes."""
        B, T, d = k.shape
        dv = v.shape[2]
        extra = {key: self._per_token(key, val, k, layout) for key, val in self.per_token.items()}
        kt, vt = self._tokens(k, layout), self._tokens(v, layout)
        tokens = {self.names.get("q", "q"): kt, self.names.get("k", "k"): kt, self.names.get("v", "v"): vt}
        parts = state if isinstance(state, dict) else {next(iter(self.states)): state}
        inits = {arg: parts[arg].unsqueeze(1) for arg in self.states}
        kwargs = {**tokens, **extra, **self.fixed_kwargs, **inits}
        if self._takes_final_flag():
            kwargs["output_final_state"] = True
        label = _label(self.fn)
        try:
            inspect.signature(self.fn).bind(**kwargs)
        except TypeError as exc:
            raise CapacityError(
                f"{self.name}: {label} does not take these arguments ({exc}); {self._convention()}"
            ) from None
        except ValueError:
            pass
        try:
            out = self.fn(**kwargs)
        except TypeError as exc:
            raise CapacityError(f"{self.name}: {label} raised TypeError: {exc}; {self._convention()}") from None
        except (RuntimeError, IndexError, AssertionError, ValueError) as exc:
            raise _LayoutError(f"{self.name}: {label} raised {type(exc).__name__}: {exc}") from None
        n = len(self.states)
        if not isinstance(out, (tuple, list)) or len(out) < 2:
            raise CapacityError(f"{self.name}: {label} returned {_describe(out)}; expected (o, final states ...)")
        finals = list(out[1:])
        if len(finals) == 1 and n > 1:
            only = finals[0]
            if isinstance(only, (tuple, list)):
                finals = list(only)
            elif isinstance(only, torch.Tensor) and only.ndim >= 1 and only.shape[0] == n:
                finals = list(only.unbind(0))  # stacked along a first axis
        if len(finals) != n:
            raise CapacityError(
                f"{self.name}: {label} returned {_describe(out)}; from_fla expects o and {n} final state(s) "
                f"({', '.join(self.states)}) in that order, and never drops one"
            )
        new = {}
        for (arg, code), final in zip(self.states.items(), finals):
            want = (B, 1, *self._shape(code, d, dv))
            if not isinstance(final, torch.Tensor):
                raise CapacityError(
                    f"{self.name}: {label} returned {type(final).__name__} for the final {arg}, expected a tensor {want}"
                    " (called with output_final_state=True)"
                )
            if tuple(final.shape) != want:
                raise _LayoutError(
                    f"{self.name}: {label} returned the final {arg} of shape {tuple(final.shape)}, expected {want}"
                )
            new[arg] = final[:, 0].to(torch.float32).contiguous()
        return new if isinstance(state, dict) else next(iter(new.values()))

    def _check_state(self, state: object, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int]:
        """B, d, dv of a write, with the state's shapes checked against them."""
        _validate.tensor("k", k, ndim=3, finite=False)
        _validate.tensor("v", v, ndim=3, finite=False)
        if not self._multi:
            state = _validate.tensor("state", state, ndim=3, finite=False)
            B, d, dv = state.shape
            T = k.shape[1]
            if k.shape != (B, T, d) or v.shape != (B, T, dv):
                raise CapacityError(
                    f"{self.name}: shapes do not match: state [B, d, dv] = {list(state.shape)}, k [B, t, d] = "
                    f"{list(k.shape)}, v [B, t, dv] = {list(v.shape)}"
                )
            return B, d, dv
        B, T, d = k.shape
        dv = v.shape[2]
        if not isinstance(state, dict) or set(state) != set(self.states):
            raise CapacityError(
                f"{self.name}: the state is the dict of init_state() with {', '.join(self.states)}, got "
                f"{type(state).__name__}"
            )
        for arg, code in self.states.items():
            want = (B, *self._shape(code, d, dv))
            if not isinstance(state[arg], torch.Tensor) or tuple(state[arg].shape) != want:
                got = tuple(state[arg].shape) if isinstance(state[arg], torch.Tensor) else type(state[arg]).__name__
                raise CapacityError(
                    f"{self.name}: state {arg!r} is {got}, expected {want} for k [B, t, d] = {list(k.shape)}, "
                    f"v [B, t, dv] = {list(v.shape)}"
                )
        if v.shape[:2] != (B, T):
            raise CapacityError(f"{self.name}: k {list(k.shape)} and v {list(v.shape)} must share B and t")
        return B, d, dv

    def write(self, state: FlaState, k: torch.Tensor, v: torch.Tensor) -> FlaState:
        """Shapes: state float32 ``[B, d, dv]`` (or the dict of several ``states``), k ``[B, t, d]``, v ``[B, t, dv]``;
        returns the new state."""
        B, d, dv = self._check_state(state, k, v)
        T = k.shape[1]
        # (_call, the plain convention's, takes the one tensor state that _check_state has checked)
        call: Callable[[Any, torch.Tensor, torch.Tensor, str], FlaState] = (
            self._call if self._plain else self._call_mapped
        )
        try:
            return call(state, k, v, self.layout)
        except _LayoutError as exc:
            message = str(exc)
        other = LAYOUTS[1 - LAYOUTS.index(self.layout)]
        if T > 1:  # with one token the two layouts are the same tensors
            try:
                call(state, k, v, other)
            except Exception:
                pass
            else:
                message += (
                    f"; it looks transposed: with layout={other!r} ({_LAYOUT_WORDS[other]}) the op returns the "
                    f"expected shapes, so pass layout={other!r}"
                )
        raise CapacityError(message)

    def read(self, state: FlaState, q: torch.Tensor) -> torch.Tensor:
        """q S (or ``read(q, state)`` when given). Shapes: state ``[B, d, dv]`` (or the dict), q ``[B, m, d]`` ->
        float32 ``[B, m, dv]``."""
        memory = state[next(iter(self.states))] if isinstance(state, dict) else state
        d = memory.shape[1] if self.reader is None else None  # a reader of its own reads q as it likes
        held = f"state [B, d, dv] = {list(memory.shape)}"
        q = _validate.queries(self.name, q, batch=memory.shape[0], d=d, held=held, state=memory)
        if self.reader is None:
            return q.float() @ memory
        r = self.reader(q.float(), state)
        if not isinstance(r, torch.Tensor) or r.ndim != 3 or tuple(r.shape[:2]) != tuple(q.shape[:2]):
            got = tuple(r.shape) if isinstance(r, torch.Tensor) else type(r).__name__
            raise CapacityError(f"{self.name}: read {_label(self.reader)} returned {got}, expected [B, m, dv]")
        return r.to(torch.float32)


def from_fla(
    fn: Callable[..., object],
    *,
    name: str | None = None,
    layout: str = "BTHK",
    per_token: Mapping[str, PerToken] | None = None,
    dims: int | Sequence[int] | None = None,
    additive: bool | None = None,
    delta_rule: bool | None = None,
    names: dict[str, str] | None = None,
    states: dict[str, str] | None = None,
    read: Reader | None = None,
    **fixed_kwargs: Any,  # Any: the op's own arguments, passed as given
) -> FlaVariant:
    """A variant around ``fn``, an op with the flash-linear-attention calling convention.

    ``layout``: ``"BTHK"`` (tokens ``[B, T, H, K]``, most fla ops) or ``"BHTK"``. ``per_token``:
    inputs drawn up for every token: a number (``{"beta": 1.0}``, a log-gate ``{"g": math.log(0.95)}``),
    a sequence of K numbers (one per key channel; fixes d = K) or a callable of the keys
    (``{"a": lambda k: -k}``; gets k ``[B, T, d]``, returns ``[B, T]`` or ``[B, T, d]``).
    ``dims``: the key dimensions the op accepts when a fixed argument ties d (e.g. RWKV-6's
    ``u`` of shape ``[H, K]``); ``check_variant`` then measures at one of them.
    ``fixed_kwargs`` go to every call unchanged (e.g. ``scale=1.0``). ``additive`` /
    ``delta_rule`` (True, False or None = unknown) tell ``check_variant`` whether T2 / T12 must hold.
    ``names`` (the op's names for q, k, v), ``states`` (its initial-state arguments and their shapes) and
    ``read`` (how its state is read, when not q S) map other conventions; see the module docstring, also for
    why the read is q S rather than a call of fn.

    >>> import torch
    >>> def fla_linear(q, k, v, initial_state=None, output_final_state=True):   # [B, T, H, K] layout
    ...     S = initial_state + torch.einsum("bthk,bthv->bhkv", k, v)
    ...     return torch.einsum("bthk,bhkv->bthv", q, S), S
    >>> mem = from_fla(fla_linear, name="my-linear")
    >>> S = mem.write(mem.init_state(2, 8, 4), torch.randn(2, 5, 8), torch.randn(2, 5, 4))
    >>> tuple(S.shape), tuple(mem.read(S, torch.randn(2, 3, 8)).shape)
    ((2, 8, 4), (2, 3, 4))
    """
    return FlaVariant(
        fn,
        name=name,
        layout=layout,
        per_token=per_token,
        dims=dims,
        additive=additive,
        delta_rule=delta_rule,
        fixed_kwargs=fixed_kwargs,
        names=names,
        states=states,
        read=read,
    )
