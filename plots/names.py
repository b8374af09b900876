"""Names as readers know them: labels of variants, key families and feature maps as display text, and axis labels.

Result Datasets label their coordinates with registry names and parameters (``delta(beta=0.5)``,
``correlated(rho=0.5)``, ``dpfp(nu=2)``). The display name of each name is kept on its registry entry
(``variants.register(..., display=...)``, ``keys.Family(..., display=...)``, the feature maps' registry, or a
plug-in class's ``display`` attribute); this module only asks the registries and writes the parameters with
their symbols. Legends follow the registries' order.

>>> variant_name("delta(beta=0.5)")
'DeltaNet (delta), β = 0.5'
>>> keys_name("orthogonal")
'tight frame (orthogonal)'
>>> keys_name("correlated(rho=0.5)")
'correlated (ρ = 0.5)'
>>> parse_label("anisotropic(rank=8)")
('anisotropic', {'rank': 8})
>>> variant_name("mymem:Longhorn(beta=1.0)")
'Longhorn, β = 1.0'
"""

from __future__ import annotations

from typing import Any

from lacapacity import variants
from lacapacity.base import labels
from lacapacity.errors import CapacityError
from lacapacity.inputs import features, keys

# parameters shown by their symbol; any other is shown by its name (docs/naming.md)
_SYMBOLS = {"beta": "β", "rho": "ρ", "nu": "ν", "alpha": "α"}

# axis labels, each with its unit in parentheses
AXIS = {
    "d": "key dimension d (dimensions)",
    "load": "load n / d (pairs per key dimension)",
    "n": "pairs written n (pairs)",
    "capacity": "capacity n* (pairs)",
    "mse": "mean error ‖r − v‖² (value units²)",
    "recall": "argmax recall (fraction)",
    "mean_sq_coherence": "mean squared coherence (k_i·k_j)² (dimensionless)",
    "effective_rank": "effective rank of the keys (dimensions)",
    "feature_dim": "feature dimension D (features)",
    "load_feature": "n / D (pairs per feature)",
    "state_numel": "numbers kept per head (floats)",
    "decode_seconds": "decode time per token (s)",
    "decode_flops": "decode cost per token, T13 (FLOPs)",
}


def parse_label(label: str) -> tuple[str, dict[str, Any]]:
    """Split ``'name(k=v, k2=v2)'`` into ``('name', {'k': v, 'k2': v2})`` with ``lacapacity.labels`` (the one grammar
    of labels); a label it cannot read is a bare name."""
    try:
        return labels.parse(str(label))
    except CapacityError:
        return str(label), {}


def order() -> list[str]:
    """The names legends put first, in this order: the registries' variants, key families, then feature maps."""
    return [*variants.display_names(), *keys.display_names(), *features.display_names()]


def _param(k: str, v: object) -> str:
    shown = labels.format("x", {"v": v})[4:-1]  # the label's own spelling of the value: true, 0, [0.9, 1.0]
    return f"{_SYMBOLS.get(k, k)} = {shown}"


def _with_params(base: str, params: dict[str, Any]) -> str:
    """Every parameter the label holds (labels hold those that differ from the defaults), whatever its value."""
    shown = [_param(k, v) for k, v in params.items()]
    return f"{base}, {', '.join(shown)}" if shown else base


def variant_name(label: str) -> str:
    """Display name of a variant label (registry name or import path ``module:Class``, with optional parameters)."""
    base, params = parse_label(label)
    return _with_params(variants.display_name(base), params)


def keys_name(label: str) -> str:
    """Display name of a key-family label."""
    base, params = parse_label(label)
    name = keys.display_name(base)
    if base in ("correlated", "anisotropic") and params:
        shown = ", ".join(_param(k, v) if k != "rank" else f"rank {v}" for k, v in params.items())
        return f"{name} ({shown})"
    return _with_params(name, params)


def feature_name(label: str) -> str:
    """Display name of a feature-map label."""
    base, params = parse_label(label)
    name = features.display_name(base)
    return f"{name} ({', '.join(_param(k, v) for k, v in params.items())})" if params else name
