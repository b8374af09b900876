"""The plot layer's names, colours and curves, on small hand-made Datasets (no sweep): display names come from the
registry entries (built-ins and plug-ins), legends follow the registries' order, ``theme.curves`` draws each label's
mean and range itself (compared with numpy on the Dataset), the style is seaborn's, and ``save`` draws once per file."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from lacapacity import variants
from lacapacity.errors import CapacityError
from lacapacity.inputs import features, keys
from lacapacity.plots import _data, error_vs_load, names, theme, variant_curves
from lacapacity.plots.save import save

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugin_pkg"))
from usermem import GainMemory


def _results(variant_labels, key_labels=("gaussian",), *, seed=0, seeds=3) -> xr.Dataset:
    """A results Dataset shaped like the sweep's (variant, key_family, d, load, seed), random values."""
    rng = np.random.default_rng(seed)
    d, load = [8, 16], [0.5, 1.0, 2.0, 4.0]
    shape = (len(variant_labels), len(key_labels), len(d), len(load), seeds)
    dims = ("variant", "key_family", "d", "load", "seed")
    n = np.maximum(1, np.round(np.outer(d, load))).astype(int)
    return xr.Dataset(
        {"mse": (dims, rng.uniform(0.01, 2.0, shape)), "recall": (dims, rng.uniform(0.0, 1.0, shape))},
        coords={
            "variant": list(variant_labels),
            "key_family": list(key_labels),
            "d": d,
            "load": load,
            "seed": np.arange(seeds),
            "n": (("d", "load"), n),
            "dv": 16,
            "additive": ("variant", [False] * len(variant_labels)),
            "linear_read": ("variant", [True] * len(variant_labels)),
        },
        attrs={"study": "hand-made"},
    )


def _legend(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]


@pytest.fixture
def fresh_registry(monkeypatch):
    """Registrations made by a test end with it."""
    monkeypatch.setattr(variants, "_REGISTRY", variants._REGISTRY.copy())


# ---------------------------------------------------------------- display names live on the registry entries


def test_display_names_are_the_registry_entries():
    for name, shown in variants.display_names().items():
        assert variants.display_name(name) == shown and names.variant_name(name) == shown
    assert variants.display_name("delta") == "DeltaNet (delta)" and variants.display_name("lsq") == "lsq"
    for name in keys.available():
        family = keys.family(name)
        assert names.keys_name(name) == (family.display or family.name)
    assert keys.family("orthogonal").display == "tight frame (orthogonal)"
    for name, shown in features.display_names().items():
        assert names.feature_name(name) == shown
    assert set(features.display_names()) == set(features.available())  # every built-in map has one
    # the plot layer keeps no table of its own, and no alias that no registry has
    assert not any(hasattr(names, table) for table in ("VARIANTS", "KEYS", "FEATURES", "ORDER"))
    assert set(names.order()) <= set(variants.display_names()) | set(keys.available()) | set(features.available())


def test_a_registered_plugin_shows_its_display_name_in_the_legend(fresh_registry):
    variants.register("gain", GainMemory, "c times the additive read (tests)", display="gain memory (tests)")
    assert names.variant_name("gain(c=0.5)") == "gain memory (tests), c = 0.5"
    fig = variant_curves(_results(["gain(c=0.5)", "linear"]))
    legend = _legend(fig)
    assert "gain memory (tests), c = 0.5" in legend and "linear attention (additive)" in legend
    # registered later than the built-ins: after them in the legend
    assert legend.index("linear attention (additive)") < legend.index("gain memory (tests), c = 0.5")


def test_register_takes_the_class_display_and_checks_it(fresh_registry):
    class Shown(GainMemory):
        display = "shown by its class"

    variants.register("shown", Shown, "a class that names itself")
    variants.register("plain", GainMemory, "a class that does not")
    assert variants.display_name("shown") == "shown by its class" and variants.display_name("plain") == "plain"
    with pytest.raises(CapacityError, match="display name"):
        variants.register("bad", GainMemory, "x", display="")


