"""log-linear: log-linear attention's recall against n at and between powers of two, beside its base memories at the
same state bytes.

At n = 2^m every written pair lies in one Fenwick bucket, so log-linear attention reads lam^m times its base memory's
read: the argmax recall is the base's exactly there, and differs only between powers of two. The loads put n at every
power of two from 16 to 256 and at the points between. The log-linear memories run at d = 32 (dv = 32), where their
state grows as floor(log2 n) + 1 levels of 32 x 32 numbers (5 to 9 levels here); linear attention and the gated
delta rule run at d = 32 too and at d = 160, 192, 224, 256 and 288, the key dimensions whose d x 32 state holds as
many numbers as the log-linear state at each n (d = 32 (floor(log2 n) + 1)). The figure (``plots.log_linear``) draws
each log-linear memory beside its base at the same bytes and at d = 32 (docs/memories.md).
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall

STUDY = Study(
    name="log-linear",
    description="log-linear attention at and between powers of two, beside linear and gated delta at the same state bytes",
    grid=Grid(
        variant=(
            "linear",
            "log_linear(lam=0.5)",
            "gated_delta(alpha=0.99, beta=1)",
            "log_linear(base=gated_delta, alpha=0.99, lam=0.5)",
        ),
        keys=("gaussian",),
        d=(32, 160, 192, 224, 256, 288),
        dv=(32,),
        n=(16, 24, 32, 40, 48, 64, 80, 96, 128, 192, 256),
        seed=(0, 1, 2),
    ),
    task=Recall(values="gaussian"),
)
