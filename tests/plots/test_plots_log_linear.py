"""The log-linear figure (plots.log_linear): log-linear attention beside its base memory at the same state bytes."""

import dataclasses

import numpy as np
import pytest

from lacapacity import CapacityError, plots, studies, sweep
from lacapacity.plots.log_linear import equal_bytes, log_linear_bytes


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The log-linear study at d0 = 8, dv = 8: n = 4, 6 (3 levels: d = 24 at the same bytes) and 8 (4 levels: 32)."""
    study = studies.get("log-linear")
    grid = dataclasses.replace(
        study.grid, variant=("linear", "log_linear(lam=0.5)"), d=(8, 24, 32), dv=(8,), n=(4, 6, 8), seed=(0, 1, 2)
    )
    res = sweep.run(dataclasses.replace(study, grid=grid), out=tmp_path_factory.mktemp("ll"), progress=False)
    return res.dataset


def test_the_base_is_read_at_the_d_that_holds_the_log_linear_state_bytes(small):
    chosen, ll, base = equal_bytes(small.squeeze("key_family", drop=True), "log_linear", "linear")
    assert list(chosen) == [24, 24, 32]  # d0 (floor(log2 n) + 1)
    assert list(ll) == [3 * 64, 3 * 64, 4 * 64] and list(base) == list(ll)  # numbers: levels x d0 dv = d x dv


def test_the_figure_draws_the_base_at_the_same_bytes_and_at_d0(small):
    assert plots.choose(small) == ["log-linear"]
    fig = log_linear_bytes(small)
    top = fig.axes[0]
    lines = {ln.get_label(): ln for ln in top.get_lines()}
    rec = small.recall.squeeze("key_family", drop=True)
    same = [float(rec.sel(variant="linear", d=dd, n=n).mean("seed")) for dd, n in ((24, 4), (24, 6), (32, 8))]
    np.testing.assert_allclose(lines["linear at the same bytes"].get_ydata(), same)
    np.testing.assert_allclose(lines["linear, d = 8"].get_ydata(), rec.sel(variant="linear", d=8).mean("seed"))
    np.testing.assert_allclose(
        lines["log_linear, d = 8 (grows)"].get_ydata(), rec.sel(variant="log_linear", d=8).mean("seed")
    )
    # at n = 4 and 8 (powers of two) log-linear recalls as its base at d0, between them it need not
    ll, lin = lines["log_linear, d = 8 (grows)"].get_ydata(), lines["linear, d = 8"].get_ydata()
    assert ll[0] == lin[0] and ll[2] == lin[2]


def test_the_figure_needs_a_log_linear_memory_and_its_base(small):
    with pytest.raises(CapacityError, match="needs a log_linear memory and its base"):
        log_linear_bytes(small.sel(variant=["log_linear"]))


def test_the_bands_are_one_standard_error_over_the_seeds(small):
    fig = log_linear_bytes(small)
    top = fig.axes[0]
    rec = small.recall.squeeze("key_family", drop=True)
    same = np.stack([rec.sel(variant="linear", d=dd, n=n).values for dd, n in ((24, 4), (24, 6), (32, 8))])
    for label, per in (("linear at the same bytes", same), ("linear, d = 8", rec.sel(variant="linear", d=8).values)):
        (band,) = [c for c in top.collections if c.get_gid() == f"range:{label}"]
        xy = band.get_paths()[0].vertices
        mean, se = (
            per.mean(1),
            per.std(1, ddof=1) / np.sqrt(per.shape[1]),
        )  # [n], numpy's, over the 3 seeds (with 2 the range would be one s.e.)
        for n, m, e in zip((4, 6, 8), mean, se):
            ys = xy[np.isclose(xy[:, 0], n), 1]
            np.testing.assert_allclose([ys.min(), ys.max()], [m - e, m + e], atol=1e-12)
