"""TCP-Path (seed 001): each new TCP connection takes the fastest path found by flooding
its SYN through the fabric, first arrival wins.

The controller plays the paper's TCP-Path switches over plain OpenFlow 1.3:

1. A host's SYN (tcp_flags SYN without ACK) is punted by its edge switch.  The controller
   locks the SD tuple {S, pS, D, pD} there to the host port and floods an *exploration
   copy* (the SYN behind EtherType 0x88B5, see :mod:`dcnlab.schemes.tcppath.frames`)
   out of every live fabric port of that switch, never to hosts.
2. Every switch punts every copy.  The first copy of an exploration at a switch locks it
   to its in-port and is flooded on (live fabric ports except the in-port, in a random
   order per copy so that ties between idle paths break randomly); later copies are
   dropped and counted.  Copies travel through the switches' real output queues, so a
   copy behind a congested queue loses the race.
3. At the destination edge the first copy's SYN is delivered to D; edge switches punt
   SYN-ACKs from hosts.
4. The SYN-ACK confirms the locks: the controller walks them back from D's edge to S's,
   installs per-flow entries in both directions (SD and DS) on every switch of that path
   with an idle timeout (10 s, the authors' switch), and hands the SYN-ACK to S.
   Unconfirmed locks expire after the lock timeout.
5. Path Fail / Recovery: when a port of a confirmed path goes down the flow's entries
   are removed on the whole path (its packets continue at once on the default routes)
   and a Path Recovery exploration (no SYN) from the source edge sets up a new path.

The state machine is :mod:`dcnlab.schemes.tcppath.state`; entries and priorities are
in :mod:`dcnlab.schemes.tcppath.rules`.

The core's default routes (ECMP select groups, compiled from the view) carry everything
TCP-Path does not handle: non-TCP traffic (ARP is answered by the controller as in every
dcnlab app), TCP connections whose SYN the controller never saw (opened before it
started), flows after their per-flow entries aged out (they fall back to the default
path rather than re-exploring, as the paper allows), SYN-ACKs arriving after the lock
timeout, and under TFE every flow that is not an elephant.

Configuration (environment, like every dcnlab app):

``DCNLAB_TCPPATH_IDLE``      idle timeout of per-flow entries, s (default 10)
``DCNLAB_TCPPATH_LOCK``      lifetime of exploration locks, s (default 3)
``DCNLAB_TCPPATH_RECOVERY``  ``proactive`` (default: re-explore on Path Fail) or ``off``
"""

from __future__ import annotations

import os
import random
import time
from collections import OrderedDict, deque
from typing import Any, cast

from ryu.controller import ofp_event
from ryu.controller.handler import MAIN_DISPATCHER, set_ev_cls
from ryu.lib import hub
from ryu.ofproto import ofproto_v1_3 as ofp

from dcnlab.controller import ofmsg
from dcnlab.controller.compiler import SELECT_GROUPS
from dcnlab.controller.fabric_app import FabricApp
from dcnlab.controller.rules import FlowEntry, SwitchRules
from dcnlab.schemes.tcppath import frames, rules
from dcnlab.schemes.tcppath.state import (
    DEFAULT_LOCK_TIMEOUT,
    Attachment,
    ConfirmError,
    Exploration,
    Flow,
    StartKind,
    TcpPathState,
    Verdict,
)
from dcnlab.schemes.tcppath.state_file import TcpPathControllerState

ENV_IDLE = "DCNLAB_TCPPATH_IDLE"
ENV_LOCK = "DCNLAB_TCPPATH_LOCK"
ENV_RECOVERY = "DCNLAB_TCPPATH_RECOVERY"
DEFAULT_IDLE = 10
TICK = 0.5  # s between lock expiry sweeps and entry-count samples
SERIES_LEN = 600
RECENT_FLOWS = 500
PENDING_XIDS = 4096


