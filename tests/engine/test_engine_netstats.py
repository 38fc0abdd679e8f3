"""netstats: the run's bottleneck queue from switch histograms, host RTOs, goodput, FCT
percentiles, and their summary with paired ratios."""

from __future__ import annotations

import math

from dcnlab.benchmarks.engine import netstats

NETSTAT = """TcpExt: SyncookiesSent TCPTimeouts TCPLossProbes
TcpExt: 0 7 3
IpExt: InNoRoutes InTruncatedPkts
IpExt: 0 0
"""


def test_parse_netstat() -> None:
    got = netstats.parse_netstat(NETSTAT)
    assert got["TcpExt"]["TCPTimeouts"] == 7 and got["IpExt"]["InNoRoutes"] == 0


def test_hist_stats_are_time_weighted() -> None:
    # 2000 ns at 0, 500 at 4, 7500 at 10 (switch_ext's qhist test has the same numbers)
    st = netstats.hist_stats({0: 2000, 4: 500, 10: 7500})
    assert math.isclose(st["mean"], 7.7) and (st["p5"], st["p95"]) == (0.0, 10.0)
    assert math.isnan(netstats.hist_stats({})["mean"])
    assert netstats.hist_delta({0: 100, 3: 50}, {0: 150, 3: 50, 5: 10}) == {0: 50, 5: 10}


def _flow(start: float, end: float, size: int, status: str = "ok", sched: float = 0.0
          ) -> dict:
    return {"start": start, "end": end, "fct": end - start, "size": size, "bytes": size,
            "status": status, "measured": True, "sched": sched}


def test_run_row_picks_the_busiest_port_during_the_run() -> None:
    before = {"s1:1": {"qout": {0: 1000, 30: 10_000}, "qin": {0: 11_000}},
              "s1:2": {"qout": {0: 11_000}}}
    # During the run: s1:1 sits at 0 then 2 (mean 1), s1:2 at 3 all the time.
    after = {"s1:1": {"qout": {0: 2000, 2: 1000, 30: 10_000}, "qin": {0: 11_500, 1: 500}},
             "s1:2": {"qout": {0: 11_000, 3: 2000}}}
    # Two rounds: one of two flows over 2 s, one whose flow timed out (not counted).
    flows = [_flow(0.0, 1.0, 1_000_000), _flow(0.5, 2.0, 1_000_000),
             _flow(5.0, 9.0, 5, status="timeout", sched=5.0)]
    row = netstats.run_row("x", 10.0, 1, before, after, 4, 2, flows)
    assert row["bottleneck"] == "s1:2" and row["qout_mean"] == 3.0
    assert (row["drops"], row["rtos"]) == (4, 2)
    assert math.isclose(row["goodput_mbps"], 2_000_000 * 8 / 2.0 / 1e6)
    assert row["fct_p50"] == 1.25
    row = netstats.run_row("x", 10.0, 1, before, {"s1:1": after["s1:1"]}, 0, 0, flows)
    assert (row["bottleneck"], row["qout_mean"], row["qin_mean"]) == ("s1:1", 1.0, 0.5)
    # Busy time: the 1000 ns at 2; Q_in held 1 for 500 ns of it.
    assert (row["qout_busy_mean"], row["qout_busy_p95"], row["qin_busy_mean"]) == (2.0, 2.0, 0.5)


def test_goodput_is_per_batch_and_refreshed_from_flows() -> None:
    flows = [_flow(0.0, 0.5, 500_000), _flow(0.0, 1.0, 500_000),
             _flow(10.0, 10.25, 250_000, sched=10.0)]
    cols = netstats.flow_columns(flows)
    assert math.isclose(cols["goodput_mbps"], (8.0 + 8.0) / 2)  # 1 MB/1 s and 250 kB/0.25 s
    rows = [{"scheme": "a", "load": "10.0", "seed": "1", "goodput_mbps": "0"}]
    tagged = [{**f, "scheme": "a", "load": 10.0, "seed": 1} for f in flows]
    assert math.isclose(netstats.refresh_flow_columns(rows, tagged)[0]["goodput_mbps"], 8.0)


def test_summary_ratios_and_render() -> None:
    rows = [{"scheme": s, "load": 10, "seed": seed, "qout_mean": q, "drops": d}
            for s, q, d in (("base", 10.0, 8), ("new", 5.0, 2)) for seed in (1, 2)]
    summary = netstats.summarize(rows, "base")
    by = {(r.scheme, r.metric): r for r in summary}
    assert math.isclose(by[("new", "qout_mean")].ratio, 0.5)
    assert math.isclose(by[("new", "drops")].ratio, 0.25)
    text = netstats.render(summary, ["base", "new"], "base", "senders")
    assert "Q_out mean (pkts)" in text and "[0.50]" in text and "senders 10" in text


def test_render_leaves_out_what_no_scheme_measured() -> None:
    # Open vSwitch has no queue histograms: a run there has host figures only.
    rows = [{"scheme": s, "load": 0.2, "seed": seed, "goodput_mbps": g, "rtos": 0}
            for s, g in (("ecmp", 9.0), ("single", 9.5)) for seed in (1, 2)]
    text = netstats.render(netstats.summarize(rows, "ecmp"), ["ecmp", "single"], "ecmp",
                           "load")
    assert "goodput" in text and "RTOs" in text
    assert "Q_out" not in text and "Q_in" not in text and "drops" not in text


def test_edge_drops_per_switch_hosts_attach_to() -> None:
    before = {"s2:1": {"drops": 5}, "s2:2": {"drops": 1}, "s3:1": {"drops": 0},
              "s1:1": {"drops": 7}}
    after = {"s2:1": {"drops": 9}, "s2:2": {"drops": 4}, "s3:1": {"drops": 2},
             "s1:1": {"drops": 70}, "s4:2": {"drops": 3}}
    # s1 (the core) is not an edge; s4 has no "before" line (counted from zero);
    # s5 keeps no stats: left out
    assert netstats.edge_drops(before, after, ["s2", "s3", "s4", "s5"]) == [7, 2, 3]
    row = netstats.run_row("x", 1.0, 1, {}, {}, 0, 0, [], [7, 2, 3])
    assert (row["edge_drops"], row["edge_drops_each"]) == (12, "2;3;7")
