"""Checkpoint folders shared by the passes of one cell (``lacapacity.tasks._resume``): a pass whose points are stored
never takes the folder from under another pass of the same cell that is still training (workers run them at once:
the loaded CI run of 2026-12-07 failed on ``Parent directory ... does not exist``)."""

import torch

from lacapacity.tasks import _resume

SETTINGS = {"steps": 3}


def _state(x: float) -> dict:
    return {"w": torch.full((2, 2), x), "step": 2}


def test_storing_one_pass_leaves_the_folder_to_the_others(tmp_path):
    root = tmp_path / "checkpoints"
    root.mkdir()  # the run makes it; each cell's folder is made by the first point that saves
    cell = root / "cellkey"
    with _resume.checkpoints(cell):
        training, finished = _resume.point(0, 8), _resume.point(0, 16)
    assert training is not None and finished is not None
    finished.save(SETTINGS, _state(1.0))
    _resume.discard(cell, [(0, 16)])  # the other pass's point is stored (the run's process)
    training.save(SETTINGS, _state(2.0))  # this worker goes on saving its own
    got = training.load(SETTINGS)
    assert got is not None and torch.equal(got["w"], _state(2.0)["w"])
    assert not (cell / "seed=0-n=16.pt").exists()
    _resume.discard(cell)  # every point of the cell stored: the folder and the empty parent go
    assert not root.exists()


def test_a_save_into_a_folder_that_is_gone_saves_nothing_and_the_work_goes_on(tmp_path):
    root = tmp_path / "checkpoints"
    root.mkdir()
    with _resume.checkpoints(root / "cellkey"):
        ckpt = _resume.point(1, 4)
    assert ckpt is not None
    _resume.tidy(root)  # the run ended (an interrupt) while a worker still trains
    assert not root.exists()
    ckpt.save(SETTINGS, _state(3.0))  # no error: nothing saved
    assert ckpt.load(SETTINGS) is None


def test_tidy_keeps_what_holds_a_checkpoint(tmp_path):
    root = tmp_path / "checkpoints"
    (root / "empty").mkdir(parents=True)
    with _resume.checkpoints(root / "kept"):
        ckpt = _resume.point(0, 2)
    assert ckpt is not None
    ckpt.save(SETTINGS, _state(4.0))
    _resume.tidy(root)
    assert not (root / "empty").exists() and (root / "kept" / "seed=0-n=2.pt").exists()
