"""Memory updates on a device-resident float32 state, and the fused read/error.

``update`` writes a chunk of tokens into a state in place and returns it; ``read_error`` scores
reads against target values. Both check their inputs before any launch and then dispatch:

- ``backend="auto"``: the Triton kernels on CUDA tensors (or everywhere when the environment
  sets ``TRITON_INTERPRET=1``), the plain-torch reference otherwise;
- ``backend="torch"``: the reference (``kernels.reference``), on any device;
- ``backend="triton"``: the Triton kernels (compiled on CUDA, the interpreter on the CPU).

The math of each mode is in ``reference.py`` and README.md beside this file.

>>> import torch
>>> from capacity import kernels
>>> S = torch.zeros(2, 8, 4)
>>> k, v = torch.randn(2, 5, 8), torch.randn(2, 5, 4)
>>> S = kernels.update(S, k, v, mode="delta", beta=1.0)
>>> tuple(S.shape)
(2, 8, 4)
"""

from __future__ import annotations

import os

import torch

from capacity.errors import CapacityError
from capacity.kernels import reference
from capacity.kernels.reference import CHANNEL_GATE, MODES, SCALAR_GATE, USES_BETA

__all__ = ["update", "read", "read_error", "MODES", "MAX_DIM"]

MAX_DIM = 256  # largest d and dv the Triton kernels take
INPUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
BACKENDS = ("auto", "torch", "triton")


def _backend(backend: str, device: torch.device) -> str:
    if backend not in BACKENDS:
        raise CapacityError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
    if backend == "auto":
        return "triton" if device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1" else "torch"
    return backend


