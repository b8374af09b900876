"""The model task: the linear-attention heads of a real hybrid model, measured on a text (docs/models.md).

One forward pass of the model (``source``: a local folder or ``random:<model_type>``) over the first n tokens of the
text captures every linear layer's kernel inputs (``lacapacity.inputs.capture``), a layer at a time; each layer is
proved by replay (the toolkit's recurrence of its family reproduces the kernel's outputs and final state to a
relative RMS error of ``PROOF`` or the run refuses) and measured per head (``heads``): key geometry against T5-T8,
recall of the head's own pairs by age with its real gates beside T22/T23 at its mean gate and beta, how full the
state is, the output error of the state stored in each server format, and the cell's memory (the grid's variant)
written with the same keys and values. The model's own numbers are the same in every cell (computed once per
process); the cell's variant gives ``rule_error``.

Grid: ``variant`` the memories compared (built-ins keep a d x dv state, the head's own bytes, except
``log_linear``, whose state grows: its ``rule_state_numel`` says so), one ``n`` (tokens of the text), one seed, the
default keys; ``d`` and ``dv`` are the model's (the grid's are not used).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from lacapacity.base import _validate, labels
from lacapacity.errors import CapacityError, user_code
from lacapacity.inputs import capture
from lacapacity.tasks.model import heads, source
from lacapacity.tasks.protocol import Config, Measured, Pass, Schema, StudyView, Task, Variable
from lacapacity.variants import precision
from lacapacity.variants._guard import guard

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr
    from numpy.typing import NDArray


PROOF = 1e-5  # the largest relative RMS error of a replay against the kernel for a capture to be used
FORMATS = ("bfloat16", "float8_e4m3fn", "int8/row", "int8/row+ef", "int4/row", "int4/row+ef")


def _items(x: str | int | Iterable[Any]) -> Sequence[Any]:
    return labels.split(x) if isinstance(x, str) else ((x,) if isinstance(x, int) else tuple(x))


@dataclass(frozen=True)
class Model(Config):
    """The model task's settings: ``model`` (a local folder or ``random:<model_type>[:seed]``), ``text`` (a file; None:
    the shipped text), ``ages`` (the lower edges of the age bins, increasing from 0), ``window`` (values an argmax
    read chooses among), ``formats`` (state formats replayed: ``lacapacity.variants.precision`` names), ``digest``
    (filled in by ``to_json`` from the model, the text and the tokenizer; a value given is replaced)."""

    kind: ClassVar[str] = "model"
    model: str = "random:qwen3_next"
    text: str | None = None
    ages: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64, 128)
    window: int = 16
    formats: tuple[str, ...] = FORMATS
    digest: str = ""

    def __post_init__(self) -> None:
        put: Callable[[str, object], None] = lambda name, value: object.__setattr__(self, name, value)
        if not isinstance(self.model, str) or not self.model.strip():
            raise CapacityError(f"model must be a local model folder or random:<model_type>, got {self.model!r}")
        put("model", self.model.strip())
        if self.text is not None and not isinstance(self.text, str):
            raise CapacityError(f"text must be a file name, got {self.text!r}")
        ages = tuple(
            _validate.positive_int("ages", labels.scalar(a) if isinstance(a, str) else a, minimum=0)
            for a in _items(self.ages)
        )
        if not ages or ages[0] != 0 or any(b <= a for a, b in zip(ages, ages[1:], strict=False)):
            raise CapacityError(f"ages must increase from 0 (the lower edges of the age bins), got {self.ages!r}")
        put("ages", ages)
        put("window", _validate.positive_int("window", self.window))
        formats = tuple(str(f).strip() for f in _items(self.formats))
        for f in formats:
            precision._rounder_for(f, False, 0)  # an unknown format is one line here
        put("formats", formats)

    def to_json(self) -> dict[str, Any]:
        """The settings, with ``digest`` computed from the loaded model, config, text and tokenizer (the reuse key's)."""
        out = super().to_json()
        out["digest"] = source.digest(self.model, self.text)
        return out


_A = ("long_name", "units", "description")


def _var(dims: tuple[str, ...], *meta: str) -> Variable:
    return Variable(("seed", *dims), dict(zip(_A, meta, strict=True)))


_HEAD = ("layer", "head")
_VARIABLES = {
    "coherence2": _var(_HEAD, "mean squared coherence of the keys", "", "measured: mean over i != j of (k_i . k_j)^2, keys made unit"),
    "coherence2_random": _var(_HEAD, "mean squared coherence, random keys", "", "T7: 1/d"),
    "max_coherence": _var(_HEAD, "largest coherence of the keys", "", "measured: max over i != j of |k_i . k_j|"),
    "welch_bound": _var(_HEAD, "Welch bound", "", "T6: the least largest coherence of n unit keys in R^d"),
    "effective_rank": _var(_HEAD, "effective rank of the keys", "", "measured: exp(entropy of the normalised squared singular values)"),
    "crosstalk_t4": _var(_HEAD, "T4 crosstalk error at the real keys", "", "T4 evaluated at the captured keys: what an additive state of them would read"),
    "frame_bound": _var(_HEAD, "frame bound", "", "T5: the least T4 error of n unit keys in R^d"),
    "random_keys_error": _var(_HEAD, "T4 error of random keys", "", "T7: (n - 1)/d"),
    "rank_bound": _var(_HEAD, "rank bound", "", "T8: the least mean error of any d x dv state with a linear read"),
    "gate_mean": _var(_HEAD, "mean gate", "", "measured: the head's mean decay gate (over tokens, and channels for kda)"),
    "beta_mean": _var(_HEAD, "mean beta", "", "measured: the head's mean write strength (NaN for mamba2 and decay)"),
    "fullness": _var(_HEAD, "mean recall error of all pairs", "", "measured: mean relative error of every pair read back from the final state"),
    "fullness_theory": _var(_HEAD, "mean recall error, closed form", "", "T22/T23 at the head's mean gate and beta, d and n, averaged over ages"),
    "recall_error": _var((*_HEAD, "age"), "recall error", "", "measured: mean ||k_t S - v_t||^2 / ||v_t||^2 of the pairs of the age bin"),
    "recall_argmax": _var((*_HEAD, "age"), "argmax recall", "", "measured: fraction of the bin's pairs whose read picks their own value among the window"),
    "recall_theory": _var((*_HEAD, "age"), "recall error, closed form", "", "T22 (mamba2, decay) or T23 (gated_delta, kda) at the head's mean gate and beta"),
    "precision_error": _var((*_HEAD, "format"), "output error of a stored state", "", "measured: relative RMS error of the head's outputs with its state stored in the format after every token, against float32"),
    "rule_error": _var((*_HEAD, "age"), "recall error of the cell's memory", "", "measured: the cell's memory written with the head's keys (unit) and values, each pair read back"),
    "rule_state_numel": Variable(("seed",), {"long_name": "numbers in the cell's memory's state per head", "units": "numbers", "description": "measured: the memory's state_numel(d, dv); the model's head keeps d dv"}, dtype="int64", finite=True),
}  # fmt: skip


@dataclass(frozen=True)
class _Shape:
    layers: tuple[int, ...]
    heads: int
    d: int
    dv: int
    tokens: int


@functools.lru_cache(maxsize=2)
def _shape(model: str, text: str | None) -> _Shape:
    """The linear layers, heads and dimensions of a model (a capture of 8 tokens)."""
    loaded = source.load(model, text)
    found: list[capture.Layer] = []
    with user_code(f"model {model!r}", "in its forward pass"):
        capture.capture(loaded.model, loaded.ids[:, :8], found.append)
    L = found[0]
    return _Shape(tuple(x.index for x in found), L.heads, int(L.k.shape[-1]), int(L.v.shape[-1]), loaded.ids.shape[1])


@functools.lru_cache(maxsize=1)
def _own(
    model: str, text: str | None, n: int, ages: tuple[int, ...], window: int, formats: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """The model's own numbers: every variable but the rule's, ``[layers, H, ...]``, one capture, a layer at a time."""
    loaded = source.load(model, text)
    parts: list[dict[str, np.ndarray]] = []

    def on_layer(layer: capture.Layer) -> None:
        replayed = capture.replay(layer)
        err = capture.proof(layer, replayed)
        if err > PROOF:
            raise CapacityError(
                f"model: the replay of layer {layer.index} differs from the model's kernel by {err:.2g} (relative RMS, more than {PROOF:g}): this capture is not used"
            )
        part = {**heads.geometry(layer), **heads.recall(layer, ages, window)}
        part["precision_error"] = heads.precision_errors(layer, formats, replayed[0])
        parts.append(part)

    with user_code(f"model {model!r}", "in its forward pass"):
        capture.capture(loaded.model, loaded.ids[:, :n], on_layer)
    return {k: np.stack([p[k] for p in parts]) for k in parts[0]}


def _rule(model: str, text: str | None, n: int, ages: tuple[int, ...], memory: Any) -> np.ndarray:
    """``[layers, H, ages]``: a memory's recall error on every head's keys and values, one capture, a layer at a time."""
    loaded = source.load(model, text)
    parts: list[np.ndarray] = []
    with user_code(f"model {model!r}", "in its forward pass"):
        capture.capture(
            loaded.model, loaded.ids[:, :n], lambda layer: parts.append(heads.rule_recall(layer, memory, ages))
        )
    return np.stack(parts)


class ModelTask(Task[Model]):
    """The heads of a real hybrid model on a text: geometry, forgetting, fullness, stored formats, other rules."""

    name = "model"
    description = (
        "the linear-attention heads of a transformers hybrid model on a text: keys, forgetting, formats, other rules"
    )
    Config = Model
    per_point = False
    key_axis = False
    grid_axes = ()

    def check_grid(self, study: StudyView[Model]) -> None:
        g = study.grid
        if (
            g.curve != "n"
            or len(g.n) != 1
            or len(g.seed) != 1
            or g.feature
            or [k.label for k in g.keys] != ["gaussian"]
        ):
            raise CapacityError(
                "a model study takes one n (tokens of the text), one seed, no feature maps and the default keys (its keys are the model's)"
            )

    def check(self, study: StudyView[Model]) -> None:
        p = study.task
        source.check(p.model)
        shape = _shape(p.model, p.text)
        n = study.grid.n[0]
        if n > shape.tokens:
            raise CapacityError(
                f"model: the text has {shape.tokens} tokens, fewer than n = {n}: give a longer text or a smaller n"
            )
        if n < 2 * p.window or n <= p.ages[-1]:
            raise CapacityError(
                f"model: n = {n} tokens is too short for window = {p.window} and the last age bin {p.ages[-1]}: n must be at least 2 window and more than the last age"
            )

    def schema(self, study: StudyView[Model]) -> Schema:
        p = study.task
        shape = _shape(p.model, p.text)
        dims = {"seed": list(study.grid.seed), "layer": list(shape.layers), "head": list(range(shape.heads))}
        return Schema(
            dims,
            dict(_VARIABLES),
            extra={"age": list(p.ages), "format": list(p.formats)},
        )

    def writes(self, study: StudyView[Model], ns: list[int]) -> int:
        return max(ns)

    def measure(self, run: Pass[Model]) -> Measured:
        """The model's numbers (shared by every cell) and the cell's memory's recall on the same keys and values."""
        p, n = run.study.task, run.ns[0]
        own = _own(p.model, p.text, n, p.ages, p.window, p.formats)
        mem = guard(run.memory)
        rule = _rule(p.model, p.text, n, p.ages, mem)
        shape = _shape(p.model, p.text)
        values: dict[str, NDArray[Any]] = {k: v[None, None] for k, v in own.items()}  # [n, seed, layer, head, ...]
        values["rule_error"] = rule[None, None]
        values["rule_state_numel"] = np.array([[mem.state_numel(shape.d, shape.dv)]], dtype=np.int64)
        return Measured(values)

    def theory(
        self, study: StudyView[Model], n: NDArray[np.int64], d: NDArray[np.int64], dv: NDArray[np.int64]
    ) -> dict[str, tuple[float | NDArray[Any], dict[str, Any]]]:
        return {}  # the closed forms depend on each head's measured gates: stored beside the measurements

    def figures(self, ds: xr.Dataset) -> list[str]:
        return ["model-maps", "model-recall", "model-precision"]  # this folder's own (figures.py)

    def attrs(self, study: StudyView[Model]) -> dict[str, Any]:
        p = study.task
        shape = _shape(p.model, p.text)
        loaded = source.load(p.model, p.text)
        return {
            "model": p.model,
            "model_type": str(loaded.model.config.model_type),  # type: ignore[union-attr]  # a transformers model's config
            "family": loaded.family,
            "tokenizer": loaded.tokenizer,
            "head_d": shape.d,
            "head_dv": shape.dv,
            "digest": source.digest(p.model, p.text),
        }
