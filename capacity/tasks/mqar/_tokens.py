"""What the MQAR probe and zoology's generator share: embedding lookup, key-family parameters and the memory read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from lacapacity.errors import CapacityError
from lacapacity.variants import declares

if TYPE_CHECKING:  # pragma: no cover
    from lacapacity.variants import Variant


def _take(emb: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return torch.take_along_dim(emb, tokens.unsqueeze(-1), dim=1)  # [B, vocab, e] at [B, t] -> [B, t, e]


def _key_params(key_params: Mapping[str, Any] | None) -> dict[str, Any]:
    if key_params is None:
        return {}
    if not isinstance(key_params, Mapping):
        raise CapacityError(
            f"key_params must be a dict of the key family's parameters (e.g. {{'rho': 0.5}}), got {key_params!r}"
        )
    return dict(key_params)


def _check_variant(variant: object) -> str:
    for name in ("init_state", "write", "read"):
        if not callable(getattr(variant, name, None)):
            raise CapacityError(
                f"variant {variant!r} has no method {name}(); a variant needs init_state, write and read"
            )
    return declares.name(variant)  # a variant's name, or its class's


def _read(variant: Variant, vname: str, state: Any, q: torch.Tensor, dv: int) -> torch.Tensor:
    r = variant.read(state, q)
    if not isinstance(r, torch.Tensor) or tuple(r.shape) != (q.shape[0], q.shape[1], dv):
        got = tuple(r.shape) if isinstance(r, torch.Tensor) else type(r).__name__
        raise CapacityError(
            f"variant {vname!r}: read returned {got}, expected a tensor of shape [B, m, dv] = "
            f"{(q.shape[0], q.shape[1], dv)}"
        )
    return r.float()
