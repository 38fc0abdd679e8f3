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

That is *controller mode*.  In *data-plane mode* (the default where every switch speaks
the Nicira extensions: Open vSwitch, switch_ext with them) the controller installs the
pipeline of :mod:`dcnlab.schemes.tcppath.dataplane` once per switch (and again when a
port changes) and no TCP packet is punted: exploration (the packet itself, VLAN-tagged,
flooded), first-arrival locking (``learn`` of a "seen" entry and of a reverse lock),
confirmation by the first packet of the other direction (``learn`` of both directions'
per-flow entries, 10 s idle) and forwarding all happen in the switches.  A flow whose
entries aged out (or were removed by Path Fail) is explored again by its next packet.
The controller reads what it reports from flow statistics every 0.5 s: the per-flow
entries (flows, their paths, table sizes) and the packet counts of the pipeline's
counting entries (explorations, copies received, late copies dropped); flow-removed
messages count aged entries.  On a port going down it deletes the per-flow entries of
every flow over it (on the whole path), so their next packets re-explore (Path Recovery).

The default forwarding carries everything TCP-Path does not handle: non-TCP traffic,
TCP connections whose SYN it never saw (opened before it started), packets sent while
their exploration is pending, SYN-ACKs arriving after the lock timeout, and under TFE
every flow that is not an elephant.  In data-plane mode it is ARP-Path by default, as in
the paper (:mod:`dcnlab.schemes.arppath`: its tables follow TCP-Path's, the compiled ECMP
routes stay behind it for frames that meet no entry in the fabric; the hosts' ARP is
ARP-Path's, never the controller's); ``DCNLAB_TCPPATH_DEFAULT=ecmp`` makes it the
compiled ECMP select groups, which is also what controller mode uses (where ARP is
answered by the controller as in every dcnlab app).

Configuration (environment, like every dcnlab app):

``DCNLAB_TCPPATH_IDLE``      idle timeout of per-flow entries, s (default 10)
``DCNLAB_TCPPATH_LOCK``      lifetime of exploration locks, s (default 3)
``DCNLAB_TCPPATH_RECOVERY``  ``proactive`` (default: re-explore on Path Fail) or ``off``
``DCNLAB_TCPPATH_MODE``      ``dataplane`` (default; falls back to controller mode, with a
                             warning, when a switch lacks the Nicira extensions) or
                             ``controller``
``DCNLAB_TCPPATH_DEFAULT``   ``arppath`` (default, data-plane mode) or ``ecmp``: what
                             forwards the rest (ARP-Path's own settings:
                             ``DCNLAB_ARPPATH_IDLE``, ``DCNLAB_ARPPATH_LOCK``)
