"""What produced a result: the versions of the packages, the commit of the source tree, a hash of the code.

``fingerprint`` hashes the package's own sources (not the plots), the source files of the user's plug-ins and the
data files a study reads: results stored under it are reused only while all three are unchanged.

>>> len(fingerprint()) == 64 and fingerprint() == fingerprint()
True
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import platform
import subprocess
import sys
from functools import cache
from importlib import metadata
from pathlib import Path

from capacity import __version__

__all__ = ["fingerprint", "versions", "git_commit"]


@cache
def _package_sources() -> str:
    """sha256 over every .py file of the package that computes numbers (not the plots), in a stable order."""
    h = hashlib.sha256()
    for pkg in ("capacity", "capacity.kernels", "capacity.studies"):
        for root in sorted(importlib.util.find_spec(pkg).submodule_search_locations or []):
            for f in sorted(Path(root).rglob("*.py")):
                if "plots" not in f.relative_to(root).parts:
                    h.update(str(f.relative_to(root)).encode() + f.read_bytes())
    return h.hexdigest()


def _file(path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _source_of(obj) -> str:
    """A hash of the source file of the module that defines ``obj`` (its class, for an instance); '' if none."""
    target = obj if inspect.isclass(obj) or inspect.isfunction(obj) else type(obj)
    path = getattr(sys.modules.get(getattr(target, "__module__", ""), None), "__file__", None)
    return _file(path) if path else ""


def fingerprint(user_objects=(), data_files=()) -> str:
    """A hash of what computes the numbers besides the configuration: the package, user plug-ins, data files."""
    parts = [_package_sources(), *sorted(map(_source_of, user_objects)), *sorted(map(_file, data_files))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def versions() -> dict:
    """Versions of the packages that produce the numbers."""
    out = {"capacity": __version__, "python": platform.python_version()}
    for pkg in ("torch", "triton", "numpy", "xarray"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def git_commit() -> str:
    """The commit of the source tree the package runs from (``-dirty`` if it has changes), or ``unknown``."""
    git = lambda *a: subprocess.run(["git", *a], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10)
    try:
        head = git("rev-parse", "HEAD")
        dirty = head.returncode == 0 and git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty else "") if head.returncode == 0 else "unknown"
