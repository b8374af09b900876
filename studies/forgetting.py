"""forgetting: recall, error and signal against the age of a pair, for the four rules of T21-T24 (d = 64).

1024 random unit keys (load 16) and values written into each memory, every stored pair read back once and its
metrics averaged per geometric age bin (``Recall(age_bins=True)``). The rules at settings where their horizons differ
and lie inside the 1024 writes: the delta rule at beta = 0.5 and 1 (horizons d/beta = 128 and 64), decay 0.99
(100), gated delta 0.99 with beta = 0.5 (56), mamba2 with A = 1, dt = 0.01 (62). (The additive memory does not
forget: its signal stays 1 while its error grows as (n - 1)/d, T7, about 16 here; ``--set variant=...,linear``
adds it.)
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall

STUDY = Study(
    name="forgetting",
    description="signal, error and recall against the age of a pair: delta, decay, gated_delta, mamba2 (T21-T24)",
    grid=Grid(
        variant=(
            "decay(alpha=0.99)",
            "delta(beta=1.0)",
            "delta(beta=0.5)",
            "gated_delta(alpha=0.99, beta=0.5)",
            "mamba2(A=1.0, dt=0.01, w_std=1.0)",
        ),
        keys=("gaussian",),
        d=(64,),
        load=(16,),
        seed=(0, 1, 2, 3),
    ),
    task=Recall(age_bins=True),
)