"""

from __future__ import annotations

import math
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
from dcnlab.controller.fabric_ports import SwitchPorts, live_peer, switch_ports
from dcnlab.controller.rules import FlowEntry, SwitchRules
from dcnlab.schemes.arppath.part import ArpPathPart
from dcnlab.schemes.tcppath import dataplane as dpl
from dcnlab.schemes.tcppath import frames, polling, rules
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
ENV_MODE = "DCNLAB_TCPPATH_MODE"
ENV_DEFAULT = "DCNLAB_TCPPATH_DEFAULT"
MODES = ("dataplane", "controller")
DEFAULTS = ("arppath", "ecmp")  # default forwarding; the paper's is ARP-Path
DEFAULT_IDLE = 10
TICK = 0.5  # s between lock expiry sweeps and entry-count samples
SERIES_LEN = 600
RECENT_FLOWS = 500
PENDING_XIDS = 4096
FAIL_BARRIER_WAIT = 2.0  # s: Path Fail deletes at a connection's edges by then at the latest
FAIL_RETRY_AFTER = 1.0  # s after a Path Fail deletion: a half-confirmed connection explores again
FAIL_RETRIES = 2


class TcpPath(FabricApp):
    POLICY = SELECT_GROUPS
    ELEPHANTS_ONLY = False  # TFE sets it

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.idle_timeout = int(os.environ.get(ENV_IDLE, DEFAULT_IDLE))
        self.lock_timeout = float(os.environ.get(ENV_LOCK, DEFAULT_LOCK_TIMEOUT))
        self.recovery = os.environ.get(ENV_RECOVERY, "proactive") != "off"
        self.mode_wanted = os.environ.get(ENV_MODE, "dataplane").strip().lower()
        if self.mode_wanted not in MODES:
            raise ValueError(f"{ENV_MODE}={self.mode_wanted!r}: use one of {', '.join(MODES)}")
        default = os.environ.get(ENV_DEFAULT, DEFAULTS[0]).strip().lower()
        if default not in DEFAULTS:
            raise ValueError(f"{ENV_DEFAULT}={default!r}: use one of {', '.join(DEFAULTS)}")
        # ARP-Path after TCP-Path's tables, for what TCP-Path does not explore (data-plane
        # mode only: controller mode forwards it on the compiled ECMP routes)
        self.arppath = ArpPathPart(base=dpl.TABLES) if default == "arppath" else None
        self.nx: dict[int, bool] = {}  # switch -> speaks the Nicira extensions we use
        self.dataplane = False  # the mode in force (decided once every switch described)
        self.dp = dpl.DataplaneView()
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
        # Path Fail deletes a connection in two phases (see _delete_connection): the
        # barriers still unanswered, (dpid, xid) -> batch
        self._fail_barriers: dict[tuple[int, int], int] = {}
        # batch -> (started, the edges' deletes, the edges)
        self._fail_batches: dict[int, tuple[float, list[tuple[int, Any]], frozenset[int]]] = {}
        self._fail_serial = 0
        self._deleting: dict[dpl.Tuple, int] = {}  # connection -> its batch
        # connection -> (when its last deletion finished, deletions so far): failed
        # connections not yet seen on a complete new path
        self._fail_done: dict[dpl.Tuple, tuple[float, int]] = {}
        # Data-plane mode reads flow statistics in rounds, one switch at a time.
        self.polling = polling.FlowPolling(polling.decode_cost_per_entry())
        self._threads.append(hub.spawn(self._ticker))
        self._threads.append(hub.spawn(self._poller))

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
                if self.dataplane:
                    ports = self._switch_ports(dpid)
                    dpl.rebuild(sw, ports, self.elephants, self.idle_timeout,
                                max(1, math.ceil(self.lock_timeout)))
                    if self.arppath is not None:
                        self.arppath.attach(sw, ports, routes_table=dpl.T_DEFAULT)
                    continue
                ports = {h.port for h in self.view.hosts_on(dpid)}
                sw.flows.update(rules.static_entries(ports, self.elephants,
                                                     dpid in self.port_masks))
            self._augmented = compiled
        return compiled

    def _switch_ports(self, dpid: int) -> SwitchPorts:
        return switch_ports(self.view, dpid)

    @property
    def ready(self) -> bool:
        # Not before the mode is decided: the pipeline may still change completely.
        return super().ready and self._mode_decided()

    def _mode_decided(self) -> bool:
        if self.mode_wanted == "controller":
            return True
        switches = self.expected or set(self.datapaths)
        return bool(switches) and switches <= set(self.nx)

    def _decide_mode(self) -> None:
        if not self._mode_decided():
            return
        switches = sorted(self.expected or set(self.datapaths))
        lacking = [d for d in switches if not self.nx.get(d)]
        want = self.mode_wanted == "dataplane" and not lacking
        if self.mode_wanted == "dataplane" and lacking and self.counters["tcppath_fallback"] == 0:
            self.counters["tcppath_fallback"] += 1
            self.warn(f"TCP-Path data-plane mode needs the Nicira extensions (learn, resubmit, "
                      f"registers); switch {lacking[0]:#x} ({self.descriptions.get(lacking[0])})"
                      f" lacks them: falling back to controller mode")
        if want != self.dataplane:
            self.dataplane = want
            self.logger.info("TCP-Path runs in %s mode", "data-plane" if want else "controller")
            self._compiled_version = -1
            self.push_changes()
        self._dirty = True

    def switch_described(self, dp: Any, mfr: str, hw: str, sw: str) -> None:
        self.nx[dp.id] = dpl.speaks_nicira(mfr, sw)
        self._decide_mode()
        if self.elephants is not None and mfr.startswith("Nicira") and (
                dp.id not in self.port_masks):
            # Open vSwitch matches masked ports: move TFE's classification into it.
            self.port_masks.add(dp.id)
            self._compiled_version = -1
            self.push_changes()

    def resync(self, dp: Any) -> None:
        self.port_masks.discard(dp.id)  # until it describes itself again
        self.dp.forget(dp.id)
        if self.arppath is not None:
            self.arppath.forget(dp.id)
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
        return live_peer(self.view, dpid, port)

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
                self.counters["tcppath_tcp_packet_in"] += 1
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
        if self.dataplane:
            self.dataplane_path_fail(msg.datapath.id, port.port_no)
            return
        self.path_fail(msg.datapath.id, port.port_no)

    def dataplane_path_fail(self, dpid: int, port: int) -> None:
        """Delete the per-flow entries of every flow over (dpid, port) on every switch; the
        flows' next packets find no entry at their edge and explore a new path."""
        port_msgs = dpl.delete_port_flows(self.datapaths.get(dpid), port)
        batches = []
        for conn in self.dp.connections_over(dpid, port):
            if self.dp.fail(conn):
                self.counters["tcppath_path_fail"] += 1
            batches.append(self._delete_connection(conn))
        # At an edge of one of them, the port's per-flow entries go in the second phase.
        pending = [self._fail_batches[b] for b in batches if b in self._fail_batches]
        edge = next((later for _, later, edges in pending if dpid in edges), None)
        if edge is not None:
            edge.extend((dpid, m) for m in port_msgs)
        else:
            for msg in port_msgs:
                self.datapaths[dpid].send_msg(msg)

    def _delete_connection(self, conn: dpl.Tuple) -> int:
        """Delete a connection's per-flow entries, locks and seen entries everywhere, in two
        phases: first the locks and seen entries everywhere and the per-flow entries on
        every switch but the edges (the switches of its two hosts); then, once every switch
        has answered a barrier sent after those deletes, the edges' per-flow entries.  The
        connection explores again as soon as its client's edge has lost its per-flow entry,
        and its copies must find every switch clean: deleting everywhere at once let them
        reach switches whose deletes were still on the way, which would then wipe the new
        locks and seen entries and leave the new path unconfirmed there.  A deletion under
        way is not started again.  Returns its batch."""
        if conn in self._deleting:
            return self._deleting[conn]
        self._fail_serial += 1
        batch = self._fail_serial
        edges = {h.dpid for h in self.view.hosts if h.mac in (conn[0], conn[1])}
        later: list[tuple[int, Any]] = []
        for dpid, dp in sorted(self.datapaths.items()):
            if dpid in edges:
                first = dpl.delete_connection(dp, conn, dpl.LEARNED[1:])
                later += [(dpid, m) for m in dpl.delete_connection(dp, conn, dpl.LEARNED[:1])]
            else:
                first = dpl.delete_connection(dp, conn)
            self.counters["messages"] += len(first)
            for msg in first:
                dp.send_msg(msg)
            barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
            dp.set_xid(barrier)
            dp.send_msg(barrier)
            self._fail_barriers[(dpid, barrier.xid)] = batch
        self.counters["messages"] += len(later)
        self._deleting[conn] = batch
        self._fail_batches[batch] = (self.now(), later, frozenset(edges))
        if batch not in self._fail_barriers.values():
            self._finish_delete(batch)
        return batch

    def _finish_delete(self, batch: int) -> None:
        """The second phase of a connection's deletion: its edges."""
        _, later, _ = self._fail_batches.pop(batch, (0.0, [], frozenset()))
        for dpid, msg in later:
            dp = self.datapaths.get(dpid)
            if dp is not None:
                dp.send_msg(msg)
        self._fail_barriers = {k: b for k, b in self._fail_barriers.items() if b != batch}
        for conn in [c for c, b in self._deleting.items() if b == batch]:
            del self._deleting[conn]
            self._fail_done[conn] = (self.now(), self._fail_done.get(conn, (0.0, 0))[1] + 1)

    def _retry_half_confirmed(self) -> None:
        """A failed connection whose entries came back (its re-exploration was confirmed
        on some switches) but that has no complete path a while after its deletion is
        deleted again, so it explores again: on Open vSwitch a re-exploration can start
        without any copy leaving the client's edge.  A revalidator that re-translates the
        busy datapath flow whose per-flow entry was deleted executes the explore entry's
        ``learn`` actions (seen, lock, generation) for the packets it accounts for, and the
        next revalidation already finds the new seen entry: no packet took the flooding
        actions in between (captured: no tagged frame on the edge's uplinks), the edge
        treats the connection as pending for the lock timeout and the other direction's
        packets, on the default routes, confirm it at the edge alone (issue #15)."""
        now = self.now()
        for conn, (done, tries) in list(self._fail_done.items()):
            if conn not in self.dp.failed:  # recovered
                del self._fail_done[conn]
                continue
            if now - done < FAIL_RETRY_AFTER or conn in self._deleting:
                continue
            if tries > FAIL_RETRIES:
                del self._fail_done[conn]
                continue
            keys = {conn, dpl.reverse(conn)}
            if any(k[1:] in keys for table in self.dp.tables.values() for k in table):
                self.counters["tcppath_path_fail_retried"] += 1
                self._delete_connection(conn)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier(self, ev: Any) -> None:
        batch = self._fail_barriers.pop((ev.msg.datapath.id, ev.msg.xid), None)
        if batch is None:
            super()._barrier(ev)
        elif batch not in self._fail_barriers.values():
            self._finish_delete(batch)

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
        if msg.cookie == dpl.COOKIE_FLOW:
            if msg.reason == ofp.OFPRR_IDLE_TIMEOUT:
                self.counters["tcppath_flow_entries_aged"] += 1
                in_port = msg.match.get("in_port")
                if in_port in self.view.host_ports(msg.datapath.id):
                    self.counters["tcppath_flows_aged"] += 1  # one direction, at its source
            return
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
        """Expire unconfirmed locks; sample the per-flow entry count; in data-plane mode
        finish Path Fail deletions a switch never confirmed."""
        if self.dataplane:
            for batch, (started, _, _) in list(self._fail_batches.items()):
                if now - started > FAIL_BARRIER_WAIT:  # a switch that never answered
                    self._finish_delete(batch)
        self.counters["tcppath_expired"] += len(self.paths.expire(now))
        self.series.append((round(time.time(), 2), self._count_entries()))
        self._dirty = True

    def _ticker(self) -> None:
        while True:
            hub.sleep(TICK)
            self.tick(self.now())

    def poll_round(self) -> None:
        """Data-plane mode: ask every switch for its per-flow and counting entries, one
        switch after another over the round's interval (see :mod:`.polling`)."""
        dps = sorted(self.datapaths.items())
        if self.polling.start_round(d for d, _ in dps):
            self._walk_round()  # a switch never answered the last round: walk what came
        if not dps:
            hub.sleep(TICK)
            return
        gap = self.polling.interval / len(dps)  # fixed for the round (see start_round)
        for dpid, dp in dps:
            if self.datapaths.get(dpid) is dp:  # still connected
                self.polling.asked(dpid)
                for msg in dpl.stats_requests(dp):
                    dp.send_msg(msg)
                for msg in self.arppath.requests(dp) if self.arppath is not None else ():
                    dp.send_msg(msg)
            hub.sleep(gap)

    def _poller(self) -> None:
        while True:
            if self.dataplane:
                self.poll_round()
            else:
                hub.sleep(TICK)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _flow_stats(self, ev: Any) -> None:
        started = time.perf_counter()
        msg = ev.msg
        self.polling.decoded(len(msg.body))
        more = bool(msg.flags & ofp.OFPMPF_REPLY_MORE)
        if self.arppath is not None and self.arppath.owns(msg.datapath.id, msg.xid):
            self._arppath_stats(msg.datapath.id, msg.xid, msg.body, more)
            self.polling.spent(time.perf_counter() - started)
            return
        done = self.dp.reply(msg.datapath.id, msg.xid, msg.body, more)
        self.polling.spent(time.perf_counter() - started)
        if done is not None:
            self._apply_flow_stats(msg.datapath.id, done)

    def _arppath_stats(self, dpid: int, xid: int, body: list[Any], more: bool) -> None:
        """A reply to ARP-Path's requests (the default forwarding's entries): Path Fail
        for addresses over a dead link (level-triggered, as TCP-Path's), its counters."""
        assert self.arppath is not None
        done = self.arppath.handle_reply(self.view, self.datapaths, dpid, xid, body, more)
        if done == "flows":
            self.arppath.sample()  # every entries reply: TCP-Path's rounds pace these
        if done is not None:
            for name, value in self.arppath.counters().items():
                self.counters[name] = value  # totals as polled
            self._dirty = True

    def _apply_flow_stats(self, dpid: int, done: str) -> None:
        if done == "flows":
            # Path Fail is level-triggered: per-flow entries on a link that is down (still
            # there, or back: see DataplaneView.dead_ports) are deleted again, every poll.
            for port in sorted(self.dp.dead_ports(self.view, dpid)):
                self.counters["tcppath_path_fail_repeated"] += 1
                self.dataplane_path_fail(dpid, port)
            if self.polling.answered(dpid):
                self._walk_round()
        totals = self.dp.totals()
        self.copy_bytes = totals.pop("tcppath_copy_bytes") or self.copy_bytes
        for name, value in totals.items():
            self.counters[name] = value
        self._count_entries()

    def _walk_round(self) -> None:
        """After a polling round: report the paths that are new since the last walk, retry
        half-confirmed connections, and count the time in the round's cost."""
        started = time.perf_counter()
        for flow in self.dp.update_paths(self.view):
            self._fail_done.pop(dpl.connection(flow.key), None)
            self.counters["tcppath_confirmed"] += flow.new_connection
            if flow.recovered:
                self.counters["tcppath_recovered"] += 1
            self.recent.append({"serial": 0, "src": flow.src_ip, "sport": flow.sport,
                                "dst": flow.dst_ip, "dport": flow.dport, "path": flow.path,
                                "time": time.time()})
        self._retry_half_confirmed()
        self.polling.walked(time.perf_counter() - started)

    # -- reporting ---------------------------------------------------------------

    def entries_per_switch(self) -> dict[int, int]:
        if self.dataplane:
            return self.dp.entries_per_switch()
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
            "mode": "dataplane" if self.dataplane else "controller",
            "default": "arppath" if self.arppath is not None and self.dataplane else "ecmp",
            "idle_timeout": self.idle_timeout,
            "lock_timeout": self.lock_timeout,
            "flows": len(self.dp.paths) if self.dataplane else len(self.paths.flows),
            "explorations": len(self.paths.explorations),
            "flow_entries": {str(d): n for d, n in sorted(per_switch.items())},
            "flow_entries_total": sum(per_switch.values()),
            "flow_entries_max": self.entries_max,
            "series": list(self.series),
            "copies_in": {str(d): n for d, n in sorted(
                (self.dp.copies_in() if self.dataplane else self.copies_in).items())},
            "copy_bytes": self.copy_bytes,
            "recent": list(self.recent),
        }
        if self.dataplane:
            state["tcppath"]["polling"] = {
                "interval": round(self.polling.interval, 3),
                "round_cost_ms": round(self.polling.last_cost * 1e3, 2),
                "decode_us_per_entry": round(self.polling.decode_cost * 1e6, 1),
                "rounds": self.polling.rounds,
                "read_at": {str(d): t for d, t in sorted(self.polling.read_at.items())}}
            if self.arppath is not None:
                state["arppath"] = {"mode": "dataplane", **self.arppath.state()}
        return state

