"""ARP-Path as a part of an app: the standalone ``arppath`` app has it as its forwarding,
TCP-Path and TFE as their default forwarding.  The part installs its tables on top of a
switch's compiled policy, asks the switches for its flow statistics (the app sends the
requests in its polling rounds and hands back the replies the part asked for), and turns
a link going down into Path Fail: what every switch knows of the addresses whose entries
led over it is deleted, so their next frames explore again."""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Any

from dcnlab.controller.fabric_ports import SwitchPorts
from dcnlab.controller.rules import SwitchRules
from dcnlab.controller.view import NetworkView

from . import dataplane as apl
from .view import ArpPathView, delete_entry, delete_towards, stats_requests

ENV_IDLE = "DCNLAB_ARPPATH_IDLE"
ENV_LOCK = "DCNLAB_ARPPATH_LOCK"
DEFAULT_IDLE = 10  # s: learned forwarding entries (as TCP-Path's per-flow entries)
DEFAULT_LOCK = 3  # s: locks (as TCP-Path's)
SERIES_LEN = 600  # (wall time, entries) samples kept, one per polling round
DELETED_LEN = 200  # the controller's latest deletions kept for the state file


def _seconds(name: str, default: int) -> int:
    text = os.environ.get(name, str(default))
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: give whole seconds, at least 1") from None
    if value < 1:
        raise ValueError(f"{name}={text!r}: give whole seconds, at least 1")
    return value


