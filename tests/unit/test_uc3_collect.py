"""UC3 app logic without a network: paths from compiled rules, flow table, config, Jain."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dcnlab.benchmarks.longflows import jain, rates, series
from dcnlab.controller.compiler import compile_policy
from dcnlab.controller.view import NetworkView
from dcnlab.hosts.uc3_agent.bpf import Tuple4
from dcnlab.hosts.uc3_agent.protocol import FlowStats
from dcnlab.schemes.uc3.alloc import Allocator, Rounding
from dcnlab.schemes.uc3.collect import (
    FlowTable,
    LinkLoad,
    PathError,
    PathFinder,
    competing,
    link_capacities,
)
from dcnlab.schemes.uc3.config import ConfigError, Uc3Config, parse_agents
from dcnlab.topo.spec import parse


def _stats(src: str, sport: int, dst: str, tput: float, rtt_us: float = 10_000) -> FlowStats:
    return FlowStats(Tuple4(src, sport, dst, 5400), rtt_us, 1448, 10, 0.0, tput, 1 << 20)


def test_dumbbell_paths_share_the_core_link() -> None:
    spec = parse("dumbbell:4")
    view = NetworkView.from_topology(spec)
    compiled = compile_policy(view, "striped")
    finder = PathFinder()
    server = spec.host("h7").ip
    p1 = finder.path(view, compiled, spec.host("h1").ip, server)
    p4 = finder.path(view, compiled, spec.host("h4").ip, server)
    core = (1, 1)  # s1 port 1 is the s1-s2 link (first link the family builds)
    assert p1[0] == core and p4[0] == core and p1[-1] == p4[-1]
    assert len(p1) == 2
    back = finder.path(view, compiled, server, spec.host("h1").ip)
    assert back[0][0] == 2 and back[-1] == (1, spec.host("h1").interfaces[0].port)
    assert competing({"a": p1, "b": p4}) == {core: 2, p1[-1]: 2}


def test_outside_flows_pool_at_the_data_center_edge() -> None:
    # dumbbell:4,2,1: h2 (A'') sends from behind the outside switch s3, h1 (A') from s1.
    spec = parse("dumbbell:4,2,1")
    view = NetworkView.from_topology(spec)
    compiled = compile_policy(view, "striped")
    server = spec.host("h7").ip
    a1, a2 = spec.host("h1").ip, spec.host("h2").ip
    paths = {Tuple4(ip, 40000, server, 5400): PathFinder().path(view, compiled, ip, server)
             for ip in (a1, a2)}
    assert paths[Tuple4(a2, 40000, server, 5400)][0][0] == 3  # leaves s3 first
    table = FlowTable(min_rate_bps=1e5)
    table.report("h1", [_stats(a1, 40000, server, 50e6)], now=0.0)
    table.report("h2", [_stats(a2, 40000, server, 5e6)], now=0.0)
    edges = {f.local: i.edge for f, i in table.inputs(paths, outside={3}).items()}
    assert edges == {a1: 1, a2: 1}  # both enter the data center at s1 (the paper's R2)
    # Without the tier the first switch is the edge, as for every other topology.
    edges = {f.local: i.edge for f, i in table.inputs(paths).items()}
    assert edges == {a1: 1, a2: 3}


def test_ecmp_rules_are_not_one_path() -> None:
    spec = parse("fattree:4")
    view = NetworkView.from_topology(spec)
    compiled = compile_policy(view, "groups")
    with pytest.raises(PathError):
        PathFinder().path(view, compiled, "10.0.0.1", "10.3.1.2")


def test_capacities_from_spec_and_override() -> None:
    spec = parse("dumbbell:2,rate=50M")
    caps = link_capacities(spec)
    assert set(caps.values()) == {50e6} and (1, 1) in caps and (2, 1) in caps
    assert set(link_capacities(spec, 10e6).values()) == {10e6}


def test_flow_table_keeps_active_senders_only() -> None:
    table = FlowTable(min_rate_bps=100e3, stale_s=1.0)
    table.report("10.0.0.1", [_stats("10.0.0.1", 1, "10.1.0.1", 40e6),
                              _stats("10.0.0.1", 2, "10.1.0.1", 10.0)], now=0.0)
    assert [f.lport for f in table.active()] == [1]
    path = ((1, 1), (2, 3))
    inputs = table.inputs({Tuple4("10.0.0.1", 1, "10.1.0.1", 5400): path})
    (only,) = inputs.values()
    assert only.edge == 1 and only.rtt_s == 0.01 and only.throughput_bps == 40e6
    assert not only.window_limited  # no clamp requested
    table.expire(now=2.0)
    assert not table.flows


def test_a_flow_its_agent_no_longer_lists_stops_competing_at_once() -> None:
    # The seed 004 variable scenario: a client stops, its socket closes and leaves the
    # agent's next report; the others' shares must grow then, not stale_s later.
    table = FlowTable(min_rate_bps=100e3, stale_s=2.0)
    a1, a2 = _stats("10.0.0.1", 1, "10.1.0.1", 25e6), _stats("10.0.0.1", 2, "10.1.0.1", 25e6)
    b1 = _stats("10.0.0.2", 1, "10.1.0.1", 25e6)
    table.report("a", [a1, a2], now=0.0)
    table.report("b", [b1], now=0.0)
    assert len(table.active()) == 3
    table.report("a", [a1], now=0.1)  # a2 closed
    assert set(table.active()) == {a1.flow, b1.flow}
    table.report("b", [], now=0.2)  # b's only flow closed: an empty report says so
    assert set(table.flows) == {a1.flow}
    # a flow that moved to another agent's report is that agent's: a's next report
    # without it does not remove it
    table.report("a", [a1, a2], now=0.25)
    table.report("b", [a2], now=0.3)
    table.report("a", [a1], now=0.4)
    assert set(table.flows) == {a1.flow, a2.flow}
    table.expire(now=2.35)  # b went silent after 0.3 s: its flow goes when stale
    assert set(table.flows) == {a1.flow}


def test_two_rtts_get_equal_rates_and_bdp_windows() -> None:
    table = FlowTable()
    table.report("a", [_stats("10.0.0.1", 1, "10.1.0.1", 60e6, rtt_us=6_000)], now=0)
    table.report("b", [_stats("10.0.0.4", 1, "10.1.0.1", 45e6, rtt_us=34_000)], now=0)
    path = ((1, 1), (2, 3))
    inputs = table.inputs({f: path for f in table.flows})
    out = Allocator().allocate(inputs, {(1, 1): 100e6, (2, 3): 100e6})
    windows = sorted(a.window for a in out.values())
    # ceil(50e6/8 * rtt / 1514-byte frames): 37,500 / 1,514 = 24.8 -> 25;
    # 212,500 / 1,514 = 140.4 -> 141
    assert windows == [25, 141]
    assert {a.rate_bps for a in out.values()} == {50e6}


def test_link_load_from_counters() -> None:
    load = LinkLoad()
    load.update({1: {1: {"tx_bytes": 0}}}, now=0.0)
    load.update({1: {1: {"tx_bytes": 1_250_000}}}, now=1.0)
    assert load.load_bps[(1, 1)] == 10e6
    load.update({1: {1: {"tx_bytes": 1_250_000}}}, now=5.0)
    assert load.load_bps[(1, 1)] == 0.0


def test_config_from_env_and_errors() -> None:
    cfg = Uc3Config.from_env({"DCNLAB_AGENT_SECRET": "s" * 32, "DCNLAB_UC3_ROUNDING": "down",
                              "DCNLAB_UC3_REALLOCATION": "off", "DCNLAB_UC3_CAPACITY": "100M",
                              "DCNLAB_UC3_INTERVAL": "0.1"})
    assert cfg.alloc.rounding is Rounding.DOWN and not cfg.alloc.reallocation
    assert cfg.capacity_bps == 100e6 and cfg.interval_s == 0.1 and cfg.secret == b"s" * 32
    assert Uc3Config.from_env({}).secret is None
    for bad in ({"DCNLAB_UC3_ALPHA": "2"}, {"DCNLAB_UC3_ROUNDING": "sideways"},
                {"DCNLAB_UC3_CAPACITY": "fast"}, {"DCNLAB_UC3_SECRET_FILE": "/nonexistent"}):
        with pytest.raises(ConfigError):
            Uc3Config.from_env(bad)


def test_agents_file_forms() -> None:
    got = parse_agents({"10.0.0.1": "192.168.0.2", "10.0.0.2": "192.168.0.3:7000",
                        "10.0.0.3": {"addr": "192.168.0.4", "port": 7001}}, 6690)
    assert got == {"10.0.0.1": ("192.168.0.2", 6690), "10.0.0.2": ("192.168.0.3", 7000),
                   "10.0.0.3": ("192.168.0.4", 7001)}
    for bad in ([], {"x": "192.168.0.2"}, {"10.0.0.1": "nowhere"}, {"10.0.0.1": 5},
                {"10.0.0.1": "192.168.0.2:0"}):
        with pytest.raises(ConfigError):
            parse_agents(bad, 6690)


def test_jain_and_receiver_rates() -> None:
    assert jain([1, 1]) == 1.0 and jain([1, 0]) == 0.5 and jain([]) == 1.0
    rows = [(0.0, {"a": 0, "b": 0}), (1.0, {"a": 1000, "b": 500}), (2.0, {"a": 2000, "b": 1000})]
    assert rates(rows, 0.0, 2.0) == {"a": 8000.0, "b": 4000.0}
    per = series(rows)
    assert len(per) == 2 and per[0]["total_bps"] == 12000.0
    assert per[0]["jain"] == pytest.approx(0.9)


def test_a_flow_whose_cwnd_reached_its_clamp_is_window_limited() -> None:
    """The agent reports each flow's cwnd and the window clamped on it: at the clamp, the
    flow sends all it is allowed (the allocator never counts it as under-using)."""
    path = ((1, 1), (2, 3))
    cases = {1: (10, 10), 2: (10, 12), 3: (12, 10), 4: (10, 0)}  # sport: (cwnd, clamp)
    table = FlowTable()
    table.report("10.0.0.1", [replace(_stats("10.0.0.1", p, "10.1.0.1", 5e6), cwnd=c, clamp=k)
                              for p, (c, k) in cases.items()], now=0.0)
    inputs = table.inputs({f: path for f in table.flows})
    assert {f.lport: i.window_limited for f, i in inputs.items()} == {
        1: True, 2: False, 3: True, 4: False}
