"""``capacity check``: every closed form and bound of docs/theory.md against a measurement.

One module per topic holds its rows (``GROUPS``: the theorems and the function that appends their rows);
``MODULES`` lists them in the table's order.

Each check compares what the library computes (the probe, the registered variants, the kernels' oracle,
``keys.describe``, ``metrics.capacity``) with an independent closed form or brute-force computation, and
states its tolerance: 3 standard errors of the estimate, an exact identity's rounding, or, where a row
checks a bound that holds with a margin, that margin in its text. ``Check.function`` names what each row
checks (a function of ``lacapacity.theory``, or package code); a closed form 3% off fails at least one of
its rows (``scripts/perturb_check.py`` shows it for every function of ``lacapacity.theory.__all__``).

Measurements are cached per run (``run_checks(cache=...)``, see ``_rows.measured``), so that a rerun with
a closed form patched re-evaluates only the expected values.

>>> from lacapacity.check import run_checks
>>> rows = run_checks(seed=0, only=["T2", "T4"])
>>> [(r.theorem, r.function, r.passed) for r in rows]  # doctest: +NORMALIZE_WHITESPACE
[('T2', 'two_pair_readout', True), ('T4', 'crosstalk_error', True), ('T4', 'crosstalk_from_coherence', True),
 ('T4', 'crosstalk_from_effective_rank', True)]
"""

from __future__ import annotations

from collections.abc import Iterable

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.check import (
    additive,
    argmax,
    decay,
    delta,
    features,
    forgetting,
    log_linear,
    precision,
    quantised,
    softmax,
)
from lacapacity.check._rows import _CACHE, Check
from lacapacity.errors import CapacityError

__all__ = ["Check", "run_checks", "format_table"]

MODULES = (additive, argmax, decay, delta, softmax, precision, forgetting, features, quantised, log_linear)
_GROUPS = [group for module in MODULES for group in module.GROUPS]


def run_checks(
    *,
    device: Device = None,
    seed: int = 0,
    only: Iterable[str] | None = None,
    cache: dict[tuple[object, ...], object] | None = None,
) -> list[Check]:
    """Run the checks (all, or those of the theorems in ``only``, e.g. ``["T5", "T7"]``); returns the rows.

    ``cache``: a dict that keeps the rows' measurements of package code between runs (keyed by group,
    device, seed and the measurement's own inputs); a run with the same dict reuses them and recomputes
    only the expected values. Default: measure afresh.
    """
    dev = _validate.device(device)
    known = [t for thms, _ in _GROUPS for t in thms]
    wanted = set(known) if only is None else set(only)
    if not wanted:
        raise CapacityError(f"no theorem selected; --only takes a comma-separated list of {', '.join(known)}")
    unknown = sorted(wanted - set(known))
    if unknown:
        raise CapacityError(f"unknown theorem(s) {', '.join(unknown)}; known: {', '.join(known)}")
    if cache is not None and not isinstance(cache, dict):
        raise CapacityError(f"cache must be a dict (or None), got {type(cache).__name__}")
    rows: list[Check] = []
    for thms, group in _GROUPS:
        if wanted & set(thms):
            token = _CACHE.set(
                None if cache is None else (cache, (group.__module__, group.__qualname__, str(dev), seed))
            )
            try:
                group(dev, seed, rows)
            finally:
                _CACHE.reset(token)
    return [r for r in rows if r.theorem in wanted]


def format_table(rows: list[Check]) -> str:
    """The rows as a fixed-width text table, with a summary line."""
    width = max([len(r.what) for r in rows] + [20])
    head = f"{'':4} {'thm':4} {'check':{width}} {'function':23} {'measured':>12} {'rel':>3} {'expected':>12} {'tol':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        mark = "ok" if r.passed else "FAIL"
        lines.append(
            f"{mark:4} {r.theorem:4} {r.what:{width}} {r.function:23} {r.measured:12.6g} {r.relation:>3} {r.expected:12.6g} {r.tolerance:9.2g}"
        )
    failed = sum(not r.passed for r in rows)
    lines.append(f"{len(rows) - failed} of {len(rows)} checks hold" + (f"; {failed} FAILED" if failed else ""))
    return "\n".join(lines)
