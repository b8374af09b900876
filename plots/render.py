"""The figures that fit a results Dataset, written as PNG and PDF: ``render(ds, out=...)`` and ``render_path(results)``.

The task that made a Dataset chooses its figures (``Task.figures``): the kind its configuration records
(``ds.attrs["config"]``), or recall's, the default kind, for a Dataset that records none. A figure is a function of
``FIGURES`` (the modules of ``lacapacity.plots``) or of the task's own: ``FIGURES`` of the module ``figures.py`` in
its folder (a plug-in task's too, beside its task module), which wins over a figure of the same name here. Every figure is built (and every missing
input reported) before any file is written. Files are named ``<study>_<figure>.png`` and ``.pdf`` (``study`` from
``ds.attrs``); the same Dataset gives the same bytes. Several figures are built and encoded in parallel, one child
process each (``save_all``).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import json
import multiprocessing
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TypeAlias

import xarray as xr
from matplotlib.figure import Figure

from lacapacity import tasks
from lacapacity.errors import CapacityError
from lacapacity.plots import layout
from lacapacity.plots._data import task_of
from lacapacity.plots.bill import bill
from lacapacity.plots.capacity_vs_d import capacity_vs_d
from lacapacity.plots.closed_form import closed_form
from lacapacity.plots.error_vs_load import error_vs_load
from lacapacity.plots.feature_maps import feature_maps
from lacapacity.plots.forgetting import forgetting
from lacapacity.plots.frontier import frontier
from lacapacity.plots.heads import heads_capacity
from lacapacity.plots.log_linear import log_linear_bytes
from lacapacity.plots.needle import needle_depth, needle_figure
from lacapacity.plots.orthogonality import orthogonality
from lacapacity.plots.precision import precision_curves
from lacapacity.plots.pretrained_keys import pretrained_keys
from lacapacity.plots.save import Folder, check_folder, encode, save, write
from lacapacity.plots.trained import trained_figure
from lacapacity.plots.variants import variant_curves
from lacapacity.sweep import executors

# a figure function: the Dataset in, the Figure out (its other parameters keep their defaults)
FigureFn: TypeAlias = Callable[[xr.Dataset], Figure]
# a figure to draw: (file stem, a function of no argument that builds it)
Job: TypeAlias = tuple[str, Callable[[], Figure]]


def own_figures(task: tasks.Task[Any]) -> dict[str, FigureFn]:
    """The figures a task's folder defines: ``FIGURES`` of the module ``figures`` beside the module that defines the
    task's class (``capacity/tasks/<task>/figures.py``); none without such a module."""
    module = f"{type(task).__module__.rpartition('.')[0]}.figures"
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # the task's module is not in a package
        found = False
    if not found:
        return {}
    own = getattr(importlib.import_module(module), "FIGURES", None)
    if not isinstance(own, dict) or not all(isinstance(k, str) and callable(f) for k, f in own.items()):
        raise CapacityError(f"{module}.FIGURES must be a dict of figure name -> function of a Dataset, got {own!r}")
    return own


# figure name -> figure function: those of lacapacity.plots (a task folder's own are its task's: ``own_figures``)
FIGURES: dict[str, FigureFn] = {
    "bill": bill,
    "capacity": capacity_vs_d,
    "closed-form": closed_form,
    "error-vs-load": error_vs_load,
    "feature-maps": feature_maps,
    "orthogonality": orthogonality,
    "variants": variant_curves,
    "pretrained-keys": pretrained_keys,
    "frontier": frontier,
    "forgetting": forgetting,
    "needle": needle_figure,
    "needle-depth": needle_depth,
    "precision": precision_curves,
    "heads": heads_capacity,
    "log-linear": log_linear_bytes,
    "trained": trained_figure,
}


def choose(ds: xr.Dataset) -> list[str]:
    """The figures that fit what ``ds`` holds, whatever its study is called: its task's choice (``Task.figures``)."""
    return task_of(ds).figures(ds)


def available() -> dict[str, str]:
    """The figures of ``lacapacity.plots``: name -> the first line of its function's docstring (a task folder's own
    figures are drawn for its task's results only)."""
    return {name: next(iter((FIGURES[name].__doc__ or "").strip().splitlines()), "") for name in sorted(FIGURES)}


