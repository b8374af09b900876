"""Capacity: the largest n at which a measured curve still meets a criterion.

Works on the probe's Dataset (dimension ``n``) and on sweep results whose curve runs along
another dimension (``load``) with ``n`` as a coordinate.

>>> import numpy as np, xarray as xr
>>> ds = xr.Dataset({"mse": ("n", [0.0, 0.25, 0.75, 1.5])}, coords={"n": [8, 16, 32, 64]})
>>> round(float(capacity(ds, metric="mse", threshold=0.5)), 4)    # crossing between n = 16 and 32, in log n
22.6274
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from lacapacity.errors import CapacityError

__all__ = ["capacity", "HIGHER_IS_BETTER", "LOWER_IS_BETTER"]

LOWER_IS_BETTER = ("mse", "rel_error", "leak")
HIGHER_IS_BETTER = ("recall", "cosine")


def _curve(y: np.ndarray, n: np.ndarray, threshold: float, higher: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One curve's finite points in increasing n, and where they meet the criterion."""
    keep = np.isfinite(y) & np.isfinite(n) & (n > 0)
    order = np.argsort(n[keep])
    y, n = y[keep][order], n[keep][order]
    return y, n, (y >= threshold if higher else y <= threshold)


def undetermined_reason(y: np.ndarray, n: np.ndarray, threshold: float, higher: bool) -> int:
    """Why ``capacity`` is NaN for one curve: 0 it is not, 1 met everywhere (beyond the grid), 2 failed at the smallest n, 3 no finite data."""
    y, n, ok = _curve(y, n, threshold, higher)
    if y.size == 0:
        return 3
    if ok.all():
        return 1
    return 0 if ok[0] else 2


def _crossing(y: np.ndarray, n: np.ndarray, threshold: float, higher: bool) -> float:
    """First crossing of ``threshold`` along one curve, interpolated linearly in log n."""
    if undetermined_reason(y, n, threshold, higher):
        return np.nan
    y, n, ok = _curve(y, n, threshold, higher)
    k = int(np.argmin(ok))  # first failure
    y0, y1 = y[k - 1], y[k]
    x0, x1 = np.log(n[k - 1]), np.log(n[k])
    frac = 0.0 if y1 == y0 else (threshold - y0) / (y1 - y0)
    return float(np.exp(x0 + np.clip(frac, 0.0, 1.0) * (x1 - x0)))


def capacity(ds: xr.Dataset, *, metric: str = "mse", threshold: float, dim: str | None = None) -> xr.DataArray:
    """Largest n meeting the criterion on ``metric`` (<= threshold for errors, >= for recall and cosine).

    The curve runs along ``dim`` (default ``"n"`` if it is a dimension, else ``"load"``); the pair
    count comes from the coordinate ``n`` (1-D along ``dim``, or over ``dim`` and others such as
    ``d``). The result drops ``dim``: one capacity per remaining coordinate, taken at the first
    crossing and interpolated linearly in log n between the grid points on either side. NaN
    where the curve meets the criterion everywhere on the grid (capacity beyond it) or nowhere.
    """
    if isinstance(ds, xr.DataArray):
        name = ds.name if isinstance(ds.name, str) else metric
        raise CapacityError(
            f"ds must be an xarray.Dataset holding {metric!r}, got a DataArray; "
            f"pass a Dataset, e.g. da.to_dataset(name={name!r})"
        )
    if not isinstance(ds, xr.Dataset):
        raise CapacityError(f"ds must be an xarray.Dataset (the probe's or a sweep's result), got {type(ds).__name__}")
    real = isinstance(threshold, (int, float, np.integer, np.floating)) and not isinstance(threshold, (bool, np.bool_))
    if not real or not np.isfinite(threshold):
        raise CapacityError(f"threshold must be a finite number (an error bound or a score), got {threshold!r}")
    if not isinstance(metric, str) or metric not in LOWER_IS_BETTER + HIGHER_IS_BETTER:
        raise CapacityError(
            f"capacity needs an error metric ({', '.join(LOWER_IS_BETTER)}) or a score ({', '.join(HIGHER_IS_BETTER)}), got {metric!r}"
        )
    if metric not in ds:
        raise CapacityError(f"the Dataset has no variable {metric!r}; it has: {', '.join(map(str, ds.data_vars))}")
    if dim is None:
        dim = "n" if "n" in ds.dims else "load"
    if dim not in ds[metric].dims:
        raise CapacityError(
            f"{metric!r} has no dimension {dim!r}; its dimensions: {', '.join(map(str, ds[metric].dims))}"
        )
    if "n" not in ds.coords:
        raise CapacityError("the Dataset needs a coordinate 'n' (pairs written)")
    if not isinstance(dim, str):
        raise CapacityError(f"dim must be a dimension name such as 'n' or 'load', got {dim!r}")
    da = ds[metric]
    if not np.issubdtype(ds.coords["n"].dtype, np.number) or np.issubdtype(ds.coords["n"].dtype, np.complexfloating):
        raise CapacityError(f"the coordinate 'n' (pairs written) must hold numbers, got dtype {ds.coords['n'].dtype}")
    n = ds.coords["n"].astype(np.float64)
    n, da = xr.broadcast(n, da)
    # on the bare Variables, so that no coordinate name can make xarray mistake a DataArray for a
    # mapping (a coordinate "keys" would); the coordinates are put back afterwards
    out = xr.apply_ufunc(
        _crossing,
        da.variable,
        n.variable,
        input_core_dims=[[dim], [dim]],
        kwargs={"threshold": float(threshold), "higher": metric in HIGHER_IS_BETTER},
        vectorize=True,
        output_dtypes=[np.float64],
    )
    order = [x for x in ds[metric].dims if x != dim]
    out = xr.DataArray(out, coords={k: c for k, c in da.coords.items() if dim not in c.dims and k != "n"}).transpose(
        *order
    )
    rel = ">=" if metric in HIGHER_IS_BETTER else "<="
    out.attrs = {
        "long_name": f"capacity ({metric} {rel} {threshold:g})",
        "units": "pairs",
        "description": f"largest n with {metric} {rel} {threshold:g}, first crossing interpolated in log n; NaN where not determined on the grid",
    }
    named: xr.DataArray = out.rename("capacity")
    return named
