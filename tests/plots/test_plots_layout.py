"""`capacity plot`'s options for panels, labels, the legend and the published panel (lacapacity.plots.layout and
render_path): each checked on the matplotlib Figure it builds (panel titles, axis labels, the legend's place against
the panels and the note, the frontier's panels), against the same figure drawn without the option."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
import xarray as xr

from lacapacity import studies, sweep
from lacapacity.errors import CapacityError
from lacapacity.plots import layout

render = importlib.import_module("lacapacity.plots.render")  # the module: lacapacity.plots.render is the function


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> xr.Dataset:
    """Two memories at three d, two seeds: the variants, capacity and frontier figures fit."""
    study = studies.get("capacity-vs-d").with_overrides(
        ["variant=linear,delta", "keys=gaussian", "d=8,16,32", "load=1/2,1,2", "seed=0,1", "dv=8"]
    )
    out = tmp_path_factory.mktemp("two")
    return sweep.run(study, out=out, device="cpu", executor="serial", progress=False).dataset.load()


def _built(ds: xr.Dataset, name: str, **kw):
    (job,) = [build for stem, build in render.builders(ds, [name], **kw)]
    return job()


def _titles(fig) -> list[str]:
    return [ax.get_title() for ax in fig.axes]


def _lines(fig) -> dict[tuple[int, str, str], np.ndarray]:
    """(row, panel title, gid) -> y of every measured line (a row is a metric, a panel a d)."""
    rows = sorted({round(ax.get_position().y0, 3) for ax in fig.axes}, reverse=True)
    return {
        (rows.index(round(ax.get_position().y0, 3)), ax.get_title(), str(line.get_gid())): np.asarray(line.get_ydata())
        for ax in fig.axes
        for line in ax.lines
        if str(line.get_gid()).startswith("measured:")
    }


def test_select_keeps_the_panels_asked_for(two):
    whole = _built(two, "variants")
    assert sorted(set(_titles(whole))) == ["d = 16, dv = 8", "d = 32, dv = 8", "d = 8, dv = 8"]
    picked = _built(layout.select(two, {"d": ["8", "32"]}), "variants")
    assert len(picked.axes) == 4 and sorted(set(_titles(picked))) == ["d = 32, dv = 8", "d = 8, dv = 8"]
    kept, full = _lines(picked), _lines(whole)  # the panels kept draw what the whole figure draws there
    assert len(kept) == 8 and all(np.array_equal(y, full[key], equal_nan=True) for key, y in kept.items())
    one = _built(layout.select(two, {"variant": ["delta"]}), "error-vs-load")  # one memory: its own figure
    assert _titles(one) == [f"DeltaNet (delta), d = {d}" for d in (8, 16, 32)]
    np.testing.assert_array_equal(layout.select(two, {"load": ["1/2", 2]})["load"].values, [0.5, 2.0])


def test_select_refuses_what_the_results_do_not_hold(two):
    with pytest.raises(CapacityError, match=r"^--select heads=\.\.\.: these results have no dimension 'heads'"):
        layout.select(two, {"heads": ["2"]})
    with pytest.raises(CapacityError, match=r"^--select d=12: not in these results \(d = 8, 16, 32\)$"):
        layout.select(two, {"d": ["12"]})
    with pytest.raises(CapacityError, match=r"^--select variant=lsq: not in these results \(variant = linear, delta"):
        layout.select(two, {"variant": ["lsq"]})


def test_relabel_sets_the_title_and_the_labels_in_order(two):
    plain = _built(two, "variants")
    ys = list(dict.fromkeys(ax.get_ylabel() for ax in plain.axes if ax.get_ylabel()))
    assert len(ys) == 2  # the error's, then the recall's
    fig = layout.relabel(_built(two, "variants"), title="Two memories", ylabel=["MSE", "top-1 recall"], xlabel="n / d")
    assert fig.get_suptitle() == "Two memories"
    for before, after in zip(plain.axes, fig.axes):
        assert after.get_ylabel() == {"": "", ys[0]: "MSE", ys[1]: "top-1 recall"}[before.get_ylabel()]
        assert after.get_xlabel() == ("n / d" if before.get_xlabel() else "")
    assert _lines(fig).keys() == _lines(plain).keys()  # the data are drawn as before
    with pytest.raises(CapacityError, match=r"^--ylabel given 3 times; this figure has 2 distinct y labels"):
        layout.relabel(_built(two, "variants"), ylabel=["a", "b", "c"])
    with pytest.raises(CapacityError, match="^the legend goes right or below or none, got 'left'$"):
        layout.relabel(_built(two, "variants"), legend="left")  # type: ignore[arg-type]


def _box(artist, fig):
    return artist.get_window_extent(fig.canvas.get_renderer())


def test_the_legend_below_the_panels_and_above_the_note_or_none(two):
    plain = _built(two, "capacity")
    (right,) = plain.legends
    entries = [t.get_text() for t in right.get_texts()]
    fig = layout.relabel(_built(two, "capacity"), legend="below")
    fig.draw_without_rendering()
    (below,) = fig.legends
    assert [t.get_text() for t in below.get_texts()] == entries  # every entry, moved
    assert fig.get_figwidth() < plain.get_figwidth() and fig.get_figheight() > plain.get_figheight()
    leg, note = _box(below, fig), _box(fig._supxlabel, fig)
    lowest = min(_box(ax, fig).y0 for ax in fig.axes)
    assert leg.y1 <= lowest and note.y1 <= leg.y0 and note.y0 >= 0  # panels, then the legend, then the note
    assert all(_box(ax, fig).x1 <= fig.bbox.x1 for ax in fig.axes)
    gone = layout.relabel(_built(two, "capacity"), legend="none")
    assert gone.legends == [] and gone.get_figwidth() < plain.get_figwidth()


def test_published_draws_or_leaves_out_the_frontiers_published_panel(two):
    assert len(_built(two, "frontier").axes) == 2  # compare and capacity-vs-d leave it out
    drawn = _built(two, "frontier", published=True)
    assert len(drawn.axes) == 3 and drawn.axes[2].get_xlabel() == "recurrent state size (bytes)"
    assert "Based's Fig. 2" in drawn._supxlabel.get_text()
    config = json.loads(two.attrs["config"])
    asked = two.assign_attrs(config=json.dumps({**config, "figures": {"frontier": {"published": True}}}))
    assert len(_built(asked, "frontier").axes) == 3  # as the frontier study asks
    assert len(_built(asked, "frontier", published=False).axes) == 2  # --no-published overrules it
    with pytest.raises(CapacityError, match=r"^--published: none of the figures drawn \(variants\) has a published"):
        render.builders(two, ["variants"], published=True)


def test_the_command_draws_with_every_option(two, tmp_path, cli, monkeypatch):
    path = tmp_path / "two.nc"
    two.to_netcdf(path)
    built: dict[str, object] = {}

    def keep(jobs, out):  # the figures as built, not encoded (render's own tests write files)
        built.update({stem: build() for stem, build in jobs})
        return []

    monkeypatch.setattr(render, "save_all", keep)
    done = cli.here(
        "plot",
        path,
        "--out",
        tmp_path / "f",
        "--only",
        "frontier,variants",
        "--select",
        "d=8,16",
        "--published",
        "--title",
        "T",
        "--xlabel",
        "X",
        "--legend",
        "none",
    )
    assert done.returncode == 0, done.stderr
    frontier, variants = built["capacity-vs-d_frontier"], built["capacity-vs-d_variants"]
    assert len(frontier.axes) == 3 and frontier.get_suptitle() == "T" and frontier.legends == []
    assert sorted(set(_titles(variants))) == ["d = 16, dv = 8", "d = 8, dv = 8"]
    assert {ax.get_xlabel() for ax in variants.axes} <= {"X", ""} and "X" in {ax.get_xlabel() for ax in variants.axes}
    cli.fails(cli.here("plot", path, "--select", "d"), "--select takes DIM=VALUE[,VALUE], got 'd'")
    cli.fails(cli.here("plot", path, "--select", "d=12"), "--select d=12: not in these results")
    cli.fails(cli.here("plot", path, "--only", "variants", "--published"), "has a published-results panel")
    assert not (tmp_path / "figures").exists()
