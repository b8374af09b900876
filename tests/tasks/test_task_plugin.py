"""A new kind of measurement is one module on the task protocol: a worked example, registered by entry point and
run through the sweep engine (plan, store, reuse, assembly) without touching the package.

The toy task measures one number per point: the squared error of reading back the last pair written after n pairs
(T12: 0 for the delta rule with beta = 1; for the additive memory, (n - 1)/d for random keys, T7 per read). It is
written in a folder of its own (here, the module TOY below), as a user's package would ship it.
"""

import sys
import textwrap

import numpy as np
import pytest

from lacapacity import CapacityError, sweep, tasks
from lacapacity.base import plugins

TOY = """
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from lacapacity.inputs import keys
from lacapacity.inputs import values
from lacapacity.tasks import Config, Measured, Schema, Task, Variable


@dataclass(frozen=True)
class LastRead(Config):
    kind: ClassVar[str] = "last_read"
    scale: float = 1.0


class LastReadTask(Task):
    name = "last_read"
    description = "the squared error of reading back the last pair written"
    Config = LastRead
    per_point = True
    key_axis = True
    grid_axes = ()

    def check_grid(self, study):
        pass

    def check(self, study):
        pass

    def schema(self, study):
        attrs = {"long_name": "last read error", "units": "value units^2", "description": "||k_n S - v_n||^2"}
        return Schema({"seed": list(study.grid.seed)}, {"last_mse": Variable(("seed",), attrs)})

    def writes(self, study, ns):
        return max(ns)

    def measure(self, run):
        cell, memory, seeds, device = run.cell, run.memory, run.seeds, run.device
        out = []
        for n in run.ns:
            K = keys.make(cell.keys.name, n, cell.d, batch=len(seeds), seed=seeds, device=device)
            V = values.make("gaussian", n, cell.dv, batch=len(seeds), seed=seeds, device=device)
            S = memory.write(memory.init_state(len(seeds), cell.d, cell.dv, device=device), K, V)
            r = memory.read(S, K[:, -1:])
            out.append((run.study.task.scale * ((r - V[:, -1:]) ** 2).sum(-1)[:, 0]).double().numpy())
        return Measured({"last_mse": np.stack(out)})  # [n, seed]

    def theory(self, study, n, d, dv):
        return {}

    def attrs(self, study):
        return {"scale": float(study.task.scale)}

    def figures(self, ds):
        return []
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    (tmp_path / "toytask.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(tmp_path))
    real = plugins.entry_points

    def entry_points(group):
        return {"last_read": "toytask:LastReadTask"} if group == "lacapacity.tasks" else real(group)

    monkeypatch.setattr(plugins, "entry_points", entry_points)
    yield
    sys.modules.pop("toytask", None)


def test_a_task_from_an_entry_point_runs_through_the_engine(toy, tmp_path):
    task = tasks.get("last_read")
    config = task.Config(scale=2.0)
    grid = sweep.Grid(variant=("linear", "delta"), keys=("gaussian",), d=(8,), n=(1, 4, 8), seed=(0, 1))
    study = sweep.Study("toy", "the last read", grid, config)
    res = sweep.run(study, out=tmp_path / "out", device="cpu", progress=False)
    ds = res.dataset
    assert ds.last_mse.dims == ("variant", "key_family", "d", "n", "seed") and ds.attrs["scale"] == 2.0
    # the delta rule with beta = 1 reads its last pair back exactly (T12); one pair in the additive memory too
    assert np.allclose(ds.last_mse.sel(variant="delta"), 0, atol=1e-9)
    assert np.allclose(ds.last_mse.sel(variant="linear", n=1), 0, atol=1e-9)
    assert (ds.last_mse.sel(variant="linear", n=8) > 0.1).all()
    # its points are stored one by one and reused like the built-in tasks'
    again = sweep.run(study.with_overrides(["n=1,4,8,16"]), out=tmp_path / "out", device="cpu", progress=False)
    assert again.reused == 12 and again.measured == 4


def test_a_task_config_refuses_what_it_does_not_have(toy):
    task = tasks.get("last_read")
    with pytest.raises(CapacityError, match=r"^unknown last_read field\(s\) vocab_size; allowed: scale$"):
        task.Config(vocab_size=3)
    with pytest.raises(CapacityError, match=r"^vocab applies to mqar studies only \(kind=mqar\)$"):
        task.Config(vocab=3)
    with pytest.raises(CapacityError, match="unknown task kind 'nope'"):
        tasks.get("nope")
