"""Kernel objects for both worlds: compiled (CUDA tensors) and interpreted (CPU tensors).

Triton picks its interpreter when ``TRITON_INTERPRET=1`` is set as ``@triton.jit`` runs, for
our kernels and for ``triton.language``'s own helpers (``tl.zeros`` ...), which are jitted when
Triton is imported. To run a kernel on CPU tensors without that variable having been set
before import, ``Kernel`` keeps the Python function twice, compiled and interpreted, and runs
the interpreted one inside ``interpreting()``: the interpreter knob is on, and every helper that
was jitted for the compiler is called through an interpreted wrapper of the same function.
The interpreter patches ``triton.language`` while it runs and (Triton 3.x) leaves some of the
patches of nested helper calls in place; the context snapshots every ``triton.language``
module and class first and puts them back on exit. The context also makes the interpreter's ``tl.dot`` read bfloat16 operands as numbers (it
multiplies their raw uint16 bit patterns otherwise) and lets Triton 3.6's interpreter use
integer arguments as loop bounds under numpy 2. Nothing is changed outside that context,
so compiled kernels in the same process are unaffected.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from types import ModuleType

import numpy as np
import torch
import triton
import triton.language as tl
from triton import knobs
from triton.runtime import interpreter
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

_lock = threading.RLock()  # the context patches process-wide state: one interpreted launch at a time
_helpers: dict[
    Callable[..., object], Callable[..., object]
] = {}  # within one context: python function -> its rewritten, interpretable version


def _call_interpreted(self: JITFunction, *args: object, **kwargs: object) -> object:
    """JITFunction.__call__ inside the context: a helper called from an interpreted kernel."""
    fn = _helpers.get(self.fn)
    if fn is None:
        interpreter._patch_lang(self.fn)  # the helper's own module globals (undone on exit)
        fn = _helpers[self.fn] = InterpretedFunction(self.fn).rewrite()
    return fn(*args, **kwargs)


def _language_objects() -> list[ModuleType | type]:
    """Every triton.language module and the classes they define: what the interpreter patches."""
    seen, out = set(), []
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith("triton.language"):
            continue
        for obj in [mod, *vars(mod).values()]:
            if (obj is mod or (isinstance(obj, type) and obj.__module__.startswith("triton.language"))) and id(
                obj
            ) not in seen:
                seen.add(id(obj))
                out.append(obj)
    return out


def _snapshot() -> list[tuple[ModuleType | type, dict[str, object]]]:
    return [(obj, dict(vars(obj))) for obj in _language_objects()]


def _restore(snapshot: list[tuple[ModuleType | type, dict[str, object]]]) -> None:
    missing = object()
    for obj, saved in snapshot:
        current = vars(obj)
        if isinstance(obj, type):  # names added to modules are kept: the interpreter's rewriter puts its own there
            for name in [n for n in current if n not in saved]:
                delattr(obj, name)
        for name, value in saved.items():
            if current.get(name, missing) is not value:
                setattr(obj, name, value)


def _as_float32(h: interpreter.TensorHandle) -> interpreter.TensorHandle:
    """A bfloat16 interpreter tensor (stored as uint16 bits) as float32 numbers; others unchanged."""
    if h.dtype != tl.bfloat16:
        return h
    bits = np.asarray(h.data).astype(np.uint32) << 16  # bf16 is the top half of a float32
    return interpreter.TensorHandle(bits.view(np.float32), tl.float32)


def _patch_lang_tensor(
    tensor: type,
    scope: interpreter._LangPatchScope,
    _original: Callable[[type, interpreter._LangPatchScope], None] = interpreter._patch_lang_tensor,
) -> None:
    """The interpreter's tensor patches, with ``__index__`` taking one-element arrays of any rank.

    Triton 3.6's interpreter turns integer arguments into arrays of shape [1] and converts them
    back with ``int(array)``, which numpy >= 2.x rejects for arrays that are not 0-dimensional
    (``range(n)`` over an argument then fails); later versions squeeze first, as this does.
    """
    _original(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).item()))


@contextlib.contextmanager
def interpreting() -> Iterator[None]:
    """Run Triton's interpreter for what is launched inside, whatever the environment said at import."""
    builder = interpreter.interpreter_builder
    with _lock, knobs.runtime.scope():
        snapshot = _snapshot()
        knobs.runtime.interpret = True
        original_call = JITFunction.__call__
        had_own_dot = "create_dot" in vars(builder)
        original_dot = builder.create_dot
        JITFunction.__call__ = _call_interpreted
        interpreter._patch_lang_tensor = _patch_lang_tensor
        builder.create_dot = lambda a, b, *rest: original_dot(_as_float32(a), _as_float32(b), *rest)
        try:
            yield
        finally:
            _helpers.clear()
            _restore(snapshot)
            JITFunction.__call__ = original_call
            interpreter._patch_lang_tensor = _patch_lang_tensor.__defaults__[0]  # type: ignore[index]  # _original's
            if had_own_dot:
                builder.create_dot = original_dot
            else:
                del builder.create_dot


class Kernel:
    """One Triton kernel function, launched compiled on CUDA tensors and interpreted elsewhere.

    Usage: ``kernel = Kernel(body, do_not_specialize=("T",))`` then
    ``kernel(grid, device, *args, FLAG=True, num_warps=4)``.
    """

    def __init__(self, fn: Callable[..., None], do_not_specialize: tuple[str, ...] = ()) -> None:
        self.fn = fn
        # an InterpretedFunction already if TRITON_INTERPRET=1 at import; sizes that only feed
        # masks and loop bounds are not specialised on (one compiled kernel for every T, d, dv)
        self.compiled = triton.jit(fn, do_not_specialize=list(do_not_specialize))
        self.interpreted = InterpretedFunction(fn)

    def __call__(self, grid: tuple[int, ...], device: torch.device, *args: object, **kwargs: object) -> None:
        if device.type == "cuda" and not isinstance(self.compiled, InterpretedFunction):
            with torch.cuda.device(device):
                self.compiled[grid](*args, **kwargs)
        else:
            with interpreting():
                self.interpreted[grid](*args, **kwargs)
