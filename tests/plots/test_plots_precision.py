"""The precision and heads figures: what they draw, against numbers computed here from the Dataset and theory."""

import numpy as np
import pytest

from lacapacity import CapacityError, plots, sweep, theory
from lacapacity.plots.heads import heads_capacity
from lacapacity.plots.precision import departures, precision_curves
from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall, metrics


def _lines(ax, prefix):
    return {ln.get_gid()[len(prefix) :]: ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith(prefix)}


@pytest.fixture(scope="module")
def precision_ds(tmp_path_factory):
    st = Study(
        "precision",
        "small",
        Grid(
            variant=("linear", "delta(beta=1)"),
            d=(16,),
            n=(16, 64, 256, 1024),
            seed=(0, 1),
            state_dtype=("float32", "float8_e4m3fn"),
            rounding=("step", "final"),
        ),
        Recall(values="gaussian", queries=128),
    )
    return sweep.run(st, out=tmp_path_factory.mktemp("p"), device="cpu", progress=False).dataset


def test_precision_figure_draws_the_curves_the_predictions_and_the_departures(precision_ds):
    ds = precision_ds
    assert plots.choose(ds) == ["precision"]
    fig = precision_curves(ds)
    lin_mse = fig.axes[0]
    sub = ds.squeeze(["key_family", "d"])
    base = sub.mse.sel(variant="linear", state_dtype="float32", rounding="step").mean("seed").values
    ns = sub.n.values.astype(float)
    pred = _lines(lin_mse, "theory:T15:")["float8_e4m3fn"]
    want = base + theory.step_rounding_error(ns, 16, 16, "float8_e4m3fn")
    np.testing.assert_allclose(pred.get_ydata(), want, rtol=1e-12)
    step = _lines(lin_mse, "measured:")["float8_e4m3fn|1:step"]
    np.testing.assert_allclose(
        step.get_ydata(), sub.mse.sel(variant="linear", state_dtype="float8_e4m3fn", rounding="step").mean("seed")
    )
    n_out = departures(ds)[("linear", "float8_e4m3fn", "step")]  # float8 leaves float32 within 1024 writes
    assert np.isfinite(n_out)
    rel = abs(sub.mse.sel(variant="linear", state_dtype="float8_e4m3fn", rounding="step").mean("seed") / base - 1)
    assert float(rel.sel(n=n_out)) > 0.05 and (rel.sel(n=slice(None, n_out - 1)) <= 0.05).all()
    marks = _lines(lin_mse, "departure:")
    assert marks["float8_e4m3fn|step"].get_xdata()[0] == n_out
    assert any((line.get_gid() or "") == "predicted:float8_e4m3fn" for line in lin_mse.get_lines())
    assert "recall" in fig.axes[1].get_ylabel()


def test_precision_figure_refuses_what_it_cannot_draw(precision_ds):
    with pytest.raises(CapacityError, match="needs float32"):
        precision_curves(precision_ds.sel(state_dtype=["float8_e4m3fn"]))
    with pytest.raises(CapacityError, match="missing dimension"):
        precision_curves(precision_ds.isel(state_dtype=0))


def test_heads_figure_puts_t20_through_the_layouts(tmp_path):
    st = Study(
        "heads",
        "small",
        Grid(variant=("linear",), d=(16, 32), load=(1 / 16, 1 / 8, 1 / 4, 1 / 2, 1, 2), seed=(0, 1), heads=(1, 4)),
        Recall(values="gaussian"),
    )
    ds = sweep.run(st, out=tmp_path, device="cpu", progress=False).dataset
    assert plots.choose(ds) == ["heads"]
    fig = heads_capacity(ds)
    left = fig.axes[0]
    for d in (16, 32):
        line = _lines(left, "theory:")[f"T20:d={d}"]
        np.testing.assert_allclose(line.get_ydata(), theory.heads_capacity(0.5, d, np.array([1.0, 4.0])))
    cap = metrics.capacity(ds.squeeze("key_family"), metric="mse", threshold=0.5).mean("seed")
    measured = _lines(left, "measured:")["linear|d = 32"]
    np.testing.assert_allclose(measured.get_ydata(), cap.sel(variant="linear", d=32).values)
    fixed = _lines(fig.axes[2], "theory:")["T20:fixed-state"]  # 16 x 16 in one head, 4 heads of 8 x 8: 256 numbers
    np.testing.assert_allclose(fixed.get_xdata(), [1, 4])
    np.testing.assert_allclose(
        fixed.get_ydata(), [theory.heads_capacity(0.5, 16, 1), theory.heads_capacity(0.5, 32, 4)]
    )


def test_the_predicted_step_deviation_of_a_scaled_fp8_format_is_fp8s():
    """fp8 with scales is predicted by T32's fp8 form (its target too), not by int8's grid."""
    from lacapacity.plots.precision import _step_deviation

    ns = np.array([16.0, 64.0, 256.0])
    for dtype, kw in (("fp8/col", {"scope": "col"}), ("fp8/c32@240", {"scope": "cols", "group": 32, "target": 240})):
        got = _step_deviation(ns, 32, 64, dtype, ("decay", 0.9, 1.0))
        want = theory.quantised_step_error(ns, 32, 64, "fp8", memory="decay", alpha=0.9, **kw)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        assert not np.allclose(
            got,
            theory.quantised_step_error(ns, 32, 64, 8, kw["scope"], group=kw.get("group"), memory="decay", alpha=0.9),
        )
