"""A memory's methods called through ``lacapacity.errors.user_code``, with the protocol's checks on what comes back.

The probe, the sweep's kinds, the conformance checks and learned keys call a memory through ``guard(variant)``: an
exception inside any method becomes one line naming the memory, the method and the exception (allocation failures
pass through, for the caller's message with the sizes); a ``write`` that returns None or a non-state, and a
``state_numel`` that does not take ``(d, dv)``, are one line saying what the protocol expects. The numbers are the
memory's own: the guard only calls it.
"""

from __future__ import annotations

import inspect
from functools import cached_property
from typing import Any, cast

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError, user_code

_OPTIONAL = ("numel", "feature_dim")  # optional members that return whole numbers


def _label(variant: object) -> str:
    from lacapacity.variants import label

    try:
        return label(variant)
    except Exception:  # a params property that raises: the class names it still
        cls = type(variant)
        return f"{cls.__module__}:{cls.__qualname__}"


def _whole(value: Any, what: str) -> int:  # Any: what a user's method returned, checked here
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__index__"):
        raise CapacityError(f"{what} returned {value!r}; it must return a whole number")
    if isinstance(value, float) and not value.is_integer():
        raise CapacityError(f"{what} returned {value!r}; it must return a whole number")
    return int(value)


class Guarded:
    """``variant`` with each protocol method (and ``numel``, ``feature_dim`` where it has them) run as user code; other
    attributes are the variant's own."""

    def __init__(self, variant: object) -> None:
        self.inner: Any = variant  # Any: any object with the protocol's methods, called as user code

    def __getattr__(self, name: str) -> Any:  # Any: the variant's own attribute, whatever it is
        found = getattr(self.inner, name)
        if name in _OPTIONAL and callable(found):  # present exactly when the memory has it
            return lambda *args: _whole(self._call(name, *args), f"{self.who}: {name}()")
        return found

    @cached_property
    def who(self) -> str:
        return f"memory {_label(self.inner)!r}"

    def _call(self, method: str, *args: object, **kwargs: object) -> Any:  # Any: what the user's method returns
        try:
            with user_code(self.who, f"in {method}()", passthrough=_validate.is_alloc_failure):
                return getattr(self.inner, method)(*args, **kwargs)
        except Exception as exc:
            if not isinstance(exc, CapacityError) and _validate.is_alloc_failure(exc):  # passed through: the
                try:  # caller's message (``_validate.alloc_error``, the command line) names the memory and the method
                    exc.capacity_user_code = f"{self.who} in {method}()"  # type: ignore[attr-defined]  # a tag the caller reads
                except Exception:  # an exception that takes no attributes: the caller's message without the name
                    pass
            raise

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> Any:  # Any: the memory's state
        state = self._call("init_state", batch, d, dv, device=device)
        if state is None:
            raise CapacityError(f"{self.who}: init_state() returned None; it must return the empty state")
        return state

    def write(self, state: Any, k: torch.Tensor, v: torch.Tensor) -> Any:  # Any: the memory's state
        new = self._call("write", state, k, v)
        if new is None:
            raise CapacityError(
                f"{self.who}: write() returned None; write(state, k, v) must return the state "
                "(after an in-place update, return state)"
            )
        if isinstance(state, torch.Tensor) and not isinstance(new, torch.Tensor):
            raise CapacityError(
                f"{self.who}: write() returned a {type(new).__name__}, but init_state() made a tensor; "
                "write(state, k, v) must return the new state"
            )
        return new

    def read(self, state: Any, q: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self._call("read", state, q))  # the protocol's type: the memory's code keeps it

    def state_numel(self, d: int, dv: int, n: int | None = None) -> int:
        """Numbers kept per batch item; ``n`` (pairs written) is passed to a memory whose ``state_numel`` takes it."""
        fn = self.inner.state_numel
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):  # no signature to inspect: call it the protocol's way
            sig = None

        def takes(*a: object, **kw: object) -> bool:
            return sig is None or _binds(sig, a, kw)

        if n is not None and sig is not None and _binds(sig, (d, dv), {"n": n}):
            args, kwargs = (d, dv), {"n": n}
        elif takes(d, dv):
            args, kwargs = (d, dv), {}
        else:
            raise CapacityError(
                f"{self.who}: state_numel{sig} does not take (d, dv); the protocol is state_numel(d, dv) -> int, the "
                "numbers kept per batch item (a memory that grows may take n=, the pairs written, too)"
            )
        return _whole(self._call("state_numel", *args, **kwargs), f"{self.who}: state_numel(d, dv)")


def _binds(sig: inspect.Signature, args: tuple[object, ...], kwargs: dict[str, object]) -> bool:
    try:
        sig.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def guard(variant: object) -> Guarded:
    """``variant`` behind ``Guarded`` (once: a guarded variant is returned as it is)."""
    return variant if isinstance(variant, Guarded) else Guarded(variant)
