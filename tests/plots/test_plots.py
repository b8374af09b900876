"""Figures of lacapacity.plots: built from small real sweeps (lacapacity.sweep, so the result schema is
the one the sweep writes), checked as matplotlib objects (scales, labels, theory lines equal to lacapacity.theory), written
deterministically, and the `capacity plot` command's errors."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import xarray as xr

from lacapacity import plots, studies, sweep, theory, variants
from lacapacity.errors import CapacityError
from lacapacity.inputs import keys, values
from lacapacity.plots import (
    bill,
    capacity_vs_d,
    closed_form,
    error_vs_load,
    feature_maps,
    measure_closed_form,
    names,
    orthogonality,
    render,
    variant_curves,
)
from lacapacity.plots.save import save
from lacapacity.tasks import probe

EXACT = dict(rtol=1e-12, atol=0)
UNITS = re.compile(r"\([^()]+\)\s*$")  # a label ends with its unit in parentheses


# ---------------------------------------------------------------- fixtures: small real measurements


def _study(name: str, sets: list[str], tmp_path_factory) -> xr.Dataset:
    """A study run by the sweep itself, on a small grid."""
    out = tmp_path_factory.mktemp(name)
    return sweep.run(
        studies.get(name).with_overrides(sets), out=out, device="cpu", executor="serial", progress=False
    ).dataset


@pytest.fixture(scope="module")
def cvd(tmp_path_factory):
    """capacity-vs-d from a real sweep, with NaNs: one missing point and one run without any finite value."""
    ds = _study(
        "capacity-vs-d",
        ["variant=linear,delta", "keys=gaussian,orthogonal", "d=8,16", "load=1/4,1/2,1,2,4,8", "seed=0,1", "dv=16"],
        tmp_path_factory,
    ).load()
    ds["mse"].loc[dict(variant="linear", key_family="gaussian", d=16, load=2.0, seed=1)] = np.nan
    ds["mse"].loc[dict(variant="delta", key_family="orthogonal", d=8, seed=0)] = np.nan
    return ds


@pytest.fixture(scope="module")
def orth(tmp_path_factory):
    return _study(
        "orthogonality",
        ["keys=gaussian,correlated(rho=0.3),anisotropic(rank=4)", "d=16", "load=1/2,1,2", "seed=0,1", "dv=16"],
        tmp_path_factory,
    )


@pytest.fixture(scope="module")
def var(tmp_path_factory):
    return _study(
        "variants",
        ["variant=linear,delta(beta=0.5)", "d=16", "load=1/2,1,2,4", "seed=0,1,2", "dv=16"],
        tmp_path_factory,
    )


@pytest.fixture(scope="module")
def fmaps(tmp_path_factory):
    return _study(
        "feature-maps", ["feature=identity,relu", "d=8,16", "load=1/4,1/2,1,2,4", "seed=0,1", "dv=16"], tmp_path_factory
    )


@pytest.fixture(scope="module")
def billds(tmp_path_factory):
    return _study("bill", ["d=16", "n=1,8,64", "repeats=3"], tmp_path_factory)


@pytest.fixture(scope="module")
def cf_inputs():
    return keys.make("gaussian", 12, 6, batch=2, seed=[0, 1]), values.make("gaussian", 12, 8, batch=2, seed=[0, 1])


@pytest.fixture(scope="module")
def cf(cf_inputs):
    return measure_closed_form(*cf_inputs, checkpoints=[2, 6, 12])


# ---------------------------------------------------------------- helpers


def theory_lines(ax) -> dict:
    return {
        line.get_gid()[len("theory:") :]: line
        for line in ax.get_lines()
        if (line.get_gid() or "").startswith("theory:")
    }


def measured_line(ax, label):
    found = [line for line in ax.get_lines() if line.get_gid() == f"measured:{label}"]
    assert len(found) == 1, [line.get_gid() for line in ax.get_lines()]
    return found[0]


def xy(line):
    return np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)


def labelled_axes(fig):
    return [ax for ax in fig.axes if ax.get_xlabel() or ax.get_ylabel()]


def assert_units(fig):
    labels = [lab for ax in fig.axes for lab in (ax.get_xlabel(), ax.get_ylabel()) if lab]
    assert labels, "no axis labels"
    for lab in labels:
        assert UNITS.search(lab), f"label without a unit: {lab!r}"


def note(fig) -> str:
    return fig._supxlabel.get_text() if fig._supxlabel is not None else ""


def capacity_by_brute_force(ds, metric, threshold, **where):
    """Mean over seeds of the first crossing of ``threshold``, interpolated in log n, written out here."""
    sub = ds.sel(where)
    higher = metric == "recall"
    caps = []
    for seed in sub.seed.values:
        y = sub[metric].sel(seed=seed).values
        n = sub.n.values.astype(float)
        keep = np.isfinite(y)
        y, n = y[keep], n[keep]
        ok = y >= threshold if higher else y <= threshold
        if ok.all() or not ok[0]:
            continue
        k = int(np.argmin(ok))
        frac = (threshold - y[k - 1]) / (y[k] - y[k - 1])
        caps.append(np.exp(np.log(n[k - 1]) + np.clip(frac, 0, 1) * (np.log(n[k]) - np.log(n[k - 1]))))
    return np.mean(caps) if caps else np.nan


# ---------------------------------------------------------------- the example Datasets follow the schema


def test_examples_follow_the_result_schema(cvd):
    assert list(cvd.mse.dims) == ["variant", "key_family", "d", "load", "seed"]
    for attr in ("study", "description", "config", "config_hash", "versions", "device", "git_commit", "created"):
        assert attr in cvd.attrs
    n_rule = np.maximum(1, np.round(cvd["load"].values[None, :] * cvd.d.values[:, None]))
    np.testing.assert_array_equal(cvd.n.values, n_rule)
    n, d = cvd.n.values.astype(float), np.broadcast_to(cvd.d.values[:, None], cvd.n.shape).astype(float)
    np.testing.assert_allclose(cvd.frame_bound.values, theory.frame_bound(n, d), **EXACT)
    np.testing.assert_allclose(cvd.rank_bound.values, theory.rank_bound(n, d), **EXACT)
    np.testing.assert_allclose(cvd.random_keys_error.values, theory.random_keys_error(n, d), **EXACT)
    for m, (long_name, units, _) in probe.METRICS.items():
        assert cvd[m].attrs["long_name"] == long_name and cvd[m].attrs["units"] == units


def test_examples_measure_what_a_direct_computation_gives(cvd):
    """A point of the grid against the additive read computed here: K_n^T V_n, read K_n, error."""
    d, load, seed = 16, 4.0, 1
    n = int(cvd.n.sel(d=d, load=load))
    K = keys.make("gaussian", 128, d, seed=seed)[0, :n].double()  # the grid draws max n and reads prefixes
    V = values.make("gaussian", 128, 16, seed=seed)[0, :n].double()
    err = ((K @ (K.T @ V) - V) ** 2).sum(-1).mean().item()
    got = float(cvd.mse.sel(variant="linear", key_family="gaussian", d=d, load=load, seed=seed))
    assert got == pytest.approx(err, rel=1e-4)
    # structured keys are drawn once per n: the orthogonal point at load 0.5 reads back exactly
    assert float(cvd.mse.sel(variant="linear", key_family="orthogonal", d=d, load=0.5, seed=0)) < 1e-9


# ---------------------------------------------------------------- capacity vs d


def test_capacity_vs_d_figure(cvd):
    fig = capacity_vs_d(cvd, eps=0.5, tau=0.9)
    axes = np.array(fig.axes).reshape(2, 2)  # rows: linear, delta; columns: mean error, recall
    for ax in axes.ravel():
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert_units(fig)
    assert axes[1, 0].get_xlabel() and axes[0, 0].get_ylabel()
    # the additive memory's closed forms on the linear row only; T8 on both; the delta rule's own on its row
    lines = theory_lines(axes[0, 0])
    assert set(lines) == {"T5", "T7", "T8"}
    x, y = xy(lines["T7"])
    np.testing.assert_allclose(y, theory.capacity_random_keys(0.5, x), **EXACT)
    x, y = xy(lines["T5"])
    np.testing.assert_allclose(y, theory.capacity_tight_frame(0.5, x), **EXACT)
    x, y = xy(theory_lines(axes[0, 1])["T10"])
    assert {8.0, 16.0} <= set(x)
    np.testing.assert_allclose(y, theory.argmax_capacity(x, 16, tau=0.9), **EXACT)
    delta = theory_lines(axes[1, 0])
    assert set(delta) == {"T8", "T12:delta"} and not theory_lines(axes[1, 1])
    x, y = xy(delta["T12:delta"])
    np.testing.assert_array_equal(y, theory.delta_rule_capacity(0.5, x.astype(int), 1.0))
    x, y = xy(delta["T8"])
    np.testing.assert_allclose(y, theory.rank_bound_capacity(0.5, x), **EXACT)
    # the markers are the mean over seeds of the capacity per run
    x, y = xy(measured_line(axes[0, 0], "gaussian"))
    for xi, yi in zip(x, y):
        assert yi == pytest.approx(
            capacity_by_brute_force(cvd, "mse", 0.5, variant="linear", key_family="gaussian", d=int(xi)), rel=1e-9
        )
    x, y = xy(measured_line(axes[0, 1], "orthogonal"))
    assert y[0] == pytest.approx(
        capacity_by_brute_force(cvd, "recall", 0.9, variant="linear", key_family="orthogonal", d=8), rel=1e-9
    )
    # legends name families and variants as users know them; the note counts the runs not drawn
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "random (Gaussian)" in legend and "tight frame (orthogonal)" in legend
    assert axes[1, 0].get_title().startswith("DeltaNet (delta)")
    assert "had no finite measurement" in " ".join(note(fig).split())


# ---------------------------------------------------------------- error vs n/d


def test_error_vs_load_figure(cvd):
    fig = error_vs_load(cvd)
    axes = np.array(fig.axes).reshape(2, 2)  # rows: variants, columns: d = 8, 16
    assert_units(fig)
    for (r, c), ax in np.ndenumerate(axes):
        d = (8, 16)[c]
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        lines = theory_lines(ax)
        # T5 and T7 bind the additive memory (row 0); T8 every linear read; the delta rule has its exact mean (row 1)
        assert set(lines) == ({"T5", "T7", "T8"} if r == 0 else {"T8", "T12:delta"})
        for theorem, fn in (("T5", theory.frame_bound), ("T7", theory.random_keys_error), ("T8", theory.rank_bound)):
            if theorem in lines:
                x, y = xy(lines[theorem])
                np.testing.assert_allclose(y, fn(x * d, d), **EXACT)
        if r == 1:
            x, y = xy(lines["T12:delta"])
            np.testing.assert_allclose(y, theory.delta_rule_error(np.round(x * d).astype(int), d, beta=1.0), **EXACT)
        marker = [line for line in ax.get_lines() if line.get_gid() == "marker:n=d"]
        assert len(marker) == 1 and list(marker[0].get_xdata()) == [1.0, 1.0]
    # the measured curve is the mean over the seeds that have a value (NaN dropped)
    x, y = xy(measured_line(axes[0, 1], "gaussian"))
    sub = cvd.mse.sel(variant="linear", key_family="gaussian", d=16)
    np.testing.assert_allclose(y, [np.nanmean(sub.sel(load=load).values) for load in x], rtol=1e-12)
    assert "below 0.001" in note(fig)


# ---------------------------------------------------------------- orthogonality


def test_orthogonality_figure(orth):
    fig = orthogonality(orth)
    assert_units(fig)
    coh, rank = fig.axes[:2]
    for ax in (coh, rank):
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    lines = theory_lines(coh)
    assert len(lines) == 3  # one T4 curve per load
    for gid, line in lines.items():
        n = int(gid.rsplit("n=", 1)[1])
        x, y = xy(line)
        np.testing.assert_allclose(y, (n - 1) * x, **EXACT)
    for gid, line in theory_lines(rank).items():
        n = int(gid.rsplit("n=", 1)[1])
        x, y = xy(line)
        np.testing.assert_allclose(y, n / x - 1, **EXACT)
    # each point is a run: its key statistic against its measured error
    pts = [c for c in coh.collections if c.get_gid() == "measured:correlated:load=2"][0]
    sub = orth.sel(key_family="correlated(rho=0.3)", load=2.0, d=16, variant="linear")
    np.testing.assert_allclose(pts.get_offsets(), np.column_stack([sub.mean_sq_coherence.values, sub.mse.values]))


# ---------------------------------------------------------------- variants and feature maps


def test_variant_curves_figure(var):
    fig = variant_curves(var)
    err, rec = fig.axes[:2]
    assert_units(fig)
    assert err.get_xscale() == "log" and err.get_yscale() == "log" and rec.get_xscale() == "log"
    lines = theory_lines(err)
    assert {"T7", "T8"} <= set(lines)
    x, y = xy(lines["T8"])
    np.testing.assert_allclose(y, theory.rank_bound(16 * x, 16), **EXACT)
    x, y = xy(theory_lines(rec)["T10"])
    np.testing.assert_allclose(y, theory.argmax_recall(16 * x, 16, 16), **EXACT)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "linear attention (additive)" in legend and "DeltaNet (delta), β = 0.5" in legend
    x, y = xy(measured_line(rec, "delta(beta=0.5)"))
    np.testing.assert_allclose(
        y, var.recall.sel(variant="delta(beta=0.5)", key_family="gaussian", d=16).mean("seed").values, rtol=1e-12
    )


def test_feature_maps_figure(fmaps):
    assert fmaps.feature_dim.dims == ("feature", "d")
    fig = feature_maps(fmaps, eps=0.5)
    *curves, cap = fig.axes[:3]
    assert_units(fig)
    for ax in (*curves, cap):
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "n / D" in curves[0].get_xlabel() and "feature dimension" in cap.get_xlabel()
    for ax, d in zip(curves, (8, 16)):
        x, y = xy(theory_lines(ax)["T8"])
        np.testing.assert_allclose(y, theory.rank_bound(x * d, d), **EXACT)
        # identity features: x is n / D with D = d
        xm, ym = xy(measured_line(ax, "identity"))
        np.testing.assert_allclose(xm, fmaps.n.sel(d=d).values / d)
        # each map's own closed form (T25-T28) on its panel: (n - 1) rho2 against n / D
        for f in ("identity", "relu"):
            x, y = xy(theory_lines(ax)[f"T25-T28:{f}"])
            D = int(fmaps.feature_dim.sel(feature=f, d=d))
            np.testing.assert_allclose(y, (x * D - 1) * theory.feature_crosstalk(f, d), rtol=1e-9)
    lines = theory_lines(cap)
    assert "T7" not in lines  # 1 + eps D holds for the identity map only, which has its own line
    x, y = xy(lines["T25-T28:identity"])
    np.testing.assert_allclose(y, theory.capacity_random_keys(0.5, np.array([8, 16])), **EXACT)  # T7 for D = d
    x, y = xy(lines["T5"])
    np.testing.assert_allclose(y, theory.capacity_tight_frame(0.5, x), **EXACT)
    assert "T25–T28 closed form" in " ".join(t.get_text() for t in fig.legends[0].get_texts())


# ---------------------------------------------------------------- the bill


def test_bill_figure(billds):
    # measured sizes: the linear state keeps d dv numbers, the cache n (d + dv)
    np.testing.assert_array_equal(billds.state_numel.sel(variant="linear", d=16).values, [256, 256, 256])
    np.testing.assert_array_equal(billds.state_numel.sel(variant="softmax", d=16).values, [32, 256, 2048])
    assert np.all(billds.decode_seconds.values > 0)
    fig = bill(billds)
    cache, decode, twin = fig.axes[:3]
    assert_units(fig)
    for ax in (cache, decode, twin):
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    lines = {**theory_lines(cache), **theory_lines(twin)}
    x = xy(lines["T13:softmax_cache"])[0]
    t = theory.bill(x, 16, 16)
    for key in ("softmax_cache", "linear_state", "softmax_decode_flops", "linear_decode_flops"):
        np.testing.assert_allclose(xy(lines[f"T13:{key}"])[1], t[key], **EXACT)
    even = [line for line in cache.get_lines() if line.get_gid() == "marker:break-even:cache"][0]
    assert list(even.get_xdata()) == [theory.break_even_n(16, 16)] * 2 == [8.0, 8.0]  # n = d/2
    even = [line for line in decode.get_lines() if line.get_gid() == "marker:break-even:flops"][0]
    assert list(even.get_xdata()) == [theory.break_even_n(16, 16, measure="flops")] * 2
    np.testing.assert_allclose(xy(measured_line(cache, "softmax"))[1], [32, 256, 2048])


# ---------------------------------------------------------------- closed-form check


def test_closed_form_data_against_a_direct_computation(cf, cf_inputs):
    K, V = (x.double().numpy() for x in cf_inputs)
    for c in (2, 6, 12):
        k, v = K[:, :c], V[:, :c]
        r = np.einsum("bij,bjv->biv", k @ k.transpose(0, 2, 1), v)  # T1/T3: reads G V, written out
        if c == 2:  # T2 for the first key
            r0 = (k[:, 0] * k[:, 0]).sum(-1)[:, None] * v[:, 0] + (k[:, 0] * k[:, 1]).sum(-1)[:, None] * v[:, 1]
            np.testing.assert_allclose(r[:, 0], r0, rtol=1e-12)
        sq = ((r - v) ** 2).sum(-1)
        a = (r * v).sum(-1) / (v * v).sum(-1)
        np.testing.assert_allclose(cf.predicted_sq_error.sel(n=c).values[:, :c], sq, rtol=1e-10)
        np.testing.assert_allclose(cf.predicted_signal.sel(n=c).values[:, :c], a, rtol=1e-10)
        assert np.isnan(cf.predicted_sq_error.sel(n=c).values[:, c:]).all()
        G = k @ k.transpose(0, 2, 1)
        t4 = ((G**2).sum((1, 2)) - 2 * np.trace(G, axis1=1, axis2=2) + c) / c
        np.testing.assert_allclose(cf.predicted_mse.sel(n=c).values, t4, rtol=1e-10)
        # and the linear memory's measured reads agree with them (float32 state)
        np.testing.assert_allclose(cf.measured_sq_error.sel(n=c).values[:, :c], sq, rtol=1e-4, atol=1e-5)
    assert cf.attrs["study"] == "closed-form" and cf.attrs["values_orthonormal"] == 0


def test_closed_form_figure(cf):
    fig = closed_form(cf)
    axes = fig.axes[:4]
    assert_units(fig)
    assert axes[0].get_xscale() == "linear"
    for ax in axes[1:]:
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    for ax, q in zip(axes, ("signal", "leak", "sq_error")):
        diag = [line for line in ax.get_lines() if line.get_gid() == "diagonal"][0]
        np.testing.assert_array_equal(diag.get_xdata(), diag.get_ydata())
        pts = [c for c in ax.collections if c.get_gid() == f"measured:{q}:n=6"][0]
        want = np.column_stack(
            [cf[f"predicted_{q}"].sel(n=6).values.ravel(), cf[f"measured_{q}"].sel(n=6).values.ravel()]
        )
        want = want[np.isfinite(want).all(1)]
        np.testing.assert_allclose(pts.get_offsets(), want)
    assert "n = 2 (T2)" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_closed_form_shows_a_memory_that_departs_from_it(cf_inputs):
    """The delta rule is not the additive state: its reads are off the T3 diagonal."""
    ds = measure_closed_form(*cf_inputs, variant=variants.get("delta"), checkpoints=[12])
    assert float(np.nanmax(np.abs(ds.measured_sq_error - ds.predicted_sq_error))) > 0.1


# ---------------------------------------------------------------- render: files, determinism


@pytest.mark.slow
def test_render_writes_every_study_and_is_deterministic(tmp_path, cvd, orth, var, fmaps, billds, cf):
    written = {}
    for ds in (cvd, orth, var, fmaps, billds, cf):
        paths = render(ds, out=tmp_path / "a")
        assert paths and all(p.exists() and p.stat().st_size > 0 for p in paths)
        assert sorted({p.suffix for p in paths}) == [".pdf", ".png"]
        assert all(p.name.startswith(ds.attrs["study"] + "_") for p in paths)
        written[ds.attrs["study"]] = paths
    stems = {p.stem for ps in written.values() for p in ps}
    assert {
        "capacity-vs-d_capacity",
        "capacity-vs-d_error-vs-load",
        "orthogonality_orthogonality",
        "variants_variants",
        "feature-maps_feature-maps",
        "bill_bill",
        "closed-form_closed-form",
    } <= stems
    for p in written["capacity-vs-d"]:
        if p.suffix == ".png":
            assert p.stat().st_size < 150_000
    again = save(capacity_vs_d(cvd), tmp_path / "b", "capacity-vs-d_capacity")  # a second, independent build
    for second in again:
        first = tmp_path / "a" / second.name
        assert first.read_bytes() == second.read_bytes(), f"{first.name} differs between two renders"
    assert b"CreationDate" not in again[1].read_bytes() and b"matplotlib" not in again[0].read_bytes()


@pytest.mark.slow
def test_render_chooses_figures_from_the_data(cvd, tmp_path):
    """A study the plots never heard of renders by what it holds; a Dataset nothing fits is one line."""
    paths = render(cvd.assign_attrs(study="my-own"), out=tmp_path)
    assert sorted(p.name for p in paths) == [
        "my-own_capacity.pdf",
        "my-own_capacity.png",
        "my-own_error-vs-load.pdf",
        "my-own_error-vs-load.png",
    ]
    one = cvd.sel(key_family=["gaussian"])
    assert plots.choose(one) == ["variants", "capacity", "frontier"]  # several memories on one key family: the overlays
    assert plots.choose(cvd.drop_vars("recall")) == ["error-vs-load"]
    with pytest.raises(CapacityError, match="no figure fits"):
        render(xr.Dataset({"mse": ("load", [1.0])}), out="unused")


def test_render_rejects_bad_datasets(cvd):
    with pytest.raises(CapacityError, match="missing variable 'recall'"):
        capacity_vs_d(cvd.drop_vars("recall"))
    with pytest.raises(CapacityError, match="holds no finite value"):
        error_vs_load(cvd.assign(mse=cvd.mse * np.nan))
    with pytest.raises(CapacityError, match="dimension 'd' has length 0"):
        error_vs_load(cvd.isel(d=slice(0, 0)))
    with pytest.raises(CapacityError, match="dimension 'dtype', which the error vs load figure does not draw"):
        error_vs_load(cvd.assign(mse=cvd.mse.expand_dims(dtype=["float32", "bfloat16"])))


# ---------------------------------------------------------------- capacity plot


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda ds: ds.drop_vars(["mse", "recall"]), "no figure fits"),
        (lambda ds: ds.assign(mse=ds.mse * np.nan), "holds no finite value"),
        (lambda ds: xr.Dataset(attrs={"study": "capacity-vs-d"}), "empty"),
    ],
    ids=["nothing-fits", "no-finite-value", "empty"],
)
def test_cli_plot_errors_are_one_line_and_exit_2(tmp_path, cli, cvd, make, expected):
    path = tmp_path / "results.nc"
    make(cvd).to_netcdf(path, engine="h5netcdf")
    done = cli.here("plot", path)
    assert done.stdout == ""
    assert cli.fails(done, expected, str(path)).startswith("capacity: error: ")
    assert not (tmp_path / "figures").exists()


def test_cli_plot_bad_paths(tmp_path, cli):
    cli.fails(cli.here("plot", tmp_path / "missing.nc"), "no such results file")
    cli.fails(cli.here("plot", tmp_path), "no results files")
    (tmp_path / "junk.nc").write_text("not netCDF")
    cli.fails(cli.here("plot", tmp_path / "junk.nc"), "not a readable netCDF")


@pytest.mark.slow
def test_cli_plot_writes_figures_beside_the_results(tmp_path, cli, cf):
    cf.to_netcdf(tmp_path / "closed-form.nc", engine="h5netcdf")
    done = cli.here("plot", tmp_path)
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == [
        "closed-form_closed-form.pdf",
        "closed-form_closed-form.png",
    ]
    assert out.split() == [
        str(tmp_path / "figures" / n) for n in ("closed-form_closed-form.png", "closed-form_closed-form.pdf")
    ]
    assert cli.here("plot", tmp_path / "closed-form.nc", "--out", tmp_path / "elsewhere").returncode == 0
    assert len(list((tmp_path / "elsewhere").iterdir())) == 2


# ---------------------------------------------------------------- names


def test_names_as_users_know_them():
    assert names.variant_name("delta") == "DeltaNet (delta)"
    assert names.variant_name("gated_delta(alpha=0.9, beta=0.5)") == "Gated DeltaNet, α = 0.9, β = 0.5"
    assert names.variant_name("linear(normalize=True)") == "linear attention (additive), normalize = true"  # all shown
    assert names.keys_name("orthogonal") == "tight frame (orthogonal)"
    assert names.keys_name("anisotropic(rank=8)") == "anisotropic (rank 8)"
    assert names.feature_name("dpfp(nu=2)") == "DPFP (ν = 2)"
    assert names.variant_name("my_memory(k=3)") == "my_memory, k = 3"  # unknown names pass through


@pytest.mark.slow  # about 7 s
def test_frontier_figure_gives_the_bytes_to_d_at_each_memorys_own_dv(tmp_path):
    from lacapacity.plots.frontier import frontier

    res = sweep.compare(
        ["lsq", "linear", "softmax(scale=16.0)", "mom(memories=2, top=1)"],
        d=(8, 16),
        load=(0.5, 1, 1.5, 2, 3, 4),
        seeds=2,
        out=tmp_path,
        device="cpu",
        progress=False,
    )
    assert "frontier" in plots.choose(res.dataset)
    fig = frontier(res.dataset)
    left = fig.axes[0]
    x, y = xy(theory_lines(left)["T8"])  # at equal bytes one T8 line for every dv: n* = x / (1 - eps)
    np.testing.assert_allclose(y, theory.rank_bound_capacity(0.5, x), **EXACT)
    x, y = xy(measured_line(left, "lsq"))
    d = np.array([8, 16])
    np.testing.assert_allclose(x, (d * d + d * d) / d)  # its bytes / (4 dv): lsq's d x d matrix counts too
    np.testing.assert_allclose(y, theory.rank_bound_capacity(0.5, d), rtol=0.05)  # T8 for its d x dv read
    xl, lin = xy(measured_line(left, "linear"))
    np.testing.assert_allclose(xl, d)  # a d x dv state: x = d
    assert (lin < 0.7 * y).all()  # the additive memory sits well below it
    xm, _ = xy(measured_line(left, "mom(memories=2, top=1)"))
    np.testing.assert_allclose(xm, 2 * d)  # two d x dv states: beside the linear state of key dimension 2d
    assert left.get_xlabel() == "d at equal bytes: state bytes / (4 dv)"
    caption = " ".join(fig.texts[-1].get_text().split())
    assert (
        "x gives a memory's state bytes to d at its own dv" in caption
        and "Several d × dv states: 2 in lsq; 2 in mixture" in caption
    )
    assert len(fig.axes) == 2 and "Based" not in caption  # the published panel only when asked
    asked = frontier(res.dataset, published=True)
    assert len(asked.axes) == 3 and "Based's Fig. 2" in asked.texts[-1].get_text()


def test_a_study_asks_its_figures_for_options(tmp_path):
    import sys

    render = sys.modules["lacapacity.plots.render"]

    from lacapacity.sweep import Grid, Study

    grid = Grid(variant=("linear", "delta"), keys=("gaussian",), d=(8, 16), load=(0.5, 1, 2), seed=(0,))
    study = Study("asks", "", grid, figures={"frontier": {"published": True}})
    assert Study.from_dict(study.to_json()) == study and "figures" not in Study("plain", "", grid).to_json()
    ds = sweep.run(study, out=tmp_path, device="cpu", progress=False).dataset
    built = dict(render.figures(ds))
    assert len(built["asks_frontier"].axes) == 3  # asked: the published panel
    plain = ds.assign_attrs(config=json.dumps(Study("plain", "", grid).to_json()))
    assert len(dict(render.figures(plain))["asks_frontier"].axes) == 2
    wrong = ds.assign_attrs(config=json.dumps({**study.to_json(), "figures": {"frontier": {"colour": "red"}}}))
    with pytest.raises(
        CapacityError, match="^the study asks the frontier figure for 'colour', which it does not take$"
    ):
        render.builders(wrong)
    with pytest.raises(CapacityError, match="a study's figures map a figure's name to its options"):
        Study("bad", "", grid, figures={"frontier": True})


@pytest.mark.slow
def test_several_figures_are_built_by_one_child_each_with_the_same_bytes(cvd, tmp_path, monkeypatch):
    """save_all: each figure built and encoded by a child process (up to the cores), the bytes of a save in this
    process; nothing is written when one figure cannot be built."""
    import os
    import sys

    mod = sys.modules["lacapacity.plots.render"]
    real = mod.encode

    def noting_the_process(fig):
        (tmp_path / f"pid-{os.getpid()}-{len(list(tmp_path.glob('pid-*')))}").write_text("")
        return real(fig)

    monkeypatch.setattr(mod, "encode", noting_the_process)
    jobs = mod.builders(cvd)
    paths = mod.save_all(jobs, tmp_path / "par")
    pids = {p.name.split("-")[1] for p in tmp_path.glob("pid-*")}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert len(jobs) == 2 and len(paths) == 4 and len(pids) == (2 if cores >= 2 else 1)
    assert (str(os.getpid()) in pids) == (cores < 2)
    for p in paths:
        fig = dict(jobs)[p.stem]()
        assert p.read_bytes() == save(fig, tmp_path / "one", p.stem)[p.suffix == ".pdf"].read_bytes()

    def broken():
        raise CapacityError("no mse to draw")

    with pytest.raises(CapacityError, match="^no mse to draw$"):
        mod.save_all([jobs[0], ("x_broken", broken)], tmp_path / "none")
    assert not (tmp_path / "none").exists() or not list((tmp_path / "none").iterdir())


def test_only_draws_the_named_figures_and_refuses_one_that_does_not_fit(cvd, tmp_path):
    import importlib

    render = importlib.import_module("lacapacity.plots.render")  # the module: lacapacity.plots.render is the function
    fitting = [stem for stem, _ in render.builders(cvd)]
    assert len(fitting) == 2
    chosen = render.builders(cvd, only=["capacity"])
    assert [stem for stem, _ in chosen] == [s for s in fitting if s.endswith("_capacity")]
    with pytest.raises(CapacityError, match=r"the figure 'frontier' does not fit these results; those that do: "):
        render.builders(cvd, only=["frontier"])
    path = tmp_path / "r.nc"
    cvd.to_netcdf(path)
    written = render.render_path(path, tmp_path / "figs", only=["capacity"])
    assert sorted(p.name for p in written) == sorted(f"{s}{ext}" for s, _ in chosen for ext in (".png", ".pdf"))


# ---------------------------------------------------------------- closed forms: read, or the task's function


@pytest.fixture(scope="module")
def mqards(tmp_path_factory):
    sets = ["variant=linear,delta(beta=1.0)", "d=8", "n=4,8,16", "seed=0", "vocab=32", "overwrite=0,0.5"]
    return _study("mqar", sets, tmp_path_factory)


def test_no_figure_computes_a_stored_closed_form_again(var, cvd, billds, mqards, monkeypatch):
    """Every function a task stores a closed-form variable by (``Task.closed_forms``) refuses to run when a figure
    reaches it through ``lacapacity.theory``: figures read the stored variable, or call the task's function."""
    from lacapacity import tasks

    stored = {fn for task in tasks.TASKS.values() for fn in task.closed_forms.values()}
    refused = [name for name in theory.__all__ if getattr(theory, name) in stored]
    assert {"argmax_recall", "rank_bound", "bill", "vocab_argmax_recall"} <= set(refused)

    def refuse(name):
        def called(*args, **kwargs):
            raise AssertionError(f"a figure computed theory.{name} again")

        return called

    for name in refused:
        monkeypatch.setattr(theory, name, refuse(name))
    drawn = [stem for ds in (var, cvd, billds, mqards) for stem, _ in plots.figures(ds)]
    assert [s.rpartition("_")[2] for s in drawn] == ["variants", "error-vs-load", "capacity", "bill", "mqar"]


