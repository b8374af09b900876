"""heads: the additive and delta memories in H heads, at a fixed key width and at a fixed state size (T20).

H = 1, 4, 16 heads of d/H key and value dimensions (each key slice normalised on its own) at d = dv = 64, 128, 256:
at a fixed d the state shrinks as d^2 / H and the additive memory's random-key error grows as (n - 1) H / d; the
diagonal d^2 / H = 4096 (64 x 64 in one head, 4 heads of 32 x 32, 16 heads of 16 x 16) compares layouts of the same
state size. Grouped value heads: ``--set value_heads=...`` (docs/precision.md#heads).
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall

STUDY = Study(
    name="heads",
    description="capacity against the number of heads H at a fixed d and at a fixed state size (T20)",
    grid=Grid(
        variant=("linear", "delta(beta=1)"),
        keys=("gaussian",),
        d=(64, 128, 256),
        load=(1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1, 2, 4),
        seed=(0, 1),
        heads=(1, 4, 16),
    ),
    task=Recall(values="gaussian"),
)
