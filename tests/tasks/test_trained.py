"""The trained task: the model against loops written here, its AdamW against torch's, trained against the ceiling,
config refusals, the reuse key over every training setting, and resume after an interrupt (bit for bit)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, studies, sweep, variants
from lacapacity.tasks.trained import model
from lacapacity.tasks.trained.task import Trained

TINY = ["variant=linear,delta", "d=8", "n=2,4", "seed=0", "vocabulary=32", "steps=4", "batch=4", "test=8"]
TINY += ["learned_steps=3", "lr=0.01,0.1"]


def _study(extra=()):
    return studies.get("trained").with_overrides([*TINY, *extra])


def _loop_read(name, K, V, Q):
    """The memory written one pair at a time and read, as the rules say (row vectors; the delta rule normalises keys
    and queries, beta = 1)."""
    d, dv = K.shape[1], V.shape[1]
    S = torch.zeros(d, dv, dtype=torch.float64)
    unit = lambda x: x / x.norm()
    for k, v in zip(K.double(), V.double()):
        if name == "linear":
            S = S + torch.outer(k, v)
        else:
            k = unit(k)
            S = S + torch.outer(k, v - k @ S)
    return torch.stack([(q.double() if name == "linear" else unit(q.double())) @ S for q in Q])


@pytest.mark.parametrize("name", ["linear", "delta"])
def test_identity_projections_are_the_probe(name):
    """With W_k = W_q = [I; 0], W_v = [0; I] the model's reads are the memory written with the key and value
    embeddings and read at the queried keys: a loop over pairs written here, and the accuracy its argmax."""
    d, n, B = 8, 6, 3
    keys, values = model.embeddings(40, d, seed=3, device="cpu")
    assert torch.allclose(keys.norm(dim=1), torch.ones(20)) and keys.shape == values.shape == (20, d)
    seqs = model.sequences(keys, values, n, B, torch.Generator().manual_seed(1))
    o = model.forward(variants.get(name), model.identity(d), seqs)[0]  # [B, n, d]
    want, right = [], 0
    for b in range(B):
        K, V, Q = seqs.pairs[b, :, :d], seqs.pairs[b, :, d:], seqs.queries[b, :, :d]
        assert torch.equal(seqs.queries[b, :, d:], torch.zeros(n, d)), "a query token carries no value"
        assert len(set(map(tuple, K.tolist()))) == n, "distinct keys"
        for i in range(n):  # the answer is the value written with the queried key
            j = next(j for j in range(n) if torch.equal(K[j], Q[i]))
            assert torch.equal(values[seqs.answers[b, i]], V[j])
        r = _loop_read(name, K, V, Q)
        want.append(r)
        right += int(((r @ values.double().T).argmax(-1) == seqs.answers[b]).sum())
    assert torch.allclose(o.double(), torch.stack(want), atol=1e-5)
    _, acc = model.score(o[None], values, seqs.answers)
    assert float(acc[0]) == pytest.approx(right / (B * n), abs=1e-6)


def test_adamw_is_torchs_with_one_group_per_model():
    """The vectorised AdamW (one lr per model) takes torch.optim.AdamW's steps, one parameter group per model."""
    g = torch.Generator().manual_seed(0)
    lrs, start = [0.3, 0.01, 0.05], torch.randn(3, 4, 2, generator=g)
    grads = [torch.randn(3, 4, 2, generator=g) for _ in range(5)]
    mine = start.clone()
    opt = model.AdamW([mine], lrs, betas=(0.8, 0.99), weight_decay=0.1)
    theirs = [torch.nn.Parameter(start[m].clone()) for m in range(3)]
    ref = torch.optim.AdamW(
        [{"params": [p], "lr": lr} for p, lr in zip(theirs, lrs)], betas=(0.8, 0.99), weight_decay=0.1
    )
    for t, gr in enumerate(grads):
        scale = 0.5 * (1 + np.cos(np.pi * t / 5))
        opt.step([gr], scale)
        for m, p in enumerate(theirs):
            p.grad = gr[m].clone()
            ref.param_groups[m]["lr"] = lrs[m] * scale
        ref.step()
    assert torch.allclose(mine, torch.stack([p.detach() for p in theirs]), atol=1e-6)


