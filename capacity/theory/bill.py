"""T13: the bill, softmax's cache against linear attention's state."""

from __future__ import annotations

from lacapacity.errors import CapacityError
from lacapacity.theory._common import Floats, Numbers, _counts, _out

__all__ = ["bill", "break_even_n"]


def bill(n: Numbers, d: Numbers, dv: Numbers | None = None) -> dict[str, Floats]:
    """T13: what each memory keeps and spends per head, as a dict of arrays over broadcast (n, d, dv).

    - ``softmax_cache``: n (d + dv) numbers (keys and values; 2 n d when dv = d);
    - ``linear_state``: d dv numbers, whatever n;
    - ``softmax_decode_flops``: 2 n (d + dv) per new token (scores, then the weighted sum; about 4 n d);
    - ``linear_decode_flops``: 4 d dv per new token (write k^T v, read q S).
    """
    dv = d if dv is None else dv
    n, d, dv = _counts(n=n, d=d, dv=dv)
    return {
        "softmax_cache": _out(n * (d + dv)),
        "linear_state": _out(d * dv + 0 * n),
        "softmax_decode_flops": _out(2.0 * n * (d + dv)),
        "linear_decode_flops": _out(4.0 * d * dv + 0 * n),
    }


def break_even_n(d: Numbers, dv: Numbers | None = None, *, measure: str = "cache") -> Floats:
    """T13: the n at which softmax's cost equals linear attention's.

    ``measure="cache"``: n (d + dv) = d dv, so n = d dv / (d + dv) (d/2 when dv = d).
    ``measure="flops"``: 2 n (d + dv) = 4 d dv, so n = 2 d dv / (d + dv) (d when dv = d).
    """
    dv = d if dv is None else dv
    d, dv = _counts(d=d, dv=dv)
    if measure == "cache":
        return _out(d * dv / (d + dv))
    if measure == "flops":
        return _out(2.0 * d * dv / (d + dv))
    raise CapacityError(f"measure must be 'cache' or 'flops', got {measure!r}")
