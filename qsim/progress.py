"""A small progress bar for long work (calibration, evaluation, simulation).

Draws on stderr when it is a terminal (redrawn at most ~10 times a second);
otherwise prints a start line and a final line, so logs stay short.
"""
from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, TextIO, TypeVar

T = TypeVar("T")


class Progress:
    def __init__(self, label: str, total: int | None, stream: TextIO | None = None,
                 enabled: bool = True):
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.done = 0
        self.start = time.perf_counter()
        self._last_draw = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        if self.enabled and not self._tty:
            print(f"{label}: {total if total is not None else '?'} steps ...", file=self.stream, flush=True)

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if self.enabled and self._tty and (now - self._last_draw > 0.1 or self.done == self.total):
            self._last_draw = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = now - self.start
        if self.total:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
            eta = elapsed / frac - elapsed if frac > 0 else 0.0
            text = f"\r{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s eta {eta:4.1f}s"
        else:
            text = f"\r{self.label} {self.done} {elapsed:5.1f}s"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        if self._tty:
            self._draw(time.perf_counter())
            self.stream.write("\n")
        else:
            print(f"{self.label}: {self.done} done in {elapsed:.1f} s", file=self.stream)
        self.stream.flush()


def progress(items: Iterable[T], label: str, total: int | None = None,
             enabled: bool = True, stream: TextIO | None = None) -> Iterator[T]:
    """Iterates `items`, showing progress; total defaults to len(items) when it has one."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    bar = Progress(label, total, stream=stream, enabled=enabled)
    try:
        for item in items:
            yield item
            bar.advance()
    finally:
        bar.close()