@pytest.mark.slow
def test_trained_reaches_the_ceiling_at_few_pairs_and_never_beats_the_best_one(tmp_path):
    """linear and delta at 4 pairs: the best lr reaches the ceiling; no trained model beats the higher ceiling by more
    than its standard error over seeds."""
    study = studies.get("trained").with_overrides(
        ["variant=linear,delta", "d=16", "n=4", "seed=0,1", "vocabulary=128", "steps=120", "batch=16"]
        + ["test=64", "learned_steps=40", "lr=0.03,0.1,0.3"]
    )
    ds = sweep.run(study, out=tmp_path, device="cpu", executor="serial", progress=False).dataset
    best = ds.accuracy_best
    se = best.std("seed", ddof=1) / np.sqrt(best.sizes["seed"])
    for ceiling in (ds.ceiling_random, ds.ceiling_learned):  # at 4 pairs in d = 16 both ceilings hold every pair
        assert (best.mean("seed") <= ceiling.mean("seed") + se + 1e-12).all(), (best.values, ceiling.values)
    higher = np.maximum(ds.ceiling_random, ds.ceiling_learned).mean("seed")
    assert (best.mean("seed") >= higher - 0.05).all(), best.values


@pytest.mark.parametrize(
    "change, message",
    [
        (["vocabulary=33"], "vocabulary must be even"),
        (["lr=0.1,0.1"], "lr must list distinct learning rates"),
        (["lr=0"], "lr must lie in (0, 10]"),
        (["steps=0"], "steps must be a whole number >= 1"),
        (["keys=orthogonal"], "keys takes gaussian only"),
        (["load=1"], "a trained study takes n"),
        (["dv=4"], "a trained study takes n"),
        (["state_dtype=bfloat16"], "apply to recall studies only"),
    ],
)
def test_bad_settings_are_refused_in_one_line(change, message):
    with pytest.raises(CapacityError) as err:
        _study(change)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_too_many_pairs_and_a_memory_without_gradients_are_refused(tmp_path):
    with pytest.raises(CapacityError, match=r"n = 17 is too many \(raise vocabulary\)"):
        sweep.run(_study(["n=17"]), out=tmp_path, device="cpu", progress=False)

    class Detached:
        name = "detached"

        def init_state(self, batch, d, dv, *, device=None):
            return torch.zeros(batch, d, dv)

        def write(self, S, k, v):
            return S + (k.transpose(1, 2) @ v).detach()

        def read(self, S, q):
            return q @ S

        def state_numel(self, d, dv):
            return d * dv

    with pytest.raises(CapacityError) as err:
        model.differentiable(Detached(), "detached")
    assert str(err.value).startswith("the trained task trains through the memory's write and read, and detached's")
    assert "\n" not in str(err.value)


def test_every_training_setting_is_in_the_reuse_key(tmp_path):
    """The same study reuses every point; changing any training setting measures every point again; a new pair
    count measures only its own points."""
    first = sweep.run(_study(), out=tmp_path, device="cpu", progress=False)
    assert first.measured == 4
    assert sweep.run(_study(), out=tmp_path, device="cpu", progress=False).reused == 4
    for change in ["steps=5", "batch=5", "lr=0.01,0.2", "vocabulary=34", "weight_decay=0.2", "beta1=0.8"]:
        again = sweep.run(_study([change]), out=tmp_path, device="cpu", progress=False)
        assert again.measured == 4 and again.reused == 0, change
    more = sweep.run(_study(["n=2,4,6"]), out=tmp_path, device="cpu", progress=False)
    assert (more.measured, more.reused) == (2, 4)
    ds = more.dataset
    assert ds.accuracy.dims == ("variant", "d", "n", "lr", "seed") and ds.ceiling_random.dims[-1] == "seed"
    assert (ds.accuracy_best == ds.accuracy.max("lr")).all()


