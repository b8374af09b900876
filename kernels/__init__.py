"""Memory updates on a device-resident float32 state, and the read.

``update`` writes a chunk of tokens into a state in place and returns it; ``read`` reads it. ``update`` checks its
inputs before any launch and then dispatches:

- ``backend="auto"``: the Triton kernels on CUDA tensors (and, interpreted, on CPU tensors when
  the environment sets ``TRITON_INTERPRET=1``), plain torch otherwise;
- ``backend="torch"``: plain torch on any device: ``kernels.chunked``, the closed and chunked
  (WY) forms of each recurrence, differentiable and held by the tests to ``kernels.reference``,
  the one-token-at-a-time oracle;
- ``backend="triton"``: the Triton kernels (compiled on CUDA, the interpreter on the CPU).

The math of each mode is in ``reference.py``, ``chunked.py`` and README.md beside this file; ``available()`` lists
the modes. ``mode`` names the recurrence an update applies (not a registered object); the gate is ``alpha``
(docs/naming.md).

>>> import torch
>>> from lacapacity import kernels
>>> g = torch.Generator().manual_seed(0)
>>> S = torch.zeros(2, 8, 4)                                   # [B, d, dv]
>>> k, v = torch.randn(2, 5, 8, generator=g), torch.randn(2, 5, 4, generator=g)
>>> S = kernels.update(S, k, v, mode="delta", beta=1.0)        # in place; returns S
>>> r = kernels.read(S, k[:, -1:])                             # the last key reads back exactly
>>> bool(((r - v[:, -1:]) ** 2).sum(-1).max() < 1e-10)
True
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TypeAlias

import torch

from lacapacity.errors import CapacityError
from lacapacity.kernels import chunked, reference
from lacapacity.kernels.reference import CHANNEL_GATE, SCALAR_GATE, USES_BETA

__all__ = ["update", "read", "available", "MAX_DIM"]

MAX_DIM = 256  # largest d and dv the Triton kernels take
INPUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
BACKENDS = ("auto", "torch", "triton")
# beta, alpha: a number or a tensor of numbers (shapes in ``update``)
Param: TypeAlias = "float | torch.Tensor"


def _backend(backend: str, device: torch.device) -> str:
    if backend not in BACKENDS:
        raise CapacityError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
    if backend == "auto":
        interpret = device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"
        return "triton" if device.type == "cuda" or interpret else "torch"
    if backend == "triton" and device.type not in ("cuda", "cpu"):
        raise CapacityError(
            f"backend='triton' runs on CUDA tensors (compiled) or CPU tensors (interpreter), got {device}; use backend='torch'"
        )
    return backend


def _triton_module(name: str) -> ModuleType:
    """Import a Triton kernel module late: Triton is optional where no kernel is launched."""
    try:
        import triton  # noqa: F401
    except ImportError:
        raise CapacityError(
            "backend='triton' needs the triton package (pip install triton); use backend='torch'"
        ) from None
    import importlib

    return importlib.import_module(f"lacapacity.kernels.{name}")


def _check_tensor(name: str, x: object, ndim: int, dtypes: tuple[torch.dtype, ...] = INPUT_DTYPES) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise CapacityError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != ndim:
        raise CapacityError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if x.dtype not in dtypes:
        raise CapacityError(
            f"{name} must be {' or '.join(str(d).replace('torch.', '') for d in dtypes)}, got {str(x.dtype).replace('torch.', '')}"
        )
    return x


def _no_meta(**tensors: torch.Tensor) -> None:
    """Raise for a meta tensor (checked after the one-device check, which names a mix of devices)."""
    for name, x in tensors.items():
        if x.device.type == "meta":
            raise CapacityError(f"{name} is a meta tensor; meta tensors carry no numbers: pass one on 'cpu' or 'cuda'")


def _check_state(state: torch.Tensor) -> tuple[int, int, int]:
    _check_tensor("state", state, 3, (torch.float32,))
    B, d, dv = state.shape
    if min(B, d, dv) < 1:
        raise CapacityError(f"state [B, d, dv] must have B, d, dv >= 1, got {list(state.shape)}")
    if any(size > 1 and stride == 0 for size, stride in zip(state.shape, state.stride())):
        raise CapacityError(
            f"state must own its entries (it is written in place), got an expanded view with strides {state.stride()}; "
            "pass state.clone()"
        )
    return B, d, dv


def _check_dims(which: str, d: int, dv: int) -> None:
    if which == "triton" and (d > MAX_DIM or dv > MAX_DIM):
        raise CapacityError(
            f"the Triton kernels take d and dv up to {MAX_DIM}, got d={d}, dv={dv}; use backend='torch'"
        )


def _param(name: str, x: object, device: torch.device) -> torch.Tensor:
    """A number or tensor parameter as float32 on ``device`` (a tensor with entries must already be there)."""
    if isinstance(x, torch.Tensor):
        if x.ndim > 0 and x.device != device:
            raise CapacityError(f"{name} must be on the state's device {device}, got {x.device}")
        if x.is_complex() or x.dtype == torch.bool:
            raise CapacityError(f"{name} must be real numbers, got {x.dtype}")
        if x.device.type == "meta":
            raise CapacityError(f"{name} is a meta tensor; meta tensors carry no numbers")
    try:
        return torch.as_tensor(x, dtype=torch.float32, device=device)
    except (TypeError, ValueError, RuntimeError):
        raise CapacityError(f"{name} must be a number or a tensor, got {type(x).__name__}") from None


def _per_token(
    name: str, x: object, B: int, T: int, device: torch.device, low: float, high: float, high_open: bool
) -> torch.Tensor:
    """A scalar-per-token parameter as a float32 [B, T] view (broadcast, not copied): from a number, [], [B] or [B, T]."""
    t = _param(name, x, device)
    if t.ndim == 1:
        t = t[:, None]
    if t.ndim > 2 or (t.ndim >= 1 and t.shape[0] not in (1, B)) or (t.ndim == 2 and t.shape[1] not in (1, T)):
        raise CapacityError(
            f"{name} must be a number or a tensor of shape [B] or [B, T] = [{B}] or [{B}, {T}]; got {tuple(t.shape)}"
        )
    return _in_range(name, t, low, high, high_open).expand(B, T)


def _per_channel(name: str, x: object, B: int, T: int, d: int, device: torch.device) -> torch.Tensor:
    """A per-channel gate as a float32 [B, T, d] view (broadcast, not copied): from a number, [d], [B, d] or [B, T, d]."""
    t = _param(name, x, device)
    shapes = {0: (), 1: (d,), 2: (B, d), 3: (B, T, d)}
    if t.ndim > 3 or tuple(t.shape) != shapes[t.ndim]:
        raise CapacityError(
            f"{name} must be a number or a tensor of shape [d], [B, d] or [B, T, d] = [{d}], [{B}, {d}], [{B}, {T}, {d}]; got {tuple(t.shape)}"
        )
    if t.ndim == 2:
        t = t[:, None, :]
    return _in_range(name, t, 0.0, 1.0, False).expand(B, T, d)


def _in_range(name: str, t: torch.Tensor, low: float, high: float, high_open: bool) -> torch.Tensor:
    """Check every entry once, on the tensor as given (before any broadcast)."""
    if t.numel() == 0:
        return t
    ok_low = bool((t > low).all())
    ok_high = bool((t < high).all()) if high_open else bool((t <= high).all())
    if not (ok_low and ok_high):
        interval = f"({low:g}, {high:g}" + (")" if high_open else "]")
        raise CapacityError(f"{name} must lie in {interval}; got values from {float(t.min()):g} to {float(t.max()):g}")
    return t


_MODES = {
    "linear": "S = S + k^T v (additive)",
    "decay": "S = alpha S + k^T v, one gate alpha per token",
    "gla": "S = Diag(alpha) S + k^T v, one gate per channel",
    "delta": "S = (I - b k^T k) S + b k^T v, the delta rule with b = beta",
    "gated_delta": "S = alpha (I - b k^T k) S + b k^T v, one gate alpha per token",
    "kda": "S = (I - b k^T k) Diag(alpha) S + b k^T v, one gate per channel",
}


def available() -> dict[str, str]:
    """The modes ``update`` applies: name -> its recurrence.

    >>> list(available())
    ['linear', 'decay', 'gla', 'delta', 'gated_delta', 'kda']
    """
    return dict(_MODES)


def update(
    state: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mode: str,
    beta: Param | None = None,
    alpha: Param | None = None,
    normalize: bool = True,
    backend: str = "auto",
) -> torch.Tensor:
    """Write the tokens (k, v) into ``state`` in place, in order, and return ``state``.

    Shapes: state float32 ``[B, d, dv]``; k ``[B, T, d]``, v ``[B, T, dv]`` (float32, bfloat16
    or float16, one dtype); ``beta`` in (0, 2) as a number, ``[B]`` or ``[B, T]`` (delta,
    gated_delta, kda); the gate ``alpha`` in (0, 1]: for decay and gated_delta a number, ``[B]`` or
    ``[B, T]``, for gla and kda a number, ``[d]``, ``[B, d]`` or ``[B, T, d]``.
    ``normalize`` L2-normalises each key before it is used. The Triton backend takes d and
    dv up to 256 and any strides; the state never leaves its device.
    """
    if mode not in _MODES:
        raise CapacityError(f"unknown mode {mode!r}; known: {', '.join(_MODES)}")
    B, d, dv = _check_state(state)
    _check_tensor("k", k, 3)
    _check_tensor("v", v, 3)
    if v.dtype != k.dtype:
        raise CapacityError(
            f"k and v must share one dtype among float32, bfloat16, float16; got {k.dtype} and {v.dtype}"
        )
    if len({state.device, k.device, v.device}) > 1:
        meta = "; meta tensors carry no numbers" if "meta" in {state.device.type, k.device.type, v.device.type} else ""
        raise CapacityError(f"state, k and v must be on one device, got {state.device}, {k.device}, {v.device}{meta}")
    _no_meta(state=state, k=k, v=v)
    if k.shape[0] != B or v.shape[0] != B or k.shape[2] != d or v.shape[2] != dv or k.shape[1] != v.shape[1]:
        raise CapacityError(
            f"shapes do not match: state [B, d, dv] = {list(state.shape)}, k [B, T, d] = {list(k.shape)}, v [B, T, dv] = {list(v.shape)}"
        )
    if not isinstance(normalize, bool):
        raise CapacityError(f"normalize must be True or False, got {normalize!r}")
    T = k.shape[1]
    which = _backend(backend, state.device)
    _check_dims(which, d, dv)
    if (beta is not None) != (mode in USES_BETA):
        raise CapacityError(f"mode {mode!r} " + ("needs beta in (0, 2)" if mode in USES_BETA else "takes no beta"))
    needs_gate = mode in SCALAR_GATE or mode in CHANNEL_GATE
    if (alpha is not None) != needs_gate:
        raise CapacityError(
            f"mode {mode!r} " + ("needs a gate alpha in (0, 1]" if needs_gate else "takes no gate (alpha)")
        )
    if beta is not None:
        beta = _per_token("beta", beta, B, T, state.device, 0.0, 2.0, True)  # [B, T]
    gate = None  # the kernels' own name for alpha
    if alpha is not None:
        if mode in SCALAR_GATE:
            gate = _per_token("alpha", alpha, B, T, state.device, 0.0, 1.0, False)  # [B, T]
        else:
            gate = _per_channel("alpha", alpha, B, T, d, state.device)  # [B, T, d]
    if T == 0:
        return state
    if which == "torch":
        new = chunked.recurrence(k, v, mode=mode, beta=beta, gate=gate, initial_state=state, normalize=normalize)
        return state.copy_(new)
    written: torch.Tensor = _triton_module("triton_update").update(  # a module's attribute: typed Any
        state, k, v, mode=mode, beta=beta, gate=gate, normalize=normalize
    )
    return written


def _check_read(state: torch.Tensor, q: torch.Tensor) -> None:
    B, d, dv = _check_state(state)
    _check_tensor("q", q, 3)
    if q.shape[0] != B or q.shape[2] != d:
        raise CapacityError(
            f"shapes do not match: state [B, d, dv] = {list(state.shape)}, q [B, m, d] = {list(q.shape)}"
        )
    if state.device != q.device:
        meta = "; meta tensors carry no numbers" if "meta" in (state.device.type, q.device.type) else ""
        raise CapacityError(f"state, q must be on one device, got state on {state.device}, q on {q.device}{meta}")
    _no_meta(state=state, q=q)


def read(state: torch.Tensor, q: torch.Tensor, *, normalize: bool = True) -> torch.Tensor:
    """o = q S. Shapes: state float32 ``[B, d, dv]``, q ``[B, m, d]``; returns float32 ``[B, m, dv]``."""
    _check_read(state, q)
    if not isinstance(normalize, bool):
        raise CapacityError(f"normalize must be True or False, got {normalize!r}")
    return reference.read(state, q, normalize=normalize)
