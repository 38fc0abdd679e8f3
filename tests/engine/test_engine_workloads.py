"""Workload generators: calibrated load, determinism, pairs, scenario structure, marks."""

from __future__ import annotations

import numpy as np
import pytest

from dcnlab.benchmarks.engine.cdf import load_cdf
from dcnlab.benchmarks.engine.marking import Marking, assign_marks
from dcnlab.benchmarks.engine.workloads import (
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