class ArpPathPart:
    """ARP-Path's tables from ``base`` on every switch, and what the controller learns of
    them."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.idle_timeout = _seconds(ENV_IDLE, DEFAULT_IDLE)
        self.lock_timeout = _seconds(ENV_LOCK, DEFAULT_LOCK)
        self.view = ArpPathView()
        self.entries_max = 0
        self.path_fails = 0
        self._asked: set[tuple[int, int]] = set()  # (dpid, xid) of our requests
        self.series: deque[tuple[float, int]] = deque(maxlen=SERIES_LEN)
        self.repairs = 0
        self._fresh: set[int] = set()  # switches whose entries arrived since the last walk
        # the breaks the last walk saw: (switch, address) -> (port, the neighbour whose
        # next read tells, None for a loop); :meth:`walk`, :meth:`confirm`
        self._suspects: dict[tuple[int, str], tuple[int, int | None]] = {}
        # what the controller itself deleted, newest last: (wall time, why, switch or
        # None for every switch, address); a path that vanished shows whether it was us
        self.deleted: deque[tuple[float, str, int | None, str]] = deque(maxlen=DELETED_LEN)

    def attach(self, rules: SwitchRules, ports: SwitchPorts, routes_table: int) -> None:
        apl.attach(rules, ports, self.base, self.idle_timeout, self.lock_timeout,
                   routes_table)

    def requests(self, dp: Any) -> list[Any]:
        """This round's flow-stats requests to ``dp``, xids set and remembered."""
        msgs = stats_requests(dp, self.base)
        for msg in msgs:
            dp.set_xid(msg)
            self._asked.add((dp.id, msg.xid))
        return msgs

    def owns(self, dpid: int, xid: int) -> bool:
        return (dpid, xid) in self._asked

    def reply(self, dpid: int, xid: int, body: list[Any], more: bool) -> str | None:
        """A reply to one of :meth:`requests`; see :meth:`ArpPathView.reply`."""
        done = self.view.reply(dpid, xid, body, more)
        if done == "flows":
            self._fresh.add(dpid)
        if done is not None:
            self._asked.discard((dpid, xid))
            self.entries_max = max(self.entries_max,
                                   sum(self.view.entries_per_switch().values()))
        return done

    def handle_reply(self, net: NetworkView, datapaths: dict[int, Any], dpid: int, xid: int,
                     body: list[Any], more: bool) -> str | None:
        """A reply to one of :meth:`requests`, acted on: once ``dpid``'s entries are
        complete, Path Fail for addresses over a dead link (level-triggered), the breaks
        this read confirms, and a walk for new ones.  Returns what :meth:`reply` does; when
        to :meth:`sample` is the app's choice (once per complete polling round, or every
        entries reply)."""
        done = self.reply(dpid, xid, body, more)
        if done == "flows":
            self.path_fail(net, dpid, datapaths)
            self.confirm(dpid, datapaths)
            self.walk(net, datapaths)
        return done

    def sample(self) -> None:
        """A polling round is complete: record the table size (controller.csv's
        entries_mean / entries_max of a run come from these samples)."""
        self.series.append((round(time.time(), 2),
                            sum(self.view.entries_per_switch().values())))

    def walk(self, net: NetworkView, datapaths: dict[int, Any]) -> int:
        """Once every connected switch's entries arrived since the last walk: note the
        breaks (:meth:`ArpPathView.breaks`: an entry forwarding an address to a neighbour
        that has none for it).  A break is read across two switches polled at different
        moments, so it is only a suspicion until the neighbour's next read
        (:meth:`confirm`).  A loop has no such neighbour: it is deleted when this walk
        sees the one before it saw.  Returns the entries deleted."""
        if not datapaths or not set(datapaths) <= self._fresh:
            return 0
        self._fresh = set()
        breaks = self.view.breaks(net)
        loops = sorted(key for key, (port, witness) in breaks.items()
                       if witness is None and self._suspects.get(key) == (port, None))
        self._suspects = {k: v for k, v in breaks.items() if k not in loops}
        return self._repair([(dpid, mac, breaks[(dpid, mac)][0]) for dpid, mac in loops],
                            datapaths)

    def confirm(self, witness: int, datapaths: dict[int, Any]) -> int:
        """``witness``'s entries just arrived: delete the suspected entries that forward
        to it an address it still has no entry for, if they still forward there as last
        read.  The neighbour's read is the newer one, so an address whose frames crossed
        both switches since the walk (learned again at both) shows here and its entries
        stay; what is left is the moment between this read and the deletion reaching the
        switch, not a polling round.  Returns the entries deleted."""
        table = self.view.tables.get(witness, {})
        mine = [(key, port) for key, (port, w) in self._suspects.items() if w == witness]
        for key, _ in mine:
            del self._suspects[key]
        doomed = [(dpid, mac, port) for (dpid, mac), port in mine
                  if mac not in table and self.view.tables.get(dpid, {}).get(mac) == port]
        return self._repair(doomed, datapaths)

    def _repair(self, doomed: list[tuple[int, str, int]], datapaths: dict[int, Any]) -> int:
        """Delete entries (switch, address, port) on their switches only, each only while
        it outputs to that port: frames they forwarded now explore from a host's edge or
        follow a lock or the fallback routes inside the fabric, and the address's next
        frames teach it again."""
        now = round(time.time(), 3)
        for dpid, mac, port in doomed:
            if dpid in datapaths:
                datapaths[dpid].send_msg(delete_entry(datapaths[dpid], self.base, mac, port))
            self.view.tables.get(dpid, {}).pop(mac, None)  # gone until a poll says otherwise
            self.deleted.append((now, "repair", dpid, mac))
        self.repairs += len(doomed)
        return len(doomed)

    def _delete_everywhere(self, macs: list[str], datapaths: dict[int, Any]) -> None:
        for dp in datapaths.values():
            for mac in macs:
                for msg in delete_towards(dp, self.base, mac):
                    dp.send_msg(msg)
        now = round(time.time(), 3)
        for mac in macs:
            for table in self.view.tables.values():
                table.pop(mac, None)  # gone until a poll says otherwise
            self.deleted.append((now, "path_fail", None, mac))

    def forget(self, dpid: int) -> None:
        self.view.forget(dpid)
        self._asked = {k for k in self._asked if k[0] != dpid}

    def path_fail(self, net: NetworkView, dpid: int, datapaths: dict[int, Any]) -> int:
        """Delete, on every switch, what it knows of the addresses whose entries at ``dpid``
        (as last polled) lead into a link that is down.  Level-triggered: called after each
        poll of ``dpid``, it deletes again what came back (Open vSwitch's revalidators may
        re-add a learned entry a datapath flow still accounts packets for).  Returns the
        addresses."""
        macs = sorted(self.view.macs_over_dead_links(net, dpid))
        self._delete_everywhere(macs, datapaths)
        self.path_fails += len(macs)
        return len(macs)

    def counters(self) -> dict[str, int]:
        return {**self.view.totals(), "arppath_path_fail": self.path_fails,
                "arppath_repaired": self.repairs}

    def state(self) -> dict[str, Any]:
        """The state file's section: settings, table sizes and the learned forwarding
        entries as last polled (paths follow from them: :meth:`ArpPathView.path`)."""
        per_switch = self.view.entries_per_switch()
        return {
            "base_table": self.base,
            "idle_timeout": self.idle_timeout,
            "lock_timeout": self.lock_timeout,
            "entries": {str(d): n for d, n in sorted(per_switch.items())},
            "entries_total": sum(per_switch.values()),
            "entries_max": self.entries_max,
            "series": list(self.series),
            "forwarding": {str(d): dict(sorted(t.items()))
                           for d, t in sorted(self.view.tables.items()) if t},
            "deleted": [list(d) for d in self.deleted],
        }
