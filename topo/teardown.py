"""Teardown: stop and remove what one run created, and nothing else.

A shared machine rules out Mininet's machine-wide clean-up (``mn -c``: it kills every
controller and deletes every OVS bridge) and any kill by name.  What a run removes is
what it can prove is its own:

- the Mininet nodes it built, found through Mininet's lists and, for nodes whose
  construction was interrupted, by the run prefix in Mininet's per-process node table;
- processes inside the run's network namespaces (known by namespace inode), killed by
  PID; the namespaces, and the veths in them, disappear with their last process;
- root-namespace interfaces carrying the run prefix (there should be none: verified);
- the directory that reserved the prefix, unless the caller asked for that directory.

Teardown must also run to the end: a Ctrl-C or SIGTERM during it is held until it is
done (:func:`deferred_interrupts`), and SIGTERM is turned into SystemExit while a network runs
(:func:`install_sigterm`) so that ``with Network(...)`` and atexit clean up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, MutableMapping, Sequence
from pathlib import Path

from mininet.net import Mininet
from mininet.node import Node

from .errors import NetworkError
from .run_namespace import netns_inode, pids_in_netns, root_links

log = logging.getLogger(__name__)


def process_running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def kill_pids(pids: Sequence[int], timeout: float = 3.0) -> None:
    """SIGTERM, wait, SIGKILL: only for PIDs we identified as ours."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                alive.append(pid)
        deadline = time.monotonic() + timeout
        while alive and time.monotonic() < deadline:
            alive = [p for p in alive if process_running(p)]
            time.sleep(0.05)
        if not alive:
            return
        pids = alive


# ---------------------------------------------------------------------------
# Mininet nodes


def stop_mininet(mn: Mininet | None, prefix: str, holder: Node | None,
                 started_pids: MutableMapping[str, int], netns: set[int]) -> None:
    """Stop the run's Mininet, or at least terminate every node shell it started.

    Every node's pid and namespace are recorded first (in ``started_pids`` and
    ``netns``), so later steps and ``leftovers()`` know them even if building stopped
    half-way.  The namespace holder is left alone: :func:`stop_namespaces` ends it last.
    """
    nodes = run_nodes(mn, prefix, holder)
    for node in nodes:
        started_pids.setdefault(node.name, node.pid)
        inode = netns_inode(node.pid) if node.pid and node.inNamespace else None
        if inode is not None:
            netns.add(inode)
    try:
        if any(node.waiting for node in nodes):
            # Interrupted inside node.cmd(): Mininet's stop() would assert on that shell.
            raise NetworkError("a node shell was interrupted in the middle of a command")
        if mn is not None:
            mn.stop()
    except Exception as exc:  # noqa: BLE001 - fall back to killing the shells
        log.warning("Mininet stop failed (%s); terminating node shells directly",
                    exc or type(exc).__name__)
    # RemoteController.stop() is a no-op, so Mininet leaves its shell running; after a
    # failed stop() nothing else is terminated either.  Namespaces (and with them the
    # veths) disappear with their last process.
    for node in nodes:
        with contextlib.suppress(Exception):
            node.terminate()
    forget_nodes(nodes)


def run_nodes(mn: Mininet | None, prefix: str, holder: Node | None) -> list[Node]:
    """Mininet nodes of this run, including ones whose construction was interrupted.

    Node.outToNode maps every live node shell of this process, so a node that never
    reached Mininet's lists is still found by its prefixed name.
    """
    nodes: dict[str, Node] = {}
    if mn is not None:
        nodes.update((n.name, n) for n in [*mn.hosts, *mn.switches, *mn.controllers])
    for node in list(Node.outToNode.values()):
        if (prefix and node.name.startswith(prefix) and node.shell is not None
                and node is not holder):
            nodes.setdefault(node.name, node)
    return list(nodes.values())


def forget_nodes(nodes: Sequence[Node]) -> None:
    """Drop stopped nodes from Mininet's class-wide fd maps (they are never pruned)."""
    for table in (Node.outToNode, Node.inToNode):
        for fd in [fd for fd, node in table.items() if node in nodes]:
            del table[fd]


# ---------------------------------------------------------------------------
# Namespaces, links, directories


def stop_namespaces(holder: Node | None, netns: set[int]) -> None:
    """Stop the namespace holder, then anything still running in the run's namespaces."""
    if holder is not None:
        holder.terminate()
        forget_nodes([holder])
    leftovers = [p for p in pids_in_netns(netns) if p != os.getpid()]
    if leftovers:
        log.warning("stopping %d process(es) left in the run's namespaces: %s",
                    len(leftovers), leftovers)
        kill_pids(leftovers)
    still = [p for p in pids_in_netns(netns) if process_running(p)]
    if still:
        raise NetworkError(f"processes still in the run's namespaces: {still}")


def sweep_root_links(prefix: str) -> None:
    """Nothing of ours belongs in the root namespace; remove strays, then verify."""
    if not prefix:
        return
    for name in [n for n in root_links() if n.startswith(prefix)]:
        subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
    left = [n for n in root_links() if n.startswith(prefix)]
    if left:
        raise NetworkError(f"interfaces with prefix {prefix!r} remain: {left}")


def remove_reserved_dir(reserved: Path | None, requested: Path | None) -> None:
    """Remove the directory that reserved the prefix, unless it is the caller's run_dir."""
    if reserved is not None and reserved != requested:
        shutil.rmtree(reserved, ignore_errors=True)


# ---------------------------------------------------------------------------
# Signals


_holding = False  # a deferred_interrupts block is open in the main thread


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold a Ctrl-C or a SIGTERM that arrives during clean-up until clean-up is done,
    then deliver it to the handler it would have reached.  Both: ``dcnlab run`` (and a
    cluster task's child) turn SIGTERM into KeyboardInterrupt, and one raised in the
    middle of a teardown left that network's Open vSwitch and run directory behind (a
    stop that lands while a run's network is being stopped anyway).  A signal ignored
    when the block starts (a second SIGTERM after the first began the stop) stays
    ignored; nested blocks hold until the outermost ends."""
    global _holding
    if threading.current_thread() is not threading.main_thread() or _holding:
        yield  # no signal reaches another thread; an outer block holds them already
        return
    caught: list[int] = []
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    held = [signum for signum, handler in previous.items() if handler is not signal.SIG_IGN]
    for signum in held:
        signal.signal(signum, lambda signum, frame: caught.append(signum))
    _holding = True
    try:
        yield
    finally:
        _holding = False
        for signum in held:
            signal.signal(signum, previous[signum])
    for signum in dict.fromkeys(caught):
        signal.raise_signal(signum)  # its handler raises (KeyboardInterrupt, SystemExit)


def install_sigterm() -> bool:
    """Turn SIGTERM into SystemExit while we run, so clean-up happens (main thread only,
    and only when nobody else handles SIGTERM).  Returns whether it was installed."""
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        signal.signal(signal.SIGTERM, _raise_system_exit)
        return True
    return False


def restore_sigterm() -> None:
    """Undo :func:`install_sigterm` (if our handler is still the one installed)."""
    if signal.getsignal(signal.SIGTERM) is _raise_system_exit:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _raise_system_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
