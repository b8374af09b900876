"""orthogonality: retrieval error against how orthogonal the keys are, at one d.

Correlated keys (mean pairwise inner product rho) and anisotropic keys (effective rank r) at
d = 64 with the linear memory; the key statistics (coherence, effective rank, frame potential)
are stored beside the errors so error can be plotted against them.
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall

STUDY = Study(
    name="orthogonality",
    description="error against key coherence and effective rank at d = 64 (correlated and anisotropic keys)",
    grid=Grid(
        variant=("linear",),
        keys=tuple(f"correlated(rho={r})" for r in (0, 0.05, 0.1, 0.2, 0.4, 0.6))
        + tuple(f"anisotropic(rank={r})" for r in (4, 8, 16, 32, 64)),
        d=(64,),
        load=(1 / 8, 1 / 4, 1 / 2, 3 / 4, 1, 3 / 2, 2, 4, 8),
        seed=(0, 1, 2),
    ),
    task=Recall(values="gaussian", key_stats=True),
)
