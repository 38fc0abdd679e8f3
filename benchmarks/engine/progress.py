"""A small progress bar: redrawn in place on a terminal, plain lines otherwise.

On a TTY the bar is one line rewritten at most ten times a second.  Anywhere else (a log
file, CI) it prints a plain line when the phase changes and at most every
``LINE_INTERVAL`` seconds, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
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
                 unit: str = "flows") -> None:
        self.total = max(1, total)
        self.done = 0
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.phase = ""
        self.began = time.monotonic()
        self._last_draw = 0.0
        self._drawn = False

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self._draw(force=True)

    def advance(self, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        self._draw()

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
        elapsed = time.monotonic() - self.began
        eta = f" eta {_clock(elapsed * (1 - frac) / frac)}" if 0 < frac < 1 else ""
        filled = int(WIDTH * frac)
        bar = "#" * filled + "." * (WIDTH - filled)
        phase = f" | {self.phase}" if self.phase else ""
        return (f"[{bar}] {100 * frac:5.1f}% {self.done}/{self.total} {self.unit} "
                f"{_clock(elapsed)}{eta}{phase}")

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
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
