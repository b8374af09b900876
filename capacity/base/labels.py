"""One grammar for the labels that name variants, key families, feature maps and studies.

A label is ``name``, ``name(k=v, ...)``, or an import path ``module:attr`` / ``module:attr(k=v, ...)``.
Values are Python literals (numbers, quoted strings, lists, tuples, dicts, None); for the command line a
bare word is a string and ``true``/``false`` are booleans. ``format`` writes the canonical label (keys in
sorted order) and ``parse(format(name, params)) == (name, params)`` for every value this module writes:
labels in result files read back to the same thing.

>>> parse("delta(beta=0.5)")
('delta', {'beta': 0.5})
>>> parse("gla(alpha=['uniform', 0.9, 1.0], seed=0)")
('gla', {'alpha': ['uniform', 0.9, 1.0], 'seed': 0})
>>> parse("mypkg.memories:Longhorn(beta=0.5)")
('mypkg.memories:Longhorn', {'beta': 0.5})
>>> format("gla", {"seed": 0, "alpha": ("uniform", 0.9, 1.0)})
"gla(alpha=['uniform', 0.9, 1.0], seed=0)"
>>> split("linear,delta(beta=0.5, normalize=true),dpfp(nu=2)")
['linear', 'delta(beta=0.5, normalize=true)', 'dpfp(nu=2)']
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from lacapacity.errors import CapacityError

_HEAD = re.compile(r"^\s*([A-Za-z_][\w.\-]*(?::[A-Za-z_][\w.]*)?)\s*(\(.*\))?\s*$", re.S)
_WORDS = {"true": True, "false": False, "True": True, "False": False, "None": None, "none": None}
_BARE = re.compile(r"^[A-Za-z_][\w.\-]*$")


def is_path(name: str) -> bool:
    """True for an import path ``module:attr`` (as opposed to a registered name)."""
    return ":" in name


def _value(node: ast.AST, label: str) -> Any:  # a literal: a number, a string, a boolean, None or a list
    """A keyword value: a literal, a bare word (string or boolean), or a fraction like 1/8."""
    if isinstance(node, ast.Name):
        return _WORDS.get(node.id, node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        num, den = _value(node.left, label), _value(node.right, label)
        if isinstance(num, int) and isinstance(den, int) and not isinstance(num, bool) and den != 0:
            return float(Fraction(num, den))
        raise CapacityError(f"{label!r}: {ast.unparse(node)} is not a number")
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e, label) for e in node.elts]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise CapacityError(
            f"{label!r}: parameter values are numbers, words, quoted strings or lists; got {ast.unparse(node)}"
        ) from None


def parse(label: object) -> tuple[str, dict[str, Any]]:
    """``'name(k=v, ...)'`` -> ``('name', {'k': v, ...})``; a repeated parameter or bad syntax is a CapacityError."""
    if not isinstance(label, str):
        raise CapacityError(f"a label is a string like 'name' or 'name(k=v, ...)', got {label!r}")
    m = _HEAD.match(label)
    if m is None:
        raise CapacityError(f"{label!r} is not a label: write 'name', 'name(k=v, ...)' or 'module:attr(k=v, ...)'")
    name, args = m.group(1), m.group(2)
    if not args:
        return name, {}
    try:
        call = ast.parse("f" + args, mode="eval").body
    except SyntaxError as exc:
        raise CapacityError(f"{label!r}: parameters are written k=v separated by commas ({exc.msg})") from None
    if not isinstance(call, ast.Call) or call.args or any(k.arg is None for k in call.keywords):
        raise CapacityError(f"{label!r}: parameters are written k=v separated by commas")
    params: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg in params:
            raise CapacityError(f"{label!r} sets {kw.arg} more than once")
        params[kw.arg] = _value(kw.value, label)  # type: ignore[index]  # not None: checked above
    return name, params


def _fmt(value: object, top: bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "None"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CapacityError(f"label values must be finite numbers, got {value!r}")
        return repr(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str):
        return value if top and _BARE.match(value) and value not in _WORDS else repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v, False) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_fmt(v, False)}" for k, v in sorted(value.items())) + "}"
    if hasattr(value, "tolist"):  # numpy scalars and small arrays, torch tensors
        return _fmt(value.tolist(), top)
    raise CapacityError(
        f"label values must be numbers, strings, booleans, None or lists of them, got {type(value).__name__}"
    )


def format(name: str, params: dict[str, Any] | None = None) -> str:
    """The canonical label of ``name`` with ``params`` (sorted by key)."""
    if not params:
        return name
    return f"{name}(" + ", ".join(f"{k}={_fmt(v, True)}" for k, v in sorted(params.items())) + ")"


def split(text: str) -> list[str]:
    """Split a comma-separated list at the commas outside brackets and quotes."""
    parts: list[str] = []
    cur: list[str] = []
    depth, quote = 0, None
    for ch in str(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0 and not quote:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def scalar(text: str) -> bool | int | float | str:
    """A command-line value: an int, a float (also a fraction ``1/8``), true/false, else the string itself.

    >>> scalar("1/8"), scalar("3"), scalar("true"), scalar("orthonormal")
    (0.125, 3, True, 'orthonormal')
    """
    t = str(text).strip()
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    m = re.fullmatch(r"([+-]?\d+)\s*/\s*([+-]?\d+)", t)
    if m:
        if int(m.group(2)) == 0:
            raise CapacityError(f"{t!r} divides by zero")
        return float(Fraction(int(m.group(1)), int(m.group(2))))
    return t


def _frozen(x: Any) -> Any:  # a label value, lists as tuples
    return tuple(_frozen(v) for v in x) if isinstance(x, (list, tuple)) else x


def _thawed(x: Any) -> Any:  # a label value, tuples as lists
    return [_thawed(v) for v in x] if isinstance(x, tuple) else x


@dataclass(frozen=True)
class Spec:
    """A registered name or import path ``module:attr`` with parameters, labelled ``name(k=v, ...)``, or (variants
    only) a memory object in ``obj``, labelled by ``lacapacity.variants.label`` and sent to workers by pickling."""

    name: str
    params: tuple[tuple[str, object], ...] = ()
    obj: object = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, value: object, what: str) -> Spec:
        """From a Spec, a label, a dict ``{"name": ..., "params": {...}}`` or (variants) an object."""
        if isinstance(value, Spec):
            return value
        if isinstance(value, str):
            name, params = parse(value)
        elif isinstance(value, dict) and set(value) <= {"name", "params"} and isinstance(value.get("params", {}), dict):
            name, params = str(value.get("name", "")), dict(value.get("params") or {})
        else:
            objects = ", a variant object" if what == "variant" else ""
            raise CapacityError(f"a {what} is a label like 'name' or 'name(k=v, ...)'{objects}; got {value!r}")
        if not name:
            raise CapacityError(f"a {what} needs a name, got {value!r}")
        return cls(name, tuple(sorted((k, _frozen(v)) for k, v in params.items())), None)

    @property
    def kwargs(self) -> dict[str, Any]:
        """The parameters as keyword arguments, name -> value (lists as lists)."""
        return {k: _thawed(v) for k, v in self.params}

    @property
    def label(self) -> str:
        """``name(k=v, ...)``, the label that parses back to this spec (an object's: its name)."""
        return self.name if self.obj is not None else format(self.name, self.kwargs)

    def to_json(self) -> dict[str, Any]:
        """``{"name": ..., "params": {...}}`` (with ``"object": True`` for a memory object, which JSON cannot hold)."""
        return {"name": self.name, "params": self.kwargs, **({"object": True} if self.obj is not None else {})}
