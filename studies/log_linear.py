"""log-linear: log-linear attention's recall against n at and between powers of two, next to its base memories.

At n = 2^m every written pair lies in one Fenwick bucket, so log-linear attention reads lam^m times its base memory's
read: the argmax recall is the base's exactly there, and differs only between powers of two. The loads put n at every
power of two from 16 to 256 and at the points between (d = 32), so that a figure shows both; the state of log_linear
grows as floor(log2 n) + 1 levels of d dv numbers, linear's and gated_delta's stay d dv (docs/memories.md).
"""

from capacity.sweep.config import Grid, Study
from capacity.tasks import Recall

STUDY = Study(
    name="log-linear",
    description="log-linear attention's recall at and between powers of two, next to linear and gated delta",
    grid=Grid(
        variant=(
            "linear",
            "log_linear(lam=0.5)",
            "gated_delta(alpha=0.99, beta=1)",
            "log_linear(base=gated_delta, alpha=0.99, lam=0.5)",
        ),
        keys=("gaussian",),
        d=(32,),
        load=(1 / 2, 3 / 4, 1, 5 / 4, 3 / 2, 7 / 4, 2, 5 / 2, 3, 7 / 2, 4, 5, 6, 7, 8),
        seed=(0, 1, 2),
    ),
    task=Recall(values="gaussian"),
)
