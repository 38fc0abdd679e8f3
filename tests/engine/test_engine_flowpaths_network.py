"""The flow tap on a real network (root), on both switch kinds: flowpaths.csv lists the
links each flow really took.

``first_path`` sends every destination through the lowest-numbered equal-cost port, so on
spineleaf:2,2,2 the two long flows h1 -> h3 and h2 -> h3 both go s3 port 1 -> spine s1 ->
s4, and run at the same time: each must show exactly those two links, share them with the
other, and the port counters sampled in the same run must agree (the links the tap saw
carried the flows' bytes; s3's other uplink, towards s2, carried almost nothing).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from engine_runs import assert_report_rerenders, csv_rows, run_spec

from dcnlab.benchmarks.engine import flowtap

pytestmark = [
    pytest.mark.network,
    pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths, tc BPF)"),
]

LONG = 2_000_000


def test_flowpaths_lists_the_links_each_flow_took_on_ovs_and_ext(tmp_path: Path) -> None:
    spec = {
        "name": "flowpaths", "topology": "spineleaf:2,2,2", "switch": "ovs",
        "link": {"rate": "20M"},
        "schemes": [{"name": "fp_ovs", "app": "first_path", "switch": "ovs"},
                    {"name": "fp_ext", "app": "first_path", "switch": "ext"}],
        "workload": {"type": "rps_static", "receiver": "h3", "sources": ["h1", "h2"],
                     "short_src": "h4", "long_size": LONG, "short_size": "5KB",
                     "short_start": "0.3s"},
        "loads": [2], "seeds": [1], "drain": 60, "settle": 0.5,
        "classes": {"mouse_max": "10KB", "elephant_min": "1MB"},
        "diagnosis": {"flow_paths": True, "interval": 0.1},
    }
    result, out = run_spec(spec, tmp_path)
    assert result.ok and result.not_ok == 0, result.errors

    flows = {(r["scheme"], r["flow_id"]): r for r in csv_rows(out / "flows.csv")}
    paths = csv_rows(out / "flowpaths.csv")
    assert sorted((p["scheme"], p["src"]) for p in paths) == [
        ("fp_ext", "h1"), ("fp_ext", "h2"), ("fp_ovs", "h1"), ("fp_ovs", "h2")]
    for p in paths:
        flow = flows[(p["scheme"], p["flow_id"])]
        assert p["sport"] == flow["sport"] and flow["class"] == "elephant"
        assert p["links"] == "s3:1>s1:1 s1:2>s4:1", p
        sizes = [int(b) for b in p["link_bytes"].split()]
        # every byte of the flow crossed both links once, plus headers, minus nothing
        assert all(LONG <= b < LONG * 1.1 for b in sizes), p
        assert p["shared"] == "1"
        other = next(q for q in paths if q["scheme"] == p["scheme"] and q is not p)
        assert p["shared_with"] == other["flow_id"]
        assert float(p["start"]) < float(p["end"])
        # the same time base as flows.csv (seconds since the run's start): the tap saw
        # the data from the flow's start to about its end (the sender's end may come
        # before its last segments and FIN have crossed a queue)
        assert float(flow["start"]) - 0.05 < float(p["start"]) < float(p["end"]) < float(
            flow["end"]) + 0.5, (p, flow)

    for scheme in ("fp_ovs", "fp_ext"):
        run_dir = out / "runs" / scheme / "seed1_long_flows2" / "flowtap"
        taps = flowtap.read(run_dir / flowtap.TAPS_JSON)
        assert taps["stats"]["lost"] == 0 and taps["stats"]["counted"] > 0
        samples = flowtap.read(run_dir / flowtap.LINKS_JSON)["samples"]
        assert len(samples) >= 5
        first, last = samples[0]["tx"], samples[-1]["tx"]

        def sent(port: str, first: dict[str, int] = first,
                 last: dict[str, int] = last) -> int:
            [name] = [n for n in last if n.endswith(port)]
            return last[name] - first[name]

        # the port counters agree with the tap: both flows left s3 by port 1 and s1 by
        # port 2; s3's port 2 (towards s2) stayed all but idle
        assert sent("-s3-eth1") >= 2 * LONG
        assert sent("-s1-eth2") >= 2 * LONG
        assert sent("-s3-eth2") < LONG // 100
        tapped = sum(e["bytes"] for e in taps["entries"] if e["iface"].endswith("-s1-eth1"))
        assert tapped <= sent("-s3-eth1")  # the tap saw no more than the port sent

    diag = csv_rows(out / "flowdiag.csv")
    assert sorted(d["scheme"] for d in diag) == ["fp_ext", "fp_ovs"]
    for d in diag:
        assert d["elephants"] == "2" and d["traced"] == "2"
        assert float(d["eleph_shared_frac"]) == 1.0 and d["tap_lost"] == "0"
    summary = (out / "summary.txt").read_text()
    assert "elephant paths" in summary and "elephants sharing a link" in summary
    assert_report_rerenders(out, result.table)
