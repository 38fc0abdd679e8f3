"""A small progress bar: redrawn in place on a terminal, plain lines otherwise.

On a TTY the bar is one line rewritten at most ten times a second.  Anywhere else (a log
file, CI) it prints a plain line when the phase changes and at most every
``LINE_INTERVAL`` seconds, so logs stay readable.

The bar fills with flows; the time left is estimated from whole runs once one has ended
(when the caller says how many runs there are).  Runs of one experiment take about the
same wall time (the same arrival window or run length, then a drain), while their flow
counts differ by load or client count, so a flow-weighted estimate is off by a large
factor: a 4-client run counts 6 flows and a 32-client one 34, for the same 20 s.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

LINE_INTERVAL = 15.0
REDRAW_INTERVAL = 0.1
WIDTH = 28


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:d}:{s:02d}"


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool = True,
                 unit: str = "flows", runs: int = 0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = max(1, total)
        self.done = 0
        self.unit = unit
        self.runs = runs  # 0: unknown, the estimate follows the flows
        self.runs_done = 0
        self._now = clock
        self._last_run_end = 0.0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.phase = ""
        self.began = clock()
        self._last_draw = 0.0
        self._drawn = False

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self._draw(force=True)

    def advance(self, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        self._draw()

    def run_done(self) -> None:
        """One more run has ended (its flows were advanced already)."""
        if self.runs:
            self.runs_done = min(self.runs, self.runs_done + 1)
            self._last_run_end = self._now() - self.began

    def set_counts(self, done: int, runs_done: int) -> None:
        """Absolute counts, for a caller that sums them from elsewhere (a cluster's
        workers); a run that ended since the last call moves the time estimate."""
        if runs_done > self.runs_done:
            self._last_run_end = self._now() - self.began
        self.runs_done = min(self.runs, runs_done) if self.runs else runs_done
        self.done = min(self.total, max(0, done))
        self._draw()

    def remaining(self) -> float | None:
        """Estimated seconds left, or None before there is anything to go by."""
        elapsed = self._now() - self.began
        if self.runs and self.runs_done:
            per_run = self._last_run_end / self.runs_done
            left = per_run * (self.runs - self.runs_done) - (elapsed - self._last_run_end)
            return max(0.0, left)
        frac = self.done / self.total
        return elapsed * (1 - frac) / frac if frac > 0 else None

    def message(self, text: str) -> None:
        """A line above the bar (warnings, run results)."""
        if not self.enabled:
            return
        if self.tty and self._drawn:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text.rstrip() + "\n")
        self._drawn = False
        self._draw(force=True)

    def close(self) -> None:
        if not self.enabled:
            return
        self._draw(force=True)
        if self.tty:
            self.stream.write("\n")
        self.stream.flush()
        self.enabled = False

    def line(self) -> str:
        frac = self.done / self.total
        elapsed = self._now() - self.began
        left = self.remaining()
        eta = f" eta {_clock(left)}" if left is not None and frac < 1 else ""
        filled = int(WIDTH * frac)
        bar = "#" * filled + "." * (WIDTH - filled)
        runs = f" run {min(self.runs, self.runs_done + 1)}/{self.runs}" if self.runs else ""
        phase = f" | {self.phase}" if self.phase else ""
        return (f"[{bar}] {100 * frac:5.1f}% {self.done}/{self.total} {self.unit}{runs} "
                f"{_clock(elapsed)}{eta}{phase}")

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self._now()
        interval = REDRAW_INTERVAL if self.tty else LINE_INTERVAL
        if not force and now - self._last_draw < interval:
            return
        self._last_draw = now
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.line())
            self._drawn = True
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()