def _check_tensor(name: str, x, ndim: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise CapacityError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != ndim:
        raise CapacityError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    return x


def _per_token(name: str, x, B: int, T: int, device, low: float, high: float, high_open: bool) -> torch.Tensor:
    """A scalar-per-token parameter as float32 [B, T]: from a number, [], [B] or [B, T]."""
    t = torch.as_tensor(x, dtype=torch.float32, device=device)
    if t.ndim == 1:
        t = t[:, None]
    if t.ndim > 2 or (t.ndim >= 1 and t.shape[0] not in (1, B)) or (t.ndim == 2 and t.shape[1] not in (1, T)):
        raise CapacityError(f"{name} must be a number or a tensor of shape [B], [B, T] = [{B}], [{B}, {T}]; got {tuple(t.shape)}")
    return _in_range(name, t.expand(B, T), low, high, high_open)


def _per_channel(name: str, x, B: int, T: int, d: int, device) -> torch.Tensor:
    """A per-channel gate as float32 [B, T, d]: from a number, [d], [B, d] or [B, T, d]."""
    t = torch.as_tensor(x, dtype=torch.float32, device=device)
    shapes = {0: (), 1: (d,), 2: (B, d), 3: (B, T, d)}
    if t.ndim > 3 or tuple(t.shape) != shapes[t.ndim]:
        raise CapacityError(f"{name} must be a number or a tensor of shape [d], [B, d] or [B, T, d] = [{d}], [{B}, {d}], [{B}, {T}, {d}]; got {tuple(t.shape)}")
    if t.ndim == 2:
        t = t[:, None, :]
    return _in_range(name, t.expand(B, T, d), 0.0, 1.0, False)


def _in_range(name, t, low, high, high_open):
    ok_low = bool((t > low).all())
    ok_high = bool((t < high).all()) if high_open else bool((t <= high).all())
    if not (ok_low and ok_high) or not bool(torch.isfinite(t).all()):
        interval = f"({low:g}, {high:g}" + (")" if high_open else "]")
        raise CapacityError(f"{name} must lie in {interval}; got values from {float(t.min()):g} to {float(t.max()):g}")
    return t.contiguous()


def update(state, k, v, *, mode: str, beta=None, gate=None, normalize: bool = True, backend: str = "auto") -> torch.Tensor:
    """Write the tokens (k, v) into ``state`` in place, in order, and return ``state``.

    Shapes: state float32 ``[B, d, dv]``; k ``[B, T, d]``, v ``[B, T, dv]`` (float32, bfloat16
    or float16, one dtype); ``beta`` in (0, 2) as a number, ``[B]`` or ``[B, T]`` (delta,
    gated_delta, kda); ``gate`` in (0, 1]: for decay and gated_delta a number, ``[B]`` or
    ``[B, T]``, for gla and kda a number, ``[d]``, ``[B, d]`` or ``[B, T, d]``.
    ``normalize`` L2-normalises each key before it is used.
    """
    if mode not in MODES:
        raise CapacityError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    _check_tensor("state", state, 3)
    _check_tensor("k", k, 3)
    _check_tensor("v", v, 3)
    if state.dtype != torch.float32:
        raise CapacityError(f"state must be float32, got {state.dtype}")
    if k.dtype not in INPUT_DTYPES or v.dtype != k.dtype:
        raise CapacityError(f"k and v must share one dtype among float32, bfloat16, float16; got {k.dtype} and {v.dtype}")
    if len({state.device, k.device, v.device}) > 1:
        raise CapacityError(f"state, k and v must be on one device, got {state.device}, {k.device}, {v.device}")
    B, d, dv = state.shape
    if k.shape[0] != B or v.shape[0] != B or k.shape[2] != d or v.shape[2] != dv or k.shape[1] != v.shape[1]:
        raise CapacityError(f"shapes do not match: state [B, d, dv] = {list(state.shape)}, k [B, T, d] = {list(k.shape)}, v [B, T, dv] = {list(v.shape)}")
    T = k.shape[1]
    which = _backend(backend, state.device)
    if which == "triton" and (d > MAX_DIM or dv > MAX_DIM):
        raise CapacityError(f"the Triton kernels take d and dv up to {MAX_DIM}, got d={d}, dv={dv}; use backend='torch'")
    if (beta is not None) != (mode in USES_BETA):
        raise CapacityError(f"mode {mode!r} " + ("needs beta in (0, 2)" if mode in USES_BETA else "takes no beta"))
    needs_gate = mode in SCALAR_GATE or mode in CHANNEL_GATE
    if (gate is not None) != needs_gate:
        raise CapacityError(f"mode {mode!r} " + ("needs a gate in (0, 1]" if needs_gate else "takes no gate"))
    if beta is not None:
        beta = _per_token("beta", beta, B, T, state.device, 0.0, 2.0, True)
    if gate is not None:
        if mode in SCALAR_GATE:
            gate = _per_token("gate", gate, B, T, state.device, 0.0, 1.0, False)
        else:
            gate = _per_channel("gate", gate, B, T, d, state.device)
    if T == 0:
        return state
    if which == "torch":
        new = reference.recurrence(k, v, mode=mode, beta=beta, gate=gate, initial_state=state, normalize=normalize)
        return state.copy_(new)
    from capacity.kernels import triton_update  # imported late: Triton is optional on the CPU

    return triton_update.update(state, k, v, mode=mode, beta=beta, gate=gate, normalize=normalize)


def read(state, q, *, normalize: bool = True) -> torch.Tensor:
    """o = q S. Shapes: state float32 ``[B, d, dv]``, q ``[B, m, d]``; returns float32 ``[B, m, dv]``."""
    _check_tensor("state", state, 3)
    _check_tensor("q", q, 3)
    if q.shape[0] != state.shape[0] or q.shape[2] != state.shape[1]:
        raise CapacityError(f"shapes do not match: state [B, d, dv] = {list(state.shape)}, q [B, m, d] = {list(q.shape)}")
    if q.device != state.device:
        raise CapacityError(f"state and q must be on one device, got {state.device} and {q.device}")
    return reference.read(state, q, normalize=normalize)


def read_error(state, q, target, *, normalize: bool = True, backend: str = "auto") -> dict[str, torch.Tensor]:
    """Per-query ``sq_error``, ``signal`` and ``cosine`` (float32 ``[B, m]`` each) of the reads q S against ``target``.

    Shapes: state float32 ``[B, d, dv]``, q ``[B, m, d]``, target ``[B, m, dv]``. The Triton
    backend computes them without writing the reads to device memory.
    """
    _check_tensor("state", state, 3)
    _check_tensor("q", q, 3)
    _check_tensor("target", target, 3)
    if state.dtype != torch.float32:
        raise CapacityError(f"state must be float32, got {state.dtype}")
    B, d, dv = state.shape
    if q.shape[0] != B or target.shape[0] != B or q.shape[2] != d or target.shape[2] != dv or q.shape[1] != target.shape[1]:
        raise CapacityError(f"shapes do not match: state [B, d, dv] = {list(state.shape)}, q [B, m, d] = {list(q.shape)}, target [B, m, dv] = {list(target.shape)}")
    if len({state.device, q.device, target.device}) > 1:
        raise CapacityError(f"state, q and target must be on one device, got {state.device}, {q.device}, {target.device}")
    which = _backend(backend, state.device)
    if which == "torch":
        return reference.read_error(state, q, target, normalize=normalize)
    if d > MAX_DIM or dv > MAX_DIM:
        raise CapacityError(f"the Triton kernels take d and dv up to {MAX_DIM}, got d={d}, dv={dv}; use backend='torch'")
    from capacity.kernels import triton_read

    return triton_read.read_error(state, q, target, normalize=normalize)
