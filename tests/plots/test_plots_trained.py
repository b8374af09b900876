"""The trained figure draws what the Dataset holds: the best accuracy's mean over seeds with its standard error, both
ceilings, and the accuracy against lr per pairs value."""

import numpy as np
import pytest
import xarray as xr

from lacapacity import CapacityError, plots

TRAINED = '{"task": {"kind": "trained"}}'  # the task that made it, as a run's Dataset records it (attrs["config"])


def _ds():
    rng = np.random.default_rng(0)
    v, n, lr, s = ["linear", "delta"], [4, 8, 16], [0.01, 0.1], [0, 1, 2]
    acc = rng.uniform(0, 1, (2, 1, 3, 2, 3))
    return xr.Dataset(
        {
            "accuracy": (("variant", "d", "n", "lr", "seed"), acc),
            "accuracy_best": (("variant", "d", "n", "seed"), acc.max(3)),
            "ceiling_random": (("variant", "d", "n", "seed"), rng.uniform(0, 1, (2, 1, 3, 3))),
            "ceiling_learned": (("variant", "d", "n", "seed"), rng.uniform(0, 1, (2, 1, 3, 3))),
        },
        coords={"variant": v, "d": [16], "n": n, "lr": lr, "seed": s},
        attrs={"vocabulary": 64, "steps": 10, "batch": 4, "test_sequences": 8, "config": TRAINED},
    )


def _line(ax, gid):
    found = [x for x in ax.get_lines() if x.get_gid() == gid]
    assert len(found) == 1, [x.get_gid() for x in ax.get_lines()]
    return found[0]


def test_the_trained_figure_draws_means_ses_and_both_ceilings():
    ds = _ds()
    assert plots.choose(ds) == ["trained"]
    fig = plots.FIGURES["trained"](ds)
    axes = np.array(fig.axes[:4]).reshape(2, 2)
    one = ds.sel(variant="delta").squeeze("d")
    top, bottom = axes[0, 1], axes[1, 1]
    assert np.allclose(_line(top, "measured:delta").get_ydata(), one.accuracy_best.mean("seed"))
    for var in ("ceiling_random", "ceiling_learned"):
        assert np.allclose(_line(top, f"{var}:delta").get_ydata(), one[var].mean("seed"))
    bars = [c for c in top.containers if c.lines[0].get_gid() == "measured:delta"][0]
    segments = bars.lines[2][0].get_segments()  # one vertical bar per pairs value: mean -/+ SE
    x = one.accuracy_best.transpose("n", "seed").values
    se = x.std(axis=1, ddof=1) / np.sqrt(x.shape[1])  # written here: the sample SD over the seeds / sqrt(seeds)
    assert np.allclose([seg[1, 1] - seg[0, 1] for seg in segments], 2 * se)
    assert np.allclose(_line(bottom, "window:delta|8").get_xdata(), [0.01, 0.1])
    assert np.allclose(_line(bottom, "window:delta|8").get_ydata(), one.accuracy.sel(n=8).mean("seed"))


def test_the_trained_figure_draws_one_d():
    with pytest.raises(CapacityError, match="draws one d"):
        plots.FIGURES["trained"](xr.concat([_ds(), _ds().assign_coords(d=[32])], "d"))
