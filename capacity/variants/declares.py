"""What a memory declares about itself, in one typed place, and the one reader of a memory's optional members.

A memory (``lacapacity.variants.Variant``) may carry ``declares``, a ``Declares`` (a class attribute, or a property
where the answer depends on its parameters). Every field has a default, so a memory that declares nothing is a
fixed-size state of one matrix about which nothing else is promised:

================  ==================  ==========================================================================
field             default             what it tells, and who reads it
================  ==================  ==========================================================================
linear_read       None (unsaid)       True: the read is q W for one D x dv matrix W, so the rank bound T8 binds
                                      it (``check_variant``, the figures' T8 lines, the sweep's coordinate
                                      ``linear_read``). Unsaid: ``check_variant`` applies T8 to a fixed state and
                                      says so; figures draw no T8 line
form              None (no closed     the closed-form family of the rule at its parameters (``FAMILIES``); figures
                  form)               draw a family's closed forms only for a memory that declares it, its
                                      constants read from the memory's recorded parameters
additive          None (unsaid)       True: the write is S += k^T v and the read q S exactly: ``check_variant``
                                      requires T2, figures draw T5, T7, T10 (the sweep's coordinate ``additive``).
                                      False: T2 is n/a. Unsaid: ``check_variant`` measures T2 and says whether it
                                      holds
delta_rule        None (unsaid)       True: with beta = 1 the last written unit key reads its value back exactly:
                                      ``check_variant`` requires T12 (beta from ``params["beta"]``). False: n/a.
                                      Unsaid: measured and reported
state             "fixed"             "growing": the state grows with the writes (softmax's cache, log-linear's
                                      levels); the memory then has ``numel(state)`` and ``state_numel(d, dv, n=)``,
                                      and the probe, the bill, the frontier and ``precision.state_bytes`` size it
                                      so. "learning": a fixed-size state written by gradient steps (TTT, Titans)
differentiable    None (unsaid)       False: write and read pass no gradient (a Triton backend); the trained task
                                      refuses the memory at once. True or unsaid: it checks with a tiny backward
bookkeeping       ()                  names of the state's dataclass fields that hold counters or indices, not
                                      stored numbers (log-linear's token counter, Mamba-3's clock): never rounded
                                      by the precision axis, not counted in the state's numbers or bytes
                                      (``precision``, ``check_variant``, the bill); a field of that name at any
                                      depth of the state
states            1                   how many d x dv matrices the state holds (lsq's A and B, Titans' weights and
                                      momentum: 2); the frontier's caption names memories that hold more than one
dims              None (any d)        the key dimensions d the memory takes (``from_fla`` sets it where a
                                      per-channel input fixes d); ``check_variant`` runs at the declared d nearest
                                      16 and 64
================  ==================  ==========================================================================

The optional methods and attributes besides ``declares`` are read here as well, and nowhere else: ``params`` (a
dict), ``feature_dim(d)``, ``numel(state)`` (of a growing state), ``state_bytes(d, dv, dtype, n=)``, ``display`` (a
class's name in figures) and ``label`` (a string that overrides ``variants.label``).

>>> from lacapacity import variants
>>> declared(variants.get("delta")).form, declared(variants.get("softmax")).state
('delta', 'growing')
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, Literal, get_args

from lacapacity.errors import CapacityError

# the rules whose closed forms lacapacity.theory holds (docs/theory.md):
# additive      S += phi(k)^T v (T1-T10; T25-T28 with a feature map)
# decay         S = alpha S + phi(k)^T v, a scalar gate (T11, T21)
# delta         S += beta k^T (v - k S) (T12, delta_rule_error, T22)
# gated_delta   S = alpha (I - beta k^T k) S + beta k^T v (T23, T15-T19)
# selective     Mamba2's input-dependent decay (T24)
# softmax       a cache read by softmax(scale q K^T) V (T13, T29)
# log_linear    levels of a base memory that grow as log2 n (T30)
Family = Literal["additive", "decay", "delta", "gated_delta", "selective", "softmax", "log_linear"]
FAMILIES: tuple[str, ...] = get_args(Family)
StateKind = Literal["fixed", "growing", "learning"]
_STATES: tuple[str, ...] = get_args(StateKind)


@dataclasses.dataclass(frozen=True)
class Declares:
    """What a memory is (the table in this module's docstring). ``Declares(form="delta", delta_rule=True)``."""

    linear_read: bool | None = None
    form: Family | None = None
    additive: bool | None = None
    delta_rule: bool | None = None
    state: StateKind = "fixed"
    differentiable: bool | None = None
    bookkeeping: tuple[str, ...] = ()
    states: int = 1
    dims: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        for f in ("linear_read", "additive", "delta_rule", "differentiable"):
            if getattr(self, f) is not None and not isinstance(getattr(self, f), bool):
                raise CapacityError(f"Declares: {f} must be True, False or None, got {getattr(self, f)!r}")
        if self.form is not None and self.form not in FAMILIES:
            raise CapacityError(f"Declares: unknown form {self.form!r}; known: {', '.join(FAMILIES)} (or None)")
        if self.state not in _STATES:
            raise CapacityError(f"Declares: state must be one of {', '.join(_STATES)}, got {self.state!r}")
        if not isinstance(self.bookkeeping, tuple) or not all(isinstance(x, str) and x for x in self.bookkeeping):
            raise CapacityError(f"Declares: bookkeeping must be a tuple of field names, got {self.bookkeeping!r}")
        if isinstance(self.states, bool) or not isinstance(self.states, int) or self.states < 1:
            raise CapacityError(f"Declares: states must be a whole number >= 1, got {self.states!r}")
        if self.dims is not None:
            ok = isinstance(self.dims, tuple) and self.dims and len(set(self.dims)) == len(self.dims)
            if not ok or any(isinstance(x, bool) or not isinstance(x, int) or x < 2 for x in self.dims):
                raise CapacityError(
                    f"Declares: dims must be None or a tuple of distinct whole numbers >= 2 (the key dimensions), got {self.dims!r}"
                )
            object.__setattr__(self, "dims", tuple(sorted(self.dims)))


_NOTHING = Declares()


def wrapped(inner: Declares, **changes: Any) -> Declares:  # Any: Declares' own field values
    """What a wrapper of a memory that declares ``inner`` declares (``precision.stored``, ``heads.split``): the same
    read, state, differentiability, bookkeeping, states and dims, but neither T2 nor T12 exactly (rounding, or heads,
    break them) and no closed-form family; ``changes`` replace fields."""
    out = dataclasses.replace(inner, additive=False, delta_rule=False, form=None)
    return dataclasses.replace(out, **changes) if changes else out


def declared(memory: object) -> Declares:
    """What ``memory`` declares (its ``declares``), or the defaults for a memory that declares nothing."""
    found = getattr(memory, "declares", None)
    if found is None:
        return _NOTHING
    if not isinstance(found, Declares):
        raise CapacityError(
            f"{name(memory)}: declares must be a lacapacity.variants.Declares, got {type(found).__name__}"
        )
    return found


def name(memory: object) -> str:
    """The memory's ``name`` (the protocol asks for one), or its class's name where it has none."""
    own = getattr(memory, "name", None)
    return own if isinstance(own, str) else type(memory).__name__


def has_name(memory: object) -> bool:
    """Whether the memory carries the ``name`` string the protocol asks for."""
    return isinstance(getattr(memory, "name", None), str)


def params(memory: object) -> dict[str, object] | None:
    """The memory's own ``params`` dict (a copy), or None where it has none."""
    given = getattr(memory, "params", None)
    return dict(given) if isinstance(given, dict) else None


def arguments(memory: object) -> dict[str, object]:
    """The memory's constructor arguments read back from its attributes of the same names (what a class that stores
    its arguments holds): ``variants.params`` for a memory without ``params``."""
    try:
        sig = inspect.signature(type(memory))
    except (TypeError, ValueError):
        return {}
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return {p: getattr(memory, p) for p, spec in sig.parameters.items() if spec.kind in kinds and hasattr(memory, p)}


def display(obj: object) -> str | None:
    """The ``display`` name a memory's class (or the memory) gives itself for figures, or None."""
    shown = getattr(obj, "display", None)
    return shown if isinstance(shown, str) and shown else None


def label(memory: object) -> str | None:
    """The memory's own ``label`` string, which overrides ``variants.label``, or None."""
    own = getattr(memory, "label", None)
    return own if isinstance(own, str) and own else None


def feature_dim(memory: object, d: int) -> int:
    """D, the rows of the state for keys of dimension d: the memory's ``feature_dim(d)``, else d."""
    fn = getattr(memory, "feature_dim", None)
    return int(fn(d)) if callable(fn) else int(d)


def numel(memory: object, state: object) -> int | None:
    """Numbers a growing memory's ``state`` keeps per batch item (its ``numel(state)``); None for any other memory.

    A memory that declares ``state="growing"`` without a ``numel`` method is refused in one line."""
    if declared(memory).state != "growing":
        return None
    fn = getattr(memory, "numel", None)
    if not callable(fn):
        raise CapacityError(
            f"{name(memory)}: declares state='growing' but has no numel(state) method (numbers kept after the writes)"
        )
    return int(fn(state))


def own_state_bytes(memory: object) -> Callable[..., Any] | None:
    """The memory's own ``state_bytes(d, dv, dtype, n=)`` method, or None where it has none."""
    fn = getattr(memory, "state_bytes", None)
    return fn if callable(fn) else None


def unaccounted(memory: object) -> list[str]:
    """What ``memory`` has that its declaration does not account for, or declares without having it: one sentence
    each (``check_variant`` fails its protocol row on them)."""
    try:
        said = declared(memory)
    except CapacityError as exc:
        return [str(exc)]
    has_numel = callable(getattr(memory, "numel", None))
    if said.state == "growing" and not has_numel:
        return ["declares state='growing' but has no numel(state) (the numbers the state keeps after the writes)"]
    if has_numel and said.state != "growing":
        return [
            "has numel(state) but declares a state that does not grow: declare Declares(state='growing') for a state "
            "that grows with the writes (it is then sized by numel), or drop numel"
        ]
    return []
