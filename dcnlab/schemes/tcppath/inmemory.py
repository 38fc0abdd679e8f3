"""TCP-Path in memory: the app over fake switches, no Ryu event loop, no network.

The fake datapaths (:class:`~dcnlab.controller.oftable.FakeDatapath`) record what the app
sends and :class:`~dcnlab.controller.oftable.FakeNetwork` replays it, so packets can be
sent through the tables the app programmed and the app can be polled as the switches
would answer.  The unit tests and ``benchmarks/tcppath_polling.py`` drive the same
harness (one drives it with a clock it chooses, the other measures).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ryu.ofproto import ofproto_v1_3_parser as parser

from dcnlab.controller.oftable import FakeDatapath, FakeNetwork
from dcnlab.controller.view import HostLocation, NetworkView
from dcnlab.model.topology import TopologySpec
from dcnlab.schemes.tcppath import dataplane as dpl

OVS = ("Nicira, Inc.", "Open vSwitch")  # what Open vSwitch says it is (data-plane mode)


def event(**msg: Any) -> SimpleNamespace:
    """A Ryu event as the app's handlers read it (``ev.msg.<field>``)."""
    return SimpleNamespace(msg=SimpleNamespace(**msg))


class InMemoryFabric:
    """``app`` (already built for ``spec``) connected to one fake switch per switch of the
    spec: features, the switch's description, the first barrier answered, and what it
    installs replayed."""

    def __init__(self, app: Any, spec: TopologySpec, mfr: str = OVS[0],
                 sw: str = OVS[1]) -> None:
        self.app = app
        self.view = NetworkView.from_topology(spec)
        self.net = FakeNetwork(self.view)
        self.dps = {s.dpid: FakeDatapath(s.dpid) for s in spec.switches}
        self.unanswered: list[tuple[int, int]] = []  # barriers drain(barriers=False) kept
        for dp in self.dps.values():
            self.app._features(event(datapath=dp))
        for dp in self.dps.values():
            self.app.switch_described(dp, mfr, "hw", sw)
        for dp in self.dps.values():
            barrier = [m for m in dp.sent if isinstance(m, parser.OFPBarrierRequest)]
            self.app._barrier(event(datapath=dp, xid=barrier[0].xid))
        self.drain()

    def drain(self, barriers: bool = True) -> None:
        """Apply what the app sent; ``barriers``: answer its barrier requests (after the
        messages before them), until the app sends nothing more; otherwise keep them in
        :attr:`unanswered`."""
        while True:
            answered = False
            for dpid, dp in self.dps.items():
                msgs = dp.take()
                self.net.replay(dpid, [m for m in msgs if isinstance(
                    m, (parser.OFPFlowMod, parser.OFPGroupMod))])
                for m in msgs:
                    if not isinstance(m, parser.OFPBarrierRequest):
                        continue
                    if barriers:
                        self.app._barrier(event(datapath=dp, xid=m.xid))
                        answered = True
                    else:
                        self.unanswered.append((dpid, m.xid))
            if not answered:
                return

    def host(self, name: str) -> HostLocation:
        return next(h for h in self.view.hosts if h.name == name)

    def poll(self, dpids: list[int] | None = None) -> int:
        """The app's flow-stats requests to ``dpids`` (default: every switch), sent by hand
        and answered by the fake switches; returns the per-flow entries reported."""
        entries = 0
        for dpid in self.dps if dpids is None else dpids:
            dp = self.dps[dpid]
            for req in dpl.stats_requests(dp):
                dp.set_xid(req)
                entries += self.answer(dpid, req)
        return entries

    def answer(self, dpid: int, req: Any) -> int:
        """The fake switch answers one flow-stats request of the app; returns the per-flow
        entries in the answer."""
        body = self.net.switches[dpid].flow_stats(req.table_id, req.cookie, req.cookie_mask)
        self.app._flow_stats(event(datapath=self.dps[dpid], xid=req.xid, body=body, flags=0))
        return sum(1 for s in body if s.cookie == dpl.COOKIE_FLOW)
