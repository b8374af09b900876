"""The public API as a user's code uses it, for the type check (``[tool.mypy]`` in pyproject.toml lists this file):
under mypy's strict flags, the README's example must type-check with the package's own annotations (py.typed), its
results typed as what they are (a tensor, a Dataset, a Report), not as Any. It also runs: ``python tests/typed_use.py``.
"""

import torch
import xarray as xr

import capacity
from capacity.check.conformance import Report


def readme_example() -> tuple[float, float]:
    K: torch.Tensor = capacity.keys.make("gaussian", n=256, d=64, batch=8, seed=0)  # [8, 256, 64], unit rows
    V: torch.Tensor = capacity.values.make("gaussian", n=256, dv=64, batch=8, seed=1)  # [8, 256, 64]
    ds: xr.Dataset = capacity.probe.recall(capacity.variants.get("linear"), K, V)  # over (n, batch)
    return float(ds.mse.mean("batch").sel(n=256).item()), float(capacity.theory.random_keys_error(256, 64))


def conformance(name: str) -> bool:
    report: Report = capacity.check_variant(name, d=16)
    return report.passed


def bad_input_is_a_value_error() -> type[ValueError]:
    return capacity.CapacityError


if __name__ == "__main__":
    print(readme_example(), bad_input_is_a_value_error().__name__)
