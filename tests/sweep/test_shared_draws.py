"""The passes of one sweep task share their draws (lacapacity.tasks._shared): made once, each pass its own copy, the
numbers those of the passes measured one by one."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from test_sweep_support import one_torch_thread  # noqa: F401 - autouse fixture

from lacapacity import sweep
from lacapacity.inputs import keys, values
from lacapacity.sweep import Grid, Study
from lacapacity.sweep.jobs import measure
from lacapacity.sweep.plan import Plan
from lacapacity.tasks import _shared


def _counting(monkeypatch):
    """Count the draws of keys and values the recall kind makes (the real draws, counted)."""
    calls = {"keys": 0, "values": 0}
    real_keys, real_values = keys.make, values.make

    def keys_make(*a, **k):
        calls["keys"] += 1
        return real_keys(*a, **k)

    def values_make(*a, **k):
        calls["values"] += 1
        return real_values(*a, **k)

    monkeypatch.setattr(keys, "make", keys_make)
    monkeypatch.setattr(values, "make", values_make)
    return calls


class ZeroesItsKeys:
    """The linear memory, except that it overwrites the keys it is given with zeros after writing them."""

    def __init__(self):
        from lacapacity import variants

        self.inner = variants.get("linear")
        self.name = "zeroes-its-keys"

    def init_state(self, *a, **k):
        return self.inner.init_state(*a, **k)

    def write(self, state, k, v):
        state = self.inner.write(state, k, v)
        k.zero_()
        return state

    def read(self, state, q):
        return self.inner.read(state, q)

    def state_numel(self, d, dv):
        return self.inner.state_numel(d, dv)


def _same(a, b):
    """Two passes' ``Measured``: the same variables, bit for bit, and the same attrs."""
    assert sorted(a.values) == sorted(b.values) and a.attrs == b.attrs
    for name, x in a.values.items():
        np.testing.assert_array_equal(x, b.values[name])
        assert x.dtype == b.values[name].dtype


def test_one_task_draws_once_and_every_pass_measures_what_it_measures_alone(monkeypatch):
    """Linear and delta on gaussian keys (one draw for all n) and tight frames (one per n), d = 8, two seeds: as one
    task the draws are made once for both memories, and each pass's Dataset equals the one it gives as its own task."""
    study = Study(
        "shared",
        "",
        Grid(variant=("linear", "delta"), keys=("gaussian", "orthogonal"), d=(8,), load=(0.5, 1, 2), seed=(0, 1)),
    )
    plan = Plan(study, torch.device("cpu"))
    todo = plan.passes({})
    calls = _counting(monkeypatch)
    alone = {}
    for i, p in enumerate(todo):
        alone[i] = measure({"imports": [], "passes": [(i, p, None)]})[0][1]
    drawn_alone = dict(calls)
    calls.update(keys=0, values=0)
    for family in ("gaussian", "orthogonal"):
        mine = [(i, p, None) for i, p in enumerate(todo) if p.cell.keys.name == family]
        mine.sort(key=lambda x: x[1].ns)
        for ns in sorted({x[1].ns for x in mine}):
            same = [x for x in mine if x[1].ns == ns]
            assert len(same) == 2  # linear and delta
            for i, ds in measure({"imports": [], "passes": same}):
                _same(ds, alone[i])
    assert drawn_alone == {"keys": 2 * calls["keys"], "values": 2 * calls["values"]}
    assert calls["keys"] == 1 + 3 and calls["values"] == 1 + 3  # gaussian: one draw; tight frames: one per n


def test_a_memory_that_writes_into_its_keys_changes_no_other_pass():
    """A memory that zeroes the keys it is given shares a task with the linear memory: the linear memory's numbers are
    those it gives alone (each pass gets its own copy of the draws)."""
    study = Study("shared", "", Grid(variant=("linear",), keys=("gaussian",), d=(8,), load=(0.5, 2), seed=(0,)))
    plan = Plan(study, torch.device("cpu"))
    (p,) = plan.passes({})
    zeroes = dataclasses.replace(p, memory=ZeroesItsKeys())
    alone = measure({"imports": [], "passes": [("a", p, None)]})[0][1]
    both = measure({"imports": [], "passes": [("z", zeroes, None), ("a", p, None)]})
    _same(dict(both)["a"], alone)
    assert float(dict(both)["z"].values["mse"].min()) != float(
        alone.values["mse"].min()
    )  # the zeroing memory did change its own


def test_draws_are_shared_only_inside_the_block_within_the_budget_and_for_plain_arguments(monkeypatch):
    calls = []

    def make(n, seed=0):
        calls.append(n)
        return torch.full((n,), float(len(calls)))

    assert torch.equal(_shared.drawn(make, 3), torch.full((3,), 1.0))  # outside the block: every call draws
    assert torch.equal(_shared.drawn(make, 3), torch.full((3,), 2.0))
    with _shared.shared():
        a = _shared.drawn(make, 3, seed=[1, 2])
        a.zero_()
        b = _shared.drawn(make, 3, seed=[1, 2])
        assert torch.equal(b, torch.full((3,), 3.0))  # its own copy, drawn once
        b.zero_()
        assert torch.equal(_shared.drawn(make, 3, seed=[1, 2]), torch.full((3,), 3.0))  # and again
        assert len(calls) == 3
        _shared.drawn(make, 3, seed=torch.Generator())  # a generator's next draw differs: never shared
        _shared.drawn(make, 3, seed=torch.Generator())
        assert len(calls) == 5
        monkeypatch.setattr(_shared, "BUDGET", 3 * 4 + 8)  # room for the first draw and 2 more floats
        _shared.drawn(make, 4)
        _shared.drawn(make, 4)  # over the budget: not kept, drawn again
        assert len(calls) == 7
    with _shared.shared():
        _shared.drawn(make, 3, seed=[1, 2])  # a new block keeps nothing of the last
    assert len(calls) == 8


def test_the_sweep_gives_one_task_the_memories_of_a_cell(tmp_path, monkeypatch):
    """sweep.run with two memories on two d: 2 tasks of 2 passes, not 4 tasks, each drawing its keys and values once."""
    from lacapacity.sweep import executors

    calls, drawn = _counting(monkeypatch), []
    real = executors.execute

    def recording(name, fn, tasks, **kw):
        def counted(task):
            before = dict(calls)
            out = fn(task)
            drawn.append((len(task["passes"]), {k: calls[k] - before[k] for k in calls}))
            return out

        return real(name, counted, tasks, **kw)

    monkeypatch.setattr(executors, "execute", recording)
    study = Study(
        "shared", "", Grid(variant=("linear", "delta"), keys=("gaussian",), d=(8, 16), load=(0.5, 2), seed=(0,))
    )
    sweep.run(study, out=tmp_path, executor="serial", progress=False)
    assert drawn == [(2, {"keys": 1, "values": 1})] * 2
