"""feature-maps: kernelized linear attention, S = sum phi(k_i)^T v_i, for each feature map.

identity, elu+1, relu, DPFP (nu = 2), the 2nd-order Taylor map and Performer random features,
on the linear memory with gaussian keys. The features are L2-normalised (``normalize=true``),
so every map stores unit features and the signal coefficient is 1, as for unit keys; what
differs is how orthogonal the features can be. The coordinate ``feature_dim`` holds each map's
feature dimension: the onset of interference follows it and the features' orthogonality
(positive maps interfere before n = d).
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall

STUDY = Study(
    name="feature-maps",
    description="feature maps on linear memory: identity, elu1, relu, dpfp, taylor2, performer (with their feature dims)",
    grid=Grid(
        variant=("linear(normalize=true)",),
        keys=("gaussian",),
        feature=("identity", "elu1", "relu", "dpfp(nu=2)", "taylor2", "performer(m=256)"),
        d=(16, 32, 64),
        load=(1 / 16, 1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8, 16),
        seed=(0, 1, 2),
    ),
    task=Recall(values="gaussian"),
)
