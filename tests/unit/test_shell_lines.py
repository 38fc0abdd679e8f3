"""Batched node set-up commands stay within a pty line (topo/shell.py).

A Mininet node's shell reads a pseudo-terminal in canonical mode: a line over 4096 bytes
is cut, and ``node.cmd()`` then waits forever for a prompt that never comes.  This hung
``dumbbell:32`` (35 switch ports configured in one line) and the management network of
``dumbbell:16``.
"""

from __future__ import annotations

import pytest

from dcnlab.topo import ext_switch, management
from dcnlab.topo.shell import MAX_LINE, lines


class _Node:
    """Records command lines; answers like a shell whose commands all succeeded."""

    def __init__(self, name: str = "n", pid: int = 1) -> None:
        self.name, self.pid, self.sent = name, pid, []

    def cmd(self, line: str) -> str:
        self.sent.append(line)
        return ""


def test_lines_keep_every_part_in_order_within_the_limit() -> None:
    parts = [f"ip link set port{i} up" for i in range(500)]
    out = lines(parts, " && ", limit=200)
    assert len(out) > 1 and all(len(line) <= 200 for line in out)
    assert " && ".join(out) == " && ".join(parts)
    assert lines([], "; ") == [] and lines(["a", "b"], "; ") == ["a; b"]
    with pytest.raises(ValueError, match="exceeds"):
        lines(["x" * 300], "; ", limit=200)


def test_management_for_sixty_seven_hosts_fits_the_pty() -> None:
    holder = _Node("ns")
    hosts = [(f"h{i}", _Node(f"h{i}", 1000 + i)) for i in range(1, 68)]
    management.add_management(holder, "dabc", hosts)
    assert len(holder.sent) > 1
    assert all(len(line.encode()) + 1 <= 4096 for line in holder.sent)
    assert max(len(line.encode()) for line in holder.sent) <= MAX_LINE + len(" 2>&1")
    script = " ".join(holder.sent)
    assert all(f"dabcm{i} " in script for i in range(1, 68))  # every veth is created


def test_switch_port_commands_are_split_too() -> None:
    node = _Node("s1")
    cmds = [f"ip link set dabcs1-eth{i} up && ethtool -K dabcs1-eth{i} tx off tso off"
            for i in range(1, 70)]
    ext_switch.ExtSwitch._run(node, cmds, "switch ports")
    assert len(node.sent) > 1 and all(len(line) <= MAX_LINE for line in node.sent)
    assert all(f"dabcs1-eth{i} up" in "".join(node.sent) for i in range(1, 70))
