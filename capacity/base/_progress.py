"""What a long run shows while it works: a progress bar (tqdm) or, with ``verbose``, one log line per finished unit."""

from __future__ import annotations

import sys
import time


def log(msg: str) -> None:
    """One line on stderr, prefixed ``capacity:``."""
    print(f"capacity: {msg}", file=sys.stderr, flush=True)


class Progress:
    """Points done out of ``total`` for the run ``name``: a bar, log lines (``verbose``) or nothing (``show`` False)."""

    def __init__(self, name: str, total: int, done: int, *, show: bool, verbose: bool, start: str):
        self.total, self.done, self.show, self.bar, self.t0 = total, done, show, None, time.perf_counter()
        if show and not verbose:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=done, unit="pt", desc=name, file=sys.stderr, dynamic_ncols=True)
        elif show:
            log(start)

    def advance(self, count: int, what: str) -> None:
        """``count`` more points are done (``what`` finished)."""
        self.done += count
        if self.bar is not None:
            self.bar.update(count)
        elif self.show:
            log(f"{self.done}/{self.total} points; finished {what}; {time.perf_counter() - self.t0:.1f} s")

    def close(self, interrupted: str | None = None) -> None:
        """Close the bar; ``interrupted``: say, on its own line, what is kept."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if interrupted and self.show:
            log(interrupted)
