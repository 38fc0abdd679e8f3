"""ARP-Path (All-Path bridging; paper 001's default forwarding and one of its baselines):
the fastest copy of a host's broadcast finds the path and the first frame back confirms
it (every switch learns an address from the frames it sends), all in the switches' data
plane.

The controller installs :mod:`dcnlab.schemes.arppath.dataplane`'s tables once per switch
(again when a port changes) over the compiled ECMP routes, which stay as the fallback for
a frame that meets no entry inside the fabric.  No ARP of a known host reaches the
controller: requests flood as explorations, replies confirm.  The controller learns
what it reports from flow statistics in rounds (as data-plane TCP-Path does: paths,
table sizes, counters) and turns a link going down into Path Fail (what every switch
knows of the addresses whose entries led over it is deleted; their next frames explore).

It needs the Nicira extensions (Open vSwitch; switch_ext, which speaks them): on a switch
without them it says so and never becomes ready.

``DCNLAB_ARPPATH_IDLE``  idle timeout of learned forwarding entries, s (default 10)
``DCNLAB_ARPPATH_LOCK``  lifetime of locks, s (default 3)
"""

from __future__ import annotations

import time
from typing import Any, cast

from ryu.controller import ofp_event
from ryu.controller.handler import MAIN_DISPATCHER, set_ev_cls
from ryu.lib import hub
from ryu.ofproto import ofproto_v1_3 as ofp

from dcnlab.controller.compiler import SELECT_GROUPS
from dcnlab.controller.fabric_app import FabricApp
from dcnlab.controller.fabric_ports import switch_ports
from dcnlab.controller.rules import SwitchRules
from dcnlab.schemes.arppath.part import ArpPathPart
from dcnlab.schemes.arppath.state_file import ArpPathControllerState
from dcnlab.schemes.tcppath import polling
from dcnlab.schemes.tcppath.dataplane import speaks_nicira

TICK = 0.5  # s: how often an idle poller looks again


class ArpPath(FabricApp):
    POLICY = SELECT_GROUPS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.part = ArpPathPart(base=1)
        self.nx: dict[int, bool] = {}  # switch -> speaks the Nicira extensions
        self._augmented: object = None
        self.polling = polling.FlowPolling(polling.decode_cost_per_entry())
        self._threads.append(hub.spawn(self._poller))

    # -- the tables, once every switch said it can run them ----------------------

    def _capable(self) -> bool:
        switches = self.expected or set(self.datapaths)
        return bool(switches) and all(self.nx.get(d) for d in switches)

    @property
    def ready(self) -> bool:
        return super().ready and self._capable()

    def switch_described(self, dp: Any, mfr: str, hw: str, sw: str) -> None:
        self.nx[dp.id] = speaks_nicira(mfr, sw)
        if not self.nx[dp.id]:
            self.warn(f"ARP-Path runs in the switches' data plane and needs the Nicira "
                      f"extensions (learn, resubmit, registers); switch {dp.id:#x} "
                      f"({mfr} {sw}) lacks them: ARP-Path cannot run on it")
        self._compiled_version = -1  # recompile: the tables go on once all are capable
        self.push_changes()

    def compiled(self) -> dict[int, SwitchRules]:
        compiled = super().compiled()
        if self._augmented is not compiled and self._capable():
            for dpid, rules in compiled.items():
                self.part.attach(rules, switch_ports(self.view, dpid), routes_table=0)
            self._augmented = compiled
        return compiled

    def resync(self, dp: Any) -> None:
        self.part.forget(dp.id)
        super().resync(dp)

    # -- flow statistics ------------------------------------------------------------

    def _poller(self) -> None:
        while True:
            dps = sorted(self.datapaths.items())
            if not (dps and self._capable()):
                hub.sleep(TICK)
                continue
            self.polling.start_round(d for d, _ in dps)
            gap = self.polling.interval / len(dps)
            for dpid, dp in dps:
                if self.datapaths.get(dpid) is dp:  # still connected
                    self.polling.asked(dpid)
                    for msg in self.part.requests(dp):
                        dp.send_msg(msg)
                hub.sleep(gap)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _flow_stats(self, ev: Any) -> None:
        started = time.perf_counter()
        msg = ev.msg
        dpid = msg.datapath.id
        if not self.part.owns(dpid, msg.xid):
            return
        self.polling.decoded(len(msg.body))
        done = self.part.handle_reply(self.view, self.datapaths, dpid, msg.xid, msg.body,
                                      bool(msg.flags & ofp.OFPMPF_REPLY_MORE))
        if done == "flows" and self.polling.answered(dpid):
            self.part.sample()  # once per complete round
            self.polling.walked(0.0)
        for name, value in self.part.counters().items():
            self.counters[name] = value  # totals as polled, not increments
        self.polling.spent(time.perf_counter() - started)
        self._dirty = True

    # -- reporting ------------------------------------------------------------------

    def state(self) -> ArpPathControllerState:
        state = cast(ArpPathControllerState, super().state())
        state["arppath"] = {
            "mode": "dataplane" if self._capable() else "unsupported",
            **self.part.state(),
            "polling": {"interval": round(self.polling.interval, 3),
                        "rounds": self.polling.rounds,
                        "read_at": {str(d): t for d, t in sorted(self.polling.read_at.items())}}}
        return state
