"""benchmarks/loop_baseline.py and checkpointed_loop.py compute the probe's numbers; benchmarks/vs_loop.py hands them
the study's grid, holds the checkpointed loop against the main job and counts flops."""

import json
from pathlib import Path

import pytest
from script_support import load_script

from lacapacity import sweep

ROOT = Path(__file__).resolve().parents[1]


def _load(name):
    return load_script(ROOT / "benchmarks" / f"{name}.py", f"bench_{name}")


loop_baseline, checkpointed, vs_loop = _load("loop_baseline"), _load("checkpointed_loop"), _load("vs_loop")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    sets = ["d=16", "load=1/2,2", "seed=0,1"]
    study = vs_loop.study_for(sets)
    ds = sweep.run(study, out=tmp_path_factory.mktemp("sweep"), device="cpu", executor="serial", progress=False).dataset
    return study, ds


@pytest.mark.parametrize("delta", ["loop", "kernels"])
def test_the_loop_computes_the_probes_numbers(tiny, tmp_path, delta):
    study, ds = tiny
    out = tmp_path / "m.json"
    loop_baseline.main(
        vs_loop.loop_args(study) + ["--delta", delta, "--out", str(out)]
    )  # the grid as the benchmark hands it over
    rows = json.loads(out.read_text())
    assert len(rows) == 2 * 2 * 1 * 2 * 2
    for row in rows:
        variant, family, d, load, seed = row.pop("point")
        got = ds.sel(variant=variant, key_family=family, d=d, load=float(load), seed=seed)
        assert set(row) == {"mse", "rel_error", "cosine", "signal", "leak", "recall"}
        for m, want in row.items():
            assert abs(float(got[m]) - want) <= 1e-5 * max(1.0, abs(want)), (variant, family, load, seed, m)


def test_the_checkpointed_loop_computes_the_probes_numbers(tiny, tmp_path):
    study, ds = tiny
    out = tmp_path / "c.json"
    checkpointed.main(vs_loop.loop_args(study) + ["--out", str(out)])
    rows = json.loads(out.read_text())
    assert len(rows) == 2 * 2 * 1 * 2  # variant, family, d, n; the seeds are the lists
    for row in rows:
        variant, family, d, n = row.pop("point")
        got = ds.sel(variant=variant, key_family=family, d=d, load=n / d)
        assert set(row) == {"mse", "rel_error", "cosine", "signal", "leak", "recall"}
        for m, want in row.items():
            assert got[m].values.tolist() == pytest.approx(want, rel=1e-5, abs=1e-6), (variant, family, n, m)
    ds.to_netcdf(tmp_path / "r.nc")
    worst, recall_off, count = vs_loop.agreement(study, str(out), str(tmp_path / "r.nc"))
    assert worst < 1e-5 and recall_off == 0 and count == 2 * 2 * 2 * 2
    rows = json.loads(out.read_text())  # a 1% error in one number, one recall flipped: both seen
    rows[0]["mse"][0] *= 1.01
    rows[0]["recall"][1] = 1 - rows[0]["recall"][1]
    out.write_text(json.dumps(rows))
    worst, recall_off, _ = vs_loop.agreement(study, str(out), str(tmp_path / "r.nc"))
    assert worst > 5e-3 and recall_off == 1


def test_probe_flops_counts_writes_reads_and_scores():
    study = vs_loop.study_for(["d=16", "load=1,2", "seed=0", "variant=linear,delta", "keys=gaussian,orthogonal"])
    dd = 16 * 16
    reads = 2 * 16 * dd + 2 * 32 * dd
    scores = 2 * 16**2 * 16 + 2 * 32**2 * 16
    linear = (2 * 32 * dd + reads + scores) + (
        2 * 16 * dd + 2 * 32 * dd + reads + scores
    )  # gaussian: one pass; orthogonal: one per n
    delta = (4 * 32 * dd + reads + scores) + (4 * 16 * dd + 4 * 32 * dd + reads + scores)
    assert vs_loop.probe_flops(study) == linear + delta
    assert vs_loop.probe_flops(study, decode=False) == linear + delta - 4 * scores


def test_the_loop_refuses_grids_it_cannot_write():
    with pytest.raises(SystemExit, match="linear and delta"):
        vs_loop.loop_args(vs_loop.study_for(["variant=decay"]))
