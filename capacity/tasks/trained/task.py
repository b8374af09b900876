"""The trained task: one-layer models on continuous MQAR, trained over a learning-rate sweep, beside the ceiling.

A point is one (memory, d, pairs, seed): one model per learning rate of ``lr``, all trained at once
(``lacapacity.tasks.trained.model``), with the two ceilings of the same memory, d, pairs and test sequences: the model
with identity projections (the probe, random unit keys) and keys optimised through the memory (``lacapacity.learned``).
A point depends on nothing but its cell, seed and pairs, so each is stored and reused on its own; every training
setting is a field of ``Trained`` and so part of the reuse key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import xarray as xr

from lacapacity.base import _validate, labels
from lacapacity.errors import CapacityError
from lacapacity.tasks import _resume
from lacapacity.tasks.protocol import Config, Measured, Pass, Schema, StudyView, Task, Variable
from lacapacity.tasks.trained import model
from lacapacity.variants._guard import guard

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr
    from numpy.typing import NDArray


ZOOLOGY_LRS = (1e-3, 10**-2.5, 1e-2, 10**-1.5)  # zoology's continuous-MQAR sweep: np.logspace(-3, -1.5, 4)


@dataclass(frozen=True)
class Trained(Config):
    """How the trained task trains and scores each point.

    ``vocabulary``: fixed unit embeddings (half keys, half values; zoology's ``vocab_size``); ``lr``: the learning
    rates swept (an axis; one model each); ``steps``: AdamW steps (cosine decay to 0), each on ``batch`` fresh
    sequences; ``weight_decay``, ``beta1``, ``beta2``: AdamW's (zoology: 0.1 and torch's defaults); ``test``:
    held-out sequences scored per point; ``learned_steps``, ``learned_lr``: Adam steps and rate of the learned-keys
    ceiling (``lacapacity.learned``)."""

    kind: ClassVar[str] = "trained"
    vocabulary: int = 512
    lr: tuple[float, ...] = (3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)
    steps: int = 200
    batch: int = 16
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.999
    test: int = 64
    learned_steps: int = 100
    learned_lr: float = 0.05

    def __post_init__(self) -> None:
        put: Callable[[str, object], None] = lambda name, value: object.__setattr__(self, name, value)
        put("vocabulary", _validate.positive_int("vocabulary", self.vocabulary, minimum=4))
        if self.vocabulary % 2:
            raise CapacityError(
                f"vocabulary must be even (half key, half value embeddings, as zoology splits it), got {self.vocabulary}"
            )
        for name in ("steps", "batch", "test", "learned_steps"):
            put(name, _validate.positive_int(name, getattr(self, name)))
        put("weight_decay", _validate.in_range("weight_decay", self.weight_decay, 0.0, 1.0))
        put("beta1", _validate.in_range("beta1", self.beta1, 0.0, 1.0, high_open=True))
        put("beta2", _validate.in_range("beta2", self.beta2, 0.0, 1.0, high_open=True))
        put("learned_lr", _validate.in_range("learned_lr", self.learned_lr, 0.0, 10.0, low_open=True))
        lrs = labels.split(self.lr) if isinstance(self.lr, str) else self.lr
        lrs = (lrs,) if isinstance(lrs, (int, float)) else tuple(lrs)
        scalar: Callable[[object], object] = lambda x: labels.scalar(x) if isinstance(x, str) else x
        put("lr", tuple(_validate.in_range("lr", scalar(x), 0.0, 10.0, low_open=True) for x in lrs))
        if not self.lr or len(set(self.lr)) != len(self.lr):
            raise CapacityError(f"lr must list distinct learning rates in (0, 10], got {self.lr!r}")


_VARS = {
    "accuracy": (
        ("lr", "seed"),
        "trained accuracy",
        "fraction",
        "top-1 accuracy of the trained model on the test sequences, decoded over the value vocabulary",
        True,
    ),
    "loss": (
        ("lr", "seed"),
        "trained test loss",
        "nats",
        "cross-entropy of the trained model's logits (read . value embeddings) on the test sequences",
        False,
    ),
    "train_loss": (
        ("lr", "seed"),
        "training loss",
        "nats",
        "mean training cross-entropy over the last tenth of the steps",
        False,
    ),
    "accuracy_best": (
        ("seed",),
        "trained accuracy, best over lr",
        "fraction",
        "the highest test accuracy over the learning-rate sweep (zoology's and MAD's report)",
        True,
    ),
    "ceiling_random": (
        ("seed",),
        "ceiling: random keys",
        "fraction",
        "test accuracy of the model with identity projections: the probe with the random unit key embeddings as keys",
        True,
    ),
    "ceiling_learned": (
        ("seed",),
        "ceiling: learned keys",
        "fraction",
        "test accuracy reading at keys optimised through the memory (lacapacity.learned) for each test sequence",
        True,
    ),
}


def best(ds: xr.Dataset) -> xr.Dataset:
    """The best learning rate per point: ``lr_best`` (the lr of the highest test accuracy; the smaller on a tie)
    and its test ``loss_best``."""
    i = ds.accuracy.fillna(-1).argmax("lr")
    return xr.Dataset({"lr_best": ds.lr[i], "loss_best": ds.loss.isel(lr=i)})


class TrainedTask(Task[Trained]):
    """One-layer models trained on continuous MQAR, beside the training-free ceilings of the same memory."""

    name = "trained"
    description = (
        "one-layer models trained on continuous MQAR (zoology) over a learning-rate sweep, beside the probe's ceilings"
    )
    Config = Trained
    per_point = True  # a point's training depends only on its cell, seed and pairs
    pass_per_n = (
        True  # a pass trains: one per pair count and seed, so that workers share them and each is saved as it ends
    )
    key_axis = False
    grid_axes = ()

    def check_grid(self, study: StudyView[Trained]) -> None:
        g = study.grid
        if g.curve != "n" or g.feature or g.dtype != ("float32",) or g.dv:
            raise CapacityError(
                "a trained study takes n (key-value pairs per sequence, not load), no feature maps, float32 and dv = d"
            )
        if [k.label for k in g.keys] != ["gaussian"]:
            raise CapacityError(
                "a trained study draws its own embeddings (zoology's spherical: gaussian rows of unit length); keys takes gaussian only"
            )

    def check(self, study: StudyView[Trained]) -> None:
        from lacapacity import variants

        half = study.task.vocabulary // 2
        if max(study.grid.n) > half:
            raise CapacityError(
                f"a sequence of n pairs takes n distinct keys of the {half} key embeddings (vocabulary {study.task.vocabulary}): n = {max(study.grid.n)} is too many (raise vocabulary)"
            )
        for v in study.grid.variant:
            model.differentiable(variants.build(v), v.label)

    def schema(self, study: StudyView[Trained]) -> Schema:
        dims: dict[str, list[Any]] = {"lr": list(study.task.lr), "seed": list(study.grid.seed)}
        variables = {
            name: Variable(vd, {"long_name": ln, "units": u, "description": desc}, finite=fin)
            for name, (vd, ln, u, desc, fin) in _VARS.items()
        }
        coords = {"lr": ("lr", list(study.task.lr), {"long_name": "learning rate", "units": "1"})}
        return Schema(dims, variables, coords=coords)

    def writes(self, study: StudyView[Trained], ns: list[int]) -> int:
        return max(ns)

    def seconds(self, run: Pass[Trained]) -> float:
        """Estimated seconds on one CPU core: every step of the models, each as long as a step took on this
        machine just now (``model.timed_step`` at the study's smallest and largest n, once per memory and d in a
        process, linear in n between: the machine's load is in it), and the learned keys' steps at that step's
        cost per sequence. Asked by the engine after the sizes are checked (it runs the memory)."""
        p, grid = run.study.task, sorted(set(run.study.grid.n))
        timed = {
            end: model.timed_step(run.memory, d=run.cell.d, n=end, lrs=p.lr, vocabulary=p.vocabulary, batch=p.batch)
            for end in (grid[0], grid[-1])
        }
        total = 0.0
        for n in set(run.ns):
            at = (n - grid[0]) / (grid[-1] - grid[0]) if grid[-1] > grid[0] else 0.0
            step = timed[grid[0]] + (timed[grid[-1]] - timed[grid[0]]) * at
            total += p.steps * step + p.learned_steps * p.test * step / (p.batch * len(p.lr))
        return len(run.seeds) * total

    def extra_bytes(self, study: StudyView[Trained], d: int, n: int, seeds: int) -> int:
        """Float32 bytes of one point's training (seeds run one after another): the sequences ``[batch, n, 2d]`` and
        their projections, reads and gradients ``[M * batch, n, d]`` (M = len(lr) models), the states ``[M * batch,
        d, d]`` kept for the backward pass, the embeddings ``[vocabulary, d]``, the weights ``[M, 2d, d]`` three
        times with their gradients and AdamW's moments, and the learned-keys ceiling's ``[test, n, d]`` keys, its
        Adam state and its states ``[test, d, d]``."""
        p, M = study.task, len(study.task.lr)
        floats = 4 * p.batch * n * d + 9 * M * p.batch * n * d + 3 * M * p.batch * d * d + 2 * p.vocabulary * d
        floats += 24 * M * d * d + 4 * p.test * n * d + 6 * p.test * n * d + 3 * p.test * d * d
        return 4 * floats

    def measure(self, run: Pass[Trained]) -> Measured:
        p, ns, d, device = run.study.task, sorted(set(run.ns)), run.cell.d, run.device
        memory = guard(
            run.memory
        )  # every call into the user's memory is user code (one line naming it, exits and crashes too)
        out: dict[str, list[NDArray[Any]]] = {name: [] for name in _VARS}
        for n in ns:
            rows: dict[str, list[NDArray[Any] | float]] = {name: [] for name in _VARS}
            for s in run.seeds:
                common = {"d": d, "n": n, "vocabulary": p.vocabulary, "test": p.test, "seed": s}
                trained = model.train(
                    memory,
                    lrs=p.lr,
                    steps=p.steps,
                    batch=p.batch,
                    weight_decay=p.weight_decay,
                    betas=(p.beta1, p.beta2),
                    device=device,
                    checkpoint=_resume.point(s, n),
                    **common,
                )
                rows["accuracy"].append(trained.accuracy)
                rows["loss"].append(trained.loss)
                rows["train_loss"].append(trained.train_loss)
                rows["accuracy_best"].append(trained.accuracy.max())
                rows["ceiling_random"].append(model.ceiling_identity(memory, device=device, **common))
                rows["ceiling_learned"].append(
                    model.learned_keys(memory, steps=p.learned_steps, lr=p.learned_lr, device=device, **common)
                )
            for name, (vd, *_) in _VARS.items():
                x = np.asarray(rows[name], dtype=np.float64)  # [seed] or [seed, lr]
                out[name].append(x.T if vd == ("lr", "seed") else x)
        return Measured({name: np.stack(out[name]) for name in _VARS})  # each over (n, *its dims)

    def theory(
        self, study: StudyView[Trained], n: NDArray[np.int64], d: NDArray[np.int64], dv: NDArray[np.int64]
    ) -> dict[str, tuple[float | NDArray[Any], dict[str, Any]]]:
        return {}

    def attrs(self, study: StudyView[Trained]) -> dict[str, Any]:
        p = study.task
        return {
            "vocabulary": int(p.vocabulary),
            "steps": int(p.steps),
            "batch": int(p.batch),
            "weight_decay": float(p.weight_decay),
            "adam_betas": [float(p.beta1), float(p.beta2)],
            "test_sequences": int(p.test),
            "learned_steps": int(p.learned_steps),
            "learned_lr": float(p.learned_lr),
            "optimizer": "AdamW, one model per lr, cosine decay to 0 over the steps, no warm-up",
        }

    def figures(self, ds: xr.Dataset) -> list[str]:
        return ["trained"]
