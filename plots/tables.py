"""Tables a paper can take: the headline numbers of a results Dataset, as CSV or Markdown.

``headline(ds)`` gives one row per cell (every dimension of ``mse`` or ``recall`` but the curve axis, ``load`` or
``n``, and ``seed``): the capacity at each criterion (mean error <= eps = 0.5, argmax recall >= tau = 0.9;
``lacapacity.metrics.capacity``), the mean error and argmax recall at the largest n measured (``n_max``) (and there the recall over the last pairs
written, ``recall_recent``, where the results hold it: ``Recall(recent=R)``), each as the mean over seeds with its standard error (``<column>_se``: the seeds' sample standard deviation / sqrt(seeds);
empty with one seed), and ``bytes``: what one state keeps in its stored format (``state_dtype``, float32 where the
results have none), scales and an error-feedback residual counted (``lacapacity.variants.precision.state_bytes``; at
n_max for a state that grows), empty for a memory that cannot be built here. ``markdown(df)`` gives the table as
Markdown (``mean ± se`` in one cell); ``write(df, path)`` writes ``.csv`` (every column apart) or ``.md``.
``capacity table RESULTS`` prints the Markdown.

>>> import xarray as xr
>>> ds = xr.Dataset(
...     {"mse": (("n", "seed"), [[0.1, 0.3], [0.7, 0.9]])},
...     coords={"variant": "linear", "n": [8, 16], "seed": [0, 1], "d": 8, "dv": 8},
... )
>>> print(markdown(headline(ds)))
| bytes | seeds | n_max | capacity (mse <= 0.5) | mse at n_max |
|---|---|---|---|---|
| 256 | 2 | 16 | 11.39 ± 1.31 | 0.8 ± 0.1 |
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from lacapacity import variants
from lacapacity.errors import CapacityError
from lacapacity.plots import _data
from lacapacity.plots.capacity_vs_d import EPS, TAU
from lacapacity.tasks import metrics
from lacapacity.variants import precision

__all__ = ["headline", "markdown", "write"]

_CRITERIA = (("mse", "<=", EPS), ("recall", ">=", TAU))


def _mean_se(da: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    """The mean over ``seed`` and its standard error (sample standard deviation / sqrt(seeds with a value))."""
    if "seed" not in da.dims:
        return da, xr.full_like(da, np.nan, dtype=float)
    count = da.count("seed")
    se = da.std("seed", ddof=1) / np.sqrt(count)
    return da.mean("seed"), se.where(count > 1)


def _bytes(ds: xr.Dataset, row: pd.Series) -> float:
    """Bytes one state of the row's memory keeps in the row's stored format; NaN where it cannot be built here."""
    if "variant" not in row and "variant" not in ds.coords:
        return float("nan")
    label = str(row["variant"] if "variant" in row else ds["variant"].values)
    stored = ds["state_dtype"].values if "state_dtype" in ds.coords else "float32"  # a scalar coordinate, or none
    dtype = str(row["state_dtype"] if "state_dtype" in row else stored)
    d = int(row["d"] if "d" in row else ds["d"].values)
    try:
        memory = precision.stored(variants.resolve(label), dtype)
        return float(precision.state_bytes(memory, d, _data.dv_of(ds, d), dtype, n=int(row["n_max"])))
    except (CapacityError, TypeError, ValueError):
        return float("nan")


def headline(ds: xr.Dataset, *, eps: float = EPS, tau: float = TAU) -> pd.DataFrame:
    """One row per cell of ``ds``: capacity at each criterion and the metrics at the largest n, mean and standard error
    over seeds, the state's bytes (see the module). Columns: the cell's dimensions, ``bytes``, ``n_max``, ``seeds``,
    then ``<name>`` and ``<name>_se`` for each number."""
    present = [m for m, _, _ in _CRITERIA if m in ds.data_vars]
    if not present:
        raise CapacityError("a headline table needs the variable 'mse' or 'recall' in the results")
    curve = next((c for c in ("n", "load") if c in ds[present[0]].dims), None)
    if curve is None or "n" not in ds.coords:
        raise CapacityError("a headline table needs the curve axis 'n' or 'load' and the coordinate 'n'")
    thresholds = {"mse": eps, "recall": tau}
    columns: dict[str, xr.DataArray] = {}
    for m, sign, _ in _CRITERIA:
        if m in present:
            columns[f"capacity ({m} {sign} {thresholds[m]:g})"] = metrics.capacity(
                ds, metric=m, threshold=thresholds[m]
            )
    for m in [*present, *(["recall_recent"] if "recall_recent" in ds.data_vars else [])]:
        columns[f"{m} at n_max"] = ds[m].isel({curve: -1}, drop=True)
    out = xr.Dataset()
    for name, da in columns.items():
        mean, se = _mean_se(da.reset_coords(drop=True))
        out[name], out[f"{name}_se"] = mean, se
    cells = [d for d in ds[present[0]].dims if d not in (curve, "seed")]
    df = out.to_dataframe().reset_index() if cells else pd.DataFrame([{k: v.item() for k, v in out.items()}])
    df = df[[*cells, *out.data_vars]]
    n = ds["n"].isel({curve: -1}, drop=True) if curve in ds["n"].dims else ds["n"]
    df.insert(len(cells), "n_max", [int(n.sel({k: r[k] for k in n.dims}).item()) for _, r in df.iterrows()])
    df.insert(len(cells), "seeds", int(ds.sizes.get("seed", 1)))
    df.insert(len(cells), "bytes", [_bytes(ds, r) for _, r in df.iterrows()])
    return df


def _cell(x: object) -> str:
    if isinstance(x, float | np.floating):
        return "" if np.isnan(x) else f"{x:.4g}"
    return str(x)


def markdown(df: pd.DataFrame) -> str:
    """The table as Markdown: one column per number, ``mean ± se`` where a standard error is known."""
    names = [c for c in df.columns if not str(c).endswith("_se")]
    rows = []
    for _, r in df.iterrows():
        cells = []
        for c in names:
            se = r.get(f"{c}_se")
            text = _cell(r[c])
            cells.append(f"{text} ± {_cell(se)}" if text and se is not None and _cell(se) else text)
        rows.append(cells)
    lines = ["| " + " | ".join(map(str, names)) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def write(df: pd.DataFrame, path: str | Path) -> Path:
    """Write the table to ``path``: CSV for ``.csv`` (every column apart), Markdown for ``.md``; returns the path."""
    path = Path(path)
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".md":
        path.write_text(markdown(df) + "\n", encoding="utf-8")
    else:
        raise CapacityError(f"a table is written as .csv or .md, got {path.name!r}")
    return path
