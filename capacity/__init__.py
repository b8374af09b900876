"""capacity: measure how much a linear-attention state can remember.

Write n key-value pairs into a memory, read them back, and hold the retrieval error next to
the closed form it tests (docs/theory.md).

>>> import capacity
>>> K = capacity.keys.make("gaussian", n=64, d=32, batch=8, seed=0)
>>> V = capacity.values.make("orthonormal", n=64, dv=64, batch=8, seed=0)
>>> ds = capacity.probe.recall(capacity.variants.get("linear"), K, V, checkpoints=[64])
>>> measured = float(ds.mse.mean())
>>> expected = capacity.theory.random_keys_error(64, 32)      # (n - 1)/d, T7
>>> abs(measured - expected) < 0.2
True
"""

import importlib as _importlib
import importlib.util as _util
from typing import TYPE_CHECKING, Any

from capacity.base._version import __version__
from capacity.errors import CapacityError

if TYPE_CHECKING:  # what type checkers see; at run time the submodules load on first use (__getattr__ below)
    from capacity import sweep as sweep
    from capacity import theory as theory
    from capacity import variants as variants
    from capacity.base import labels as labels
    from capacity.base import plugins as plugins
    from capacity.check import conformance as conformance
    from capacity.check.conformance import Report as Report
    from capacity.check.conformance import check_variant as check_variant
    from capacity.inputs import features as features
    from capacity.inputs import keys as keys
    from capacity.inputs import values as values
    from capacity.tasks import learned as learned
    from capacity.tasks import metrics as metrics
    from capacity.tasks import probe as probe
    from capacity.tasks.mqar import probe as mqar  # noqa: F401

__all__ = ["keys", "values", "theory", "variants", "probe", "metrics", "check_variant", "CapacityError", "__version__"]

# kernels/, plots/ and studies/ sit beside this folder in the source tree and are installed inside the package; a
# source tree that is not installed in editable mode (Python started in the repository root) lacks them
if _util.find_spec("capacity.kernels") is None:
    raise ImportError(
        f"capacity is being imported from the source tree {__path__[0]}, which is not installed in editable mode: "
        "run `pip install -e .` in the repository root, or start Python from another folder"
    )

# The public names load on first use, so that `capacity --help` or `capacity list` do not import torch and xarray.
# The package is laid out by layer (docs/architecture.md): base -> inputs -> variants (memories) -> tasks -> check,
# sweep (the engine) -> cli, with theory beside base and kernels, plots and studies where the design puts them. The
# names below are where a user finds each part; the layers are where it lives.
_PUBLIC = {
    "keys": "capacity.inputs.keys",
    "values": "capacity.inputs.values",
    "features": "capacity.inputs.features",
    "learned": "capacity.tasks.learned",
    "theory": "capacity.theory",
    "variants": "capacity.variants",
    "probe": "capacity.tasks.probe",
    "metrics": "capacity.tasks.metrics",
    "mqar": "capacity.tasks.mqar.probe",
    "conformance": "capacity.check.conformance",
    "sweep": "capacity.sweep",
    "kernels": "capacity.kernels",
    "plots": "capacity.plots",
    "studies": "capacity.studies",
    "labels": "capacity.base.labels",
    "plugins": "capacity.base.plugins",
}
_LAYERS = ("base", "inputs", "tasks", "check", "errors", "cli")


def __getattr__(name: str) -> Any:  # Any: kernels, plots and studies, which type checkers do not find in the tree
    if name in ("check_variant", "Report"):
        return getattr(_importlib.import_module("capacity.check.conformance"), name)
    if name in _PUBLIC:
        return _importlib.import_module(_PUBLIC[name])
    if name in _LAYERS:
        return _importlib.import_module(f"capacity.{name}")
    raise AttributeError(f"module 'capacity' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_PUBLIC))
