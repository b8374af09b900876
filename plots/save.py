"""Write a figure as PNG and PDF with fixed metadata, so the same figure gives the same bytes."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

from lacapacity.base._files import clean_stale, write_bytes
from lacapacity.errors import CapacityError
from lacapacity.plots import theme

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import LayoutEngine

# a folder to write into, as the caller names it
Folder = str | os.PathLike[str]


FORMATS = ("png", "pdf")
# no software version, no creation time: the bytes depend on the figure alone
_METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None, "ModDate": None},
}


def save(fig: Figure, out: Folder, stem: str, *, dpi: int = 110) -> list[Path]:
    """Write ``<out>/<stem>.png`` and ``.pdf`` (the directory is created); returns the paths.

    Each file is written under a temporary name and renamed into place, so an interrupted run leaves the old file or
    the new one, never a partial one (and the next save into the folder removes a killed write's temporary file). A folder that cannot be written is a one-line CapacityError.
    """
    check_folder(out)
    return write(encode(fig, dpi=dpi), out, stem)


def encode(fig: Figure, *, dpi: int = 110) -> dict[str, bytes]:
    """The figure's files as bytes, ``{format: bytes}`` for each of ``FORMATS``: laid out once, under the theme."""
    engine = fig.get_layout_engine()
    try:
        with theme.style():
            _lay_out(fig, engine, dpi)
            out: dict[str, bytes] = {}
            for fmt in FORMATS:
                buf = io.BytesIO()
                fig.savefig(buf, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
                out[fmt] = buf.getvalue()
            return out
    finally:
        fig.set_layout_engine(engine)


def check_folder(out: Folder) -> None:
    """A one-line CapacityError if the figures folder ``out`` is a file."""
    if Path(out).exists() and not Path(out).is_dir():
        raise CapacityError(f"the figures folder {out} is a file, not a folder")


def write(encoded: dict[str, bytes], out: Folder, stem: str) -> list[Path]:
    """Write ``encode``'s bytes as ``<out>/<stem>.<format>``, each atomically (see ``save``); returns the paths."""
    out = Path(out)
    check_folder(out)
    paths: list[Path] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        clean_stale(out)  # the temporary files of a figure write that was killed
        for fmt in FORMATS:
            path = out / f"{stem}.{fmt}"
            write_bytes(path, encoded[fmt])
            paths.append(path)
    except OSError as exc:
        raise CapacityError(f"cannot write figures to {out}: {exc.strerror or exc}") from None
    return paths


def _lay_out(fig: Figure, engine: LayoutEngine | None, dpi: int) -> None:
    """Run the layout engine once, at the PNG's dpi (where savefig would run it), then take it off the figure.

    With an engine (even matplotlib's "none" placeholder) savefig draws the whole figure once more before each file,
    with a renderer that draws nothing, only to run the engine: two figure draws per file instead of one.
    """
    if engine is not None:
        old = fig.dpi
        fig.dpi = dpi
        try:
            engine.execute(fig)
        finally:
            fig.dpi = old
    fig.set_layout_engine(None)  # no engine: one draw per file (rc figure.autolayout and constrained_layout are off)
