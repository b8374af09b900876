"""Published results of trained models, kept as data files with their sources (``capacity/data/*.csv``).

Each file starts with ``#`` comment lines that cite the paper, the table or figure, how every number was read and
its reading error; then a CSV header and rows. Figures and tests read the numbers from here, never from numbers
typed into a script.

>>> from lacapacity.tasks import published
>>> "based_figure2" in published.available()
True
>>> table = published.load("based_figure2")
>>> sorted(set(table["architecture"]))[:2], "arXiv 2402.18668" in published.source("based_figure2")
(['Attention (full)', 'Attention (sliding window)'], True)
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from lacapacity.errors import CapacityError

_DATA = Path(__file__).resolve().parents[1] / "data"


def available() -> dict[str, str]:
    """Name -> the first comment line of each data file (what it holds)."""
    return {p.stem: _comments(p).splitlines()[0] for p in sorted(_DATA.glob("*.csv"))}


def path(name: str) -> Path:
    """The data file of ``name``."""
    p = _DATA / f"{name}.csv"
    if not isinstance(name, str) or not p.is_file():
        raise CapacityError(f"no published data {name!r}; available: {', '.join(available())}")
    return p


def _comments(p: Path) -> str:
    lines = []
    for line in p.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return "\n".join(lines)


def source(name: str) -> str:
    """The file's comment block: the source, how each number was read, the reading error."""
    return _comments(path(name))


def load(name: str) -> pd.DataFrame:
    """The rows of ``name`` as a pandas DataFrame (its ``attrs["source"]`` holds the comment block)."""
    p = path(name)
    body = "\n".join(line for line in p.read_text().splitlines() if not line.startswith("#"))
    table = pd.read_csv(io.StringIO(body))
    table.attrs["source"] = _comments(p)
    return table
