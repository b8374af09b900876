"""frontier: the recall-memory frontier without training: capacity against the numbers each memory keeps.

Additive, delta, gated delta, Longhorn and least-squares memories, the additive memory with DPFP features (which
change the state's size), and softmax's growing cache, on the same gaussian keys and values, d = 16, 32, 64. T8 is
the frontier of every linear read, n* = D / (1 - eps) for a D x dv state; the least-squares memory lies on it.
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall

STUDY = Study(
    name="frontier",
    description="the recall-memory frontier: capacity against state size for every memory, T8 as the frontier of linear reads",
    grid=Grid(
        variant=(
            "linear",
            "delta",
            "gated_delta(alpha=0.99)",
            "longhorn",
            "lsq",
            "linear(feature=dpfp, normalize=true, nu=2)",
            "softmax(scale=16.0)",
        ),
        keys=("gaussian",),
        d=(16, 32, 64),
        load=(1 / 8, 1 / 4, 1 / 2, 3 / 4, 1, 3 / 2, 2, 3, 4, 6, 8, 12, 16),
        seed=(0, 1, 2),
    ),
    task=Recall(values="gaussian"),
    figures={"frontier": {"published": True}},  # trained models' results in bytes beside the frontier
)