def test_a_figure_draws_what_is_stored(billds):
    """The bill figure's T13 lines are the stored variables: doubled there, doubled in the figure (break-evens too)."""
    t13 = ("softmax_cache", "linear_state", "softmax_decode_flops", "linear_decode_flops")
    edited = billds.assign({name: billds[name] * (2.0 if name.startswith("softmax") else 1.0) for name in t13})
    cache, decode, twin = bill(edited).axes[:3]
    lines = {**theory_lines(cache), **theory_lines(twin)}
    for name in t13:
        np.testing.assert_array_equal(xy(lines[f"T13:{name}"])[1], edited[name].sel(d=16).values)
    even = [line for line in cache.get_lines() if line.get_gid() == "marker:break-even:cache"][0]
    assert list(even.get_xdata()) == [theory.break_even_n(16, 16) / 2] * 2  # softmax's line twice as steep
    even = [line for line in decode.get_lines() if line.get_gid() == "marker:break-even:flops"][0]
    assert list(even.get_xdata()) == [theory.break_even_n(16, 16, measure="flops") / 2] * 2


def test_a_figure_on_a_finer_grid_calls_the_function_the_task_names(var, mqards, monkeypatch):
    """Where a figure draws a stored closed form on a finer grid, its line follows the task's function."""
    from lacapacity.tasks.mqar.task import MqarTask
    from lacapacity.tasks.recall.task import RecallTask

    half = lambda fn: lambda *args: 0.5 * np.asarray(fn(*args))
    recall = {
        **RecallTask.closed_forms,
        **{k: half(RecallTask.closed_forms[k]) for k in ("argmax_recall_pred", "rank_bound")},
    }
    monkeypatch.setattr(RecallTask, "closed_forms", recall)
    monkeypatch.setattr(MqarTask, "closed_forms", {"accuracy_pred": half(MqarTask.closed_forms["accuracy_pred"])})
    fig = variant_curves(var)
    err, rec = fig.axes[:2]
    x, y = xy(theory_lines(rec)["T10"])
    np.testing.assert_allclose(y, 0.5 * theory.argmax_recall(16 * x, 16, 16), **EXACT)
    x, y = xy(theory_lines(err)["T8"])
    np.testing.assert_allclose(y, 0.5 * theory.rank_bound(16 * x, 16), **EXACT)
    ((_, mqar_fig),) = plots.figures(mqards)
    x, y = xy(theory_lines(mqar_fig.axes[0])["T10"])
    np.testing.assert_allclose(y, 0.5 * theory.vocab_argmax_recall(x, 8, 8, 32), **EXACT)
