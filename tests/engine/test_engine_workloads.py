"""Workload generators: calibrated load, determinism, pairs, scenario structure, marks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dcnlab.benchmarks.engine.cdf import load_cdf
from dcnlab.benchmarks.engine.marking import Marking, assign_marks
from dcnlab.benchmarks.engine.schema import SpecFileError
from dcnlab.benchmarks.engine.spec import load_specs, parse_spec
from dcnlab.benchmarks.engine.workloads import (
    ClientEvent,
    Flow,
    IncastSizeWorkload,
    IncastWorkload,
    LongLivedWorkload,
    PoissonWorkload,
    RpsRandomWorkload,
    RpsStaticWorkload,
    ShortLongWorkload,
    WorkloadError,
    arrival_rate,
    generate,
    offered_load,
    rack_of,
)
from dcnlab.topo.spec import parse

FATTREE = parse("fattree:4,rate=10M")


def test_arrival_rate_formula() -> None:
    # rho * C / (8 E[S]) per host: 0.5 * 10 Mbit/s / (8 * 1 MB) = 0.625 flows/s.
    assert arrival_rate(0.5, 10.0, 1e6, 1) == pytest.approx(0.625)
    assert arrival_rate(0.5, 10.0, 1e6, 16) == pytest.approx(16 * 0.625)
    with pytest.raises(WorkloadError):
        arrival_rate(0.0, 10.0, 1e6, 1)


@pytest.mark.parametrize(("cdf", "load"), [("websearch", 0.3), ("websearch", 0.6),
                                           ("datamining", 0.4)])
def test_offered_load_matches_the_target(cdf: str, load: float) -> None:
    # A long draw: the heavy tails need many flows before the mean settles.
    duration = 20_000.0 if cdf == "websearch" else 200_000.0
    flows = generate(PoissonWorkload(cdf=cdf), FATTREE, load, seed=11, duration=duration)
    measured = offered_load(flows, duration, link_mbit=10.0, hosts=16)
    assert measured == pytest.approx(load, rel=0.05)
    # Every host's uplink and downlink carry about the same share.
    for side in ("src", "dst"):
        per_host = np.array([sum(f.size for f in flows if getattr(f, side) == h.name)
                             for h in FATTREE.hosts], dtype=float)
        assert per_host.std() / per_host.mean() < 0.2


def test_poisson_arrivals_and_sizes() -> None:
    flows = generate(PoissonWorkload(), FATTREE, 0.4, seed=3, duration=5_000.0)
    starts = np.array([f.start for f in flows])
    assert np.all(np.diff(starts) >= 0) and starts.max() < 5_000.0
    gaps = np.diff(starts)
    expected = arrival_rate(0.4, 10.0, load_cdf("websearch").mean(), 16)
    assert 1 / gaps.mean() == pytest.approx(expected, rel=0.05)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, abs=0.05)  # exponential
    assert [f.id for f in flows] == list(range(len(flows)))


def test_pairs_are_inter_rack_unless_asked_otherwise() -> None:
    flows = generate(PoissonWorkload(), FATTREE, 0.5, seed=1, duration=500.0)
    racks = {h.name: rack_of(h) for h in FATTREE.hosts}
    assert flows and all(racks[f.src] != racks[f.dst] for f in flows)
    anyp = generate(PoissonWorkload(pairs="any"), FATTREE, 0.5, seed=1, duration=500.0)
    assert all(f.src != f.dst for f in anyp)
    assert any(racks[f.src] == racks[f.dst] for f in anyp)
    pool = generate(PoissonWorkload(hosts=["h1", "h2", "h5"]), FATTREE, 0.5, seed=1,
                    duration=500.0)
    assert {f.src for f in pool} | {f.dst for f in pool} <= {"h1", "h2", "h5"}


def test_identical_lists_for_identical_seeds() -> None:
    marking = Marking()
    for workload, value in ((PoissonWorkload(), 0.3), (RpsRandomWorkload(), 4),
                            (IncastWorkload(jitter=0.001), 5)):
        a = assign_marks(generate(workload, FATTREE, value, 5, 30.0), marking, 5)
        b = assign_marks(generate(workload, FATTREE, value, 5, 30.0), marking, 5)
        c = assign_marks(generate(workload, FATTREE, value, 6, 30.0), marking, 6)
        assert a == b
        assert a != c


def test_incast_rounds_are_synchronized() -> None:
    flows = generate(IncastWorkload(size=32_000, receiver="h1", rounds=3, interval=0.5),
                     FATTREE, 4, seed=1, duration=0.0)
    assert len(flows) == 12
    assert {f.dst for f in flows} == {"h1"} and len({f.src for f in flows}) == 4
    assert sorted({f.start for f in flows}) == [0.0, 0.5, 1.0]
    assert all(f.size == 32_000 for f in flows)
    with pytest.raises(WorkloadError):
        generate(IncastWorkload(receiver="h1"), FATTREE, 16, seed=1, duration=0.0)


def test_incast_size_sweeps_the_flow_size() -> None:
    w = IncastSizeWorkload(count=3, receiver="h1", rounds=2, interval=4.0)
    flows = generate(w, FATTREE, 1_000_000, seed=1, duration=0.0)
    assert len(flows) == 6 and {f.size for f in flows} == {1_000_000}
    assert {f.dst for f in flows} == {"h1"} and sorted({f.start for f in flows}) == [0.0, 4.0]
    with pytest.raises(WorkloadError, match="whole number of bytes"):
        w.check(FATTREE, 0.5, None)
    with pytest.raises(WorkloadError) as err:
        IncastSizeWorkload(count=16, receiver="h1").check(FATTREE, 1000, None)
    assert err.value.field == "count"


def test_seed002_short_and_long_flows_to_a_few_receivers() -> None:
    topo = parse("torcore:4,4")
    w = ShortLongWorkload(receivers=5, long_flows=5)
    flows = generate(w, topo, 0.005, seed=3, duration=20.0)
    longs = [f for f in flows if f.tag == "long"]
    shorts = [f for f in flows if f.tag == "short"]
    receivers = {f.dst for f in longs}
    # one long flow of 30 MB to each receiver, at 0; no receiver ever sends
    assert len(longs) == 5 and len(receivers) == 5 and {f.size for f in longs} == {30_000_000}
    assert all(f.start == 0.0 for f in longs)
    assert {f.dst for f in shorts} <= receivers
    assert not {f.src for f in flows} & receivers
    # exponential gaps of mean 5 ms over 20 s: ~4000 flows, mean gap within 5%
    starts = np.array(sorted(f.start for f in shorts))
    assert 3600 < len(shorts) < 4400 and abs(np.diff(starts).mean() - 0.005) < 0.00025
    assert starts.max() < 20.0
    # Pareto(shape 1.2, mean 50 KB): scale 8333 bytes is the smallest size; the median is
    # scale * 2^(1/1.2) = 14.8 KB (the heavy tail makes the sample mean unstable)
    sizes = np.array([f.size for f in shorts])
    assert sizes.min() >= 8333 and abs(np.median(sizes) - 14_847) < 1000
    assert generate(w, topo, 0.005, seed=3, duration=20.0) == flows
    with pytest.raises(WorkloadError, match="leave no sender"):
        ShortLongWorkload(receivers=16).check(topo, 0.005, None)
    with pytest.raises(WorkloadError, match="inter-arrival"):
        w.check(topo, 0.0, None)


def test_seed000_static_scenario() -> None:
    flows = generate(RpsStaticWorkload(), FATTREE, 3, seed=1, duration=0.0)
    longs = [f for f in flows if f.tag == "long"]
    shorts = [f for f in flows if f.tag == "short"]
    assert sorted(f.src for f in longs) == ["h1", "h2", "h3"]
    assert {f.dst for f in flows} == {"h16"}
    assert all(f.size == 10_000_000 for f in longs) and all(f.start < 0.011 for f in longs)
    assert len(shorts) == 1 and shorts[0].src == "h1" and shorts[0].size == 200_000
    assert generate(RpsStaticWorkload(), FATTREE, 0, seed=1, duration=0.0)[0].tag == "short"
    with pytest.raises(WorkloadError):
        RpsStaticWorkload().check(FATTREE, 6, None)


def test_seed000_random_scenario() -> None:
    flows = generate(RpsRandomWorkload(short_flows=20), FATTREE, 4, seed=2, duration=0.0)
    assert sum(f.tag == "long" for f in flows) == 4
    shorts = [f for f in flows if f.tag == "short"]
    assert len(shorts) == 20 and all(1.0 <= f.start <= 2.0 for f in shorts)
    assert all(f.src != f.dst for f in flows)


def test_seed004_long_lived_and_udp() -> None:
    topo = parse("dumbbell:8,2")
    flows = generate(LongLivedWorkload(), topo, 6, seed=1, duration=20.0)
    tcp = [f for f in flows if f.kind == "tcp"]
    udp = [f for f in flows if f.kind == "udp"]
    assert len(tcp) == 6 and all(f.long_lived and f.stop == 20.0 for f in tcp)
    assert len(udp) == 2 and all(f.rate_mbit == 85.0 and (f.start, f.stop) == (10.0, 15.0)
                                 for f in udp)
    server = next(h.name for h in topo.hosts if h.role == "server")
    assert {f.dst for f in flows} == {server}


def test_seed004_udp_goes_from_outside_to_the_sinks() -> None:
    topo = parse("dumbbell:8,2,2")  # one UDP sender behind s3, one receiver on s1
    flows = generate(LongLivedWorkload(), topo, 8, seed=1, duration=20.0)
    (udp,) = [f for f in flows if f.kind == "udp"]
    role = {h.name: h.role for h in topo.hosts}
    assert (role[udp.src], role[udp.dst]) == ("udp", "udp_sink")
    assert {f.dst for f in flows if f.kind == "tcp"} == {"h11"}  # the server
    with pytest.raises(WorkloadError, match="2 UDP receivers for 1"):
        LongLivedWorkload(udp_sinks=["h1", "h2"]).check(topo, 8, None)
    with pytest.raises(WorkloadError, match="cannot send to itself"):
        LongLivedWorkload(udp_sinks=["h9"]).check(topo, 8, None)


def test_marking_ports_and_dscp() -> None:
    flows = generate(PoissonWorkload(), FATTREE, 0.5, seed=1, duration=300.0)
    marked = assign_marks(flows, Marking(dscp=8), seed=1)
    elephants = [f for f in marked if f.size > 10_000_000]
    others = [f for f in marked if f.size <= 10_000_000]
    assert elephants and others
    assert all(30000 < f.sport <= 60999 and f.dscp == 8 for f in elephants)
    assert all(10000 <= f.sport <= 29999 and f.dscp == 0 for f in others)
    # Ports do not repeat within a host's flows of a run.
    for host in {f.src for f in marked}:
        ports = [f.sport for f in marked if f.src == host]
        assert len(ports) == len(set(ports))
    unmarked = assign_marks(flows, Marking(ports=False), seed=1)
    assert all(f.sport <= 29999 for f in unmarked)
    with pytest.raises(ValueError, match="overlap"):
        Marking(elephant_ports=[20000, 40000])


# The paper's variable scenario (Sect. 4.1, Fig. 5(b)), per group A and B.
VARIABLE = [ClientEvent(7.0, stop=4), ClientEvent(9.0, stop=4), ClientEvent(11.0, stop=4),
            ClientEvent(14.0, start=4), ClientEvent(16.0, start=4), ClientEvent(18.0, start=4)]


def _running(flows: list[Flow], t: float) -> list[str]:
    return sorted((f.src for f in flows if f.kind == "tcp" and f.start <= t
                   < float(f.stop or 0)), key=lambda h: int(h[1:]))


def test_seed004_clients_stop_and_start_again_per_group() -> None:
    topo = parse("dumbbell:32,2,8")  # A' h1-h8, A'' h9-h16 (outside), B h17-h32
    group = {h.name: h.group for h in topo.hosts}
    w = LongLivedWorkload(schedule=VARIABLE)
    flows = generate(w, topo, 32, seed=1, duration=20.0)
    tcp = [f for f in flows if f.kind == "tcp"]
    # 32 first connections and 24 new ones from the clients that start again
    assert len(tcp) == 56 and all(f.long_lived and f.dst == "h35" for f in tcp)
    assert [f.id for f in flows] == list(range(len(flows)))
    assert [len(_running(flows, t)) for t in (6.9, 7.0, 9.0, 11.0, 13.9, 14.0, 16.0, 18.0,
                                             19.9)] == [32, 24, 16, 8, 8, 16, 24, 32, 32]
    # Who stops: in group B the last ones first; in group A an A' and an A'' in turn,
    # each from its last, so both subgroups lose clients at every step.
    left_at = {t: sorted((f.src for f in tcp if f.stop == t), key=lambda h: int(h[1:]))
               for t in (7.0, 9.0, 11.0)}
    assert left_at[7.0] == ["h7", "h8", "h15", "h16", "h29", "h30", "h31", "h32"]
    assert left_at[9.0] == ["h5", "h6", "h13", "h14", "h25", "h26", "h27", "h28"]
    assert left_at[11.0] == ["h3", "h4", "h11", "h12", "h21", "h22", "h23", "h24"]
    assert _running(flows, 12.0) == ["h1", "h2", "h9", "h10", "h17", "h18", "h19", "h20"]
    for stopped in left_at.values():
        assert sorted(group[h] for h in stopped) == ["A'"] * 2 + ["A''"] * 2 + ["B"] * 4
    # Who starts again: the first to stop the first to start, each as a new connection
    # (its own flow id) that sends until the end; the first ones start at 0.
    for stop, start in ((7.0, 14.0), (9.0, 16.0), (11.0, 18.0)):
        again = [f for f in tcp if f.start == start]
        assert sorted((f.src for f in again), key=lambda h: int(h[1:])) == left_at[stop]
        assert all(f.stop == 20.0 and f.id > 32 for f in again)
    assert sorted(f.start for f in tcp)[:32] == [0.0] * 32
    # A client's connections never overlap; the UDP burst is as without a schedule.
    for host in {f.src for f in tcp}:
        spans = sorted((f.start, float(f.stop or 0)) for f in tcp if f.src == host)
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))
    (udp,) = [f for f in flows if f.kind == "udp"]
    assert (udp.start, udp.stop, udp.src, udp.dst) == (10.0, 15.0, "h33", "h34")
    # No randomness: every seed gets the same list; a new connection gets its own port.
    assert generate(w, topo, 32, seed=2, duration=20.0) == flows
    marked = [f for f in assign_marks(flows, Marking(), 1) if f.src == "h8"]
    assert len(marked) == 2 and marked[0].sport != marked[1].sport


def test_a_schedule_counts_clients_per_group_of_the_chosen_clients() -> None:
    # 16 of dumbbell:16,2,4's clients: A' h1-h4, A'' h5-h8, B h9-h16; 2 per group stop
    # twice, with a stagger of 0.1 s between client starts, then all start again at once.
    topo = parse("dumbbell:16,2,4")
    w = LongLivedWorkload(stagger=0.1, udp_rate=0, schedule=[
        ClientEvent(3.0, stop=2), ClientEvent(4.0, stop=2), ClientEvent(6.0, start=4)])
    flows = generate(w, topo, 16, seed=1, duration=8.0)
    assert sorted((f.src for f in flows if f.stop == 3.0), key=lambda h: int(h[1:])) == [
        "h4", "h8", "h15", "h16"]
    assert _running(flows, 5.0) == ["h1", "h2", "h5", "h6", "h9", "h10", "h11", "h12"]
    assert len(_running(flows, 6.0)) == 16 and len(flows) == 24
    # Without a schedule the flows are what they always were.
    plain = generate(LongLivedWorkload(stagger=0.1, udp_rate=0), topo, 16, seed=1,
                     duration=8.0)
    assert [(f.src, f.start, f.stop) for f in plain] == [
        (f"h{i + 1}", pytest.approx(0.1 * i), 8.0) for i in range(16)]
    # A topology without groups: the clients form one group.
    ungrouped = generate(LongLivedWorkload(clients=["h2", "h3", "h4"], server="h1",
                                           udp_rate=0,
                                           schedule=[ClientEvent(1.0, stop=2)]),
                         FATTREE, 3, seed=1, duration=5.0)
    assert _running(ungrouped, 2.0) == ["h2"]


@pytest.mark.parametrize(("schedule", "field", "message"), [
    ([ClientEvent(7.0)], "schedule[0]", "give one of stop or start"),
    ([ClientEvent(7.0, stop=4, start=4)], "schedule[0]", "give one of stop or start"),
    # more clients stopping than are running: 12 of group A's 16 have stopped
    (VARIABLE[:3] + [ClientEvent(12.0, stop=5)], "schedule[3].stop",
     "5 clients of group A stop at 12 s, but only 4 of its 16 are running then"),
    ([ClientEvent(7.0, stop=17)], "schedule[0].stop", "only 16 of its 16"),
    # a start before the stop it would undo, at the same time, or of more than stopped
    ([ClientEvent(14.0, start=4), ClientEvent(15.0, stop=4)], "schedule[0].start",
     "4 clients of group A start again at 14 s, but only 0 stopped before then"),
    ([ClientEvent(7.0, stop=4), ClientEvent(7.0, start=4)], "schedule[1].start",
     "only 0 stopped before then"),
    ([ClientEvent(7.0, stop=4), ClientEvent(14.0, start=8)], "schedule[1].start",
     "only 4 stopped"),
    # outside the clients' sending time: before they start, at or after they stop
    ([ClientEvent(0.0, stop=1)], "schedule[0].at", "not after it starts (0 s)"),
    ([ClientEvent(7.0, stop=4), ClientEvent(25.0, start=4)], "schedule[1].at",
     "25 s is not before the clients stop (20 s"),
    ([ClientEvent(20.0, stop=4)], "schedule[0].at", "20 s is not before"),
])
def test_bad_schedules_name_the_event(schedule: list[ClientEvent], field: str,
                                      message: str) -> None:
    topo = parse("dumbbell:32,2,8")
    with pytest.raises(WorkloadError) as err:
        generate(LongLivedWorkload(schedule=schedule), topo, 32, seed=1, duration=20.0)
    assert err.value.field == field and message in str(err.value)


def test_a_schedule_is_checked_before_any_flow_is_generated() -> None:
    topo = parse("dumbbell:32,2,8")
    with pytest.raises(WorkloadError, match="14 s is not before the clients stop"):
        LongLivedWorkload(tcp_stop=12.0, schedule=VARIABLE).check(topo, 32, None)
    with pytest.raises(WorkloadError, match="not after it starts"):
        LongLivedWorkload(tcp_start=8.0, schedule=VARIABLE).check(topo, 32, None)
    late = LongLivedWorkload(schedule=VARIABLE + [ClientEvent(25.0, stop=1)])
    late.check(topo, 32, None)  # no duration given: nothing to hold 25 s against
    with pytest.raises(WorkloadError, match="25 s is not before the clients stop"):
        late.check(topo, 32, None, duration=20.0)
    # a client that has not started yet (stagger 0.5 s: h16 at 7.5 s) cannot stop
    with pytest.raises(WorkloadError) as err:
        LongLivedWorkload(stagger=0.5, schedule=VARIABLE).check(topo, 32, None)
    assert err.value.field == "schedule[0].at"
    assert "client h16 of group A would stop at 7 s, not after it starts (7.5 s)" \
        in str(err.value)


def test_a_schedule_in_an_experiment_file() -> None:
    data = {"topology": "dumbbell:32,2,8", "schemes": ["dcnlab.apps.single_path"],
            "loads": [32], "seeds": [1], "duration": 20,
            "workload": {"type": "longlived", "schedule": [
                {"at": "7s", "stop": 4}, {"at": 14, "start": 4}]}}
    spec = parse_spec(data, check_apps=False)
    assert spec.workload.schedule == [ClientEvent(7.0, stop=4), ClientEvent(14.0, start=4)]
    for event, where in (({"at": 7, "stop": 4, "go": 1}, "workload.schedule[1].go"),
                         ({"stop": 4}, "workload.schedule[1].at"),
                         ({"at": 7, "stop": -1}, "workload.schedule[1].stop"),
                         ({"at": 7, "stop": 20}, "workload.schedule[1].stop"),
                         ({"at": 4, "start": 4}, "workload.schedule[1].start")):
        bad = {**data, "workload": {"type": "longlived",
                                    "schedule": [{"at": 5, "stop": 4}, event]}}
        with pytest.raises(SpecFileError) as err:
            parse_spec(bad, check_apps=False)
        # (schema.convert repeats an inner mapping's path before its own message:
        # "workload.schedule[1]: workload.schedule[1].go: unknown field ...")
        assert where in str(err.value), (event, str(err.value))


def test_the_shipped_variable_scenario() -> None:
    specs = load_specs(Path(__file__).parents[2] / "benchmarks" / "experiments"
                       / "seed004_variable.yaml")
    assert [s.scenario for s in specs] == ["alpha", "beta"]
    assert [[s.name for s in spec.schemes] for spec in specs] == [
        ["conventional", "alpha-0.1", "alpha-0.4", "alpha-1.0"],
        ["conventional", "beta-0.2", "beta-0.6", "beta-1.0"]]
    for spec in specs:
        assert spec.topology.startswith("dumbbell:32,2,8") and spec.loads == [32]
        assert spec.seeds == [1, 2, 3] and spec.baseline == "conventional"
        assert spec.workload.schedule == VARIABLE
        flows = generate(spec.workload, spec.topo(), 32, seed=1, duration=spec.duration)
        assert [len(_running(flows, t)) for t in (5.0, 7.0, 9.0, 11.0, 14.0, 16.0, 18.0)] \
            == [32, 24, 16, 8, 16, 24, 32]
