"""Standard output whose reader may go away (``capacity ... | head -1``): the command finishes, its status says so.

Every command treats a closed pipe alike: what it prints after the reader has gone is dropped (standard output
then points at the null device), the command does all it was asked (a run still saves its results and draws its
figures, ``store --prune`` still removes what it listed), and ``lacapacity.cli.main`` ends it with 141 (128 + SIGPIPE,
what a shell reports for a tool the closed pipe ended) instead of 0, without a message.

>>> with watched() as out:
...     print("seen")
seen
>>> out.cut
False
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO


class Watched:
    """``stream`` with its writes and flushes kept from failing on a closed pipe; ``cut`` says whether one did.
    Every other attribute is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.cut = False

    def _gone(self) -> None:
        """The reader went away: what follows goes to the null device, the text already buffered too."""
        self.cut = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # no descriptor of its own: nothing more reaches it
            pass

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._gone()
        try:
            return self.stream.write(text)
        except OSError:  # still refused: dropped
            return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._gone()
            try:
                self.stream.flush()
            except OSError:
                pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextmanager
def watched() -> Iterator[Watched]:
    """``sys.stdout`` behind ``Watched`` while the block runs (flushed and put back after it); yields the watcher."""
    stream = sys.stdout
    if stream is None:  # started with stdout closed: nothing to watch (the command says so itself)
        yield Watched(io.StringIO())
        return
    out = Watched(stream)
    sys.stdout = out  # a TextIO in all but name: every other attribute is the stream's
    try:
        yield out
    finally:
        out.flush()
        if sys.stdout is out:
            sys.stdout = stream
