"""Write a figure as PNG and PDF with fixed metadata, so the same figure gives the same bytes."""

from __future__ import annotations

import os
from pathlib import Path

from capacity.plots import theme

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
    the new one, never a partial one. A folder that cannot be written is a one-line CapacityError.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise CapacityError(f"the figures folder {out} is a file, not a folder")
    paths = []
    engine = fig.get_layout_engine()
    try:
        out.mkdir(parents=True, exist_ok=True)
        with theme.style():
            for fmt in FORMATS:
                path = out / f"{stem}.{fmt}"
                tmp = out / f".{stem}.{os.getpid()}.{fmt}.tmp"
                try:
                    fig.savefig(tmp, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
                    os.replace(tmp, path)
                finally:
                    tmp.unlink(missing_ok=True)
                paths.append(path)
                fig.set_layout_engine("none")  # laid out once, by the first format: the rest reuse the positions
    except OSError as exc:
        raise CapacityError(f"cannot write figures to {out}: {exc.strerror or exc}") from None
    finally:
        fig.set_layout_engine(engine)
    return paths
