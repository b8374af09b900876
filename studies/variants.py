"""variants: every built-in memory (docs/theory.md) on the same keys and values.

Additive, decaying (RetNet), gated (GLA), delta (DeltaNet), gated delta, Kimi delta and
softmax attention (the exact-retrieval baseline) with gaussian keys at d = 32 and 64.
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall

STUDY = Study(
    name="variants",
    description="the built-in variants side by side: linear, decay, gla, delta, gated_delta, kda, softmax",
    grid=Grid(
        variant=(
            "linear",
            "decay(alpha=0.99)",
            "gla(alpha=0.99)",
            "delta(beta=1)",
            "delta(beta=0.5)",
            "gated_delta(alpha=0.99, beta=1)",
            "kda(alpha=0.99, beta=1)",
            "softmax(scale=4)",
            "softmax(scale=16)",
        ),
        keys=("gaussian",),
        d=(32, 64),
        load=(1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8, 16),
        seed=(0, 1, 2),
    ),
    task=Recall(values="gaussian"),
)
