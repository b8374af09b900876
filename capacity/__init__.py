"""capacity, imported as lacapacity (README, "Names"): measure how much a linear-attention state can remember.

Write n key-value pairs into a memory, read them back, and hold the retrieval error next to
the closed form it tests (docs/theory.md).

>>> import lacapacity
>>> K = lacapacity.keys.make("gaussian", n=64, d=32, batch=8, seed=0)
>>> V = lacapacity.values.make("orthonormal", n=64, dv=64, batch=8, seed=0)
>>> ds = lacapacity.probe.recall(lacapacity.variants.get("linear"), K, V, checkpoints=[64])
>>> measured = float(ds.mse.mean())
>>> expected = lacapacity.theory.random_keys_error(64, 32)      # (n - 1)/d, T7
>>> abs(measured - expected) < 0.2
True
"""

import importlib as _importlib
import importlib.util as _util
from typing import TYPE_CHECKING, Any

from lacapacity.base._version import __version__
from lacapacity.errors import CapacityError

if TYPE_CHECKING:  # what type checkers see; at run time the submodules load on first use (__getattr__ below)
    from lacapacity import sweep as sweep
    from lacapacity import theory as theory
    from lacapacity import variants as variants
    from lacapacity.base import labels as labels
    from lacapacity.base import plugins as plugins
    from lacapacity.check import conformance as conformance
    from lacapacity.check.conformance import Report as Report
    from lacapacity.check.conformance import check_variant as check_variant
    from lacapacity.inputs import features as features
    from lacapacity.inputs import keys as keys
    from lacapacity.inputs import values as values
    from lacapacity.tasks import learned as learned
    from lacapacity.tasks import metrics as metrics
    from lacapacity.tasks import probe as probe
    from lacapacity.tasks.mqar import probe as mqar  # noqa: F401

__all__ = ["keys", "values", "theory", "variants", "probe", "metrics", "check_variant", "CapacityError", "__version__"]

# kernels/, plots/ and studies/ sit beside this folder in the source tree and are installed inside the package; a
# source tree that is not installed in editable mode (Python started in the repository root) lacks them
if _util.find_spec("lacapacity.kernels") is None:
    raise ImportError(
        f"lacapacity is being imported from the source tree {__path__[0]}, which is not installed in editable mode: "
        "run `pip install -e .` in the repository root, or start Python from another folder"
    )

# The public names load on first use, so that `capacity --help` or `capacity list` do not import torch and xarray.
# The package is laid out by layer (docs/architecture.md): base -> inputs -> variants (memories) -> tasks -> check,
# sweep (the engine) -> cli, with theory beside base and kernels, plots and studies where the design puts them. The
# names below are where a user finds each part; the layers are where it lives.
_PUBLIC = {
    "keys": "lacapacity.inputs.keys",
    "values": "lacapacity.inputs.values",
    "features": "lacapacity.inputs.features",
    "learned": "lacapacity.tasks.learned",
    "theory": "lacapacity.theory",
    "variants": "lacapacity.variants",
    "probe": "lacapacity.tasks.probe",
    "metrics": "lacapacity.tasks.metrics",
    "mqar": "lacapacity.tasks.mqar.probe",
    "conformance": "lacapacity.check.conformance",
    "sweep": "lacapacity.sweep",
    "kernels": "lacapacity.kernels",
    "plots": "lacapacity.plots",
    "studies": "lacapacity.studies",
    "labels": "lacapacity.base.labels",
    "plugins": "lacapacity.base.plugins",
}
_LAYERS = ("base", "inputs", "tasks", "check", "errors", "cli")


def __getattr__(name: str) -> Any:  # Any: kernels, plots and studies, which type checkers do not find in the tree
    if name in ("check_variant", "Report"):
        return getattr(_importlib.import_module("lacapacity.check.conformance"), name)
    if name in _PUBLIC:
        return _importlib.import_module(_PUBLIC[name])
    if name in _LAYERS:
        return _importlib.import_module(f"lacapacity.{name}")
    raise AttributeError(f"module 'lacapacity' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_PUBLIC))
