"""What ``capacity list`` prints, read from the source itself without importing it (no torch, no copy to keep).

A registry's built-in entries are literals in its source: a call such as ``register("linear", Linear, "additive
...")`` or ``Study(name=..., description=...)``, a dict of them, or a class with ``name`` and ``description``. Reading
them from the module's syntax tree takes milliseconds, where importing the registries takes seconds (torch, xarray,
every study). The caller says where each section's entries are and how they are written (``Calls``, ``Dict``,
``Classes``); this module names no other part of the package. tests/base/test_catalog.py holds each section to its
registry, entry for entry and in order, so a registration written in another shape fails there, not in a user's
listing.

>>> import ast
>>> tree = ast.parse('register("linear", Linear, "additive memory")\\nregister(name="x", factory=X, description="d")')
>>> Calls("register", ("name", 0), ("description", 2)).read(tree)
{'linear': 'additive memory', 'x': 'd'}
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from lacapacity.errors import CapacityError

# the distribution's name on the package index (pyproject.toml's [project] name; tests/test_release.py holds them
# equal); the import name is ``lacapacity``, because the unrelated distribution named "capacity" installs a module
# named ``capacity`` (README, "Names")
DISTRIBUTION = "linear-attention-capacity"


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _argument(call: ast.Call, where: tuple[str, int]) -> str | None:
    """The string literal passed to ``call`` as the keyword ``where[0]`` or at position ``where[1]``."""
    keyword, position = where
    for kw in call.keywords:
        if kw.arg == keyword:
            return _literal(kw.value)
    return _literal(call.args[position]) if position < len(call.args) else None


# the nodes a registration can sit in: statements that hold others, and the literals and calls that hold entries
_HOLDERS: tuple[type[ast.AST], ...] = (ast.Module, ast.FunctionDef, ast.ClassDef, ast.For, ast.If, ast.With, ast.Expr)
_HOLDERS += (ast.Assign, ast.AnnAssign, ast.List, ast.Tuple, ast.Dict, ast.Call, ast.Attribute)


def _in_order(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` a registration can be, in the order the source writes them (depth first; the bodies of
    expressions that cannot hold one, an ``if``'s test or a ``return``, say, are not visited: that is most of a
    module, and most of the time this takes)."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, _HOLDERS):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return out


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


@dataclass(frozen=True)
class Calls:
    """Every call of ``callee`` (a function or class, by its name) whose name and description are literals, each
    given as (keyword, position): ``Calls("Study", ("name", 0), ("description", 1))``."""

    callee: str
    name: tuple[str, int]
    description: tuple[str, int]

    def read(self, tree: ast.AST) -> dict[str, str]:
        out = {}
        for node in _in_order(tree):
            if isinstance(node, ast.Call) and _callee(node) == self.callee:
                name, desc = _argument(node, self.name), _argument(node, self.description)
                if name is not None and desc is not None:
                    out[name] = desc
        return out


@dataclass(frozen=True)
class Dict:
    """A dict literal of name -> description: each value a string, or a call whose description is ``description``
    (keyword, position)."""

    description: tuple[str, int] | None = None

    def read(self, tree: ast.AST) -> dict[str, str]:
        out = {}
        for node in _in_order(tree):
            if not isinstance(node, ast.Dict):
                continue
            for key, value in zip(node.keys, node.values):
                name = _literal(key)
                desc = (
                    _literal(value)
                    if self.description is None
                    else _argument(value, self.description)
                    if isinstance(value, ast.Call)
                    else None
                )
                if name is not None and desc is not None:
                    out[name] = desc
        return out


def _assigned(cls: ast.ClassDef) -> dict[str, ast.expr]:
    """name -> value of the plain assignments in a class body (``name = "mqar"``, ``Config = Mqar``)."""
    return {t.id: s.value for s in cls.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}


def _fields(cls: ast.ClassDef) -> list[str]:
    """The annotated fields of a dataclass body, ``ClassVar`` ones left out."""
    return [
        s.target.id
        for s in cls.body
        if isinstance(s, ast.AnnAssign)
        and isinstance(s.target, ast.Name)
        and "ClassVar" not in ast.unparse(s.annotation)
    ]


@dataclass(frozen=True)
class Classes:
    """Every class whose body sets ``name`` and ``description`` to literals (a task: ``name = "mqar"``); with
    ``fields``, the description ends with the fields of the class its ``Config`` names, where this file defines it
    (a task's settings: ``(fields: vocab, overwrite, ...)``)."""

    fields: bool = False

    def read(self, tree: ast.AST) -> dict[str, str]:
        classes = {n.name: n for n in _in_order(tree) if isinstance(n, ast.ClassDef)}
        out = {}
        for cls in classes.values():
            own = _assigned(cls)
            name, desc = _literal(own.get("name")), _literal(own.get("description"))
            if name is None or desc is None:
                continue
            config = own.get("Config")
            if self.fields and isinstance(config, ast.Name) and config.id in classes:
                desc += f" (fields: {', '.join(_fields(classes[config.id])) or 'none'})"
            out[name] = desc
        return out


Shape = Calls | Dict | Classes


def _spec(module: str) -> tuple[Path | None, list[Path]]:
    """(the source file, the package folders) of ``module``, found without running it or its parent packages:
    only the top package and the one below it are looked up by the import system (their parents imported: for
    ``lacapacity.tasks.learned``, ``lacapacity`` alone), the rest by their files."""
    parts = module.split(".")
    spec = importlib.util.find_spec(".".join(parts[:2]))
    if spec is None:
        return None, []
    origin = Path(spec.origin) if spec.origin else None
    folders = [Path(f) for f in spec.submodule_search_locations or ()]
    for part in parts[2:]:
        found = [f / part for f in folders if (f / part / "__init__.py").is_file()]
        if found:
            origin, folders = found[0] / "__init__.py", found
        else:
            modules = [f / f"{part}.py" for f in folders if (f / f"{part}.py").is_file()]
            origin, folders = (modules[0] if modules else None), []
            if origin is None:
                return None, []
    return origin, folders


def source(module: str) -> Path:
    """The source file of ``module``, found without running it or the packages it is in below the top one."""
    origin, _ = _spec(module)
    if origin is None or origin.suffix != ".py":
        raise CapacityError(f"no Python source for {module!r}")
    return origin


def files(package: str, pattern: str) -> list[Path]:
    """The files of ``package``'s folder that match ``pattern`` (``"*.py"``, ``"*/task.py"``), sorted."""
    _, folders = _spec(package)
    if not folders:
        raise CapacityError(f"{package!r} is not a package")
    return sorted(p for folder in folders for p in folder.glob(pattern))


def read(paths: list[Path], shape: Shape) -> dict[str, str]:
    """name -> description of every entry written in ``shape`` in the files ``paths``, in the order written."""
    out: dict[str, str] = {}
    for path in paths:
        out.update(shape.read(ast.parse(path.read_text(encoding="utf-8"), str(path))))
    return out
