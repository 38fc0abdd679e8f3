"""The run's identity and isolation: its prefix, its directory and its network namespace.

Prefix.  Every node and interface name of a run starts with ``d`` + 3 random characters +
``-`` (``d1x9-h1-eth0``), so ``ps``, logs and ``ip link`` tell concurrent runs apart and
teardown can recognise what is its own.  The prefix is reserved by creating the run's
directory ``/tmp/dcnlab-<tag>`` (mkdir is atomic).

Namespace.  The userspace datapath of Open vSwitch always creates a tap device called
``ovs-netdev``, so two private OVS instances in one namespace collide (see
docs/platform.md).  Each run therefore gets its own network namespace, held by a Mininet
node ``<prefix>ns``, in which ovs-vswitchd, ryu-manager and every switch shell live: the
switch-side veth ends, the bridges' tap devices and the controller's 127.0.0.1 are all
private to the run.  Namespaces are identified by the inode of ``/proc/PID/ns/net``,
which is how teardown finds every process still inside one.
"""

from __future__ import annotations

import os
import re
import secrets
import string
import subprocess
from pathlib import Path

from mininet.node import Node

from .errors import NetworkError

RUN_ROOT = Path("/tmp")


def root_links() -> list[str]:
    """Interface names in the root network namespace (the one this process lives in)."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                         check=False).stdout
    return [m.group(1).split("@")[0] for m in re.finditer(r"^\d+:\s+(\S+?):", out, re.MULTILINE)]


def reserve_prefix() -> tuple[str, Path]:
    """A fresh run prefix ("d" + 3 characters + "-") and the directory that reserves it.

    mkdir is atomic, so two processes never get the same prefix; prefixes still present
    in the root namespace's links (a crashed run) are skipped.  The randomness does not
    touch the ``random`` module, whose seed belongs to experiments.
    """
    alphabet = string.ascii_lowercase + string.digits
    existing = root_links()
    for _ in range(200):
        tag = "d" + "".join(secrets.choice(alphabet) for _ in range(3))
        if any(name.startswith(tag + "-") for name in existing):
            continue
        directory = RUN_ROOT / f"dcnlab-{tag}"
        try:
            directory.mkdir(mode=0o755)
        except FileExistsError:
            continue
        return tag + "-", directory
    raise NetworkError(f"could not reserve a run prefix under {RUN_ROOT}")


def start_namespace_holder(prefix: str) -> Node:
    """A Mininet node whose network namespace becomes the run namespace."""
    holder = Node(prefix + "ns", inNamespace=True)
    # IPv6 off before any interface exists there: no ND/MLD noise into the switches.
    holder.cmd("ip link set lo up; sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
               "net.ipv6.conf.default.disable_ipv6=1")
    return holder


def netns_inode(pid: int) -> int | None:
    """The network namespace ``pid`` lives in (None once the process is gone)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def pids_in_netns(inodes: set[int]) -> list[int]:
    """Every process inside one of the given network namespaces."""
    # Never the namespace this process lives in (the machine's own): a mistake there would
    # make a clean-up kill other people's processes.
    inodes = inodes - {netns_inode(os.getpid()), netns_inode(1)}
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and netns_inode(int(entry)) in inodes:
            pids.append(int(entry))
    return pids