def builders(
    ds: xr.Dataset,
    only: Sequence[str] | None = None,
    *,
    published: bool | None = None,
    look: Callable[[Figure], Figure] | None = None,
) -> list[Job]:
    """The figures that fit ``ds``, not yet built: ``[(file stem, build), ...]`` with ``build()`` -> Figure, stems
    ``<study>_<figure>``; with ``only``, those of the figures named there (each must fit). ``published``: draw (True)
    or leave out (False) the published-results panel of the figures that have one (the frontier), whatever the study
    asks; one of the figures drawn must have it. ``look``: applied to each Figure once built (``layout.relabel``).
    The Dataset's own faults (no variables, text, no figure that fits) are raised here."""
    if not isinstance(ds, xr.Dataset):
        raise CapacityError(f"plots need an xarray.Dataset, got {type(ds).__name__}")
    if len(ds.data_vars) == 0:
        raise CapacityError("the Dataset is empty (no variables)")
    text = [str(v) for v in ds.data_vars if ds[v].dtype.kind not in "biuf"]
    if text:  # every variable of a results file is a number; one that holds text was edited or is not ours
        raise CapacityError(f"variable {text[0]!r} holds {ds[text[0]].dtype} values, not numbers")
    task = task_of(ds)
    names = task.figures(ds)
    if not names:
        raise CapacityError(
            f"no figure fits this Dataset ({task.name} results with {', '.join(map(str, ds.data_vars))})"
        )
    known = {**FIGURES, **own_figures(task)}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise CapacityError(
            f"the {task.name} task names the figure {unknown[0]!r}, which neither lacapacity.plots nor its folder defines"
        )
    if only is not None:
        missing = [name for name in only if name not in names]
        if missing:
            raise CapacityError(
                f"the figure {missing[0]!r} does not fit these results; those that do: {', '.join(names)}"
            )
        names = [name for name in names if name in only]
    study = str(ds.attrs.get("study") or "results")
    asked = _options(ds)
    for name, options in asked.items():  # a study's options for its figures (``Study.figures``)
        allowed = inspect.signature(known[name]).parameters if name in known else {}
        wrong = [k for k in options if k not in allowed or k == "ds"]
        if name in names and wrong:
            raise CapacityError(f"the study asks the {name} figure for {wrong[0]!r}, which it does not take")
    if published is not None:
        having = [name for name in names if "published" in inspect.signature(known[name]).parameters]
        if not having:
            raise CapacityError(
                f"--published: none of the figures drawn ({', '.join(names)}) has a published-results panel"
                " (the frontier figure has)"
            )
        for name in having:
            asked[name] = {**asked.get(name, {}), "published": published}
    jobs: list[Job] = [(f"{study}_{name}", functools.partial(known[name], ds, **asked.get(name, {}))) for name in names]
    return jobs if look is None else [(stem, _looked(build, look)) for stem, build in jobs]


def _looked(build: Callable[[], Figure], look: Callable[[Figure], Figure]) -> Callable[[], Figure]:
    """``build``, then ``look`` on the Figure it returns."""
    return lambda: look(build())


