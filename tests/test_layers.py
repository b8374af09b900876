"""The layers of docs/architecture.md, held: each layer imports only the layers below it (by the source's AST, imports
inside functions included), and the package has no import cycle between layers.

A task folder's own figures (``capacity/tasks/<task>/figures.py``) are of the figures layer, wherever they sit."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORDER = [
    "errors",
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
# the two upward imports the architecture names, each inside a function
ALLOWED_UP = {
    ("errors", "base", "capacity/errors.py"),  # the guard of user code records the files it opens (base/_opened.py)
    ("inputs", "variants", "capacity/inputs/learned.py"),  # keys optimised against a memory's read
    ("theory", "inputs", "capacity/theory/features.py"),  # a feature map's definition, integrated over
}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "capacity":
        return None
    if len(parts) == 1:
        return "capacity"
    if parts[1] == "tasks" and len(parts) == 4 and parts[3] == "figures":  # a task folder's own figures
        return "plots"
    return parts[1]


def _source_layer(path: Path) -> str:
    rel = path.relative_to(ROOT).parts
    if rel[:2] == ("capacity", "tasks") and len(rel) == 4 and rel[3] == "figures.py":
        return "plots"
    if rel[0] in ("kernels", "plots", "studies"):
        return rel[0]
    if len(rel) == 2:
        return {"__init__.py": "capacity", "cli.py": "cli", "errors.py": "errors"}[rel[1]]
    return rel[1]


def _imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "capacity":
                yield from (f"capacity.{a.name}" for a in node.names)
            else:
                yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


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
            if dst is None or dst == src or dst == "capacity" and module == "capacity":
                continue
            if dst == "__version__":
                dst = "base"  # the version, one string in capacity/__init__.py
            rel = str(path.relative_to(ROOT))
            if dst not in ORDER:
                wrong.append(f"{rel} imports {module}: not in a layer")
            elif ORDER.index(dst) > ORDER.index(src) and (src, dst, rel) not in ALLOWED_UP:
                wrong.append(f"{rel} ({src}) imports {module} ({dst}), a layer above it")
    assert not wrong, "\n".join(wrong)


def test_the_exceptions_are_still_needed():
    """An allowed upward import that is gone is taken off the list."""
    for _src, dst, rel in ALLOWED_UP:
        assert any(_layer(m) == dst for m in _imports(ROOT / rel)), rel


def test_capacity_has_no_loose_modules():
    """capacity/ holds layer folders and the three files of the top (the public names, the error type, the shell)."""
    loose = sorted(p.name for p in (ROOT / "capacity").glob("*.py"))
    assert loose == ["__init__.py", "cli.py", "errors.py"]
    folders = sorted(p.name for p in (ROOT / "capacity").iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == ["base", "check", "inputs", "sweep", "tasks", "theory", "variants"]
