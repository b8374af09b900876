"""Closed forms and bounds of docs/theory.md, as plain functions, one module per topic.

Scalar functions of (n, d, dv) broadcast like numpy and return a float for scalar input,
an ndarray otherwise. Functions of key and value matrices accept numpy arrays or torch
tensors with any leading batch dimensions (``K: [..., n, d]``, ``V: [..., n, dv]``) and
return the same kind.

>>> from capacity import theory
>>> theory.frame_bound(n=128, d=64)          # T5: mean error of any n > d unit keys
1.0
>>> theory.random_keys_error(n=65, d=64)      # T7: expected error of random unit keys
1.0
>>> round(theory.welch_bound(n=3, d=2), 4)    # T6: three unit vectors in the plane
0.5
"""

from capacity.theory.additive import (
    capacity_random_keys,
    capacity_tight_frame,
    crosstalk_error,
    decomposition,
    frame_bound,
    optimal_gain,
    optimal_gain_error,
    random_coherence_moments,
    random_keys_error,
    rank_bound,
    rank_bound_capacity,
    two_pair_readout,
    welch_bound,
)
from capacity.theory.argmax import (
    argmax_capacity,
    argmax_capacity_refined,
    argmax_recall,
    argmax_recall_refined,
    recall_at,
    recall_at_capacity_refined,
    recall_at_refined,
)
from capacity.theory.bill import bill, break_even_n
from capacity.theory.decay import decay_readout
from capacity.theory.delta import delta_rule_capacity, delta_rule_error
from capacity.theory.features import (
    dpfp_error,
    elu1_feature_error,
    feature_crosstalk,
    feature_map_error,
    performer_error,
    polynomial_kernel_error,
    relu_feature_error,
    sphere_moment,
)
from capacity.theory.forgetting import forgetting_error, forgetting_horizon, forgetting_signal, mamba2_step_moments
from capacity.theory.heads import heads_capacity, heads_effective_d, heads_random_keys_error, heads_state_numel
from capacity.theory.precision import (
    decay_rounding_floor,
    delta_rounding_floor,
    final_rounding_error,
    retained_fraction,
    rounding_crossover,
    rounding_variance,
    stall_fraction,
    stall_onset,
    step_rounding_error,
    unit_roundoff,
)
from capacity.theory.quantised import (
    quantised_crossover,
    quantised_final_error,
    quantised_rounding_variance,
    quantised_step_error,
    scale_moment,
)
from capacity.theory.softmax import exp_kernel_error, softmax_error, softmax_weight

__all__ = [
    "two_pair_readout",
    "decomposition",
    "crosstalk_error",
    "frame_bound",
    "welch_bound",
    "random_keys_error",
    "random_coherence_moments",
    "rank_bound",
    "optimal_gain",
    "optimal_gain_error",
    "argmax_recall",
    "argmax_capacity",
    "argmax_recall_refined",
    "argmax_capacity_refined",
    "decay_readout",
    "delta_rule_error",
    "capacity_random_keys",
    "capacity_tight_frame",
    "rank_bound_capacity",
    "delta_rule_capacity",
    "bill",
    "break_even_n",
    "forgetting_signal",
    "forgetting_error",
    "forgetting_horizon",
    "mamba2_step_moments",
    "sphere_moment",
    "polynomial_kernel_error",
    "relu_feature_error",
    "elu1_feature_error",
    "dpfp_error",
    "performer_error",
    "feature_crosstalk",
    "feature_map_error",
    "exp_kernel_error",
    "softmax_error",
    "softmax_weight",
    "recall_at",
    "recall_at_refined",
    "recall_at_capacity_refined",
    "unit_roundoff",
    "rounding_variance",
    "final_rounding_error",
    "step_rounding_error",
    "rounding_crossover",
    "stall_fraction",
    "retained_fraction",
    "stall_onset",
    "decay_rounding_floor",
    "delta_rounding_floor",
    "heads_random_keys_error",
    "heads_capacity",
    "heads_state_numel",
    "heads_effective_d",
    "scale_moment",
    "quantised_rounding_variance",
    "quantised_final_error",
    "quantised_step_error",
    "quantised_crossover",
]
