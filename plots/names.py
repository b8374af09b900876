"""Names as readers know them: variants, key families and feature maps, and axis labels with units.

Result Datasets label their coordinates with registry names and parameters (``delta(beta=0.5)``,
``correlated(rho=0.5)``, ``dpfp(nu=2)``); figures show them as the literature calls them.

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

from capacity import labels
from capacity.errors import CapacityError

__all__ = ["parse_label", "variant_name", "keys_name", "feature_name", "AXIS", "VARIANTS", "KEYS", "FEATURES", "ORDER"]

VARIANTS = {
    "linear": "linear attention (additive)",
    "decay": "decay (RetNet)",
    "gla": "GLA (gated linear attention)",
    "delta": "DeltaNet (delta)",
    "gated_delta": "Gated DeltaNet",
    "kda": "KDA (Kimi Delta Attention)",
    "softmax": "softmax attention (KV cache)",
}
KEYS = {
    "gaussian": "random (Gaussian)",
    "orthogonal": "tight frame (orthogonal)",
    "simplex": "simplex (equiangular)",
    "correlated": "correlated",
    "anisotropic": "anisotropic",
    "learned": "learned",
    "pretrained": "pretrained (MiniLM)",
}
FEATURES = {
    "identity": "identity",
    "elu": "elu + 1",
    "elu1": "elu + 1",
    "relu": "ReLU",
    "dpfp": "DPFP",
    "taylor": "Taylor (2nd order)",
    "taylor2": "Taylor (2nd order)",
    "performer": "Performer (random positive)",
    "favor": "Performer (random positive)",
}
# "a", "gate": old spellings of the gate alpha in older result files; softmax's "scale" shows as itself (docs/naming.md)
_PARAMS = {"beta": "β", "rho": "ρ", "nu": "ν", "alpha": "α", "a": "α", "gate": "α", "rank": "rank", "m": "m"}

# the order in which known labels appear in legends (and take palette colours), unknown ones after
ORDER = list(VARIANTS) + list(KEYS) + list(FEATURES)

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


def parse_label(label: str) -> tuple[str, dict]:
    """Split ``'name(k=v, k2=v2)'`` into ``('name', {'k': v, 'k2': v2})`` with ``capacity.labels`` (the one grammar
    of labels); a label it cannot read is a bare name."""
    try:
        return labels.parse(str(label))
    except CapacityError:
        return str(label), {}


def _with_params(base: str, params: dict[str, str], sep: str = ", ") -> str:
    if not params:
        return base
    shown = [f"{_PARAMS.get(k, k)} = {v}" if v else k for k, v in params.items() if k != "normalize"]
    return f"{base}{sep}{', '.join(shown)}" if shown else base


def variant_name(label: str) -> str:
    """Display name of a variant label (registry name or import path ``module:Class``, with optional parameters)."""
    base, params = parse_label(label)
    return _with_params(VARIANTS.get(base, base.rpartition(":")[2]), params)


def keys_name(label: str) -> str:
    """Display name of a key-family label."""
    base, params = parse_label(label)
    name = KEYS.get(base, base)
    if base in ("correlated", "anisotropic") and params:
        shown = ", ".join(f"{_PARAMS.get(k, k)} = {v}" if k != "rank" else f"rank {v}" for k, v in params.items())
        return f"{name} ({shown})"
    return _with_params(name, params)


def feature_name(label: str) -> str:
    """Display name of a feature-map label."""
    base, params = parse_label(label)
    name = FEATURES.get(base, base)
    if params:
        shown = ", ".join(f"{_PARAMS.get(k, k)} = {v}" for k, v in params.items())
        return f"{name} ({shown})"
    return name
