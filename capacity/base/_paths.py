"""Where the package's code and the installed libraries live: code there is recorded by its hash or its version, not
as the user's (``lacapacity.sweep.provenance``), and files read there are not recorded (``_opened``)."""

from __future__ import annotations

import importlib.util
import os
import site
import sys
import sysconfig
from functools import cache
from pathlib import Path

ROOTS = ("lacapacity", "lacapacity.kernels", "lacapacity.studies")  # the package's code that computes numbers


@cache
def package_dirs() -> list[Path]:
    """The folders of the package's code that computes numbers (``ROOTS``), resolved."""
    specs = [importlib.util.find_spec(r) for r in ROOTS]  # this package's own packages: found, with folders
    return sorted({Path(p).resolve() for s in specs for p in s.submodule_search_locations})  # type: ignore[union-attr]


@cache
def library_dirs() -> tuple[str, ...]:
    """The standard library's and the installed distributions' folders (as given and resolved): code there is
    recorded by version, not by its bytes."""
    paths = sysconfig.get_paths()
    found = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    found += list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()]
    found += [os.path.join(sys.base_prefix, "lib"), os.path.join(sys.base_exec_prefix, "lib")]
    dirs = [p for p in found if p and os.path.isdir(p)]
    return tuple(sorted({os.path.join(q, "") for p in dirs for q in (os.path.abspath(p), os.path.realpath(p))}))
