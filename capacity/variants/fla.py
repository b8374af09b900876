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

Keys are passed as given: give unit keys (``capacity.keys.make`` does) or set the op's own
normalisation flag. The state is one ``[B, H, K, V]`` tensor: an op that returns more state
(a tuple final_state, or a third output such as an extra ``[B, H, K]`` state) is refused with a
CapacityError rather than have a part silently dropped. A variant pickles (for worker
processes) when ``fn`` and every callable in ``per_token`` are importable module-level
functions; otherwise pickling raises a CapacityError that names the culprit.
"""

from __future__ import annotations

import copy
import inspect
import numbers
import pickle
from collections.abc import Callable, Sequence

import torch

from capacity import _validate
from capacity.errors import CapacityError

__all__ = ["FlaVariant", "from_fla"]

LAYOUTS = ("BTHK", "BHTK")
_LAYOUT_WORDS = {"BTHK": "tokens [B, T, H, K]", "BHTK": "tokens [B, H, T, K]"}


def _label(fn) -> str:
    return f"{getattr(fn, '__module__', None) or '?'}.{getattr(fn, '__qualname__', None) or type(fn).__name__}"


def _jsonable(x):
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


def _describe(x) -> str:
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
        fn: Callable,
        *,
        name: str | None,
        layout: str,
        per_token: dict | None,
        dims,
        additive: bool | None,
        delta_rule: bool | None,
        fixed_kwargs: dict,
    ):
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
        reserved = {"q", "k", "v", "initial_state", "output_final_state"} & (set(fixed_kwargs) | set(per_token or {}))
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
        self.per_token: dict = {}
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
            if not bool(torch.isfinite(self.per_token[key]).all()):
                raise CapacityError(f"{self.name}: per_token[{key!r}] must be finite, got {value!r}")
        if len(set(channel_lengths.values())) > 1:
            listed = ", ".join(f"per_token[{k!r}] has {n}" for k, n in channel_lengths.items())
            raise CapacityError(f"{self.name}: per-channel inputs must all have K = d entries, but {listed}")
        self.dims = self._dims(dims, channel_lengths)
        for flag, value in (("additive", additive), ("delta_rule", delta_rule)):
            if value is not None and not isinstance(value, bool):
                raise CapacityError(f"{self.name}: {flag} must be True, False or None, got {value!r}")
        if additive is not None:
            self.additive = additive
        if delta_rule is not None:
            self.delta_rule = delta_rule

    def _dims(self, dims, channel_lengths: dict[str, int]):
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
    def params(self) -> dict:
        out = {"fn": _label(self.fn), "layout": self.layout}
        out.update({f"per_token.{k}": _jsonable(v) for k, v in self.per_token.items()})
        out.update({k: _jsonable(v) for k, v in self.fixed_kwargs.items()})
        if self.dims is not None:
            out["dims"] = list(self.dims)
        return out

    def __repr__(self) -> str:
        return f"from_fla({_label(self.fn)}, name={self.name!r}, layout={self.layout!r})"

    def __getstate__(self):
        for what, obj in [("fn", self.fn)] + [
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
        self, memo
    ):  # copies need no pickling: lambdas are copied by reference, as copy does for functions
        new = object.__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update({k: copy.deepcopy(v, memo) for k, v in self.__dict__.items()})
        return new

    def state_numel(self, d: int, dv: int) -> int:
        return int(d) * int(dv)

    def init_state(self, batch: int, d: int, dv: int, *, device=None) -> torch.Tensor:
        batch = _validate.positive_int("batch", batch)
        d = _validate.positive_int("d", d)
        dv = _validate.positive_int("dv", dv)
        return torch.zeros(batch, d, dv, dtype=torch.float32, device=_validate.device(device))

    # ------------------------------------------------------------------ the call

    @staticmethod
    def _tokens(x: torch.Tensor, layout: str) -> torch.Tensor:
        """[B, T, C] -> [B, T, 1, C] (BTHK) or [B, 1, T, C] (BHTK); [B, T] -> [B, T, 1] or [B, 1, T]."""
        return x.unsqueeze(2) if layout == "BTHK" else x.unsqueeze(1)

    def _per_token(self, key: str, value, k: torch.Tensor, layout: str) -> torch.Tensor:
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

    def write(self, state: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Shapes: state float32 ``[B, d, dv]``, k ``[B, t, d]``, v ``[B, t, dv]``; returns the new state."""
        _validate.tensor("state", state, ndim=3, finite=False)
        _validate.tensor("k", k, ndim=3, finite=False)
        _validate.tensor("v", v, ndim=3, finite=False)
        B, d, dv = state.shape
        T = k.shape[1]
        if k.shape != (B, T, d) or v.shape != (B, T, dv):
            raise CapacityError(
                f"{self.name}: shapes do not match: state [B, d, dv] = {list(state.shape)}, k [B, t, d] = "
                f"{list(k.shape)}, v [B, t, dv] = {list(v.shape)}"
            )
        try:
            return self._call(state, k, v, self.layout)
        except _LayoutError as exc:
            message = str(exc)
        other = LAYOUTS[1 - LAYOUTS.index(self.layout)]
        if T > 1:  # with one token the two layouts are the same tensors
            try:
                self._call(state, k, v, other)
            except Exception:
                pass
            else:
                message += (
                    f"; it looks transposed: with layout={other!r} ({_LAYOUT_WORDS[other]}) the op returns the "
                    f"expected shapes, so pass layout={other!r}"
                )
        raise CapacityError(message)

    def read(self, state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """q S. Shapes: state ``[B, d, dv]``, q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        _validate.tensor("q", q, ndim=3, finite=False)
        if q.shape[0] != state.shape[0] or q.shape[2] != state.shape[1]:
            raise CapacityError(
                f"{self.name}: q [B, m, d] = {list(q.shape)} does not match the state [B, d, dv] = {list(state.shape)}"
            )
        return q.float() @ state


def from_fla(
    fn: Callable,
    *,
    name: str | None = None,
    layout: str = "BTHK",
    per_token: dict | None = None,
    dims=None,
    additive: bool | None = None,
    delta_rule: bool | None = None,
    **fixed_kwargs,
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
    See the module docstring for why the read is q S rather than a call of fn.

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
    )
