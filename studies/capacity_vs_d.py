"""capacity-vs-d (the default study): how many pairs a d x d state holds, against d.

Linear and delta memories, random (gaussian) and tight-frame (orthogonal) keys, gaussian unit
values with dv = d, d from 16 to 256 and n/d from 1/8 to 16. Read the capacity at a mean-error
threshold (T7: n* = 1 + eps d for random keys; T5: d (1 + eps) for tight frames) or at an argmax
recall threshold (T10) with ``lacapacity.metrics.capacity(ds, metric=..., threshold=...)``.
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall

LOADS = (1 / 8, 3 / 16, 1 / 4, 3 / 8, 1 / 2, 3 / 4, 1, 3 / 2, 2, 3, 4, 6, 8, 12, 16)

STUDY = Study(
    name="capacity-vs-d",
    description="capacity against d: linear and delta, gaussian and orthogonal keys, d 16..256, n/d 1/8..16 (MSE and argmax)",
    grid=Grid(
        variant=("linear", "delta"),
        keys=("gaussian", "orthogonal"),
        d=(16, 32, 64, 128, 256),
        load=LOADS,
        seed=(0, 1, 2, 3),
    ),
    task=Recall(values="gaussian"),
)
