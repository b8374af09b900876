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

Per-token inputs (beta, log-gates g) go in ``per_token``: a number becomes ``[B, T, H]`` (or
``[B, H, T]``), a sequence of K numbers ``[B, T, H, K]`` (or ``[B, H, T, K]``). Keys are passed
as given: give unit keys (``capacity.keys.make`` does) or set the op's own normalisation flag.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

import torch

from capacity import _validate
from capacity.errors import CapacityError

__all__ = ["from_fla", "FlaVariant"]

LAYOUTS = ("BTHK", "BHTK")


def _label(fn) -> str:
    return f"{getattr(fn, '__module__', None) or '?'}.{getattr(fn, '__qualname__', None) or type(fn).__name__}"


def _jsonable(x):
    if isinstance(x, (str, bool, int, float)) or x is None:
        return x
    if isinstance(x, torch.Tensor):
        return x.tolist() if x.numel() <= 64 else f"tensor{tuple(x.shape)}"
    if isinstance(x, (list, tuple)):
        return [_jsonable(y) for y in x]
    return repr(x)


class FlaVariant:
    """A variant around an fla-style function; build it with ``from_fla``."""

    def __init__(self, fn: Callable, *, name: str | None, layout: str, per_token: dict | None, additive: bool | None, delta_rule: bool | None, fixed_kwargs: dict):
        if not callable(fn):
            raise CapacityError(f"from_fla needs a callable with the fla convention fn(q, k, v, ..., initial_state=, output_final_state=), got {fn!r}")
        self.fn = fn
        self.name = name if name is not None else f"fla:{getattr(fn, '__name__', type(fn).__name__)}"
        if not isinstance(self.name, str) or not self.name:
            raise CapacityError(f"from_fla: name must be a non-empty string, got {name!r}")
        if layout not in LAYOUTS:
            raise CapacityError(f"{self.name}: unknown layout {layout!r}; known: {', '.join(LAYOUTS)} (tokens [B, T, H, K] or [B, H, T, K])")
        self.layout = layout
        reserved = {"q", "k", "v", "initial_state", "output_final_state"} & set(fixed_kwargs)
        if reserved:
            raise CapacityError(f"{self.name}: {', '.join(sorted(reserved))} are set by the wrapper; pass only the function's other arguments")
        self.fixed_kwargs = dict(fixed_kwargs)
        self.per_token = {}
        for key, value in (per_token or {}).items():
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                self.per_token[key] = torch.tensor(float(value))
            elif isinstance(value, (Sequence, torch.Tensor)) and not isinstance(value, str):
                vec = torch.as_tensor(value, dtype=torch.float32).flatten()
                if vec.numel() == 0:
                    raise CapacityError(f"{self.name}: per_token[{key!r}] must not be empty")
                self.per_token[key] = vec
            else:
                raise CapacityError(f"{self.name}: per_token[{key!r}] must be a number (one per token) or a sequence of K numbers (one per key channel), got {value!r}")
            if not bool(torch.isfinite(self.per_token[key]).all()):
                raise CapacityError(f"{self.name}: per_token[{key!r}] must be finite, got {value!r}")
        for flag, value in (("additive", additive), ("delta_rule", delta_rule)):
            if value is not None and not isinstance(value, bool):
                raise CapacityError(f"{self.name}: {flag} must be True, False or None, got {value!r}")
        if additive is not None:
            self.additive = additive
        if delta_rule is not None:
            self.delta_rule = delta_rule

    @property
    def params(self) -> dict:
        out = {"fn": _label(self.fn), "layout": self.layout}
        out.update({f"per_token.{k}": _jsonable(v) for k, v in self.per_token.items()})
        out.update({k: _jsonable(v) for k, v in self.fixed_kwargs.items()})
        return out

    def __repr__(self) -> str:
        return f"from_fla({_label(self.fn)}, name={self.name!r}, layout={self.layout!r})"

    def state_numel(self, d: int, dv: int) -> int:
        return int(d) * int(dv)

    def init_state(self, batch: int, d: int, dv: int, *, device=None) -> torch.Tensor:
        batch = _validate.positive_int("batch", batch)
        d = _validate.positive_int("d", d)
        dv = _validate.positive_int("dv", dv)
        return torch.zeros(batch, d, dv, dtype=torch.float32, device=_validate.device(device))

    def _tokens(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, C] -> [B, T, 1, C] (BTHK) or [B, 1, T, C] (BHTK)."""
        return x.unsqueeze(2) if self.layout == "BTHK" else x.unsqueeze(1)

    def _per_token(self, key: str, value: torch.Tensor, B: int, T: int, d: int, device) -> torch.Tensor:
        if value.ndim == 0:
            t = value.to(device).expand(B, T)
            return self._tokens(t.unsqueeze(-1)).squeeze(-1)  # [B, T, 1] or [B, 1, T]
        if value.numel() != d:
            raise CapacityError(f"{self.name}: per_token[{key!r}] has {value.numel()} entries; a per-channel input needs K = d = {d}")
        return self._tokens(value.to(device).expand(B, T, d))  # [B, T, 1, d] or [B, 1, T, d]

    def write(self, state: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Shapes: state float32 ``[B, d, dv]``, k ``[B, t, d]``, v ``[B, t, dv]``; returns the new state."""
        _validate.tensor("state", state, ndim=3, finite=False)
        _validate.tensor("k", k, ndim=3, finite=False)
        _validate.tensor("v", v, ndim=3, finite=False)
        B, d, dv = state.shape
        T = k.shape[1]
        if k.shape != (B, T, d) or v.shape != (B, T, dv):
            raise CapacityError(f"{self.name}: shapes do not match: state [B, d, dv] = {list(state.shape)}, k [B, t, d] = {list(k.shape)}, v [B, t, dv] = {list(v.shape)}")
        extra = {key: self._per_token(key, val, B, T, d, k.device) for key, val in self.per_token.items()}
        kt, vt = self._tokens(k), self._tokens(v)
        out = self.fn(kt, kt, vt, **extra, **self.fixed_kwargs, initial_state=state.unsqueeze(1), output_final_state=True)
        if not isinstance(out, (tuple, list)) or len(out) < 2:
            raise CapacityError(f"{self.name}: {_label(self.fn)} returned {type(out).__name__}; the fla convention returns (o, final_state)")
        o, final = out[0], out[1]
        want_o = (B, T, 1, dv) if self.layout == "BTHK" else (B, 1, T, dv)
        if isinstance(o, torch.Tensor) and tuple(o.shape) != want_o:
            raise CapacityError(f"{self.name}: {_label(self.fn)} returned o of shape {tuple(o.shape)}, expected {self.layout} = {want_o}")
        if not isinstance(final, torch.Tensor):
            raise CapacityError(f"{self.name}: {_label(self.fn)} returned final_state {type(final).__name__}, expected a tensor [B, H, K, V] = {(B, 1, d, dv)} (called with output_final_state=True)")
        if tuple(final.shape) != (B, 1, d, dv):
            raise CapacityError(f"{self.name}: {_label(self.fn)} returned final_state of shape {tuple(final.shape)}, expected [B, H, K, V] = {(B, 1, d, dv)}")
        return final[:, 0].to(torch.float32).contiguous()

    def read(self, state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """q S. Shapes: state ``[B, d, dv]``, q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        _validate.tensor("q", q, ndim=3, finite=False)
        if q.shape[0] != state.shape[0] or q.shape[2] != state.shape[1]:
            raise CapacityError(f"{self.name}: q [B, m, d] = {list(q.shape)} does not match the state [B, d, dv] = {list(state.shape)}")
        return q.float() @ state


def from_fla(fn: Callable, *, name: str | None = None, layout: str = "BTHK", per_token: dict | None = None, additive: bool | None = None, delta_rule: bool | None = None, **fixed_kwargs) -> FlaVariant:
    """A variant around ``fn``, an op with the flash-linear-attention calling convention.

    ``layout``: ``"BTHK"`` (tokens ``[B, T, H, K]``, most fla ops) or ``"BHTK"``. ``per_token``:
    inputs drawn up for every token, e.g. ``{"beta": 1.0}`` or a log-gate ``{"g": math.log(0.95)}``.
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
    return FlaVariant(fn, name=name, layout=layout, per_token=per_token, additive=additive, delta_rule=delta_rule, fixed_kwargs=fixed_kwargs)
