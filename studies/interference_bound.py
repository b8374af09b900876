"""interference-bound: measured crosstalk of the additive state over the bounds it cannot beat.

The linear memory with every key family that exists past n = d (simplex keys stop at
n = d + 1, so they are left out), including learned keys, next to T5 (frame potential), T6
(Welch, against the measured max coherence) and T8 (rank). Stores the key statistics of
``lacapacity.keys.describe`` at every point.
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall

STUDY = Study(
    name="interference-bound",
    description="measured crosstalk of linear memory over the T5/T6/T8 bounds for every key family, learned keys included",
    grid=Grid(
        variant=("linear",),
        keys=("gaussian", "orthogonal", "correlated(rho=0.2)", "anisotropic(rank=8)", "learned"),
        d=(32, 64),
        load=(1 / 4, 1 / 2, 3 / 4, 1, 3 / 2, 2, 3, 4, 6, 8),
        seed=(0, 1, 2),
    ),
    task=Recall(values="gaussian", key_stats=True),
)
