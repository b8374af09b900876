"""learned-keys: keys optimised through the memory's own write and read, against random and tight-frame keys.

How close gradient-descent keys get to the frame bound (T5, linear) and the rank bound (T8,
delta), at d = 32 with gaussian unit values.
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall

STUDY = Study(
    name="learned-keys",
    description="learned keys vs gaussian and orthogonal keys for linear and delta memories, against T5 and T8",
    grid=Grid(
        variant=("linear", "delta"),
        keys=("gaussian", "orthogonal", "learned"),
        d=(32,),
        load=(1 / 2, 1, 3 / 2, 2, 3, 4, 8),
        seed=(0, 1),
    ),
    task=Recall(values="gaussian", key_stats=True),
)
