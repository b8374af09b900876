"""Write a figure as PNG and PDF with fixed metadata, so the same figure gives the same bytes."""

from __future__ import annotations

from pathlib import Path

from capacity.plots import theme

from capacity._files import atomic_write, clean_stale
from capacity.errors import CapacityError

__all__ = ["save", "FORMATS"]

FORMATS = ("png", "pdf")
# no software version, no creation time: the bytes depend on the figure alone
_METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None, "ModDate": None},
}


def save(fig, out, stem: str, *, dpi: int = 110) -> list[Path]:
    """Write ``<out>/<stem>.png`` and ``.pdf`` (the directory is created); returns the paths.

    Each file is written under a temporary name and renamed into place, so an interrupted run leaves the old file or
    the new one, never a partial one (and the next save into the folder removes a killed write's temporary file). A folder that cannot be written is a one-line CapacityError.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise CapacityError(f"the figures folder {out} is a file, not a folder")
    paths = []
    engine = fig.get_layout_engine()
    try:
        out.mkdir(parents=True, exist_ok=True)
        clean_stale(out)  # the temporary files of a figure write that was killed
        with theme.style():
            _lay_out(fig, engine, dpi)
            for fmt in FORMATS:
                path = out / f"{stem}.{fmt}"
                atomic_write(path, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, dpi=dpi, metadata=_METADATA[fmt]))
                paths.append(path)
    except OSError as exc:
        raise CapacityError(f"cannot write figures to {out}: {exc.strerror or exc}") from None
    finally:
        fig.set_layout_engine(engine)
    return paths


def _lay_out(fig, engine, dpi: int) -> None:
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
