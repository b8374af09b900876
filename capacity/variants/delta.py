"""Delta-rule memories: each write first reads what the state holds for k and corrects it towards v.

    delta         S = (I - b k^T k) S + b k^T v = S + b k^T (v - k S)   (DeltaNet)
    gated_delta   S = alpha (I - b k^T k) S + b k^T v                    (Gated DeltaNet)
    kda           S = (I - b k^T k) Diag(alpha) S + b k^T v             (Kimi Delta Attention)

With unit keys and b = 1 the last written key reads back exactly (T12), whatever the gate.
``normalize=True`` (the default, as in DeltaNet) L2-normalises keys (their features) and
queries; the rule is only stable for ||k||^2 b < 2. b (``beta``) in (0, 2); gates (``alpha``) in (0, 1]; each
either a constant or ``("uniform", low, high)`` drawn per token from ``seed``. The other parameters are those of
``Recurrent``.
"""

from __future__ import annotations

from lacapacity.variants.recurrent import Recurrent


class Delta(Recurrent):
    """The delta rule with beta in (0, 2), float32 state ``[batch, D, dv]``.

    >>> import torch
    >>> from lacapacity import variants, keys
    >>> mem = variants.get("delta", beta=1.0)
    >>> K = keys.make("gaussian", n=10, d=8, seed=0); V = torch.randn(1, 10, 4)
    >>> S = mem.write(mem.init_state(1, 8, 4), K, V)
    >>> bool(torch.allclose(mem.read(S, K[:, -1:]), V[:, -1:], atol=1e-5))   # T12
    True
    """

    name = "delta"
    mode = "delta"
    _family = "delta"
    beta: object = 1.0
    normalize: bool = True


class GatedDelta(Recurrent):
    """Gated DeltaNet: S = alpha (I - b k^T k) S + b k^T v, one gate alpha in (0, 1] per token, b in (0, 2)."""

    name = "gated_delta"
    mode = "gated_delta"
    _family = "gated_delta"
    alpha: object = 0.95
    beta: object = 1.0
    normalize: bool = True


class KDA(Recurrent):
    """Kimi Delta Attention: S = (I - b k^T k) Diag(alpha) S + b k^T v, alpha in (0, 1]^D, b in (0, 2)."""

    name = "kda"
    mode = "kda"
    gate_per_channel = True
    alpha: object = 0.95
    beta: object = 1.0
    normalize: bool = True