def _options(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """The options the study of ``ds`` asks of its figures, as its configuration records them (``Study.figures``)."""
    try:
        recorded = json.loads(str(ds.attrs["config"])) if "config" in ds.attrs else {}
    except ValueError:
        return {}
    asked = recorded.get("figures", {}) if isinstance(recorded, dict) else {}
    return {str(k): dict(v) for k, v in asked.items() if isinstance(v, dict)} if isinstance(asked, dict) else {}


def figures(ds: xr.Dataset) -> list[tuple[str, Figure]]:
    """The figures that fit ``ds``, built but not saved: ``[(file stem, Figure), ...]``, stems ``<study>_<figure>``."""
    return [(stem, build()) for stem, build in builders(ds)]


def render(ds: xr.Dataset, *, out: Folder) -> list[Path]:
    """Write the default figures of ``ds``'s study into the folder ``out``; returns the paths (PNG, PDF per figure)."""
    return save_all(builders(ds), out)


_JOBS: list[Job] = []  # the (stem, build) a forked child runs (inherited by fork: nothing is pickled but an index)


def _encode_one(i: int) -> dict[str, bytes]:
    stem, build = _JOBS[i]
    return encode(build())


def save_all(jobs: list[Job], out: Folder) -> list[Path]:
    """Build every figure of ``jobs`` (``[(stem, build), ...]``), then write each into ``out``; returns the paths.

    No file is written unless every figure was built. Building, laying out and encoding a figure is nearly all of
    its cost, and one figure does not need another: with several figures and cores (and ``fork``, which hands the
    Dataset to the child without pickling it), each is built and encoded by a child process, at most one per core,
    and this process writes the bytes once all of them are back. An error in one is raised here, as in this process.
    """
    check_folder(out)
    n = min(len(jobs), executors.cores())
    if n < 2 or "fork" not in multiprocessing.get_all_start_methods():
        built = [(stem, build()) for stem, build in jobs]
        return [path for stem, fig in built for path in save(fig, out, stem)]
    _JOBS[:] = jobs
    try:
        fork = multiprocessing.get_context("fork")  # each child dies with this process (kill -9 included)
        with ProcessPoolExecutor(
            n, mp_context=fork, initializer=executors._die_with_parent, initargs=(os.getpid(),)
        ) as pool:
            done = [pool.submit(_encode_one, i) for i in range(len(jobs))]
            encoded = [future.result() for future in done]
    except BrokenProcessPool:
        raise CapacityError("a process drawing the figures died (out of memory?); no figure was written") from None
    finally:
        _JOBS.clear()
    return [path for (stem, _), data in zip(jobs, encoded) for path in write(data, out, stem)]


def _open(path: Path) -> xr.Dataset:
    """Any file xarray opens (netCDF4/HDF5 through h5netcdf, netCDF3 through scipy), loaded whole."""
    try:
        with xr.open_dataset(path) as f:
            loaded: xr.Dataset = f.load()  # xarray's Self: Any under 3.10
            return loaded
    except (OSError, ValueError, TypeError) as exc:
        raise CapacityError(
            f"not a readable netCDF results file ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None


def render_path(
    results: Folder,
    out: Folder | None = None,
    *,
    only: Sequence[str] | None = None,
    select: Mapping[str, Sequence[object]] | None = None,
    published: bool | None = None,
    title: str | None = None,
    xlabel: str | Sequence[str] | None = None,
    ylabel: str | Sequence[str] | None = None,
    legend: layout.Legend = "right",
) -> list[Path]:
    """Render a results file (``.nc``) or every ``.nc`` in a directory; ``out`` defaults to ``figures/`` beside them.

    What ``capacity plot``'s options ask: ``only``, just the figures named there (``--only``); ``select``, the panels:
    dimension -> the values to keep (``--select d=16,32``, ``layout.select``); ``published``, the published-results
    panel drawn or left out (``--published``, ``--no-published``; by default as the study asks); ``title``,
    ``xlabel``, ``ylabel``, ``legend``: the figure's title, axis labels and legend place (``layout.relabel``).
    """
    if legend not in layout.LEGEND:
        raise CapacityError(f"the legend goes {' or '.join(layout.LEGEND)}, got {legend!r}")
    for name, value in (("results", results), ("out", out)):
        if not isinstance(value, (str, os.PathLike)) and (value is not None or name == "results"):
            raise CapacityError(f"render_path's {name} must be a path (str or os.PathLike), got {value!r}")
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
    look = None
    if (title, xlabel, ylabel, legend) != (None, None, None, "right"):
        look = functools.partial(layout.relabel, title=title, xlabel=xlabel, ylabel=ylabel, legend=legend)
    jobs: list[Job] = []
    for f in files:  # every file's faults reported before anything is built or written
        try:
            ds = layout.select(_open(f), select or {})
            jobs += [(stem, _named(f, build)) for stem, build in builders(ds, only, published=published, look=look)]
        except CapacityError as exc:
            raise CapacityError(f"{f}: {exc}") from None
    return save_all(jobs, out_dir)


def _named(path: Path, build: Callable[[], Figure]) -> Callable[[], Figure]:
    """``build``, its CapacityError prefixed with the results file it draws."""

    def named() -> Figure:
        try:
            return build()
        except CapacityError as exc:
            raise CapacityError(f"{path}: {exc}") from None

    return named
