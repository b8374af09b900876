"""The public API as a user's code uses it, for the type check (``[tool.mypy]`` in pyproject.toml lists this file):
under mypy's strict flags, the README's example must type-check with the package's own annotations (py.typed), its
results typed as what they are (a tensor, a Dataset, a Report), not as Any. It also runs: ``python tests/typed_use.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
import xarray as xr
from numpy.typing import NDArray
from typing_extensions import assert_type  # torch requires typing_extensions; typing has it from 3.11

import lacapacity
from lacapacity import kernels, sweep, tasks
from lacapacity.check.conformance import Report
from lacapacity.inputs import pretrained
from lacapacity.tasks.protocol import Pass, StudyView
from lacapacity.variants import heads, precision
from lacapacity.variants.delta import Delta
from lacapacity.variants.fla import FlaState, FlaVariant, from_fla
from lacapacity.variants.lsq import LSQ, LsqState
from lacapacity.variants.recurrent import State

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def readme_example() -> tuple[float, float]:
    K: torch.Tensor = lacapacity.keys.make("gaussian", n=256, d=64, batch=8, seed=0)  # [8, 256, 64], unit rows
    V: torch.Tensor = lacapacity.values.make("gaussian", n=256, dv=64, batch=8, seed=1)  # [8, 256, 64]
    ds: xr.Dataset = lacapacity.probe.recall(lacapacity.variants.get("linear"), K, V)  # over (n, batch)
    return float(ds.mse.mean("batch").sel(n=256).item()), float(lacapacity.theory.random_keys_error(256, 64))


def conformance(name: str) -> bool:
    report: Report = lacapacity.check_variant(name, d=16)
    return report.passed


def closed_forms_keep_the_kind(K: torch.Tensor) -> tuple[torch.Tensor, bytes, float]:
    """Key matrices: a tensor in, a tensor out; a numpy array in, a float64 array out; numbers in, a float out."""
    signal, leak = lacapacity.theory.decomposition(K, K)
    err = lacapacity.theory.crosstalk_error(K.numpy())
    return leak.detach() - signal, err.tobytes(), float(lacapacity.theory.welch_bound(3, 2))


class Mine:
    """A user's memory (the protocol of lacapacity.variants, its name a class attribute): a Variant to type checkers."""

    name = "mine"

    def init_state(self, batch: int, d: int, dv: int, *, device: str | torch.device | None = None) -> torch.Tensor:
        return torch.zeros(batch, d, dv, device=device)

    def write(self, state: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return state + k.transpose(1, 2) @ v

    def read(self, state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return q @ state

    def state_numel(self, d: int, dv: int) -> int:
        return d * dv


def my_memory_is_a_variant() -> lacapacity.variants.Variant:
    return Mine()


def kernel_writes_and_reads(K: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, int]:
    """lacapacity.kernels (read through typecheck/'s link): the state written in place is a tensor, the modes by name."""
    S = kernels.update(torch.zeros(K.shape[0], K.shape[2], V.shape[2]), K, V, mode="delta", beta=1.0)
    modes: dict[str, str] = kernels.available()
    return kernels.read(S, K[:, :1]), len(modes)


def figures_of(ds: xr.Dataset, out: Path) -> tuple[list[Path], list[str], Figure]:
    """lacapacity.plots (read through typecheck/'s link): files written, figure names chosen, a matplotlib Figure."""
    from lacapacity import plots  # here: matplotlib loads only where a figure is drawn

    written: list[Path] = plots.render(ds, out=out)
    built: list[tuple[str, Figure]] = plots.figures(ds)
    return written + plots.render_path(out / "results.nc"), plots.choose(ds), built[0][1]


def bad_input_is_a_value_error() -> type[ValueError]:
    return lacapacity.CapacityError


class HalfStep(Delta):
    """A user's subclass of a built-in memory: the delta rule with another default step."""

    beta: object = 0.5


# Each function below returns one result of the memories' API as it is: a result typed Any (or wrongly) fails the
# check (warn_return_any), so the types users get from lacapacity.variants, .inputs and .check stay what they are.


def subclass_state(K: torch.Tensor, V: torch.Tensor) -> State:
    mem = HalfStep()
    return mem.write(mem.init_state(1, K.shape[2], V.shape[2]), K, V)  # a tensor, or a TokenState


def subclass_read(K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    return HalfStep().read(subclass_state(K, V), K)


def subclass_params() -> dict[str, object]:
    return HalfStep().params


def lsq_state(K: torch.Tensor, V: torch.Tensor) -> LsqState:
    lsq = LSQ(lam=1e-3)
    return lsq.write(lsq.init_state(1, K.shape[2], V.shape[2]), K, V)


def lsq_solution(K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    return LSQ(lam=1e-3).solution(lsq_state(K, V))  # [1, d, dv]


def stored_state(K: torch.Tensor, V: torch.Tensor) -> precision.StoredState:
    low = precision.Stored(HalfStep(), "bfloat16", "step")
    return low.write(low.init_state(1, K.shape[2], V.shape[2]), K, V)


def stored_read(K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    return precision.Stored(HalfStep(), "bfloat16", "step").read(stored_state(K, V), K)


def stored_bytes(d: int, dv: int) -> int:
    return precision.state_bytes(HalfStep(), d, dv, "bfloat16")


def head_numbers(d: int, dv: int) -> int:
    return heads.Heads(lacapacity.variants.get("linear"), 2).state_numel(d, dv)


def fla_linear(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, initial_state: torch.Tensor, output_final_state: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """A user's op in flash-linear-attention's convention, tokens [B, T, H, K], state [B, H, K, V]."""
    S = initial_state + torch.einsum("bthk,bthv->bhkv", k, v)
    return torch.einsum("bthk,bhkv->bthv", q, S), S


def wrapped_op() -> FlaVariant:
    return from_fla(fla_linear, name="my-linear", per_token={})


def wrapped_state(K: torch.Tensor, V: torch.Tensor) -> FlaState:
    mem = wrapped_op()
    return mem.write(mem.init_state(1, K.shape[2], V.shape[2]), K, V)


def wrapped_read(K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    return wrapped_op().read(wrapped_state(K, V), K)


def pretrained_arguments() -> tuple[int, int | None, Path]:
    """The pretrained key family's arguments, checked without loading the model: (layer, head or None, the text)."""
    return pretrained.check(384, layer=1, head="all")


if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    K, V = torch.randn(2, 5, 8, generator=g), torch.randn(2, 5, 4, generator=g)
    print(readme_example(), tuple(kernel_writes_and_reads(K, V)[0].shape), bad_input_is_a_value_error().__name__)
    print(readme_example(), bad_input_is_a_value_error().__name__)
    K, V = lacapacity.keys.make("gaussian", n=8, d=16, seed=0), lacapacity.values.make("gaussian", n=8, dv=16, seed=1)
    reads = [f(K, V) for f in (subclass_read, lsq_solution, stored_read, wrapped_read)]
    print([tuple(r.shape) for r in reads], stored_bytes(16, 16), head_numbers(16, 16), subclass_params())
    print(pretrained_arguments()[:2])


def a_sweep(out: str) -> tuple[xr.Dataset, int, list[int]]:
    """A study built as docs/sweeps.md builds one, run: the result's Dataset, counts and grid typed."""
    grid = sweep.Grid(variant=("linear", "delta(beta=0.5)"), d=16, load=(0.5, 1))
    study = sweep.Study("typed", "two memories", grid, sweep.Recall(top_k=(1, 2))).with_overrides(["d=8", "seed=0"])
    result = sweep.run(study, out=out, device="cpu", executor="serial", progress=False)
    assert_type(result, sweep.RunResult)  # assert_type fails on Any too: the types reach the user
    assert_type(result.dataset, xr.Dataset)
    assert_type(study.grid.variant, tuple[sweep.Spec, ...])
    assert_type(study.task, tasks.Config)
    labels: list[str] = [spec.label for spec in study.grid.variant]
    assert labels == ["linear", "delta(beta=0.5)"]
    return result.dataset, result.measured + result.reused, study.grid.ns(8)


@dataclass(frozen=True)
class Echo(tasks.Config):
    """A user's task settings (a frozen dataclass with its kind)."""

    kind: ClassVar[str] = "typed-echo"
    scale: float = 1.0


class EchoTask(tasks.Task[Echo]):
    """A user's task against the protocol: ``run.study.task`` is typed as its own settings, ``run.cell`` and ``run.memory``
    as what the engine hands it."""

    name = "typed-echo"
    description = "reads each stored value back, scaled"
    Config = Echo
    per_point = True
    key_axis = False
    grid_axes = ()

    def check_grid(self, study: StudyView[Echo]) -> None:
        if study.grid.curve != "n":
            raise lacapacity.CapacityError("typed-echo takes n")

    def check(self, study: StudyView[Echo]) -> None:
        pass

    def schema(self, study: StudyView[Echo]) -> tasks.Schema:
        return tasks.Schema({"seed": list(study.grid.seed)}, {"norm": tasks.Variable(("seed",), {"units": "1"})})

    def writes(self, study: StudyView[Echo], ns: list[int]) -> int:
        return max(ns)

    def measure(self, run: Pass[Echo]) -> tasks.Measured:
        scale = assert_type(run.study.task, Echo).scale  # the task's own settings, typed
        cell, memory, seeds, device = run.cell, run.memory, run.seeds, run.device
        assert_type(cell.d, int)
        assert_type(memory, lacapacity.variants.Variant)
        assert_type(seeds, tuple[int, ...])
        assert_type(device, torch.device)
        K = lacapacity.keys.make(cell.keys.name, max(run.ns), cell.d, batch=len(seeds), seed=seeds, device=device)
        state = memory.write(memory.init_state(len(seeds), cell.d, cell.d, device=device), K, K)
        norms = memory.read(state, K).norm(dim=-1).mean(-1) * scale  # [S]
        return tasks.Measured({"norm": np.stack([norms.cpu().numpy().astype(np.float64)] * len(run.ns))})

    def theory(
        self, study: StudyView[Echo], n: NDArray[np.int64], d: NDArray[np.int64], dv: NDArray[np.int64]
    ) -> dict[str, tuple[float | NDArray[Any], dict[str, Any]]]:
        return {}

    def attrs(self, study: StudyView[Echo]) -> dict[str, Any]:
        return {"scale": study.task.scale}

    def figures(self, ds: xr.Dataset) -> list[str]:
        return []


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        ds, points, ns = a_sweep(out)
    print(readme_example(), bad_input_is_a_value_error().__name__, dict(ds.sizes), points, ns)
