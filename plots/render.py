"""Each study's default figures, written as PNG and PDF: ``render(ds, out_dir)`` and ``render_path(results)``.

The study is ``ds.attrs["study"]`` (docs/results-schema.md). Every figure is built (and every
missing input reported) before any file is written. Files are named ``<study>_<figure>.png``
and ``.pdf``; the same Dataset gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import xarray as xr

from capacity.errors import CapacityError
from capacity.plots.bill import bill
from capacity.plots.capacity_vs_d import capacity_vs_d
from capacity.plots.closed_form import closed_form
from capacity.plots.error_vs_load import error_vs_load
from capacity.plots.feature_maps import feature_maps
from capacity.plots.orthogonality import orthogonality
from capacity.plots.pretrained_keys import pretrained_keys
from capacity.plots.save import save
from capacity.plots.variants import variant_curves

__all__ = ["render", "render_path", "figures", "FIGURES", "studies"]


def _several_d(ds) -> bool:
    return ds.sizes.get("d", 0) > 1


# study -> [(figure name, figure function, condition on the Dataset)]
FIGURES: dict[str, list[tuple[str, Callable, Callable]]] = {
    "capacity-vs-d": [("capacity", capacity_vs_d, _several_d), ("error-vs-load", error_vs_load, None)],
    "interference-bound": [("error-vs-load", error_vs_load, None), ("orthogonality", orthogonality, None)],
    "orthogonality": [("orthogonality", orthogonality, None), ("error-vs-load", error_vs_load, None)],
    "variants": [("variants", variant_curves, None), ("capacity", capacity_vs_d, _several_d)],
    "feature-maps": [("feature-maps", feature_maps, None)],
    "bill": [("bill", bill, None)],
    "learned-keys": [("error-vs-load", error_vs_load, None), ("capacity", capacity_vs_d, _several_d)],
    "closed-form": [("closed-form", closed_form, None)],
    "pretrained-keys": [("pretrained-keys", pretrained_keys, None), ("orthogonality", orthogonality, None)],
}


def studies() -> list[str]:
    """The studies ``render`` knows."""
    return sorted(FIGURES)


def figures(ds: xr.Dataset) -> list[tuple[str, object]]:
    """The default figures of ``ds``'s study, built but not saved: ``[(file stem, Figure), ...]``."""
    if not isinstance(ds, xr.Dataset):
        raise CapacityError(f"plots need an xarray.Dataset, got {type(ds).__name__}")
    study = ds.attrs.get("study")
    if study is None:
        raise CapacityError(f"the Dataset has no 'study' attribute; plots are drawn for the studies {', '.join(studies())}")
    if study not in FIGURES:
        raise CapacityError(f"unknown study {study!r}; plots are drawn for the studies {', '.join(studies())}")
    if len(ds.data_vars) == 0:
        raise CapacityError(f"the {study} Dataset is empty (no variables)")
    return [(f"{study}_{name}", fn(ds)) for name, fn, cond in FIGURES[study] if cond is None or cond(ds)]


def render(ds: xr.Dataset, out_dir) -> list[Path]:
    """Write the default figures of ``ds``'s study into ``out_dir``; returns the paths (PNG, PDF per figure)."""
    return [path for stem, fig in figures(ds) for path in save(fig, out_dir, stem)]


def _open(path: Path) -> xr.Dataset:
    try:
        with xr.open_dataset(path, engine="h5netcdf") as f:
            return f.load()
    except (OSError, ValueError, TypeError) as exc:
        raise CapacityError(f"not a readable netCDF results file ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None


def render_path(results, out=None) -> list[Path]:
    """Render a results file (``.nc``) or every ``.nc`` in a directory; ``out`` defaults to ``figures/`` beside them."""
    results = Path(results)
    if results.is_dir():
        files = sorted(results.glob("*.nc"))
        if not files:
            raise CapacityError(f"{results}: no results files (*.nc) in this directory")
        out_dir = Path(out) if out is not None else results / "figures"
    elif results.is_file():
        files = [results]
        out_dir = Path(out) if out is not None else results.parent / "figures"
    else:
        raise CapacityError(f"{results}: no such results file or directory")
    built = []
    for f in files:  # build every figure (and report any missing input) before writing anything
        try:
            built += figures(_open(f))
        except CapacityError as exc:
            raise CapacityError(f"{f}: {exc}") from None
    return [path for stem, fig in built for path in save(fig, out_dir, stem)]
