"""The package's import graph has no cycle, counting imports inside functions too."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# where each installed package's source lives (pyproject.toml maps capacity/ to lacapacity and kernels/, plots/, studies/ into it)
SOURCES = {
    "lacapacity": ROOT / "capacity",
    "lacapacity.kernels": ROOT / "kernels",
    "lacapacity.plots": ROOT / "plots",
    "lacapacity.studies": ROOT / "studies",
}


def _modules() -> dict[str, Path]:
    found = {}
    for pkg, root in SOURCES.items():
        for f in root.rglob("*.py"):
            rel = f.relative_to(root).with_suffix("").parts
            if (
                any(p in SOURCES for p in (".".join((pkg,) + rel[:i]) for i in range(1, len(rel))))
                and pkg == "lacapacity"
                and rel[0] in ("kernels", "plots", "studies")
            ):
                continue
            name = ".".join((pkg,) + (rel[:-1] if rel[-1] == "__init__" else rel))
            found[name] = f
    return found


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the package modules it imports (module level and inside functions), parents of a submodule included."""
    edges = {m: set() for m in modules}
    for mod, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    parent = parent[: len(parent) - node.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if (
                    t and t != mod and not mod.startswith(t + ".")
                ):  # importing one's own parent package is not a dependency cycle
                    edges[mod].add(t)
    return edges


def _cycle(edges):
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_import_graph_has_no_cycle():
    modules = _modules()
    assert (
        "lacapacity.sweep.runner" in modules
        and "lacapacity.kernels" in modules
        and "lacapacity.plots.render" in modules
    )
    cycle = _cycle(_edges(modules))
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
