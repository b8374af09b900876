"""Write a figure as PNG and PDF with fixed metadata, so the same figure gives the same bytes."""

from __future__ import annotations

from pathlib import Path

from capacity.plots import theme

__all__ = ["save", "FORMATS"]

FORMATS = ("png", "pdf")
# no software version, no creation time: the bytes depend on the figure alone
_METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None, "ModDate": None},
}


def save(fig, out_dir, stem: str, *, dpi: int = 110) -> list[Path]:
    """Write ``<out_dir>/<stem>.png`` and ``.pdf`` (the directory is created); returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    engine = fig.get_layout_engine()
    try:
        with theme.style():
            for fmt in FORMATS:
                path = out / f"{stem}.{fmt}"
                fig.savefig(path, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
                paths.append(path)
                fig.set_layout_engine("none")  # laid out once, by the first format: the rest reuse the positions
    finally:
        fig.set_layout_engine(engine)
    return paths
