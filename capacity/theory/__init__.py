"""Closed forms and bounds of docs/theory.md, as plain functions, one module per topic.

Scalar functions of (n, d, dv) broadcast like numpy and return a float for scalar input,
an ndarray otherwise. Functions of key and value matrices accept numpy arrays or torch
tensors with any leading batch dimensions (``K: [..., n, d]``, ``V: [..., n, dv]``) and
return the same kind.

>>> from lacapacity import theory
>>> theory.frame_bound(n=128, d=64)          # T5: mean error of any n > d unit keys
1.0
>>> theory.random_keys_error(n=65, d=64)      # T7: expected error of random unit keys
1.0
>>> round(theory.welch_bound(n=3, d=2), 4)    # T6: three unit vectors in the plane
0.5
"""

from lacapacity.theory import (
    additive,
    argmax,
    decay,
    delta,
    features,
    forgetting,
    heads,
    log_linear,
    precision,
    quantised,
    softmax,
)
from lacapacity.theory import bill as _bill
from lacapacity.theory.additive import *  # noqa: F403
from lacapacity.theory.argmax import *  # noqa: F403
from lacapacity.theory.bill import *  # noqa: F403
from lacapacity.theory.decay import *  # noqa: F403
from lacapacity.theory.delta import *  # noqa: F403
from lacapacity.theory.features import *  # noqa: F403
from lacapacity.theory.forgetting import *  # noqa: F403
from lacapacity.theory.heads import *  # noqa: F403
from lacapacity.theory.log_linear import *  # noqa: F403
from lacapacity.theory.precision import *  # noqa: F403
from lacapacity.theory.quantised import *  # noqa: F403
from lacapacity.theory.softmax import *  # noqa: F403

# the names of every topic module, listed once: in that module's __all__
__all__ = [
    name
    for module in (
        additive,
        argmax,
        _bill,
        decay,
        delta,
        forgetting,
        features,
        softmax,
        precision,
        heads,
        quantised,
        log_linear,
    )
    for name in module.__all__
]
