"""FCT slowdown (slowdown.py): ideal FCTs worked out by hand on two topologies, the best
of several paths, size bins, per-run and across-seed figures, and the report's section,
rows and figures."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from figure_content import assert_readable, errorbar_series, line_series, panels, saved_figures

from dcnlab.benchmarks.engine import report, slowdown
from dcnlab.benchmarks.engine.results import FLOW_COLUMNS, CsvAppender, write_json
from dcnlab.benchmarks.engine.schema import SpecFileError
from dcnlab.benchmarks.engine.spec import load_spec
from dcnlab.model.topology import (
    HostSpec,
    Interface,
    LinkParams,
    LinkSpec,
    SwitchSpec,
    TopologySpec,
)
from dcnlab.topo.spec import parse

FRAME_10M = 1514 * 8 / 10e6  # a full frame at 10 Mbit/s: 1.2112 ms
HEADER_10M = 66 * 8 / 10e6  # a header-only frame at 10 Mbit/s


def test_one_segment_on_spineleaf_by_hand() -> None:
    # h1 - leaf - spine - leaf - h2: four links of 10 Mbit/s and 100 us each way.
    spec = parse("spineleaf:1,2,1,rate=10M,delay=100us")
    rtt0 = 4 * (2 * 100e-6 + 2 * HEADER_10M)
    # one 1514-byte frame at the bottleneck, and once more on each of the other 3 links
    transfer = 4 * FRAME_10M
    assert slowdown.ideal_fct(spec, "h1", "h2", 1448) == pytest.approx(2 * rtt0 + transfer)
    assert 2 * rtt0 + transfer == pytest.approx(7.2896e-3)


def test_a_megabyte_on_spineleaf_by_hand() -> None:
    spec = parse("spineleaf:1,2,1,rate=10M,delay=100us")
    segments = math.ceil(1_000_000 / 1448)  # 691: 690 full ones and a partial one
    wire = 1_000_000 + segments * 66
    transfer = wire * 8 / 10e6 + 3 * FRAME_10M
    expected = 2 * 4 * (2 * 100e-6 + 2 * HEADER_10M) + transfer
    assert slowdown.ideal_fct(spec, "h1", "h2", 1_000_000) == pytest.approx(expected)
    assert expected == pytest.approx(0.8425632)


def test_fattree_pairs_by_hand() -> None:
    spec = parse("fattree:4")  # 100 Mbit/s, no delay
    assert len(slowdown.shortest_paths(spec, "h1", "h16")) == 4  # inter-pod: via 4 cores
    assert len(slowdown.shortest_paths(spec, "h1", "h3")) == 2  # same pod: via 2 aggs
    assert len(slowdown.shortest_paths(spec, "h1", "h2")) == 1  # same edge switch
    header, frame = 66 * 8 / 1e8, 1514 * 8 / 1e8
    # 100 KB between pods: 6 links, 70 segments (69 full)
    wire = 100_000 + 70 * 66
    expected = 2 * 6 * 2 * header + wire * 8 / 1e8 + 5 * frame
    assert slowdown.ideal_fct(spec, "h1", "h16", 100_000) == pytest.approx(expected)
    assert expected == pytest.approx(9.10192e-3)
    # the same flow under one edge switch crosses 2 links
    near = 2 * 2 * 2 * header + wire * 8 / 1e8 + frame
    assert slowdown.ideal_fct(spec, "h1", "h2", 100_000) == pytest.approx(near)


def _two_paths(slow_mbit: float | None, fast_mbit: float | None) -> TopologySpec:
    """h1 - a - {b | c} - d - h2, the b branch at ``slow_mbit``, the c one at ``fast_mbit``,
    host links at 100 Mbit/s."""
    def link(x: str, y: str, mbit: float | None) -> LinkSpec:
        return LinkSpec(x, 1, y, 1, LinkParams(rate_mbit=mbit))
    switches = [SwitchSpec(n, i + 1, "t") for i, n in enumerate("abcd")]
    hosts = [HostSpec("h1", (Interface("10.0.0.1", "00:00:00:00:00:01", "a", 1),)),
             HostSpec("h2", (Interface("10.0.0.2", "00:00:00:00:00:02", "d", 1),))]
    links = [link("h1", "a", 100), link("a", "b", slow_mbit), link("b", "d", slow_mbit),
             link("a", "c", fast_mbit), link("c", "d", fast_mbit), link("d", "h2", 100)]
    return TopologySpec("hand", "hand", switches, hosts, links, LinkParams())


def test_the_best_of_unequal_paths_and_no_ideal_without_rate_or_delay() -> None:
    spec = _two_paths(10, 50)
    fast = slowdown.path_ideal([slowdown.Hop(r * 1e6, 0.0) for r in (100, 50, 50, 100)],
                               1_000_000)
    assert slowdown.ideal_fct(spec, "h1", "h2", 1_000_000) == pytest.approx(fast)
    assert slowdown.ideal_fct(spec, "h1", "h2", 1_000_000) < slowdown.path_ideal(
        [slowdown.Hop(r * 1e6, 0.0) for r in (100, 10, 10, 100)], 1_000_000)
    # an unshaped, delay-free path: nothing to compare with
    bare = TopologySpec("bare", "bare", spec.switches, spec.hosts,
                        [LinkSpec(lk.a, 1, lk.b, 1, LinkParams()) for lk in spec.links],
                        LinkParams())
    assert slowdown.ideal_fct(bare, "h1", "h2", 1000) is None
    assert slowdown.ideal_fct(spec, "h1", "h9", 1000) is None  # no such host: no path


def test_bins_labels_and_edges() -> None:
    assert slowdown.bin_labels() == ["0-100KB", "100KB-10MB", "10MB+"]
    assert [slowdown.size_bin(n) for n in (1, 99_999, 100_000, 9_999_999, 10**7)] == \
        ["0-100KB", "0-100KB", "100KB-10MB", "100KB-10MB", "10MB+"]
    assert slowdown.bin_labels((1234, 1_500_000)) == ["0-1234B", "1234B-1500KB", "1500KB+"]
    for bad in ([], [0], [10, 5], [5, 5]):
        with pytest.raises(ValueError, match="increasing positive"):
            slowdown.check_edges(bad)


def _row(scheme: str, seed: int, size: int, fct: float, **extra: object) -> dict:
    return {"scheme": scheme, "load": 0.5, "seed": seed, "src": "h1", "dst": "h2",
            "size": size, "kind": "tcp", "status": "ok", "measured": True, "fct": fct,
            **extra}


def test_per_run_and_across_seed_figures_with_ratios() -> None:
    spec = parse("spineleaf:1,2,1,rate=10M,delay=100us")
    small, big = slowdown.ideal_fct(spec, "h1", "h2", 1448), \
        slowdown.ideal_fct(spec, "h1", "h2", 1_000_000)
    assert small is not None and big is not None
    rows = []
    for seed, k in ((1, 2.0), (2, 4.0)):
        rows += [_row("ecmp", seed, 1448, k * small), _row("ecmp", seed, 1448, 3 * k * small),
                 _row("ecmp", seed, 1_000_000, k * big),
                 _row("spray", seed, 1448, k * small / 2), _row("spray", seed, 1448, k * small),
                 _row("spray", seed, 1_000_000, k * big / 2),
                 # not counted: failed, unmeasured, UDP, long-lived (size 0)
                 _row("ecmp", seed, 1448, 9.0, status="failed"),
                 _row("ecmp", seed, 1448, 9.0, measured=False),
                 _row("ecmp", seed, 1448, 9.0, kind="udp"),
                 _row("ecmp", seed, 0, 9.0)]
    summary = slowdown.summarize(rows, spec, "ecmp")
    index = {(r.scheme, r.metric, r.cls): r for r in summary}
    assert index[("ecmp", "slowdown_flows", "0-100KB")].mean == 2
    assert index[("ecmp", "slowdown_mean", "0-100KB")].mean == pytest.approx((4 + 8) / 2)
    assert index[("ecmp", "slowdown_p50", "100KB-10MB")].mean == pytest.approx(3.0)
    # p99 of the slowdowns k and 3k, linear interpolation: k + 0.99 * 2k
    assert index[("ecmp", "slowdown_p99", "0-100KB")].mean == pytest.approx(
        (2 * (1 + 0.99 * 2) + 4 * (1 + 0.99 * 2)) / 2)
    spray = index[("spray", "slowdown_mean", "0-100KB")]
    assert spray.ratio == pytest.approx(0.375) and spray.seeds == 2  # 0.75k / 2k per seed
    assert math.isnan(index[("spray", "slowdown_flows", "0-100KB")].ratio)  # a count
    assert index[("ecmp", "slowdown_flows", "10MB+")].mean == 0
    assert not slowdown.summarize([_row("ecmp", 1, 1448, 1.0, kind="udp")], spec, "ecmp")


def _results_dir(out: Path, topology: str, bins: list[int] | None = None) -> None:
    out.mkdir(parents=True)
    spec = {"baseline": "ecmp", "sweep": "load", "topology": topology,
            "workload_type": "poisson", "schemes": [{"name": "ecmp"}, {"name": "spray"}]}
    if bins is not None:
        spec["slowdown_bins"] = bins
    write_json(out / "meta.json", {"name": "demo", "status": "complete", "spec": spec})
    topo = parse(topology)
    appender = CsvAppender(out / "flows.csv", FLOW_COLUMNS)
    rows, fid = [], 0
    for seed in (1, 2, 3):
        for load in (0.2, 0.4):
            for scheme, slow in (("ecmp", 3.0), ("spray", 1.5)):
                for size in (5_000, 300_000, 20_000_000):
                    ideal = slowdown.ideal_fct(topo, "h1", "h16", size)
                    assert ideal is not None
                    rows.append({"scheme": scheme, "load": load, "seed": seed,
                                 "flow_id": fid, "src": "h1", "dst": "h16", "size": size,
                                 "kind": "tcp", "class": "rabbit", "bytes": size,
                                 "fct": ideal * slow * (1 + load) * (1 + 0.1 * seed),
                                 "status": "ok", "measured": True, "sched": 0.0})
                    fid += 1
    appender.write(rows)
    appender.close()


def test_report_has_the_section_rows_and_figures(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "res"
    _results_dir(out, "fattree:4")
    figures = saved_figures(monkeypatch)
    result = report(out)
    text = result.table
    assert "FCT slowdown: FCT / ideal FCT alone on the path" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("0-100KB mean"))
    # ecmp 3 * 1.2 * (1.2 ... 1.4) and spray at half of it on every seed
    assert line.split()[2:4] == ["4.32", "±"] and "x0.50 [0.50, 0.50]" in line
    with open(out / "summary.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["metric"].startswith("slowdown_")]
    assert {(r["metric"], r["class"]) for r in rows} >= {
        ("slowdown_p99", "10MB+"), ("slowdown_flows", "100KB-10MB")}
    names = {p.name for p in result.files}
    assert {"slowdown_mean.png", "slowdown_p99.png", "slowdown_cdf_load0.20.png",
            "slowdown_cdf_load0.40.png"} <= names
    for name in ("slowdown_mean.png", "slowdown_p99.png", "slowdown_cdf_load0.40.png"):
        assert_readable(figures[name], name)
        assert figures[name].texts, f"{name}: no caption"  # what the points are
    mean = figures["slowdown_mean.png"]
    assert [ax.get_title() for ax in panels(mean)] == \
        ["flows of 0-100KB", "flows of 100KB-10MB", "flows of 10MB+"]
    assert errorbar_series(panels(mean)[0]) == ["ecmp (n=6 flows)", "spray (n=6 flows)"]
    assert all(ax.get_yscale() == "log" for ax in panels(mean))
    cdf = figures["slowdown_cdf_load0.40.png"]
    assert line_series(panels(cdf)[2]) == ["ecmp (n=3)", "spray (n=3)"]


def test_report_uses_the_experiments_bins(tmp_path: Path) -> None:
    out = tmp_path / "res"
    _results_dir(out, "fattree:4", bins=[1_000_000])
    text = report(out).table
    assert "0-1MB mean" in text and "1MB+ mean" in text and "100KB-10MB" not in text


def test_experiment_files_take_bins_in_any_size_unit(tmp_path: Path) -> None:
    base = ("name: t\ntopology: fattree:4\nschemes: [{app: dcnlab.apps.ecmp}]\n"
            "workload: {type: poisson}\nloads: [0.1]\nseeds: [1]\nduration: 1\n")
    path = tmp_path / "e.yaml"
    path.write_text(base + "slowdown_bins: [10KB, 1MB]\n")
    assert load_spec(path).slowdown_bins == (10_000, 1_000_000)
    path.write_text(base)
    assert load_spec(path).slowdown_bins == slowdown.DEFAULT_EDGES
    for bad, why in (("[1MB, 10KB]", "increasing"), ("10KB", "a list"),
                     ("[ten]", "size in bytes")):
        path.write_text(base + f"slowdown_bins: {bad}\n")
        with pytest.raises(SpecFileError, match=why):
            load_spec(path)
