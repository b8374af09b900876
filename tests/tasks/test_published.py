"""Published trained results: the data files carry their sources, and the figures draw exactly their rows."""

import numpy as np
import pytest

from lacapacity import CapacityError, sweep, theory
from lacapacity.plots import frontier
from lacapacity.plots import published as layers
from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall, published


def test_every_data_file_cites_its_source_and_reading():
    for name in published.available():
        text = published.source(name)
        assert "arXiv" in text or "github" in text.lower(), name
        assert "read" in text.lower(), name  # how each number was read (or why it could not be)
        table = published.load(name)
        assert len(table) > 0 and table.attrs["source"] == text
    with pytest.raises(CapacityError, match="no published data"):
        published.load("nothing")


def test_based_rows_follow_their_stated_calibration():
    """Each row's numbers are its marker's pixel centroid through the calibration the file states."""
    t = published.load("based_figure2")
    # tolerances: the printed rounding of the pixels (0.05 px) and of the calibration's coefficients
    np.testing.assert_allclose(t["log2_state_bytes"], 0.035242 * t["x_px"] - 7.5295, atol=2.5e-3)
    np.testing.assert_allclose(t["accuracy"], -0.003208 * t["y_px"] + 1.1014, atol=6e-4)
    np.testing.assert_allclose(t["state_bytes"], 2.0 ** t["log2_state_bytes"], rtol=2e-3)
    counts = t["architecture"].value_counts()
    assert counts["Based"] >= 9 and counts["Attention (sliding window)"] == 8 and counts["Attention (full)"] == 2
    assert t["accuracy"].between(0, 1.005).all()


@pytest.fixture(scope="module")
def variants_ds(tmp_path_factory):
    study = Study(
        "frontier-test",
        "two memories",
        Grid(variant=("linear", "delta(beta=1)"), d=(8, 16), load=(0.5, 1, 2, 4), seed=(0, 1)),
        Recall(),
    )
    return sweep.run(study, out=tmp_path_factory.mktemp("pub")).dataset


def test_the_frontier_figure_draws_the_file_and_nothing_typed_in(variants_ds):
    fig = frontier(variants_ds, published=True)  # the panel is drawn when asked
    ax = fig.axes[2]
    t = published.load("based_figure2")
    drawn = {ln.get_gid().split(":")[-1]: ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("published:")}
    assert set(drawn) == {"Based", "Mamba", "Attention (full)", "Attention (sliding window)"}
    for arch, line in drawn.items():
        rows = t[t["architecture"] == arch]
        np.testing.assert_array_equal(line.get_xdata(), rows["state_bytes"].to_numpy(float))
        np.testing.assert_array_equal(line.get_ydata(), rows["accuracy"].to_numpy(float))
    assert ax.get_xscale() == "log" and "bytes" in ax.get_xlabel()
    ceiling = [ln for ln in ax.get_lines() if ln.get_gid() == "theory:T10:mqar-ceiling"]
    assert len(ceiling) == 1 and np.all(np.diff(ceiling[0].get_ydata()) >= -1e-12)  # more bytes, more recall
    assert "arXiv 2402.18668" in fig.get_supxlabel()


def test_the_ceiling_is_t10_over_the_test_mix():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from lacapacity.tasks.mqar import probe as mqar

    ax = Figure().subplots()
    line = layers.mqar_ceiling(ax, 2**12, 2**20)
    b, acc = line.get_xdata(), line.get_ydata()
    d = np.sqrt(b[10] / 4)
    pairs = np.array([p for _, p in mqar.ZOOLOGY_BASED_FIGURE2_TEST], dtype=float)
    want = (pairs * theory.vocab_argmax_recall(pairs, d, d, 4096)).sum() / pairs.sum()
    assert acc[10] == pytest.approx(want, rel=1e-12)