def test_plugins_by_import_path_show_their_display_or_class_name(tmp_path, monkeypatch):
    (tmp_path / "shownmem.py").write_text(
        textwrap.dedent(
            """
            import dataclasses
            from lacapacity.inputs import keys

            class Named:
                display = "a named memory"

            class Unnamed:
                pass

            FAMILY = dataclasses.replace(keys.family("gaussian"), name="mykeys", display="my keys")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert names.variant_name("shownmem:Named(c=2)") == "a named memory, c = 2"
    assert names.variant_name("shownmem:Unnamed") == "Unnamed"  # no display: its class name
    assert names.variant_name("nosuchmodule:Longhorn(beta=1.0)") == "Longhorn, β = 1.0"  # not importable here
    assert names.keys_name("shownmem:FAMILY") == "my keys"
    assert (
        names.feature_name("lacapacity.inputs.features:Dpfp(nu=2)") == "Dpfp (ν = 2)"
    )  # a FeatureMap class, no display
    fig = error_vs_load(_results(["linear"], ["shownmem:FAMILY", "gaussian"]))
    assert {"my keys", "random (Gaussian)"} <= set(_legend(fig))


def test_legend_order_is_the_registry_order(fresh_registry):
    registered = list(variants.display_names())
    labels = ["zz_unknown", "softmax(beta=4.0)", "lsq", "delta(beta=1.0)", "delta(beta=0.5)", "linear"]
    got = theme.ordered(labels)
    assert got[-1] == "zz_unknown"  # unknown names after every registered one
    bases = [names.parse_label(lab)[0] for lab in got[:-1]]
    assert bases == sorted(bases, key=registered.index)
    assert got.index("delta(beta=0.5)") < got.index("delta(beta=1.0)")  # parameters ascending
    variants.register("aaa_late", GainMemory, "registered last")
    assert theme.ordered(["aaa_late", "softmax"]) == ["softmax", "aaa_late"]  # registration order, not by name
    # colours follow the order: the first base takes the palette's first colour
    colors = theme.palette(["softmax", "linear"])
    assert colors["linear"] == to_rgb(theme.COLORBLIND[0]) and colors["softmax"] == to_rgb(theme.COLORBLIND[1])


# ---------------------------------------------------------------- curves: drawn directly, one line per label


def _curve_table(seed=1):
    ds = _results(["linear", "delta(beta=0.5)", "lsq"], seed=seed)
    da = ds["mse"].isel(key_family=0, d=0, drop=True)  # [variant, load, seed]
    da[dict(variant=0, load=1, seed=2)] = np.nan  # a missing run: the mean is over the seeds that have a value
    return da, _data.tidy(da, "mse")


@pytest.mark.parametrize("err_style", ["band", "bars"])
def test_curves_draw_each_labels_mean_and_standard_error(err_style):
    da, df = _curve_table()
    with theme.style():
        fig, axes = theme.figure()
        ax = axes[0, 0]
        theme.curves(ax, df, x="load", y="mse", hue="variant", name=names.variant_name, err_style=err_style)
    for label in da["variant"].values:
        lines = [ln for ln in ax.get_lines() if ln.get_gid() == f"measured:{label}"]
        assert len(lines) == 1, [ln.get_gid() for ln in ax.get_lines()]
        x, y = lines[0].get_data()
        values = da.sel(variant=label).values  # [load, seed]
        np.testing.assert_array_equal(x, da["load"].values)
        np.testing.assert_allclose(y, np.nanmean(values, axis=-1), rtol=1e-12)
        assert lines[0].get_label() == names.variant_name(label)
        ranges = [a for a in ax.collections if a.get_gid() == f"range:{label}"]
        # the standard error of the mean over the seeds that have a value: sample deviation / sqrt(their number)
        count = np.sum(~np.isnan(values), axis=-1)
        se = np.nanstd(values, axis=-1, ddof=1) / np.sqrt(count)
        lo, hi = np.nanmean(values, axis=-1) - se, np.nanmean(values, axis=-1) + se
        if err_style == "bars":
            (bars,) = ranges
            assert isinstance(bars, LineCollection)
            segments = np.array(bars.get_segments())  # [load, 2 ends, (x, y)]
            np.testing.assert_allclose(segments[:, 0, 1], lo, rtol=1e-12)
            np.testing.assert_allclose(segments[:, 1, 1], hi, rtol=1e-12)
        else:
            (band,) = ranges
            assert isinstance(band, PolyCollection)
            ys = band.get_paths()[0].vertices[:, 1]
            assert ys.min() == pytest.approx(lo.min()) and ys.max() == pytest.approx(hi.max())


def test_curves_find_no_line_by_its_colour():
    """Every label the same colour: each still gets its own line, with its own mean."""
    da, df = _curve_table(seed=2)
    same = {str(v): (0.2, 0.4, 0.6) for v in da["variant"].values}
    with theme.style():
        fig, axes = theme.figure()
        ax = axes[0, 0]
        theme.curves(ax, df, x="load", y="mse", hue="variant", name=names.variant_name, colors=same)
    measured = {ln.get_gid(): ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("measured:")}
    assert set(measured) == {f"measured:{v}" for v in da["variant"].values}
    for v in da["variant"].values:
        np.testing.assert_allclose(measured[f"measured:{v}"].get_ydata(), np.nanmean(da.sel(variant=v).values, -1))


def test_curves_with_a_style_draw_a_line_per_pair_and_a_legend_per_grouping():
    ds = _results(["linear", "delta"], ["gaussian", "orthogonal"], seed=3)
    fig = variant_curves(ds)
    err = fig.axes[0]
    for v in ("linear", "delta"):
        for k in ("gaussian", "orthogonal"):
            (line,) = [ln for ln in err.get_lines() if ln.get_gid() == f"measured:{v}|{k}"]
            np.testing.assert_allclose(
                line.get_ydata(), ds.mse.sel(variant=v, key_family=k, d=8).mean("seed").values, rtol=1e-12
            )
    legend = _legend(fig)
    assert {"linear attention (additive)", "DeltaNet (delta)", "random (Gaussian)", "tight frame (orthogonal)"} <= set(
        legend
    )


# ---------------------------------------------------------------- the look: seaborn's, without importing seaborn


def test_the_style_and_palettes_are_seaborns():
    import seaborn as sns

    want = {
        **sns.axes_style("ticks", {"axes.grid": True, "grid.color": ".92"}),
        **sns.plotting_context("paper", font_scale=1.05),
    }
    want.pop("image.cmap")  # seaborn's own colormap; no figure draws an image
    got = {k: v for k, v in theme._RC.items() if k in want}
    overridden = {"lines.linewidth", "lines.markersize", "axes.titlesize", "font.family"}  # the plots' own
    assert set(got) == set(want)
    assert {k: v for k, v in got.items() if k not in overridden} == {
        k: v for k, v in want.items() if k not in overridden
    }
    assert [to_rgb(c) for c in theme.COLORBLIND] == list(sns.color_palette("colorblind"))
    assert theme._blend((0.9, 0.5, 0.1), (0.1, 0.2, 0.3), 4) == list(
        sns.blend_palette([(0.9, 0.5, 0.1), (0.1, 0.2, 0.3)], 4)
    )
    assert list(theme.DASHES) == sns._base.unique_dashes(len(theme.DASHES))


@pytest.mark.slow
def test_drawing_the_main_figures_imports_no_seaborn(tmp_path):
    path = tmp_path / "results.nc"
    _results(["linear", "delta"], ["gaussian", "orthogonal"]).to_netcdf(path, engine="h5netcdf")
    code = textwrap.dedent(
        f"""
        import sys
        from lacapacity import plots
        written = plots.render_path({str(path)!r}, {str(tmp_path / "figs")!r})
        print(len(written), *sorted(m for m in ("seaborn", "scipy.stats", "matplotlib.pyplot") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["4"]  # capacity and error-vs-load, PNG and PDF; nothing else imported


# ---------------------------------------------------------------- save: one layout, one draw per file


@pytest.mark.slow
def test_save_draws_each_file_once_and_writes_what_savefig_writes(tmp_path, monkeypatch):
    ds = _results(["linear", "delta"], ["gaussian", "orthogonal"], seed=4)
    reference = error_vs_load(ds)
    with theme.style():  # what savefig writes by itself, laying the figure out (at the PNG's dpi) before it draws
        png, pdf = io.BytesIO(), io.BytesIO()
        reference.savefig(png, format="png", dpi=110, metadata={"Software": None})
        reference.set_layout_engine("none")  # the PDF keeps the PNG's layout
        reference.savefig(
            pdf,
            format="pdf",
            dpi=110,
            metadata={"Creator": None, "Producer": None, "CreationDate": None, "ModDate": None},
        )
    draws = []
    real = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(renderer) or real(self, renderer))
    fig = error_vs_load(ds)
    engine = fig.get_layout_engine()
    paths = save(fig, tmp_path, "once")
    assert len(draws) == 2  # one per file (savefig alone draws twice per file: once only to lay out)
    assert fig.get_layout_engine() is engine
    assert paths[0].read_bytes() == png.getvalue() and paths[1].read_bytes() == pdf.getvalue()
