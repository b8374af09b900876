"""The layers of docs/architecture.md, held: each layer imports only the layers below it (by the source's AST, imports
inside functions included), and the package has no import cycle between layers.

A task folder's own figures (``capacity/tasks/<task>/figures.py``) are of the figures layer, and ``capacity/errors.py``
(the error types and the guard of user code, which records in ``base/_opened.py`` and ``base/_crumb.py``) of the
base layer, wherever they sit. No import goes upward: there is no list of exceptions."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORDER = [
    "base",
    "theory",
    "kernels",
    "inputs",
    "variants",
    "tasks",
    "check",
    "sweep",
    "plots",
    "studies",
    "cli",
]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "lacapacity":
        return None
    if len(parts) == 1:
        return "capacity"
    if parts[1] == "tasks" and len(parts) == 4 and parts[3] == "figures":  # a task folder's own figures
        return "plots"
    return "base" if parts[1] == "errors" else parts[1]


def _source_layer(path: Path) -> str:
    rel = path.relative_to(ROOT).parts
    if rel[:2] == ("capacity", "tasks") and len(rel) == 4 and rel[3] == "figures.py":
        return "plots"
    if rel[0] in ("kernels", "plots", "studies"):
        return rel[0]
    if len(rel) == 2:
        return {"__init__.py": "capacity", "cli.py": "cli", "errors.py": "base"}[rel[1]]
    return rel[1]


def _package(path: Path) -> list[str]:
    """The dotted package of a source file as installed (``plots/theme.py`` -> ``lacapacity.plots``)."""
    rel = path.relative_to(ROOT).with_suffix("").parts
    parts = ["lacapacity", *rel[1:]] if rel[0] == "capacity" else ["lacapacity", *rel]
    return parts[:-1]  # a module's package; for an __init__.py, the package it is


# the public names of capacity/__init__.py -> the module each is (``lacapacity.probe`` is ``lacapacity.tasks.probe``)
_PUBLIC = {
    k.value: v.value
    for node in ast.walk(ast.parse((ROOT / "capacity" / "__init__.py").read_text(encoding="utf-8")))
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_PUBLIC" for t in node.targets)
    for k, v in zip(node.value.keys, node.value.values)
}
_LOADERS = {"import_module", "__import__", "find_spec", "load_path", "import_modules"}  # they take a module's name


def _public(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[0] == "lacapacity" and parts[1] in _PUBLIC:
        return ".".join([_PUBLIC[parts[1]], *parts[2:]])
    return module


def _imports(path: Path):
    """Every module of ours the file reaches: ``import`` and ``from ... import`` (relative ones resolved), a module
    named by a string to an importer (``importlib.import_module("lacapacity.sweep")``, ``plugins.load_path``,
    ``find_spec``), and ``capacity.<part>`` reached through ``import lacapacity`` (``lacapacity.sweep.run``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = set()  # the names ``import lacapacity`` binds in this file
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = _package(path)
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            if base == "lacapacity" or node.level and not node.module:  # from lacapacity import sweep; from . import x
                yield from (_public(f"{base}.{a.name}") for a in node.names)
            else:  # the module, and each name as a submodule it may be (from lacapacity.tasks.mqar import figures)
                yield _public(base)
                yield from (_public(f"{base}.{a.name}") for a in node.names if a.name != "*")
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield _public(a.name)
                if a.name == "lacapacity" or a.name.startswith("lacapacity.") and a.asname is None:
                    bound.add(a.asname or "lacapacity")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            text = node.args[0].value
            if name in _LOADERS and isinstance(text, str) and text.split(".")[0] == "lacapacity":
                yield _public(text.partition(":")[0])
    for node in ast.walk(tree):  # lacapacity.sweep.run(...) after ``import lacapacity``
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            if node.attr in _PUBLIC or (ROOT / "capacity" / node.attr).is_dir():  # a layer, not a name like errors'
                yield _public(f"lacapacity.{node.attr}")


def _files():
    for folder in ("capacity", "kernels", "plots", "studies"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_each_layer_imports_only_the_layers_below_it():
    wrong = []
    for path in _files():
        src = _source_layer(path)
        if src == "capacity":  # the package's public names point into every layer
            continue
        for module in _imports(path):
            dst = _layer(module)
            if dst is None or dst == src or dst == "capacity" and module == "lacapacity":
                continue
            rel = str(path.relative_to(ROOT))
            if dst not in ORDER:
                wrong.append(f"{rel} imports {module}: not in a layer")
            elif ORDER.index(dst) > ORDER.index(src):
                wrong.append(f"{rel} ({src}) imports {module} ({dst}), a layer above it")
    assert not wrong, "\n".join(wrong)


def test_capacity_has_no_loose_modules():
    """capacity/ holds layer folders and the three files of the top (the public names, the error type, the shell)."""
    loose = sorted(p.name for p in (ROOT / "capacity").glob("*.py"))
    assert loose == ["__init__.py", "cli.py", "errors.py"]
    folders = sorted(p.name for p in (ROOT / "capacity").iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == ["base", "check", "inputs", "sweep", "tasks", "theory", "variants"]