class TcpPath(FabricApp):
    POLICY = SELECT_GROUPS
    ELEPHANTS_ONLY = False  # TFE sets it

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.idle_timeout = int(os.environ.get(ENV_IDLE, DEFAULT_IDLE))
        self.lock_timeout = float(os.environ.get(ENV_LOCK, DEFAULT_LOCK_TIMEOUT))
        self.recovery = os.environ.get(ENV_RECOVERY, "proactive") != "off"
        self.elephants = self.elephant_filter()
        self.paths = TcpPathState(self._live_peer, self.lock_timeout)
        self.rng = random.Random()
        self.series: deque[tuple[float, int]] = deque(maxlen=SERIES_LEN)
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_FLOWS)
        self.entries_max = 0
        self.copies_in: dict[int, int] = {}  # exploration copies punted, per switch
        self.copy_bytes = 0  # size of the last copy (the paper's L_B)
        self._xid_flow: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._augmented: object = None
        # Switches known to accept masked TCP ports (Open vSwitch): TFE classifies there.
        self.port_masks: set[int] = set()
        self._threads.append(hub.spawn(self._ticker))

    def elephant_filter(self) -> rules.ElephantFilter | None:
        """Which SYNs are explored: None = all (TCP-Path); TFE narrows it."""
        return None

    def now(self) -> float:
        return time.monotonic()

    # -- static entries on top of the compiled default routes -------------------

    def compiled(self) -> dict[int, SwitchRules]:
        compiled = super().compiled()
        if self._augmented is not compiled:  # once per recompilation
            for dpid, sw in compiled.items():
                ports = {h.port for h in self.view.hosts_on(dpid)}
                sw.flows.update(rules.static_entries(ports, self.elephants,
                                                     dpid in self.port_masks))
            self._augmented = compiled
        return compiled

    def switch_described(self, dp: Any, mfr: str, hw: str, sw: str) -> None:
        if self.elephants is not None and mfr.startswith("Nicira") and (
                dp.id not in self.port_masks):
            # Open vSwitch matches masked ports: move TFE's classification into it.
            self.port_masks.add(dp.id)
            self._compiled_version = -1
            self.push_changes()

    def resync(self, dp: Any) -> None:
        self.port_masks.discard(dp.id)  # until it describes itself again
        # A (re)connecting switch loses its per-flow entries: forget the flows through it
        # (and their entries elsewhere), then the base installs the static policy.
        dp.send_msg(rules.delete_all_flows(dp))
        for flow in self.paths.flows_through(dp.id):
            self.paths.remove_flow(flow.serial)
            self._uninstall(flow, skip=dp.id)
            self.counters["tcppath_flows_reset"] += 1
        super().resync(dp)

    # -- helpers ---------------------------------------------------------------

    def _live_peer(self, dpid: int, port: int) -> tuple[int, int] | None:
        far = self.view.peer(dpid, port)
        if far is None or not self.view.graph.edges[dpid, far[0]]["up"]:
            return None
        return far

    def _live_fabric_ports(self, dpid: int) -> list[int]:
        return [p for p in sorted(self.view.fabric_ports(dpid))
                if self._live_peer(dpid, p) is not None]

    def _packet_out(self, dpid: int, ports: list[int], frame: bytes) -> bool:
        dp = self.datapaths.get(dpid)
        if dp is None or not ports:
            return False
        parser = dp.ofproto_parser
        dp.send_msg(parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER,
                                        in_port=ofp.OFPP_CONTROLLER,
                                        actions=[parser.OFPActionOutput(p) for p in ports],
                                        data=frame))
        return True

    def _flood(self, dpid: int, frame: bytes, skip: int | None) -> None:
        ports = [p for p in self._live_fabric_ports(dpid) if p != skip]
        self.rng.shuffle(ports)  # ties between idle paths break randomly, not by port number
        if self._packet_out(dpid, ports, frame):
            self.counters["tcppath_copy_packet_out"] += 1
            self.counters["tcppath_copies_sent"] += len(ports)
        else:
            self.counters["tcppath_flood_nowhere"] += 1

    def _send_flow(self, dpid: int, entry: FlowEntry, serial: int | None) -> None:
        dp = self.datapaths.get(dpid)
        if dp is None:
            return
        msg = rules.flow_mod(dp, entry, notify=serial is not None)
        dp.set_xid(msg)
        if serial is not None:  # so a switch's error names the flow it broke
            self._xid_flow[(dpid, msg.xid)] = serial
            while len(self._xid_flow) > PENDING_XIDS:
                self._xid_flow.popitem(last=False)
        dp.send_msg(msg)
        self.counters["messages"] += 1

    def _delete(self, dpid: int, entry: FlowEntry) -> None:
        dp = self.datapaths.get(dpid)
        if dp is not None:
            dp.send_msg(ofmsg.flow_delete_strict(dp, entry))
            self.counters["messages"] += 1

    def _host_attachment(self, ip: str, mac: str) -> Attachment | None:
        host = self.view.host_by_ip(ip)
        if host is None or host.mac != mac:
            return None
        return Attachment(host.dpid, host.port)

    # -- packet-in dispatch ----------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev: Any) -> None:
        msg = ev.msg
        data = msg.data
        in_port = msg.match.get("in_port")
        ethertype = data[12:14] if len(data) >= 14 else b""
        if in_port is None or ethertype not in (b"\x88\xb5", b"\x08\x00"):
            super()._packet_in(ev)  # ARP, LLDP, and the base's bad-frame accounting
            return
        self.counters["packet_in"] += 1
        dpid = msg.datapath.id
        try:
            if ethertype == b"\x88\xb5":
                self.counters["tcppath_copy_packet_in"] += 1
                self.copies_in[dpid] = self.copies_in.get(dpid, 0) + 1
                self.copy_bytes = len(data)
                self.on_copy(dpid, in_port, *frames.parse_exploration(data))
            else:
                self.on_tcp(dpid, in_port, frames.parse_tcp(data))
        except frames.BadFrame as exc:
            self.counters["tcppath_bad_punt"] += 1
            self.logger.debug("switch %#x port %s: bad punted frame: %s", dpid, in_port, exc)

    def on_tcp(self, dpid: int, in_port: int, seg: frames.TcpFrame) -> None:
        if in_port in self.view.fabric_ports(dpid):
            # Our punt entries match host ports only; never explore from the fabric.
            self.counters["tcppath_punt_from_fabric"] += 1
            return
        if seg.is_syn:
            self.on_syn(dpid, in_port, seg)
        elif seg.is_synack:
            self.on_synack(dpid, in_port, seg)
        else:
            raise frames.BadFrame(f"TCP flags {seg.flags:#x}: neither SYN nor SYN-ACK")

    # -- 1. a host's SYN at its edge ------------------------------------------------

    def on_syn(self, dpid: int, in_port: int, seg: frames.TcpFrame) -> None:
        key = seg.key
        src = self._host_attachment(key.src_ip, key.src_mac)
        dst = self._host_attachment(key.dst_ip, key.dst_mac)
        if src != Attachment(dpid, in_port) or dst is None:
            self.counters["tcppath_syn_unknown_host"] += 1
            return  # the default routes would drop it too
        if self.elephants is not None and not self.elephants.matches(key.src_port, seg.dscp):
            # TFE on a switch that cannot classify: relayed, never explored.
            self.counters["tcppath_not_elephant"] += 1
            self._packet_out(dst.dpid, [dst.port], seg.data)
            return
        started = self.paths.start(key, src, dst, self.now())
        if started.superseded is not None:
            self.counters["tcppath_superseded"] += 1
        if started.kind is StartKind.NEW:
            self.counters["tcppath_explorations"] += 1
            assert started.exploration is not None
            self._flood(dpid, frames.exploration(started.exploration.xid, frames.KIND_REQUEST,
                                                 seg.data), None)
        elif started.kind is StartKind.LOCAL:
            self.counters["tcppath_explorations"] += 1
            assert started.exploration is not None
            self._deliver(started.exploration, seg.data)
        else:
            # A retransmitted SYN: straight to D on the path already found.
            self.counters[f"tcppath_syn_{started.kind.value}"] += 1
            self._packet_out(dst.dpid, [dst.port], seg.data)

    # -- 2./3. exploration copies ---------------------------------------------------

    def on_copy(self, dpid: int, in_port: int, xid: int, kind: int,
                inner: frames.TcpFrame) -> None:
        if in_port not in self.view.fabric_ports(dpid):
            self.counters["tcppath_copy_from_host"] += 1
            return
        expl = self.paths.explorations.get(xid)
        if expl is not None and expl.key != inner.key:
            self.counters["tcppath_bad_copy"] += 1
            return
        verdict = self.paths.copy(xid, dpid, in_port, self.now())
        self.counters[f"tcppath_copy_{verdict.value}"] += 1
        if verdict is Verdict.FLOOD:
            self._flood(dpid, frames.exploration(xid, kind, inner.data), in_port)
        elif verdict is Verdict.DELIVER:
            assert expl is not None
            if expl.recovery:
                self._confirm_recovery(expl)
            else:
                self._deliver(expl, inner.data)

    def _deliver(self, expl: Exploration, syn: bytes) -> None:
        if not rules.synack_punted_statically(expl.key, self.elephants,
                                              expl.dst.dpid in self.port_masks):
            # Sent first, on the same connection as the SYN's packet-out.
            self._send_flow(expl.dst.dpid, rules.synack_punt(expl, self.lock_timeout), None)
        self._packet_out(expl.dst.dpid, [expl.dst.port], syn)
        self.counters["tcppath_delivered"] += 1

    # -- 4. the SYN-ACK confirms --------------------------------------------------

    def on_synack(self, dpid: int, in_port: int, seg: frames.TcpFrame) -> None:
        now = self.now()
        try:
            done = self.paths.confirm(seg.key, dpid, in_port, now)
        except ConfirmError as exc:
            # It confirms nothing, but its connection must still open (on the default
            # routes): hand it to its host.
            self.counters[f"tcppath_synack_{exc.reason}"] += 1
            self.logger.info("SYN-ACK not confirming: %s", exc)
            dst = self._host_attachment(seg.key.dst_ip, seg.key.dst_mac)
            if dst is not None and self._packet_out(dst.dpid, [dst.port], seg.data):
                self.counters["tcppath_synack_relayed"] += 1
            return
        flow = done.flow
        expl = self.paths.explorations[flow.xid]
        self._install(flow, done.replaced)
        if not rules.synack_punted_statically(expl.key, self.elephants,
                                              expl.dst.dpid in self.port_masks):
            self._delete(expl.dst.dpid, rules.synack_punt(expl, self.lock_timeout))
        # The source edge got its entries before this, on the same connection.
        self._packet_out(expl.src.dpid, [expl.src.port], seg.data)

    def _confirm_recovery(self, expl: Exploration) -> None:
        try:
            done = self.paths.confirm_recovery(expl.xid, self.now())
        except ConfirmError as exc:
            self.counters[f"tcppath_recovery_{exc.reason}"] += 1
            return
        self.counters["tcppath_recovered"] += 1
        self._install(done.flow, done.replaced)

    def _install(self, flow: Flow, replaced: Flow | None) -> None:
        new = rules.flow_entries(flow, self.idle_timeout)
        for dpid in reversed(flow.dpids):  # destination first, as the Path Reply travels
            for entry in new[dpid]:
                self._send_flow(dpid, entry, flow.serial)
        if replaced is not None:
            self.counters["tcppath_replaced"] += 1
            self._uninstall(replaced, keep=new)
        self.counters["tcppath_confirmed"] += 1
        self.counters["tcppath_flow_entries_installed"] += 2 * len(flow.path)
        self.recent.append({"serial": flow.serial, "src": flow.key.src_ip,
                            "sport": flow.key.src_port, "dst": flow.key.dst_ip,
                            "dport": flow.key.dst_port, "path": flow.dpids,
                            "time": time.time()})
        self._count_entries()

    def _uninstall(self, flow: Flow, keep: dict[int, list[FlowEntry]] | None = None,
                   skip: int | None = None) -> None:
        old = rules.flow_entries(flow, self.idle_timeout)
        for dpid, entries in old.items():
            kept = {e.key for e in (keep or {}).get(dpid, [])}
            for entry in entries:
                if dpid != skip and entry.key not in kept:
                    self._delete(dpid, entry)
        self._count_entries()

    # -- 5. failures, ageing, errors ----------------------------------------------

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _tcppath_port_status(self, ev: Any) -> None:
        msg = ev.msg
        port = msg.desc
        if port.port_no > ofp.OFPP_MAX:
            return
        if msg.reason != ofp.OFPPR_DELETE and self._port_is_up(port):
            return
        self.path_fail(msg.datapath.id, port.port_no)

    def path_fail(self, dpid: int, port: int) -> None:
        """Invalidate every flow over (dpid, port) on its whole path; re-explore it."""
        for flow in self.paths.link_down(dpid, port):
            self.counters["tcppath_path_fail"] += 1
            self._uninstall(flow)
            if not self.recovery:
                continue
            src = self._host_attachment(flow.key.src_ip, flow.key.src_mac)
            dst = self._host_attachment(flow.key.dst_ip, flow.key.dst_mac)
            if src is None or dst is None:
                continue
            started = self.paths.start(flow.key, src, dst, self.now(), recovery=True)
            assert started.exploration is not None
            self.counters["tcppath_recovery_explorations"] += 1
            if started.kind is StartKind.LOCAL:
                self._confirm_recovery(started.exploration)
            else:
                self._flood(src.dpid, frames.exploration(
                    started.exploration.xid, frames.KIND_RECOVERY,
                    frames.synthetic_segment(flow.key)), None)

    @set_ev_cls(ofp_event.EventOFPFlowRemoved, MAIN_DISPATCHER)
    def _flow_removed(self, ev: Any) -> None:
        msg = ev.msg
        serial = rules.serial_of(msg.cookie)
        if serial is None or msg.reason == ofp.OFPRR_DELETE:
            return  # our own deletes, or not a per-flow entry
        flow = self.paths.remove_flow(serial)
        if flow is not None:
            # One entry aged out: take the rest down too, so no half path lingers.
            self.counters["tcppath_flows_aged"] += 1
            self._uninstall(flow, skip=msg.datapath.id)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, MAIN_DISPATCHER)
    def _tcppath_error(self, ev: Any) -> None:
        msg = ev.msg
        serial = self._xid_flow.pop((msg.datapath.id, msg.xid), None)
        if serial is None:
            return  # not a per-flow entry: the base counts and reports it
        if msg.type == ofp.OFPET_FLOW_MOD_FAILED and msg.code == ofp.OFPFMFC_TABLE_FULL:
            self.counters["tcppath_table_full"] += 1
        else:
            self.counters["tcppath_flow_mod_failed"] += 1
        flow = self.paths.remove_flow(serial)
        if flow is not None:
            # A partial path is safe (entries match in_port) but useless: drop it, the
            # connection continues on the default routes.
            self._uninstall(flow)

    def tick(self, now: float) -> None:
        """Expire unconfirmed locks; sample the per-flow entry count."""
        self.counters["tcppath_expired"] += len(self.paths.expire(now))
        self.series.append((round(time.time(), 2), self._count_entries()))
        self._dirty = True

    def _ticker(self) -> None:
        while True:
            hub.sleep(TICK)
            self.tick(self.now())

    # -- reporting ---------------------------------------------------------------

    def entries_per_switch(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for flow in self.paths.flows.values():
            for dpid in flow.dpids:
                out[dpid] = out.get(dpid, 0) + 2
        return out

    def _count_entries(self) -> int:
        total = sum(self.entries_per_switch().values())
        self.entries_max = max(self.entries_max, total)
        self._dirty = True
        return total

    def state(self) -> TcpPathControllerState:
        state = cast(TcpPathControllerState, super().state())
        per_switch = self.entries_per_switch()
        state["tcppath"] = {
            "elephants_only": self.elephants is not None,
            "idle_timeout": self.idle_timeout,
            "lock_timeout": self.lock_timeout,
            "flows": len(self.paths.flows),
            "explorations": len(self.paths.explorations),
            "flow_entries": {str(d): n for d, n in sorted(per_switch.items())},
            "flow_entries_total": sum(per_switch.values()),
            "flow_entries_max": self.entries_max,
            "series": list(self.series),
            "copies_in": {str(d): n for d, n in sorted(self.copies_in.items())},
            "copy_bytes": self.copy_bytes,
            "recent": list(self.recent),
        }
        return state

