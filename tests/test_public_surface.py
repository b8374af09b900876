"""The public surface, pinned: a change to what users import fails here first (add it to CHANGELOG.md and here).

Each public module's ``__all__`` is listed below as it stands; a name added, removed or renamed is an API change,
made on purpose or not at all. Engine internals (plan, store, jobs, provenance, assembly) stay out of it.
"""

import importlib
import pkgutil

import pytest

SURFACE = {
    "capacity": [
        "keys",
        "values",
        "theory",
        "variants",
        "probe",
        "metrics",
        "check_variant",
        "CapacityError",
        "__version__",
    ],
    "capacity.sweep": [
        "Grid",
        "Spec",
        "Study",
        "Recall",
        "Mqar",
        "Needle",
        "Bill",
        "run",
        "compare",
        "RunResult",
        "EXECUTORS",
    ],
    "capacity.tasks": [
        "TASKS",
        "get",
        "available",
        "Task",
        "Config",
        "Schema",
        "Variable",
        "Measured",
        "Recall",
        "Mqar",
        "Needle",
        "Bill",
        "Trained",
    ],
    "capacity.variants": [
        "Variant",
        "Declares",
        "get",
        "resolve",
        "build",
        "label",
        "params",
        "is_variant",
        "register",
        "available",
        "display_name",
        "display_names",
        "from_fla",
    ],
    "capacity.inputs.keys": ["make", "describe", "available", "family", "Family", "display_name", "display_names"],
    "capacity.inputs.values": ["make", "available"],
    "capacity.inputs.features": ["FeatureMap", "get", "available", "display_name", "display_names", "PARAMS"],
    "capacity.tasks.probe": [
        "recall",
        "measure",
        "Curves",
        "default_checkpoints",
        "age_edges",
        "peak_bytes",
        "METRICS",
        "PER_QUERY",
        "PER_AGE",
        "RECENT",
        "BLOCK",
    ],
    "capacity.tasks.metrics": ["capacity", "HIGHER_IS_BETTER", "LOWER_IS_BETTER"],
    "capacity.check": ["Check", "run_checks", "format_table"],
    "capacity.check.conformance": ["check_variant", "Report", "Result"],
    "capacity.kernels": ["update", "read", "available", "MAX_DIM"],
    "capacity.plots": [
        "render",
        "render_path",
        "figures",
        "available",
        "FIGURES",
        "choose",
        "capacity_vs_d",
        "error_vs_load",
        "orthogonality",
        "variant_curves",
        "feature_maps",
        "frontier",
        "precision_curves",
        "heads_capacity",
        "bill",
        "closed_form",
        "measure_closed_form",
        "forgetting",
        "needle_figure",
        "needle_depth",
    ],
    "capacity.plots.layout": ["select", "relabel"],
    "capacity.plots.tables": ["headline", "markdown", "write"],
    "capacity.studies": ["available", "get"],
    "capacity.theory": [
        "two_pair_readout",
        "decomposition",
        "crosstalk_error",
        "frame_bound",
        "welch_bound",
        "tight_frame_coherence",
        "random_keys_error",
        "random_coherence_moments",
        "rank_bound",
        "optimal_gain",
        "optimal_gain_error",
        "capacity_random_keys",
        "capacity_tight_frame",
        "rank_bound_capacity",
        "argmax_recall",
        "argmax_capacity",
        "argmax_recall_refined",
        "argmax_capacity_refined",
        "recall_at",
        "recall_at_refined",
        "recall_at_capacity_refined",
        "vocab_argmax_recall",
        "bill",
        "break_even_n",
        "decay_readout",
        "delta_rule_error",
        "delta_rule_capacity",
        "sphere_moment",
        "polynomial_kernel_error",
        "relu_feature_error",
        "elu1_feature_error",
        "dpfp_error",
        "performer_error",
        "feature_crosstalk",
        "feature_map_error",
        "forgetting_signal",
        "forgetting_error",
        "forgetting_horizon",
        "forgetting_hypothesis",
        "mamba2_step_moments",
        "heads_random_keys_error",
        "heads_capacity",
        "heads_state_numel",
        "heads_effective_d",
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
        "exp_kernel_error",
        "softmax_error",
        "softmax_weight",
        "scale_moment",
        "quantised_rounding_variance",
        "quantised_final_error",
        "quantised_step_error",
        "quantised_crossover",
        "log_linear_error",
        "log_linear_level_error",
    ],
}


@pytest.mark.parametrize("module", sorted(SURFACE))
def test_the_public_surface_is_pinned(module):
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(SURFACE[module]), f"{module}.__all__ changed"
    assert len(set(mod.__all__)) == len(mod.__all__), f"{module}.__all__ lists a name twice"
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert not missing, f"{module}.__all__ names what it does not have: {missing}"


def _theory_topics() -> list[str]:
    from capacity import theory

    return [f"capacity.theory.{m.name}" for m in pkgutil.iter_modules(theory.__path__) if not m.name.startswith("_")]


def test_no_module_exports_beyond_the_pinned_surface():
    """``__all__`` is the pinned surface and no wider: a module outside SURFACE that sets ``__all__`` exports names
    nobody pinned (theory's topic modules aside: their lists are theory's, listed once there)."""
    from test_doctests import MODULES, SKIP

    exporting = [m for m in [*MODULES, *SKIP] if hasattr(importlib.import_module(m), "__all__")]
    assert sorted(set(exporting) - set(SURFACE) - set(_theory_topics())) == []


def test_theory_lists_each_name_once_from_its_topic_modules():
    """theory's names are its topic modules' __all__, not a second hand-written list."""
    from capacity import theory

    listed = [name for m in _theory_topics() for name in importlib.import_module(m).__all__]
    assert sorted(listed) == sorted(theory.__all__)


def test_the_public_names_of_capacity_point_into_the_layers():
    import capacity

    for name in ("keys", "values", "probe", "metrics", "variants", "theory", "sweep"):
        module = getattr(capacity, name)
        assert module.__name__.startswith("capacity."), name
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        capacity.nope  # noqa: B018
