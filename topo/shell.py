"""Command lines for a Mininet node's shell that its pty can take.

Mininet talks to every node through a bash on a pseudo-terminal in canonical mode, whose
line buffer holds 4096 bytes: a longer command line is cut there, bash never sees its end
(nor the prompt sentinel Mininet waits for), and ``node.cmd()`` blocks forever.  Batched
set-up commands (one shell round trip per node instead of one per command) grow with the
topology -- a switch with 60 ports, a management network for 60 hosts -- so they are
split into as few lines as fit.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_LINE = 3800  # bytes per line, below the tty's 4096 with room for the " 2>&1\n" tail


def lines(parts: Sequence[str], sep: str, limit: int = MAX_LINE) -> list[str]:
    """``parts`` joined by ``sep`` into consecutive lines of at most ``limit`` bytes.

    A part longer than ``limit`` cannot be split and raises ValueError (it would hang)."""
    out: list[str] = []
    current = ""
    for part in parts:
        if len(part.encode()) > limit:
            raise ValueError(f"shell command of {len(part.encode())} bytes exceeds the "
                             f"{limit}-byte line a node's pty takes: {part[:80]}...")
        joined = f"{current}{sep}{part}" if current else part
        if len(joined.encode()) <= limit:
            current = joined
        else:
            out.append(current)
            current = part
    if current:
        out.append(current)
    return out
