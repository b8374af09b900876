"""What ``capacity list`` prints, without importing torch: the built-ins' names and descriptions, kept in a data file.

The registries (``studies.available``, ``variants.available``, ``features.available``, ``keys.available``,
``values.available``) import torch, xarray and every study, about 3 s; the list of what ships with the package
does not change between runs, so ``capacity/data/catalog.json`` holds it, written by ``python -m capacity.base.catalog``
from the registries themselves (``build``), and tests/base/test_catalog.py fails when the file and the registries
disagree. Plug-ins are not in the file: a section whose entry point group holds a name that the catalog lacks
(another installed package's plug-in) is read from its registry, the slow way, so it shows exactly what the
registry says.

>>> list(available("values"))
['gaussian', 'orthonormal']
"""

from __future__ import annotations

import functools
import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from capacity.base import plugins
from capacity.errors import CapacityError

__all__ = ["SECTIONS", "available", "build", "PATH", "DISTRIBUTION"]

# the distribution's name on the package index (pyproject.toml's [project] name; tests/test_release.py holds them
# equal); the import name is ``capacity``, which the unrelated distribution named "capacity" also installs (README)
DISTRIBUTION = "linear-attention-capacity"

PATH = Path(__file__).parents[1] / "data" / "catalog.json"
SECTIONS = ("studies", "variants", "features", "keys", "values")
_MODULES = {  # where each section's registry lives
    "studies": "capacity.studies",
    "variants": "capacity.variants",
    "features": "capacity.inputs.features",
    "keys": "capacity.inputs.keys",
    "values": "capacity.inputs.values",
}
_GROUPS = {s: f"capacity.{s}" for s in SECTIONS if s != "values"}  # the entry point group of each plug-in section


def _registry(section: str) -> dict[str, str]:
    """The registry's own answer (imports torch and the section's modules)."""
    import importlib

    names: dict[str, str] = importlib.import_module(_MODULES[section]).available()
    return names


def build() -> dict[str, dict[str, str]]:
    """section -> {name: description} from the registries: the built-ins and the package's own entry points only."""
    own = {s: {ep.name for ep in _own_entry_points(g)} for s, g in _GROUPS.items()}  # e.g. the key family "learned"
    out = {}
    for section in SECTIONS:
        foreign = set(plugins.entry_points(_GROUPS[section])) - own[section] if section in _GROUPS else set()
        out[section] = {name: desc for name, desc in _registry(section).items() if name not in foreign}
    return out


def _own_entry_points(group: str) -> list[metadata.EntryPoint]:
    """The entry points of ``group`` that this distribution declares (its name compared as PEP 503 normalises it)."""
    own = _normalised(DISTRIBUTION)
    return [ep for ep in metadata.entry_points(group=group) if ep.dist is not None and _normalised(ep.dist.name) == own]


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def _read(path: Path) -> dict[str, Any]:  # JSON
    """The catalog file, read once per process (``capacity list`` asks for five sections)."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def available(section: str) -> dict[str, str]:
    """name -> one-line description of ``section`` (one of SECTIONS), as its registry's ``available()`` gives it."""
    if section not in SECTIONS:
        raise CapacityError(f"section must be one of {', '.join(SECTIONS)}, got {section!r}")
    try:
        known = _read(PATH)[section]
    except (OSError, ValueError, KeyError):  # no catalog (a partial install): the registry itself
        return _registry(section)
    if section in _GROUPS and set(plugins.entry_points(_GROUPS[section])) - set(known):
        return _registry(section)  # a plug-in of another package: only its registry can describe it
    return dict(known)  # a copy: the cached file stays as read


def main() -> None:
    """Write ``capacity/data/catalog.json`` from the registries."""
    PATH.write_text(json.dumps(build(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(PATH)


if __name__ == "__main__":
    main()
