"""UC3: fair bandwidth allocation among flows with different RTTs (seed 004).

Routing is the ``single_path`` policy, so a flow's path is the deterministic shortest path
the compiled rules give its (source, destination) pair: the app knows every flow's path
from the compiled view (:class:`~dcnlab.schemes.uc3.collect.PathFinder` follows the
compiled entries through in-memory tables) and needs no per-flow entries.

Collected, as in the paper's UC3 architecture:

- link bandwidth: each switch egress's rate from the topology (or DCNLAB_UC3_CAPACITY),
  and its load from the OpenFlow port statistics FabricApp polls (reported in the state);
- competing flows per link: the host agents report their TCP flows (sock_diag), each mapped
  to its path;
- per-flow RTT and throughput: from the same reports (the kernel's srtt; bytes acked
  since the previous report), the throughput smoothed with EMA alpha.

Every notification interval the allocator (:mod:`dcnlab.schemes.uc3.alloc`) computes
each active flow's fair share at its bottleneck, optionally reallocates what flows below
``beta * share`` leave unused (per ingress edge switch: the path's first switch that is
not of tier ``external``), and turns the rate into a BDP window; the windows go to the
sending hosts' agents (:class:`~dcnlab.hosts.uc3_agent.client.AgentPool`), which
clamp the flows' cwnd with BPF.  Agents are reached over a management network
(``Network(management=True)``), never the data plane.

Environment (all optional except what reaching agents needs):

=============================  ==========================================================
``DCNLAB_UC3_AGENTS``          JSON file: host fabric IP -> agent address (``"a.b.c.d"``,
                               ``"a.b.c.d:port"`` or ``{"addr":..,"port":..}``); re-read
                               when it changes (agents may start after the app)
``DCNLAB_UC3_AGENT_PORT``      agent port when the file gives none (6690)
``DCNLAB_UC3_SECRET_FILE``     shared secret file (else ``DCNLAB_AGENT_SECRET``); without
                               a secret the app only routes (single_path) and warns
``DCNLAB_UC3_INTERVAL``        notification interval, s (0.05)
``DCNLAB_UC3_ALPHA``           EMA weight of the newest throughput sample (0.4)
``DCNLAB_UC3_BETA``            under-use threshold factor for reallocation (0.8)
``DCNLAB_UC3_ROUNDING``        ``up`` | ``round`` | ``down``: BDP to whole segments (up)
``DCNLAB_UC3_REALLOCATION``    1/0: reallocate unused bandwidth (1)
``DCNLAB_UC3_METHOD``          ``bottleneck`` (the paper) | ``maxmin`` (water-filling)
``DCNLAB_UC3_CAPACITY``        link capacity for every link, e.g. ``100M`` (default: the
                               topology's link rates; else the port's speed; else 1G)
``DCNLAB_UC3_MIN_RATE``        flows reporting less are idle, not competing (100k)
``DCNLAB_UC3_HEADER_BYTES``    wire bytes per segment besides the payload (66): windows
                               count segments, shares wire bits
=============================  ==========================================================

The state file (``DCNLAB_STATE_FILE``) gets a ``uc3`` section: configuration, agents
(connected or not), the latest allocation per flow (window, share, rate, RTT, throughput,
smoothed throughput, path) and per link (capacity, load, competing flows); counters
``uc3_*`` join FabricApp's counters.

Agents report every 0.1-0.2 s; with a shorter notification interval a round reuses the
latest sample, so the EMA sees it more than once (alpha then acts per round).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, cast

from ryu.lib import hub

from dcnlab.controller.compiler import STRIPED
from dcnlab.controller.fabric_app import FabricApp, discovery_mode
from dcnlab.hosts.uc3_agent import protocol as proto
from dcnlab.hosts.uc3_agent.bpf import Tuple4
from dcnlab.hosts.uc3_agent.client import AgentPool
from dcnlab.model.runtime import ENV_TOPOLOGY
from dcnlab.model.topology import EXTERNAL_TIER, TopologySpec
from dcnlab.schemes.uc3.alloc import Allocation, Allocator, AllocError
from dcnlab.schemes.uc3.collect import (
    FlowTable,
    Link,
    LinkLoad,
    PathError,
    PathFinder,
    competing,
    flow_key,
    link_capacities,
)
from dcnlab.schemes.uc3.config import ConfigError, Uc3Config, read_agents
from dcnlab.schemes.uc3.state_file import Uc3ControllerState

DEFAULT_CAPACITY_BPS = 1e9
AGENTS_RELOAD_S = 0.5


class Uc3(FabricApp):
    POLICY = STRIPED

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.uc3 = Uc3Config.from_env()
        self.allocator = Allocator(self.uc3.alloc)
        self.flow_table = FlowTable(self.uc3.min_rate_bps)
        self.path_finder = PathFinder()
        self.link_load = LinkLoad()
        self.capacity = link_capacities(self._spec(), self.uc3.capacity_bps)
        self.allocation: dict[Tuple4, Allocation] = {}
        self.paths: dict[Tuple4, tuple[Link, ...]] = {}
        self.agent_addrs: dict[str, tuple[str, int]] = {}
        self._agents_mtime: float | None = None
        self._agents_checked = 0.0
        self._sent: dict[str, dict[Tuple4, int]] = {}
        self._capacity_warned: set[Link] = set()
        self.pool: AgentPool | None = None
        if self.uc3.secret is None:
            self.warn("uc3: no agent secret (DCNLAB_UC3_SECRET_FILE): routing only, no "
                      "allocation")
        else:
            self.pool = AgentPool(self.uc3.secret, on_report=self._on_report)
        self._threads.append(hub.spawn(self._uc3_loop))

    @staticmethod
    def _spec() -> TopologySpec | None:
        path = os.environ.get(ENV_TOPOLOGY)
        if not path or discovery_mode():
            return None
        with open(path) as fh:
            return TopologySpec.from_dict(json.load(fh))

    # -- collection ------------------------------------------------------------

    def _on_report(self, name: str, msg: proto.AgentMessage) -> None:
        self.flow_table.report(name, msg.flows)
        self.counters["uc3_reports"] += 1

    def _reload_agents(self, now: float) -> None:
        path = self.uc3.agents_file
        if path is None or self.pool is None or now - self._agents_checked < AGENTS_RELOAD_S:
            return
        self._agents_checked = now
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return  # not written yet: whoever starts the agents writes it later
        if mtime == self._agents_mtime:
            return
        self._agents_mtime = mtime
        try:
            self.agent_addrs = read_agents(path, self.uc3.agent_port)
        except ConfigError as exc:
            self.warn(f"uc3: {exc}")
            return
        for ip, (addr, port) in self.agent_addrs.items():
            self.pool.ensure(ip, addr, port)
        self.pool.retain(self.agent_addrs)
        self.counters["uc3_agents_loaded"] += 1
        self.logger.info("uc3: %d agent(s) from %s", len(self.agent_addrs), path)

    def _link_capacity(self, link: Link) -> float:
        cap = self.capacity.get(link)
        if cap:
            return cap
        if self.uc3.capacity_bps:
            return self.uc3.capacity_bps
        port = self.ports.get(link[0], {}).get(link[1])
        speed_kbps = getattr(port, "curr_speed", 0) or 0
        if speed_kbps > 0:
            return speed_kbps * 1e3
        if link not in self._capacity_warned:
            self._capacity_warned.add(link)
            self.warn(f"uc3: no capacity known for switch {link[0]:#x} port {link[1]}; "
                      f"assuming {DEFAULT_CAPACITY_BPS:g} bit/s (set DCNLAB_UC3_CAPACITY)")
        return DEFAULT_CAPACITY_BPS

    def _outside(self) -> set[int]:
        """Switches beyond the data center's edge (tier ``external`` in the topology)."""
        return {dpid for dpid, tier in self.view.graph.nodes(data="tier")
                if tier == EXTERNAL_TIER}

    # -- allocation ------------------------------------------------------------

    def _uc3_loop(self) -> None:
        while True:
            hub.sleep(self.uc3.interval_s)
            try:
                self.allocate_once()
            except Exception:  # noqa: BLE001 - one bad round must not end allocation
                self.counters["uc3_errors"] += 1
                self.logger.exception("uc3 allocation round failed")

    def allocate_once(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._reload_agents(now)
        self.flow_table.expire(now)
        self.link_load.update(self.port_stats, now)
        compiled = self.compiled()
        paths: dict[Tuple4, tuple[Link, ...]] = {}
        for flow in self.flow_table.active():
            try:
                paths[flow] = self.path_finder.path(self.view, compiled, flow.local,
                                                    flow.remote)
            except PathError as exc:
                self.counters["uc3_no_path"] += 1
                self.logger.debug("uc3: %s", exc)
        inputs = self.flow_table.inputs(paths, self._outside())
        capacity = {link: self._link_capacity(link) for p in paths.values() for link in p}
        try:
            self.allocation = self.allocator.allocate(inputs, capacity) if inputs else {}
        except AllocError as exc:
            self.warn(f"uc3: allocation failed: {exc}")
            self.allocation = {}
        self.paths = paths
        self._push()
        self.counters["uc3_rounds"] += 1
        self._dirty = True

    def _push(self) -> None:
        if self.pool is None:
            return
        wanted: dict[str, dict[Tuple4, int]] = {name: {} for name in self.pool.agents}
        for flow, alloc in self.allocation.items():
            record = self.flow_table.flows.get(flow)
            if record is not None and record.agent in wanted:
                wanted[record.agent][flow] = alloc.window
        for name, clamps in wanted.items():
            if self._sent.get(name) != clamps:  # unchanged: the client's refresh resends
                self.pool.agents[name].set_clamps(clamps)
                self._sent[name] = clamps
                self.counters["uc3_clamp_updates"] += 1

    # -- reporting -------------------------------------------------------------

    def state(self) -> Uc3ControllerState:
        state = cast(Uc3ControllerState, super().state())
        cfg = self.uc3
        flows = {}
        for flow, alloc in self.allocation.items():
            rec = self.flow_table.flows.get(flow)
            flows[flow_key(flow)] = {
                "window": alloc.window, "share_bps": round(alloc.share_bps),
                "rate_bps": round(alloc.rate_bps), "under_using": alloc.under_using,
                "rtt_ms": round(rec.stats.rtt_us / 1e3, 3) if rec else None,
                "throughput_bps": round(rec.stats.throughput_bps) if rec else None,
                "ema_bps": round(self.allocator.ema.values.get(flow, 0.0)),
                "agent": rec.agent if rec else None,
                "path": [f"{d}:{p}" for d, p in self.paths.get(flow, ())]}
        counts = competing(self.paths)
        links = {f"{d}:{p}": {"capacity_bps": self._link_capacity((d, p)), "flows": n,
                              "load_bps": round(self.link_load.load_bps.get((d, p), 0.0))}
                 for (d, p), n in sorted(counts.items())}
        agents = {}
        if self.pool is not None:
            agents = {name: {"addr": f"{c.host}:{c.port}", "connected": c.connected,
                             "last_error": c.last_error}
                      for name, c in self.pool.agents.items()}
        state["uc3"] = {
            "config": {"interval_s": cfg.interval_s, "alpha": cfg.alloc.alpha,
                       "beta": cfg.alloc.beta, "rounding": str(cfg.alloc.rounding),
                       "reallocation": cfg.alloc.reallocation,
                       "method": str(cfg.alloc.method), "capacity_bps": cfg.capacity_bps,
                       "min_rate_bps": cfg.min_rate_bps,
                       "header_bytes": cfg.alloc.header_bytes,
                       "agents_file": str(cfg.agents_file) if cfg.agents_file else None},
            "agents": agents, "flows": flows, "links": links}
        return state
