"""``capacity check``: every closed form and bound of docs/theory.md against a measurement.

One module per topic holds its rows (``GROUPS``: the theorems and the function that appends their rows);
``MODULES`` lists them in the table's order.

Each check compares what the library computes (the probe, the registered variants, the kernels' oracle)
with an independent closed form or brute-force computation, and states its tolerance.

>>> from capacity.check import run_checks
>>> rows = run_checks(seed=0)
>>> all(r.passed for r in rows)
True
"""

from __future__ import annotations

from capacity import _validate
from capacity.check import additive, argmax, decay, delta, precision, softmax
from capacity.check._rows import Check
from capacity.errors import CapacityError

__all__ = ["Check", "run_checks", "format_table"]

MODULES = (additive, argmax, decay, delta, softmax, precision)
_GROUPS = [group for module in MODULES for group in module.GROUPS]


def run_checks(*, device=None, seed: int = 0, only=None) -> list[Check]:
    """Run the checks (all, or those of the theorems in ``only``, e.g. ``["T5", "T7"]``); returns the rows."""
    dev = _validate.device(device)
    known = [t for thms, _ in _GROUPS for t in thms]
    wanted = set(known) if only is None else set(only)
    if not wanted:
        raise CapacityError(f"no theorem selected; --only takes a comma-separated list of {', '.join(known)}")
    unknown = sorted(wanted - set(known))
    if unknown:
        raise CapacityError(f"unknown theorem(s) {', '.join(unknown)}; known: {', '.join(known)}")
    rows: list[Check] = []
    for thms, group in _GROUPS:
        if wanted & set(thms):
            group(dev, seed, rows)
    return [r for r in rows if r.theorem in wanted]


def format_table(rows: list[Check]) -> str:
    """The rows as a fixed-width text table, with a summary line."""
    head = f"{'':4} {'thm':4} {'check':66} {'measured':>12} {'rel':>3} {'expected':>12} {'tol':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        mark = "ok" if r.passed else "FAIL"
        lines.append(
            f"{mark:4} {r.theorem:4} {r.what[:66]:66} {r.measured:12.6g} {r.relation:>3} {r.expected:12.6g} {r.tolerance:9.2g}"
        )
    failed = sum(not r.passed for r in rows)
    lines.append(f"{len(rows) - failed} of {len(rows)} checks hold" + (f"; {failed} FAILED" if failed else ""))
    return "\n".join(lines)
