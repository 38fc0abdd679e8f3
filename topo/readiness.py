"""Readiness: when a started (or restarted) network may be used.

Ready means two things at once, seen twice in a row: every switch has an OpenFlow session
with the controller, and the app says ``ready`` in its state file (the run-time contract,
:mod:`dcnlab.model.runtime`), which dcnlab apps do once every expected switch confirmed
its entries with a barrier reply.  Twice, because a TCP session is up a moment before the
OpenFlow handshake and the app's first flow mods are through.

Switch sessions are counted from the controller's sockets
(:meth:`~.controller_process.ControllerProcess.sessions`); the private Open vSwitch's
database is asked only to *name* the switches still missing in an error message.  When
the wait times out, the error says which switches and what the app reported, and quotes
the controller's log.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mininet.node import Switch

from dcnlab.model.runtime import ControllerState

from .controller_process import tail
from .errors import NetworkError
from .ovs import OvsError, OvsInstance

POLL_INTERVAL = 0.2
READY_STREAK = 2


def unconnected_switches(switches: Sequence[Switch], sessions: int,
                         ovs: OvsInstance | None) -> list[str]:
    """[] when every switch is connected; otherwise the names we can tell apart."""
    missing = len(switches) - sessions
    if missing <= 0:
        return []
    if ovs is not None:  # the database may lag, but names help an error message
        named = ovs_unconnected(ovs, [sw.name for sw in switches])
    else:
        named = [sw.name for sw in switches
                 if type(sw).connected is not Switch.connected and not sw.connected()]
    return named[:missing] or [f"({missing} unidentified)"]


def ovs_unconnected(ovs: OvsInstance, names: list[str]) -> list[str]:
    """Bridges among ``names`` whose controller the OVS database does not see connected."""
    try:
        out = ovs.vsctl("--format=json", "--", "--columns=name,controller", "list",
                        "Bridge", "--", "--columns=_uuid,is_connected", "list", "Controller")
    except OvsError as exc:
        raise NetworkError(f"cannot query the private OVS: {exc}") from None
    bridges, controllers = _json_documents(out)
    connected = {row[0][1]: row[1] for row in controllers["data"]}
    ok = set()
    for name, ctl in bridges["data"]:
        uuids = [ctl[1]] if ctl[0] == "uuid" else [u[1] for u in ctl[1]]
        if any(connected.get(u) is True for u in uuids):
            ok.add(name)
    return [n for n in names if n not in ok]


def app_status(state: ControllerState | None, *, wait_app: bool, controller_pid: int | None,
               state_file: Path) -> tuple[bool, str]:
    """(ready, why not) from the app's state file.

    An app that writes no state is ready at once unless ``wait_app``; a state written by
    an earlier controller (before a restart) does not count.  ``.get()`` throughout: apps
    outside dcnlab may write only part of the schema.
    """
    if state is None:
        if wait_app:
            return False, f"no state written to {state_file} yet"
        return True, "app writes no state"
    if controller_pid is not None and state.get("pid") not in (None, controller_pid):
        return False, f"state file is from an earlier controller (pid {state.get('pid')})"
    if state.get("ready"):
        return True, "ready"
    expected = state.get("expected", [])
    connected = state.get("connected", [])
    return False, (f"ready=false, {len(connected)}/{len(expected)} datapaths connected, "
                   f"warnings: {state.get('warnings', [])[-3:]}")


def wait_until_ready(timeout: float, *, check_alive: Callable[[], None],
                     pending_switches: Callable[[], list[str]],
                     app_ready: Callable[[], tuple[bool, str]],
                     spec_name: Callable[[str], str], log_file: Path) -> float:
    """Poll until switches and app are ready (see module doc); returns the seconds waited.

    check_alive raises when the controller died; pending_switches names the unconnected
    switches; app_ready is :func:`app_status` bound to the run; spec_name turns a node
    name back into the topology's; the controller's log is quoted when the wait times out.
    """
    began = time.monotonic()
    streak = 0
    while True:
        check_alive()
        pending = pending_switches()
        ready, status = app_ready()
        streak = streak + 1 if not pending and ready else 0
        if streak >= READY_STREAK:
            return time.monotonic() - began
        if time.monotonic() - began > timeout:
            waiting = []
            if pending:
                shown = ", ".join(spec_name(n) for n in pending[:10])
                more = f" (+{len(pending) - 10} more)" if len(pending) > 10 else ""
                waiting.append(f"{len(pending)} switch(es) not connected: {shown}{more}")
            if not ready:
                waiting.append(f"app not ready: {status}")
            raise NetworkError(
                f"network not ready after {timeout:g} s: {'; '.join(waiting)}\n"
                f"--- ryu-manager log tail ({log_file}) ---\n{tail(log_file)}")
        time.sleep(POLL_INTERVAL)


def listening(run: Callable[[list[str]], str], port: int, udp: bool = False) -> bool:
    """Whether a socket is bound to ``port`` (TCP: listening) where ``run`` runs a command
    and returns its output: a host of the network (:func:`in_host`), a namespace."""
    out = run(["ss", "-H", "-ln" + ("u" if udp else "t"), f"sport = :{port}"])
    return bool(out.strip())


def in_host(host: Any) -> Callable[[list[str]], str]:
    """A Mininet host as a ``run`` for :func:`listening`."""
    return lambda argv: host.cmd(" ".join(shlex.quote(a) for a in argv))


def wait_listening(run: Callable[[list[str]], str], port: int, *, udp: bool = False,
                   timeout: float = 15.0, what: str = "server") -> float:
    """Return (the seconds waited) once a server started in the background is bound to
    ``port``: a client started before then is refused, and a fixed pause before it is
    too short on a loaded machine and wasted on an idle one."""
    began = time.monotonic()
    while not listening(run, port, udp):
        if time.monotonic() - began > timeout:
            raise NetworkError(f"{what} not bound to {'udp' if udp else 'tcp'} port {port} "
                               f"within {timeout:g} s")
        time.sleep(POLL_INTERVAL / 2)
    return time.monotonic() - began


def _json_documents(text: str) -> list[Any]:
    """Split concatenated JSON documents (one per ovs-vsctl command)."""
    decoder = json.JSONDecoder()
    docs, index = [], 0
    while index < len(text):
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            break
        doc, index = decoder.raw_decode(text, index)
        docs.append(doc)
    return docs
