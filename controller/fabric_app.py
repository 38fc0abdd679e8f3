"""The Ryu application base that every dcnlab app builds on.

It owns the conversation with the switches: it keeps the network view, answers ARP,
compiles the app's policy into entries (:mod:`dcnlab.controller.compiler`), pushes
only the differences when the view changes (port down/up, hosts learned), resyncs a
switch that (re)connects, polls port statistics, and reports its state to
``DCNLAB_STATE_FILE`` (:mod:`dcnlab.model.runtime`).

Two ways to know the fabric:

* topology mode (``DCNLAB_TOPOLOGY`` set, as ``dcnlab`` runs do): switches, links and
  hosts are known up front; the app is ready once every expected switch confirmed its
  entries with a barrier reply;
* discovery mode (a real lab, plain ``ryu-manager``): Ryu's LLDP discovery finds
  switches and links (``--observe-links`` is switched on automatically) and hosts are
  learned from their ARP packets on non-fabric ports.

Apps are thin subclasses that set :attr:`FabricApp.POLICY` (a
:class:`~dcnlab.controller.compiler.Forwarding`: select groups, or one port per
destination) and may react to a switch's description (:meth:`FabricApp.switch_described`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter, deque
from typing import Any

from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import (
    CONFIG_DISPATCHER,
    DEAD_DISPATCHER,
    MAIN_DISPATCHER,
    set_ev_cls,
)
from ryu.lib import hub
from ryu.ofproto import ofproto_v1_3 as ofp

from dcnlab.controller import arp, ofmsg
from dcnlab.controller.compiler import SELECT_GROUPS, Forwarding, compile_policy
from dcnlab.controller.rules import SwitchRules
from dcnlab.controller.view import HostLocation, NetworkView
from dcnlab.model.runtime import (
    ENV_STATE_FILE,
    ENV_STATS_INTERVAL,
    ENV_TOPOLOGY,
    ControllerState,
    write_state,
)
from dcnlab.model.topology import TopologySpec

STATE_WRITE_PERIOD = 0.2
MAX_WARNINGS = 20
# Discovery mode: until LLDP has been quiet this long, a port that looks host-facing may
# still be an undiscovered fabric port, so ARP is neither learned from nor probed for.
DISCOVERY_SETTLE = 3.0
PROBE_INTERVAL = 1.0  # at most one probe per target address per interval
# An ARP answer waits until every switch has confirmed (barrier reply) the entries pushed
# before it, so the first packet a host sends after it finds its route everywhere
# (discovery mode: the answer follows the push for a newly located host).  A switch that
# never answers does not hold answers back longer than this.
HOLD_MAX = 2.0  # s


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.rstrip(b"\0").decode("utf-8", "replace")
    return str(value)


def discovery_mode() -> bool:
    return not os.environ.get(ENV_TOPOLOGY)


if discovery_mode():
    # Real labs: let Ryu's LLDP discovery find links (the same as --observe-links).
    from ryu import cfg
    from ryu.topology import switches as _ryu_switches  # noqa: F401  (registers the option)

    cfg.CONF.set_override("observe_links", True)
    app_manager.require_app("ryu.topology.switches", api_style=True)


class FabricApp(app_manager.RyuApp):
    OFP_VERSIONS = [ofp.OFP_VERSION]
    POLICY: Forwarding = SELECT_GROUPS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logger.setLevel(logging.INFO)
        self.view = NetworkView()
        self.expected: set[int] = set()
        topo_path = os.environ.get(ENV_TOPOLOGY)
        if topo_path:
            with open(topo_path) as fh:
                self.view = NetworkView.from_topology(TopologySpec.from_dict(json.load(fh)))
            self.expected = set(self.view.switches)
        self.state_path = os.environ.get(ENV_STATE_FILE)
        self.stats_interval = float(os.environ.get(ENV_STATS_INTERVAL, "1.0"))
        self.datapaths: dict[int, Any] = {}
        self.ports: dict[int, dict[int, Any]] = {}  # dpid -> port_no -> OFPPort
        self.installed: dict[int, SwitchRules] = {}
        self.synced: set[int] = set()
        self.barriers: dict[int, int] = {}  # dpid -> xid of the barrier ending a resync
        self.change_barriers: dict[int, int] = {}  # dpid -> xid ending the latest push
        self._held: list[tuple[int, int, bytes]] = []  # ARP answers: dpid, port, frame
        self.port_stats: dict[int, dict[int, dict[str, int]]] = {}
        self.descriptions: dict[int, str] = {}
        self.counters: Counter[str] = Counter()
        self.warnings: deque[str] = deque(maxlen=MAX_WARNINGS)
        self._compiled: dict[int, SwitchRules] = {}
        self._compiled_version = -1
        self._dirty = True
        self._last_topology_event = time.monotonic()
        self._last_probe: dict[str, float] = {}
        self._threads = [hub.spawn(self._state_writer)]
        if self.stats_interval > 0:
            self._threads.append(hub.spawn(self._stats_poller))

    # -- policy ----------------------------------------------------------------

    def compiled(self) -> dict[int, SwitchRules]:
        """The policy compiled for the current view (recompiled when the view changed)."""
        if self._compiled_version != self.view.version:
            self._compiled = self.compile(self.view)
            self._compiled_version = self.view.version
            self.counters["recompiles"] += 1
        return self._compiled

    def compile(self, view: NetworkView) -> dict[int, SwitchRules]:
        """Hook: the entries every switch must hold for ``view`` (an app may add its own
        on top of the policy's, or replace them)."""
        return compile_policy(view, self.POLICY)

    def push_changes(self) -> None:
        """Bring every connected switch to the current policy, sending differences only."""
        rules = self.compiled()
        for dpid, dp in list(self.datapaths.items()):
            if dpid not in self.synced and dpid not in self.barriers:
                continue  # not yet resynced: its full install comes with the resync
            new = rules.get(dpid)
            if new is None:
                continue
            msgs = ofmsg.changes(dp, self.installed.get(dpid), new)
            for msg in msgs:
                dp.send_msg(msg)
            self.counters["messages"] += len(msgs)
            self.installed[dpid] = new
            if msgs:
                self.change_barriers[dpid] = self._send_barrier(dp)
        self._dirty = True

    def resync(self, dp: Any) -> None:
        """Replace whatever a (re)connecting switch holds of ours with the full policy."""
        dpid = dp.id
        self.synced.discard(dpid)
        msgs = ofmsg.delete_ours(dp)
        rules = self.compiled().get(dpid)
        if rules is None:
            rules = SwitchRules(dpid)
            self.warn(f"switch {dpid:#x} is not in the topology; it gets no entries")
        msgs += ofmsg.changes(dp, None, rules)
        for msg in msgs:
            dp.send_msg(msg)
        self.counters["messages"] += len(msgs)
        self.installed[dpid] = rules
        self.barriers[dpid] = self._send_barrier(dp)

    @staticmethod
    def _send_barrier(dp: Any) -> int:
        barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
        dp.set_xid(barrier)
        dp.send_msg(barrier)
        return barrier.xid

    def switch_described(self, dp: Any, mfr: str, hw: str, sw: str) -> None:
        """Hook: a switch told what it is (OFPMP_DESC).  Apps may adapt to it."""

    # -- reporting -----------------------------------------------------------

    def warn(self, text: str) -> None:
        self.logger.warning(text)
        self.warnings.append(text)
        self._dirty = True

    @property
    def settled(self) -> bool:
        """Discovery mode: LLDP has been quiet long enough to trust host-facing ports."""
        return not discovery_mode() or (
            time.monotonic() - self._last_topology_event >= DISCOVERY_SETTLE)

    @property
    def ready(self) -> bool:
        if self.expected:
            return self.expected <= self.synced
        return bool(self.datapaths) and set(self.datapaths) <= self.synced

    def state(self) -> ControllerState:
        """The snapshot written to DCNLAB_STATE_FILE; subclasses add their own section."""
        rules = self.installed
        return {
            "app": self.__class__.__module__,
            "policy": str(self.POLICY),
            "pid": os.getpid(),
            "mode": "discovery" if discovery_mode() else "topology",
            "expected": sorted(self.expected),
            "connected": sorted(self.datapaths),
            "synced": sorted(self.synced),
            "ready": self.ready,
            "counters": dict(self.counters),
            "warnings": list(self.warnings),
            "links": sum(1 for *_, up in self.view.links() if up),
            "links_down": [[a, b] for a, _, b, _, up in self.view.links() if not up],
            "fabric": [[a, ap, b, bp, int(up)] for a, ap, b, bp, up in self.view.links()],
            "host_locations": {h.ip: {"mac": h.mac, "dpid": h.dpid, "port": h.port}
                               for h in self.view.hosts},
            "settled": self.settled,
            "hosts": len(self.view.hosts),
            "descriptions": {str(k): v for k, v in self.descriptions.items()},
            "entries": {str(d): {"flows": len(r.flows), "groups": len(r.groups)}
                        for d, r in rules.items()},
            "port_stats": {str(d): {str(p): c for p, c in ports.items()}
                           for d, ports in self.port_stats.items()},
            "updated": time.time(),
        }

    def _state_writer(self) -> None:
        settled = self.settled
        while True:
            if settled != self.settled:
                settled, self._dirty = self.settled, True
            if self._dirty and self.state_path:
                self._dirty = False
                try:
                    write_state(self.state_path, self.state())
                except OSError as exc:
                    self.logger.error("cannot write state file %s: %s", self.state_path, exc)
            hub.sleep(STATE_WRITE_PERIOD)

    def _stats_poller(self) -> None:
        while True:
            for dp in list(self.datapaths.values()):
                dp.send_msg(dp.ofproto_parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_ANY))
            hub.sleep(self.stats_interval)

    # -- switch life cycle -----------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev: Any) -> None:
        dp = ev.msg.datapath
        parser = dp.ofproto_parser
        self.datapaths[dp.id] = dp
        if discovery_mode():
            self.view.add_switch(dp.id)
            self._last_topology_event = time.monotonic()
        dp.send_msg(parser.OFPDescStatsRequest(dp, 0))
        dp.send_msg(parser.OFPPortDescStatsRequest(dp, 0))
        self.resync(dp)
        self.logger.info("switch %#x connected", dp.id)
        self._dirty = True

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _disconnected(self, ev: Any) -> None:
        dp = ev.datapath
        if dp.id is None or self.datapaths.get(dp.id) is not dp:
            return
        del self.datapaths[dp.id]
        self.synced.discard(dp.id)
        self.barriers.pop(dp.id, None)
        self.change_barriers.pop(dp.id, None)
        self.installed.pop(dp.id, None)
        self.logger.info("switch %#x disconnected", dp.id)
        self._release_held()
        self._dirty = True

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier(self, ev: Any) -> None:
        dpid = ev.msg.datapath.id
        if self.change_barriers.get(dpid) == ev.msg.xid:
            del self.change_barriers[dpid]
        if self.barriers.get(dpid) == ev.msg.xid:
            del self.barriers[dpid]
            self.synced.add(dpid)
            self._dirty = True
            if self.ready:
                self.logger.info("all %d switches have their entries", len(self.synced))
        self._release_held()

    @set_ev_cls(ofp_event.EventOFPDescStatsReply, MAIN_DISPATCHER)
    def _desc(self, ev: Any) -> None:
        dp, body = ev.msg.datapath, ev.msg.body
        mfr, hw, sw = _text(body.mfr_desc), _text(body.hw_desc), _text(body.sw_desc)
        self.descriptions[dp.id] = f"{mfr} / {hw} / {sw}"
        self.switch_described(dp, mfr, hw, sw)
        self._dirty = True

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, MAIN_DISPATCHER)
    def _port_desc(self, ev: Any) -> None:
        dpid = ev.msg.datapath.id
        ports = self.ports.setdefault(dpid, {})
        changed = False
        for port in ev.msg.body:
            if port.port_no > ofp.OFPP_MAX:
                continue
            ports[port.port_no] = port
            changed |= self.view.set_port_up(dpid, port.port_no, self._port_is_up(port)) is not None
        if changed:
            self.push_changes()

    @staticmethod
    def _port_is_up(port: Any) -> bool:
        return not (port.state & ofp.OFPPS_LINK_DOWN or port.config & ofp.OFPPC_PORT_DOWN)

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev: Any) -> None:
        msg = ev.msg
        dpid, port = msg.datapath.id, msg.desc
        if port.port_no > ofp.OFPP_MAX:
            return
        up = msg.reason != ofp.OFPPR_DELETE and self._port_is_up(port)
        if up:
            self.ports.setdefault(dpid, {})[port.port_no] = port
        else:
            self.ports.get(dpid, {}).pop(port.port_no, None)
        self.counters["port_status"] += 1
        if self.view.set_port_up(dpid, port.port_no, up) is not None:
            self.logger.info("switch %#x port %d %s: recompiling", dpid, port.port_no,
                             "up" if up else "down")
            self.push_changes()

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def _port_stats(self, ev: Any) -> None:
        stats = self.port_stats.setdefault(ev.msg.datapath.id, {})
        for s in ev.msg.body:
            if s.port_no > ofp.OFPP_MAX:
                continue
            stats[s.port_no] = {
                "rx_packets": s.rx_packets, "tx_packets": s.tx_packets,
                "rx_bytes": s.rx_bytes, "tx_bytes": s.tx_bytes,
                "rx_dropped": s.rx_dropped, "tx_dropped": s.tx_dropped,
            }
        self._dirty = True

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev: Any) -> None:
        msg = ev.msg
        self.counters["errors"] += 1
        self.warn(f"switch {msg.datapath.id:#x} sent error type={msg.type} code={msg.code}")

    # -- discovery mode: links from Ryu's LLDP ------------------------------

    def _link_event(self, link: Any, up: bool) -> None:
        src, dst = link.src, link.dst
        self._last_topology_event = time.monotonic()
        if up:
            if self.view.graph.has_edge(src.dpid, dst.dpid):
                return
            self.view.remove_hosts_on(src.dpid, src.port_no)
            self.view.remove_hosts_on(dst.dpid, dst.port_no)
            self.view.add_link(src.dpid, src.port_no, dst.dpid, dst.port_no)
        else:
            self.view.remove_link(src.dpid, dst.dpid)
        self.push_changes()

    # -- packet-in: ARP ----------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev: Any) -> None:
        msg = ev.msg
        dp = msg.datapath
        self.counters["packet_in"] += 1
        in_port = msg.match.get("in_port")
        if in_port is None or len(msg.data) < 14:
            self.counters["packet_in_bad"] += 1
            return
        if msg.data[12:14] == b"\x88\xcc":
            return  # LLDP: Ryu's discovery handles it (discovery mode) or nobody needs it
        try:
            packet = arp.parse(msg.data)
        except arp.NotArp as exc:
            self.counters["packet_in_bad"] += 1
            self.logger.debug("switch %#x port %s: ignoring punted frame: %s", dp.id, in_port, exc)
            return
        self.handle_arp(dp, in_port, packet)

    def handle_arp(self, dp: Any, in_port: int, packet: arp.ArpPacket) -> None:
        if not self.settled:
            self.counters["arp_before_settled"] += 1
            return  # hosts retry ARP every second; by then the fabric ports are known
        if in_port in self.view.fabric_ports(dp.id):
            # Our own probes come back through the fabric only by mistake: never learn there.
            self.counters["arp_from_fabric"] += 1
            return
        self._learn(HostLocation(packet.src_ip, packet.src_mac, dp.id, in_port))
        if packet.is_gratuitous:
            return
        if not packet.is_request:
            # A reply to one of our probes: hand it to the asker.
            asker = self.view.host_by_ip(packet.dst_ip)
            if asker is not None and asker.mac == packet.eth_dst:
                self._send_when_installed(asker.dpid, asker.port, arp.reply(
                    arp.ArpPacket(arp.arp.ARP_REQUEST, asker.mac, asker.ip, arp.ZERO_MAC,
                                  packet.src_ip, asker.mac, arp.BROADCAST),
                    packet.src_mac))
                self.counters["arp_relayed"] += 1
            return
        target = self.view.host_by_ip(packet.dst_ip)
        if target is not None:
            self._send_when_installed(dp.id, in_port, arp.reply(packet, target.mac))
            self.counters["arp_replied"] += 1
            return
        self._probe(packet, (dp.id, in_port))

    def _learn(self, host: HostLocation) -> None:
        known = self.view.host_by_ip(host.ip)
        if known is not None and (known.mac, known.dpid, known.port) == (host.mac, host.dpid,
                                                                          host.port):
            return
        if not discovery_mode():
            if known is None or known.mac != host.mac:
                self.counters["arp_unexpected_host"] += 1
                self.warn(f"ARP from {host.ip} ({host.mac}) at switch {host.dpid:#x} port "
                          f"{host.port} does not match the topology; ignored")
            return
        if self.view.add_host(host):
            self.logger.info("host %s (%s) at switch %#x port %d", host.ip, host.mac,
                             host.dpid, host.port)
            self.push_changes()

    def _probe(self, packet: arp.ArpPacket, origin: tuple[int, int]) -> None:
        """Ask every host-facing port for an unknown target (never the fabric ports)."""
        now = time.monotonic()
        if now - self._last_probe.get(packet.dst_ip, -PROBE_INTERVAL) < PROBE_INTERVAL:
            self.counters["arp_probe_suppressed"] += 1
            return
        self._last_probe[packet.dst_ip] = now
        frame = arp.probe(packet)
        for dpid in list(self.datapaths):
            fabric = self.view.fabric_ports(dpid)
            for port in self.ports.get(dpid, {}):
                if port not in fabric and (dpid, port) != origin:
                    self._send(dpid, port, frame)
        self.counters["arp_probed"] += 1

    def _send_when_installed(self, dpid: int, port: int, frame: bytes) -> None:
        """Send an ARP answer once every switch has confirmed the entries pushed so far:
        the asker's next packet goes to a host that may have been located just now, and
        must not overtake the routes to it."""
        if not (self.barriers or self.change_barriers):
            self._send(dpid, port, frame)
            return
        if not self._held:
            hub.spawn_after(HOLD_MAX, self._release_held, True)
        self._held.append((dpid, port, frame))
        self.counters["arp_held"] += 1

    def _release_held(self, timed_out: bool = False) -> None:
        """Send the held answers once no barrier is outstanding (or, from the timer
        started by the first of them, ``HOLD_MAX`` later: a switch that never answers
        must not silence ARP)."""
        if not self._held:
            return
        if self.barriers or self.change_barriers:
            if not timed_out:
                return
            self.counters["arp_held_timeout"] += 1
        held, self._held = self._held, []
        for dpid, port, frame in held:
            self._send(dpid, port, frame)

    def _send(self, dpid: int, port: int, frame: bytes) -> None:
        dp = self.datapaths.get(dpid)
        if dp is None:
            return
        parser = dp.ofproto_parser
        dp.send_msg(parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER,
                                        in_port=ofp.OFPP_CONTROLLER,
                                        actions=[parser.OFPActionOutput(port)], data=frame))


if discovery_mode():
    from ryu.topology import event as topo_event

    def _on_link_add(self: FabricApp, ev: Any) -> None:
        self._link_event(ev.link, True)

    def _on_link_delete(self: FabricApp, ev: Any) -> None:
        self._link_event(ev.link, False)

    FabricApp._on_link_add = set_ev_cls(topo_event.EventLinkAdd)(_on_link_add)  # type: ignore[attr-defined]
    FabricApp._on_link_delete = set_ev_cls(topo_event.EventLinkDelete)(_on_link_delete)  # type: ignore[attr-defined]