@pytest.mark.slow
def test_resume_after_a_kill_gives_the_uninterrupted_results_bit_for_bit(tmp_path):
    """Killed (SIGKILL) after two passes are saved, then run again: the Dataset equals an uninterrupted run's."""
    study = _study()
    reference = sweep.run(study, out=tmp_path / "whole", device="cpu", executor="serial", progress=False)
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, signal, sys
            saved = []
            real = os.replace
            def replace(src, dst):
                real(src, dst)
                if str(dst).endswith(".json") and "manifest" not in str(dst):  # a cell, not a checkpoint
                    saved.append(dst)
                    if len(saved) == 2:
                        os.kill(os.getpid(), signal.SIGKILL)
            os.replace = replace
            from lacapacity import studies, sweep
            study = studies.get("trained").with_overrides({TINY!r})
            sweep.run(study, out=sys.argv[1], device="cpu", executor="serial", progress=False)
            """
        )
    )
    out = tmp_path / "killed"
    proc = subprocess.run([sys.executable, str(script), str(out)], timeout=300)
    assert proc.returncode == -signal.SIGKILL
    stored = [json.loads(p.read_text()) for p in (out / ".sweep" / "trained").glob("*.json") if p.stem != "manifest"]
    assert sum(len(c["points"]) for c in stored) == 2, "two passes (one point each) were saved before the kill"
    resumed = sweep.run(study, out=out, device="cpu", executor="serial", progress=False)
    assert (resumed.reused, resumed.measured) == (2, 2)
    assert resumed.dataset.equals(reference.dataset)
    for v in resumed.dataset.data_vars:
        assert np.array_equal(resumed.dataset[v].values, reference.dataset[v].values, equal_nan=True), v


def test_an_interrupt_inside_training_resumes_from_its_checkpoint_bit_for_bit(tmp_path, monkeypatch):
    """Issue 51: a point saved only when it ends could leave nothing after minutes of training. Checkpoints every
    ``_resume.SECONDS`` (0 here: every step): interrupted as the third step's checkpoint is written (an event, not a
    time), the same run resumes from it (steps 3 to 7 only) and stores the bits of an uninterrupted run; the
    checkpoint is gone once the point is stored."""
    from lacapacity.tasks import _resume

    study = _study(["variant=linear", "n=4", "steps=8"])
    reference = sweep.run(study, out=tmp_path / "whole", device="cpu", executor="serial", progress=False)
    monkeypatch.setattr(_resume, "SECONDS", 0.0)
    real_save, real_load, resumed_at = _resume.Checkpoint.save, _resume.Checkpoint.load, []

    def save_then_stop(self, settings, state):
        real_save(self, settings, state)
        if state["step"] == 3:
            raise KeyboardInterrupt

    def load(self, settings):
        got = real_load(self, settings)
        resumed_at.append(None if got is None else got["step"])
        return got

    monkeypatch.setattr(_resume.Checkpoint, "save", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        sweep.run(study, out=tmp_path / "cut", device="cpu", executor="serial", progress=False)
    folder = tmp_path / "cut" / ".sweep" / "trained" / "checkpoints"
    assert [p.name for p in folder.glob("*/*")] == ["seed=0-n=4.pt"]
    monkeypatch.setattr(_resume.Checkpoint, "save", real_save)
    monkeypatch.setattr(_resume.Checkpoint, "load", load)
    resumed = sweep.run(study, out=tmp_path / "cut", device="cpu", executor="serial", progress=False)
    assert resumed_at == [3] and resumed.measured == 1
    for v in reference.dataset.data_vars:
        assert np.array_equal(resumed.dataset[v].values, reference.dataset[v].values, equal_nan=True), v
    assert not folder.exists()


def test_a_torn_or_foreign_checkpoint_is_ignored(tmp_path):
    """A checkpoint cut short by a crash of the machine, or saved for other settings, starts the point over."""
    from lacapacity.tasks import _resume

    ckpt = _resume.Checkpoint(tmp_path / "seed=0-n=4.pt")
    assert ckpt.load({"steps": 8}) is None  # none yet
    ckpt.save({"steps": 8}, {"step": 3, "W": [torch.arange(4.0)]})
    torn = ckpt.path.read_bytes()
    assert ckpt.load({"steps": 9}) is None
    got = ckpt.load({"steps": 8})
    assert got is not None and got["step"] == 3 and torch.equal(got["W"][0], torch.arange(4.0))
    ckpt.path.write_bytes(torn[: len(torn) // 2])
    assert ckpt.load({"steps": 8}) is None


def test_defaults_fit_the_machine():
    """The default study: d 32, 4-64 pairs, four memories; its settings are Trained's defaults."""
    s = studies.get("trained")
    assert s.grid.d == (32,) and s.grid.n == (4, 8, 16, 32, 64) and s.task == Trained()
    assert [v.label for v in s.grid.variant] == ["linear", "delta", "gated_delta", "kda"]


