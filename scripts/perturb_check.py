"""Perturb each closed form of ``lacapacity.theory`` in turn and show that ``capacity check`` fails.

For every name in ``lacapacity.theory.__all__`` (so a closed form merged later is covered without a list to
edit), the function is replaced by one that returns ``factor`` times its value (each entry of a tuple or
dict scaled; arrays and tensors scaled), and the rows that name it (``Check.function``) are run again.
The function is caught when at least one of those rows fails. A row of relation "=" or "in" that names the
function and still passes (with a non-zero expected value) is reported as loose: equalities must be tight
to the factor. A function that no row names is reported as uncaught.

The measurements of package code are made once (``run_checks(cache=...)``): under each patch only the
expected values are computed again, plus the measurements that take a closed form's value as input.

    .venv/bin/python scripts/perturb_check.py              # factor 1.03, seed 0; exit 1 if one is missed
    .venv/bin/python scripts/perturb_check.py --factor 0.97

tests/check/test_check_cli.py runs it (``test_every_closed_form_3_percent_off_fails_a_row``).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch


def scaled(x, factor: float):
    """``x`` times ``factor``: numbers, numpy arrays and tensors; tuples, lists and dicts entry by entry."""
    if isinstance(x, dict):
        return {k: scaled(v, factor) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(scaled(v, factor) for v in x)
    if isinstance(x, (bool, np.bool_)) or x is None:
        raise TypeError(f"cannot scale a {type(x).__name__}")
    if isinstance(x, (torch.Tensor, np.ndarray, float, int, np.floating, np.integer)):
        return x * factor
    raise TypeError(f"cannot scale a {type(x).__name__}")


def perturbed(fn, factor: float):
    """``fn`` with its value scaled by ``factor``."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return scaled(fn(*args, **kwargs), factor)

    return wrapper


@dataclass
class Result:
    """What a perturbation of one closed form did to the rows that name it."""

    name: str
    rows: list = field(default_factory=list)  # the baseline rows that name the function
    failed: list = field(default_factory=list)  # their ``what`` where they fail under the perturbation
    loose: list = field(default_factory=list)  # "=" / "in" rows naming it, expected != 0, that still pass
    error: str = ""  # an exception the patched run raised
    seconds: float = 0.0

    @property
    def caught(self) -> bool:
        return bool(self.failed) and not self.error


def perturb(*, factor: float = 1.03, seed: int = 0, device=None, cache: dict | None = None, baseline=None, names=None):
    """One ``Result`` per function of ``lacapacity.theory.__all__`` (or of ``names``), each patched to ``factor``x.

    ``baseline``: the unpatched rows of ``run_checks(seed=seed, cache=cache)`` if already computed; ``cache``:
    the dict that run kept its measurements in (a fresh one by default).
    """
    from lacapacity import check, theory

    cache = {} if cache is None else cache
    if baseline is None:
        baseline = check.run_checks(seed=seed, device=device, cache=cache)
    bad = [r.what for r in baseline if not r.passed]
    if bad:
        raise RuntimeError(f"capacity check fails before any perturbation: {bad}")
    results = []
    for name in theory.__all__ if names is None else names:
        res = Result(name, rows=[r for r in baseline if r.function == name])
        if res.rows:
            true = getattr(theory, name)
            setattr(theory, name, perturbed(true, factor))
            start = time.perf_counter()
            try:
                rows = check.run_checks(
                    seed=seed, device=device, cache=cache, only=sorted({r.theorem for r in res.rows})
                )
            except Exception as exc:  # a check that crashes under the patch has not caught it cleanly
                res.error = f"{type(exc).__name__}: {exc}"
                rows = []
            finally:
                setattr(theory, name, true)
            res.seconds = time.perf_counter() - start
            mine = [r for r in rows if r.function == name]
            res.failed = [r.what for r in mine if not r.passed]
            res.loose = [r.what for r in mine if r.passed and r.relation in ("=", "in") and r.expected != 0]
        results.append(res)
    return results


def report(results, factor: float = 1.03) -> str:
    """A table: each function, its rows, how many fail under the perturbation, and what was missed."""
    lines = [f"{'function':26} {'rows':>4} {'failed':>6} {'s':>6}  verdict"]
    for r in results:
        if r.error:
            verdict = f"ERROR {r.error}"
        elif not r.rows:
            verdict = "NOT CAUGHT: no check row names it"
        elif not r.failed:
            verdict = "NOT CAUGHT: every row naming it still passes"
        else:
            verdict = "caught" + (f"; loose rows: {r.loose}" if r.loose else "")
        lines.append(f"{r.name:26} {len(r.rows):4d} {len(r.failed):6d} {r.seconds:6.2f}  {verdict}")
    caught = sum(r.caught for r in results)
    lines.append(f"{caught} of {len(results)} closed forms, each {factor:g}x, fail `capacity check`")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--factor", type=float, default=1.03)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    results = perturb(factor=args.factor, seed=args.seed, device=args.device)
    print(report(results, args.factor))
    return 0 if all(r.caught and not r.loose for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
