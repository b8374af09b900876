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

from capacity import keys, metrics, probe, theory, values, variants
from capacity.errors import CapacityError

__all__ = ["keys", "values", "theory", "variants", "probe", "metrics", "CapacityError", "__version__"]
__version__ = "0.1.0"