@pytest.fixture(scope="module")
def trained_alone(tmp_path_factory):
    """The small study trained in this process (serial), once for the executors compared with it."""
    out = tmp_path_factory.mktemp("serial")
    return sweep.run(_study(), out=out, device="cpu", executor="serial", progress=False).dataset


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["processes", "dask"])
def test_worker_processes_and_dask_train_what_one_process_trains(tmp_path, trained_alone, executor):
    """Many training runs go to worker processes or a local Dask cluster: the same numbers, bit for bit."""
    study, alone = _study(), trained_alone
    got = sweep.run(study, out=tmp_path / executor, device="cpu", executor=executor, workers=2, progress=False)
    assert got.measured == 4
    for name in alone.data_vars:
        np.testing.assert_array_equal(got.dataset[name].values, alone[name].values)


@pytest.mark.slow  # three trained runs: about 12 s on the loaded 2-core VM
def test_each_seed_and_pair_count_is_a_pass_of_its_own_saved_as_it_ends(tmp_path):
    """Issue 51: a training pass of every seed at once could outlast an interrupt and leave nothing saved; one pass
    per (seed, n), each equal to the same point measured alone."""
    one_seed = [x for x in TINY if not x.startswith(("seed=", "variant="))] + ["variant=linear"]
    both = sweep.run(_study(["variant=linear", "seed=0,1"]), out=tmp_path / "b", device="cpu", progress=False)
    assert (both.passes, both.measured) == (4, 4)  # n = 2, 4 times seeds 0, 1
    for s in (0, 1):
        study = studies.get("trained").with_overrides([*one_seed, f"seed={s}"])
        alone = sweep.run(study, out=tmp_path / f"s{s}", device="cpu", progress=False).dataset
        for v in alone.data_vars:
            if "seed" in alone[v].dims:
                got = both.dataset[v].sel(seed=[s]).transpose(*alone[v].dims)
                assert np.array_equal(got.values, alone[v].values, equal_nan=True), v


class _Sleepy(type(variants.get("linear"))):  # type: ignore[misc]
    """The linear memory, 20 ms slower on every write (one write per model step): a machine this slow."""

    def write(self, state, k, v):
        import time

        time.sleep(0.02)
        return super().write(state, k, v)


def test_the_estimate_times_a_training_step_on_this_machine():
    """Issue 51: the trained study announced about 3 CPU-minutes and ran past 30 on a loaded machine (its step
    time was a constant fitted elsewhere). The estimate is now a step timed here: a memory 20 ms slower per write,
    which writes once per step, is estimated at no less than the steps' sleeps (a bound any machine meets)."""
    from lacapacity.sweep.plan import Plan
    from lacapacity.tasks.protocol import Pass

    study = _study()
    plan = Plan(study, torch.device("cpu"))
    cell, p = plan.cells[0], study.task
    sleepy, plain = _Sleepy(), variants.get("linear")
    slow, fast = (plan.task.seconds(Pass(study, cell, m, (0, 1), (2, 4), plan.device)) for m in (sleepy, plain))
    assert slow >= 2 * 2 * p.steps * 0.02, slow  # 2 seeds x 2 n x steps, each step at least one sleep
    assert slow > fast
