"""The elephant path diagnosis in memory (flowdiag.py): paths from flow-tap entries,
shared links in time, least-loaded choices on hand-built timelines, the spec option,
the run-time estimate, and the flow tap's pure helpers (flowtap.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from dcnlab.benchmarks.engine import SpecFileError, flowdiag, flowtap
from dcnlab.benchmarks.engine.flowdiag import Choice, FlowPath, Hop, Link, Timeline
from dcnlab.benchmarks.engine.spec import parse_spec, parse_specs
from dcnlab.topo.spec import parse as parse_topology

GOOD: dict[str, Any] = {
    "topology": "spineleaf:2,2,1",
    "link": {"rate": "10M"},
    "schemes": ["ryu.app.simple_switch_13", {"name": "again",
                                             "app": "ryu.app.simple_switch_13"}],
    "workload": {"type": "poisson", "cdf": "websearch"},
    "loads": [0.1],
    "seeds": [1],
    "duration": 10,
}


def _spec(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}

# spineleaf:2,2,1: leaves s3 (h1) and s4 (h2); s3 port 1 -> s1, port 2 -> s2.
UP_S1 = Link("s3", 1, "s1", 1)
UP_S2 = Link("s3", 2, "s2", 1)
DOWN_S1 = Link("s1", 2, "s4", 1)
DOWN_S2 = Link("s2", 2, "s4", 2)
LINKS = {"x-s1-eth1": UP_S1, "x-s2-eth1": UP_S2, "x-s4-eth1": DOWN_S1, "x-s4-eth2": DOWN_S2}
UPS = {"s3": [1, 2], "s4": [1, 2]}


def entry(src: str, sport: int, iface: str, nbytes: int, first: int, last: int,
          syn: int = 0, seen: int | None = None, dst: str = "10.0.1.1") -> dict[str, Any]:
    return {"src": src, "dst": dst, "sport": sport, "dport": 5001, "proto": 6,
            "iface": iface, "bytes": nbytes, "pkts": (nbytes + 1499) // 1500,
            "first_ns": first, "last_ns": last, "syn_pkts": syn,
            "seen_ns": first if seen is None else seen}


def test_a_path_is_the_links_that_carried_data_not_the_syn_copies() -> None:
    entries = [
        entry("10.0.0.1", 30001, "x-s2-eth1", 10_000_000, 100, 900, syn=1, seen=90),
        entry("10.0.0.1", 30001, "x-s4-eth2", 10_000_000, 101, 901, syn=1, seen=91),
        # a flooded SYN copy over s1: no data packets
        {**entry("10.0.0.1", 30001, "x-s1-eth1", 0, 0, 0, syn=1, seen=92), "pkts": 0},
        # a stray data packet over s1 (below 1 % of the busiest link): not the path
        entry("10.0.0.1", 30001, "x-s4-eth1", 1500, 120, 120),
        # another interface than the fabric's, and UDP: ignored
        entry("10.0.0.1", 30001, "x-h1-eth0", 10_000_000, 100, 900),
        {**entry("10.0.0.1", 30001, "x-s1-eth1", 5000, 1, 2), "proto": 17},
    ]
    paths = flowdiag.flow_paths(entries, LINKS)
    path = paths[("10.0.0.1", "10.0.1.1", 30001, 5001)]
    assert [h.link for h in path.hops] == [UP_S2, DOWN_S2]
    assert path.seen_ns == 90 and path.start_ns == 100 and path.end_ns == 901
    assert UP_S2.name == "s3:2>s2:1"


def test_a_rerouted_flow_keeps_every_link_it_used() -> None:
    entries = [entry("10.0.0.1", 30001, "x-s2-eth1", 5_000_000, 100, 500),
               entry("10.0.0.1", 30001, "x-s1-eth1", 5_000_000, 600, 900)]
    path = flowdiag.flow_paths(entries, LINKS)[("10.0.0.1", "10.0.1.1", 30001, 5001)]
    assert [h.link for h in path.hops] == [UP_S2, UP_S1]


def _path(*hops: tuple[Link, int, int], seen: int | None = None) -> FlowPath:
    built = [Hop(link, 1000, first, last) for link, first, last in hops]
    return FlowPath(built, seen if seen is not None else min(h.first_ns for h in built))


def test_sharing_needs_a_common_link_at_a_common_time() -> None:
    paths = {
        "a": _path((UP_S1, 0, 100), (DOWN_S1, 1, 101)),
        "b": _path((UP_S1, 50, 150), (DOWN_S1, 51, 151)),   # overlaps a on both links
        "c": _path((UP_S2, 0, 100), (DOWN_S2, 1, 101)),     # other links
        "d": _path((UP_S1, 200, 300), (DOWN_S1, 201, 301)),  # same links, later
        "e": _path((UP_S2, 101, 200), (DOWN_S2, 101, 201)),  # touches c at 101: no overlap
        "f": _path((UP_S2, 250, 260)),                        # after c and e
    }
    shared = flowdiag.shared_with(paths, ["a", "b", "c", "d", "e", "f"], paths)
    assert shared == {"a": ["b"], "b": ["a"], "c": [], "d": [], "e": [], "f": []}
    # only the measured ones are asked about; an unmeasured elephant still collides
    assert flowdiag.shared_with(paths, ["d"], ["d", "f"]) == {"d": []}
    assert flowdiag.shared_with(paths, ["a"], ["a", "b"]) == {"a": ["b"]}
    assert flowdiag.shared_with(paths, ["zz"], paths) == {}


def test_contention_weighs_how_many_elephants_for_how_long() -> None:
    paths = {
        "a": _path((UP_S1, 0, 100), (DOWN_S1, 0, 100)),
        "b": _path((UP_S1, 50, 100), (DOWN_S1, 50, 100)),    # half of a's time, both links
        "c": _path((UP_S1, 0, 100), (DOWN_S1, 0, 100)),      # all of a's time
        "d": _path((UP_S2, 0, 100), (DOWN_S2, 0, 100)),      # other links: alone
        "e": _path((UP_S2, 100, 200)),                        # touches d at 100: no overlap
    }
    crowd = flowdiag.contention(paths, ["a", "b", "d", "e", "zz"], paths)
    assert crowd == {"a": 1.5, "b": 2.0, "d": 0.0, "e": 0.0}
    # only elephants in ``others`` count
    assert flowdiag.contention(paths, ["a"], ["a", "b"]) == {"a": 0.5}


def _timeline() -> Timeline:
    # s3's uplinks and s4's (no flow goes up from s4 here); samples every 200 ns.
    return Timeline([0, 200, 400, 600], {
        ("s3", 1): [0, 100_000, 100_000, 300_000],  # intervals: 100000, 0, 200000
        ("s3", 2): [0, 0, 50_000, 50_000],          # intervals: 0, 50000, 0
        ("s4", 1): [0, 0, 0, 0], ("s4", 2): [0, 0, 0, 0],
        ("s1", 2): [0, 0, 0, 0], ("s2", 2): [0, 0, 0, 0]})  # the spines' links down to s4


def test_load_before_is_the_last_complete_interval() -> None:
    line = _timeline()
    assert line.load_before(199) is None  # no interval has ended yet
    assert line.load_before(200)[("s3", 1)] == 100_000
    assert line.load_before(450)[("s3", 1)] == 0 and line.load_before(450)[("s3", 2)] == 50_000
    assert line.load_before(10_000)[("s3", 1)] == 200_000


def test_the_least_loaded_choice_is_judged_at_syn_time() -> None:
    line = _timeline()
    # SYN at 300: interval 0..200 had s3:1 = 100000, s3:2 = 0 -> port 2 was least loaded
    on_2 = _path((UP_S2, 300, 900), (DOWN_S2, 301, 901))
    [pick] = flowdiag.choices(on_2, UPS, line)
    assert pick == Choice("s3", 2, {1: 100_000, 2: 0})
    assert pick.contested and pick.least_loaded
    on_1 = _path((UP_S1, 300, 900), (DOWN_S1, 301, 901))
    [pick] = flowdiag.choices(on_1, UPS, line)
    assert pick.contested and not pick.least_loaded
    # SYN at 500 (interval 200..400: 0 vs 50000): port 1 is the least loaded now
    [pick] = flowdiag.choices(_path((UP_S1, 500, 900), (DOWN_S1, 501, 901)), UPS, line)
    assert pick.loads == {1: 0, 2: 50_000} and pick.least_loaded
    # the down hop leaves s1 (a spine: no up ports), not a choice; s4's up ports are
    # never left by this flow
    assert flowdiag.choices(_path((UP_S1, 100, 900)), UPS, line) == []  # SYN too early


def test_equal_loads_are_no_contest() -> None:
    pick = Choice("s3", 1, {1: 1000, 2: 1000 + flowdiag.TIE_BYTES})
    assert not pick.contested and pick.least_loaded
    pick = Choice("s3", 1, {1: 1000 + flowdiag.TIE_BYTES + 1, 2: 1000})
    assert pick.contested and not pick.least_loaded


def test_every_choice_point_of_a_three_layer_path() -> None:
    topo = parse_topology("threelayer:2,1,1,2")
    from dcnlab.benchmarks.engine import pathdiag

    ups = pathdiag.up_ports([s.name for s in topo.switches],
                            [(lk.a, lk.a_port, lk.b, lk.b_port) for lk in topo.links])
    tiers = {s.name: s.tier for s in topo.switches}
    assert sorted({tiers[s] for s in ups}) == ["fabric", "rack"]
    rack = next(s for s in ups if tiers[s] == "rack")
    assert len(ups[rack]) == 4  # 4 planes: 4 disjoint paths
    up_link = next(lk for lk in topo.links if lk.a == rack and lk.a_port == ups[rack][0])
    fab = up_link.b
    assert len(ups[fab]) == 2  # 2 spines per plane
    fab_port = next(p for p in ups[fab])
    spine_link = next(lk for lk in topo.links
                      if (lk.a, lk.a_port) == (fab, fab_port) or (lk.b, lk.b_port) ==
                      (fab, fab_port))
    spine = spine_link.b if spine_link.a == fab else spine_link.a
    hop1 = Link(rack, ups[rack][0], fab, up_link.b_port)
    hop2 = Link(fab, fab_port, spine, 1)
    ports = {(rack, p): [0, 10, 10] for p in ups[rack]}
    ports.update({(fab, p): [0, 0, 0] for p in ups[fab]})
    ports[(rack, ups[rack][0])] = [0, 0, 0]          # the chosen rack uplink was idle
    ports[(fab, fab_port)] = [0, 9000, 9000]         # the chosen spine port was busy
    line = Timeline([0, 100, 200], ports)
    picks = flowdiag.choices(_path((hop1, 150, 900), (hop2, 151, 901)), ups, line)
    assert [(c.switch, c.chosen) for c in picks] == [(rack, ups[rack][0]), (fab, fab_port)]
    assert [c.contested for c in picks] == [False, True]  # 10 bytes apart is no contest
    assert not picks[1].least_loaded


def test_the_alternatives_are_every_shortest_path_between_the_edges() -> None:
    fabric = list(LINKS.values())
    assert sorted(flowdiag.shortest_paths(fabric, "s3", "s4"), key=str) == sorted(
        [(UP_S1, DOWN_S1), (UP_S2, DOWN_S2)], key=str)
    assert flowdiag.shortest_paths(fabric, "s4", "s3") == []  # no link back up here
    assert flowdiag.shortest_paths(fabric, "s3", "s3") == []
    topo = parse_topology("threelayer:2,2,1,1")
    links = [lk for t in topo.links for lk in (Link(t.a, t.a_port, t.b, t.b_port),
                                              Link(t.b, t.b_port, t.a, t.a_port))]
    racks = sorted(s.name for s in topo.switches if s.tier == "rack")
    hosts_pod = {s.name: s.pod for s in topo.switches}
    same_pod = [r for r in racks[1:] if hosts_pod[r] == hosts_pod[racks[0]]]
    other_pod = [r for r in racks if hosts_pod[r] != hosts_pod[racks[0]]]
    # 4 planes: 4 disjoint paths, 2 links inside a pod, 4 between pods
    assert [len(p) for p in flowdiag.shortest_paths(links, racks[0], same_pod[0])] == [2] * 4
    between = flowdiag.shortest_paths(links, racks[0], other_pod[0])
    assert [len(p) for p in between] == [4] * 4
    assert len({lk for p in between for lk in p}) == 16


def test_the_least_loaded_path_is_judged_by_its_busiest_link() -> None:
    """An idle first hop can lead to a busy path: the spine's link down to the
    destination is part of the choice."""
    line = Timeline([0, 200], {("s3", 1): [0, 0], ("s3", 2): [0, 50_000],
                               ("s1", 2): [0, 200_000], ("s2", 2): [0, 0]})
    via_s1 = _path((UP_S1, 300, 900), (DOWN_S1, 301, 901))
    [first] = flowdiag.choices(via_s1, UPS, line)
    assert first.contested and first.least_loaded
    whole = flowdiag.path_choice(via_s1, list(LINKS.values()), line)
    assert whole == flowdiag.PathChoice(200_000, (200_000, 50_000))
    assert whole.contested and not whole.least_loaded
    via_s2 = _path((UP_S2, 300, 900), (DOWN_S2, 301, 901))
    whole = flowdiag.path_choice(via_s2, list(LINKS.values()), line)
    assert whole is not None and whole.least_loaded
    # no sample before the SYN, or a path with no alternative: no choice to judge
    assert flowdiag.path_choice(_path((UP_S1, 100, 900), (DOWN_S1, 101, 901)),
                                list(LINKS.values()), line) is None
    assert flowdiag.path_choice(via_s1, [UP_S1, DOWN_S1], line) is None


def test_run_figures_and_rows_by_hand() -> None:
    line = _timeline()
    paths = {
        ("10.0.0.1", "10.0.1.1", 30001, 5001): _path((UP_S2, 300, 900), (DOWN_S2, 301, 901)),
        ("10.0.0.1", "10.0.1.1", 30002, 5001): _path((UP_S1, 300, 700), (DOWN_S1, 301, 701)),
        ("10.0.0.1", "10.0.1.1", 30003, 5001): _path((UP_S1, 500, 800), (DOWN_S1, 501, 801)),
        ("10.0.0.1", "10.0.1.1", 10004, 5001): _path((UP_S2, 300, 900)),  # a mouse
    }
    rows = [{"flow_id": i, "src": "h1", "dst": "h2", "sport": sport, "size": size,
             "class": cls, "measured": measured, "kind": "tcp", "status": "ok"}
            for i, sport, size, cls, measured in (
                (1, 30001, 20_000_000, "elephant", True),
                (2, 30002, 20_000_000, "elephant", True),
                (3, 30003, 20_000_000, "elephant", "False"),  # from a CSV, not measured
                (4, 10004, 5_000, "mouse", True),
                (5, 30005, 20_000_000, "elephant", True))]   # never seen by the tap
    keys = flowdiag.flow_keys(rows, {"h1": "10.0.0.1", "h2": "10.0.1.1"}, 5001)
    assert keys[1] == ("10.0.0.1", "10.0.1.1", 30001, 5001) and len(keys) == 5
    figures, out = flowdiag.analyze(rows, keys, paths, UPS, line, offset_ns=10**9,
                                    lost=0, fabric=list(LINKS.values()))
    # measured elephants: 1, 2, 5; traced: 1, 2.  2 overlaps 3 on s1 links (500..700);
    # 1 is alone on s2 (the mouse does not count).  Choices at SYN 300: 1 took the idle
    # port (least loaded), 2 the busy one; the same for their whole paths.
    # 2 shares its s1 links with 3 for 200 of its 400 ns: contention 0.5; 1 is alone.
    assert figures == {"elephants": 3, "traced": 2, "eleph_shared_frac": 0.5,
                       "eleph_contention": 0.25,
                       "choices": 2, "least_loaded_frac": 0.5, "hop_choices": 2,
                       "least_loaded_hops_frac": 0.5, "path_choices": 2,
                       "least_loaded_path_frac": 0.5, "tap_lost": 0}
    by = {r["flow_id"]: r for r in out}
    assert sorted(by) == [1, 2, 5]
    assert by[1]["links"] == "s3:2>s2:1 s2:2>s4:2" and by[1]["shared"] is False
    assert by[2]["shared_with"] == "3" and by[2]["least_loaded"] is False
    assert by[2]["contention"] == 0.5 and by[1]["contention"] == 0.0
    assert by[5]["contention"] is None
    assert by[1]["port_loads"] == "1:100000 2:0" and by[1]["least_loaded"] is True
    assert by[1]["path_loads"] == "0 of 0 100000" and by[1]["least_loaded_path"] is True
    assert by[2]["path_loads"] == "100000 of 0 100000" and by[2]["least_loaded_path"] is False
    assert by[1]["start"] == pytest.approx(1.0000003) and by[1]["end"] == pytest.approx(
        1.000000901)
    assert by[5]["links"] == "" and by[5]["shared"] is None
    empty, _ = flowdiag.analyze([], {}, {}, UPS, line)
    assert math.isnan(empty["eleph_shared_frac"]) and empty["elephants"] == 0


def test_summary_has_intervals_across_seeds() -> None:
    rows = [{"scheme": s, "load": 0.2, "seed": seed, "eleph_shared_frac": v,
             "least_loaded_frac": v, "elephants": 4}
            for s, seed, v in (("ecmp", 1, 0.5), ("ecmp", 2, 0.7), ("tp", 1, 0.1),
                               ("tp", 2, 0.3))]
    summary = {(r.scheme, r.metric): r for r in flowdiag.summarize(rows, "ecmp")}
    assert summary[("ecmp", "eleph_shared_frac")].mean == pytest.approx(0.6)
    assert summary[("ecmp", "eleph_shared_frac")].ci > 0
    assert summary[("tp", "eleph_shared_frac")].ratio == pytest.approx(
        math.sqrt(0.2 * 3 / 7))  # geometric mean of the per-seed ratios
    text = flowdiag.render(flowdiag.summarize(rows, "ecmp"), ["ecmp", "tp"], "ecmp", "load")
    assert "elephants sharing a link" in text and "least loaded 1st hop" in text


# ---------------------------------------------------------------------------- spec


def test_diagnosis_is_off_by_default_and_validated() -> None:
    spec = parse_spec(_spec(), check_apps=False)
    assert spec.diagnosis.flow_paths is False and spec.diagnosis.interval == 0.2
    spec = parse_spec(_spec(diagnosis={"flow_paths": True, "interval": 0.5}),
                      check_apps=False)
    assert spec.diagnosis.flow_paths and spec.diagnosis.interval == 0.5


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"diagnosis": {"flow_paths": "yes"}}, "diagnosis.flow_paths", "true or false"),
    ({"diagnosis": {"interval": 0.01}}, "diagnosis.interval", ">= 0.05"),
    ({"diagnosis": {"interval": 10}}, "diagnosis.interval", "<= 5"),
    ({"diagnosis": {"paths": True}}, "diagnosis.paths", "did you mean 'flow_paths'"),
    ({"diagnosis": True}, "diagnosis", "mapping"),
    ({"diagnosis": {"flow_paths": True}, "topology": "incast:4"}, "diagnosis.flow_paths",
     "no switch-to-switch links"),
    ({"diagnosis": {"flow_paths": True}, "switch": "ofss"}, "diagnosis.flow_paths",
     "'ofss' is not supported"),
])
def test_bad_diagnosis_is_named(changes: dict[str, Any], field: str, words: str) -> None:
    data = _spec(**changes)
    if data["topology"].startswith("incast"):
        data["workload"] = {"type": "incast"}
        data.pop("duration")
        data["loads"] = [1]
    with pytest.raises(SpecFileError) as info:
        parse_specs(data)
    assert info.value.field == field, info.value
    assert words in str(info.value)


def test_estimate_counts_runs_networks_and_drain() -> None:
    from dcnlab.benchmarks.engine.runner import NETWORK_SETUP_S, estimate_seconds, estimate_text

    spec = parse_spec(_spec(duration=10, settle=2, drain=30), check_apps=False)
    low, high = estimate_seconds([spec], [4])  # 2 schemes, one network each
    assert low == 4 * (10 + 2) + 2 * NETWORK_SETUP_S
    assert high == low + 4 * 30
    assert "4 run(s)" in estimate_text([spec], [4])
    per_run = parse_spec(_spec(duration=10, settle=2, drain=30, network="per_run"),
                         check_apps=False)
    assert estimate_seconds([per_run], [4])[0] == 4 * (10 + 2) + 4 * NETWORK_SETUP_S
    assert estimate_seconds([spec], [0]) == (0.0, 0.0)


# ---------------------------------------------------------------------------- flowtap


def test_fabric_interfaces_name_both_directions_of_switch_links() -> None:
    links = [("h1", 0, "s3", 3), ("s3", 1, "s1", 1), ("s1", 2, "s4", 1)]
    ifaces = flowtap.fabric_ifaces("d1x9-", links, ["s1", "s3", "s4"])
    assert ifaces == {"d1x9-s1-eth1": ("s3", 1, "s1", 1), "d1x9-s3-eth1": ("s1", 1, "s3", 1),
                      "d1x9-s4-eth1": ("s1", 2, "s4", 1), "d1x9-s1-eth2": ("s4", 1, "s1", 2)}


def test_tx_bytes_come_from_proc_net_dev() -> None:
    text = ("Inter-|   Receive                            |  Transmit\n"
            " face |bytes    packets errs drop fifo frame compressed multicast|bytes ...\n"
            "    lo:     100       1    0    0    0     0          0         0      100 1 "
            "0 0 0 0 0 0\n"
            "d1x9-s1-eth1: 2000 3 0 0 0 0 0 0 777777 9 0 0 0 0 0 0\n")
    assert flowtap.read_tx_bytes(["d1x9-s1-eth1", "gone"], text) == {"d1x9-s1-eth1": 777777}


def test_tap_key_and_value_layouts_match_the_c_structs() -> None:
    assert flowtap.KEY.size == 4 + 4 + 2 + 2 + 1 + 3 + 4  # struct tap_key
    assert flowtap.VALUE.size == 6 * 8  # struct tap_val
    source = flowtap.SOURCE.read_text()
    assert "return TC_ACT_OK;" in source and "TC_ACT_SHOT" not in source


def test_the_long_seed001_file_asks_for_the_diagnosis_everywhere() -> None:
    from importlib import resources
    from pathlib import Path

    from dcnlab.benchmarks.engine.spec import load_specs

    folder = resources.files("dcnlab.benchmarks").joinpath("experiments")
    specs = load_specs(Path(str(folder.joinpath("seed001_long.yaml"))))
    assert [s.scenario for s in specs] == ["ovs", "ext", "threelayer"]
    for spec in specs:
        assert spec.diagnosis.flow_paths and spec.loads == [0.1, 0.2, 0.4, 0.6]
        assert [s.name for s in spec.schemes] == ["ecmp", "arppath", "tcppath", "tfe"]
        assert len(spec.seeds) >= 3 and spec.duration >= 90
    by = {s.scenario: s for s in specs}
    assert by["ovs"].switch == "ovs" and "buffer" not in by["ovs"].topology
    assert by["ext"].switch == "ext" and "buffer=100" in by["ext"].topology
    assert by["threelayer"].topology.startswith("threelayer:")


def test_fractions_pooled_over_seeds_with_wilson_intervals() -> None:
    low, high = flowdiag.wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)
    assert flowdiag.wilson(0, 3)[0] == 0.0 and flowdiag.wilson(3, 3)[1] == 1.0
    assert all(math.isnan(v) for v in flowdiag.wilson(0, 0))
    rows = [  # seed 1: 2 traced elephants, 1 shared; seed 2: 8 traced, 6 shared
        {"scheme": "tp", "load": "0.2", "seed": "1", "eleph_shared_frac": "0.5",
         "traced": "2", "least_loaded_frac": "", "choices": "0"},
        {"scheme": "tp", "load": "0.2", "seed": "2", "eleph_shared_frac": "0.75",
         "traced": "8", "least_loaded_frac": "0.25", "choices": "4"},
    ]
    counts = flowdiag.pooled(rows)
    assert counts[("tp", 0.2, "eleph_shared_frac")] == (7, 10)  # not (0.5 + 0.75) / 2
    assert counts[("tp", 0.2, "least_loaded_frac")] == (1, 4)
    assert ("tp", 0.2, "least_loaded_hops_frac") not in counts
    text = flowdiag.render(flowdiag.summarize(rows, None), ["tp"], None, "load", rows)
    assert "7/10 0.70 [0.40-0.89]" in text and "1/4 0.25 [0.05-0.70]" in text
