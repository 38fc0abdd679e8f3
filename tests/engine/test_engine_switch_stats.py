"""switch_stats: a queue discipline's declared per-port counters as switch.csv columns
(per run: deltas summed over the ports running it, gauges after - before, the peak its
histogram reached), their summary and the section of the report."""

from __future__ import annotations

import math

from dcnlab.benchmarks.engine import netstats, switch_stats
from dcnlab.schemes.base import SwitchColumns

DECL = SwitchColumns(section="ingress", kind="abq",
                     counters={"acks_held": "held", "released": "released"},
                     gauges={"held": "still"}, peaks={"qin": "peak"},
                     labels={"held": "ACKs held"})


def _port(held: int, released: int, now: int, qin: list[list[int]], kind: str = "abq"
          ) -> dict:
    return {"port": 1, "drops": 0,
            "ingress": {"kind": kind, "acks_held": held, "released": released, "held": now},
            "qin": {"hist": qin}}


def test_run_row_sums_deltas_over_the_ports_running_the_discipline() -> None:
    before = {"s1:1": _port(10, 10, 0, [[0, 100], [9, 5]]),
              "s1:2": _port(0, 0, 0, [[0, 100]]),
              "s1:3": _port(50, 50, 0, [[0, 100]], kind="other")}
    after = {"s1:1": _port(30, 28, 2, [[0, 150], [3, 10], [9, 5]]),
             "s1:2": _port(5, 5, 0, [[0, 120], [4, 1]]),
             "s1:3": _port(90, 90, 0, [[0, 100]], kind="other")}
    row = switch_stats.run_row(before, after, [DECL])
    # held 20 + 5, released 18 + 5, still held 2; the old peak of 9 is not this run's
    assert row == {"held": 25, "released": 23, "still": 2, "peak": 4}
    assert row["held"] == row["released"] + row["still"]
    # a port that appeared after the "before" line counts from zero
    assert switch_stats.run_row({}, {"s1:2": after["s1:2"]}, [DECL])["held"] == 5
    # no port runs it: no columns (empty cells in switch.csv)
    assert switch_stats.run_row(before, {"s1:3": after["s1:3"]}, [DECL]) == {}


def test_declared_columns_come_from_the_registry() -> None:
    # The abq scheme declares its counters; the engine names no scheme.
    assert {"abq_held", "abq_released", "abq_forced_cap", "abq_forced_timeout",
            "abq_still_held", "abq_qin_peak", "abq_to_cs"} <= set(switch_stats.COLUMNS)
    assert switch_stats.COLUMNS[:3] == ["scheme", "load", "seed"]


def test_summary_and_render_show_only_schemes_that_ran_it() -> None:
    rows = [{"scheme": "abq", "load": 10, "seed": s, "abq_held": h, "abq_released": h}
            for s, h in ((1, 100), (2, 120))]
    rows += [{"scheme": "ecn", "load": 10, "seed": s} for s in (1, 2)]
    summary = switch_stats.summarize(rows)
    held = next(r for r in summary if r.metric == "abq_held")
    assert held.cls == "switch" and held.mean == 110 and math.isnan(held.ratio)
    text = switch_stats.render(summary, ["ecn", "abq"], "senders")
    assert "ABQ ACKs held" in text and "abq" in text and "ecn" not in text.split("\n")[2]
    assert switch_stats.render(switch_stats.summarize(rows[2:]), ["ecn"], "senders") == ""


def test_balancer_counters_are_read_per_group_from_the_stats_lines() -> None:
    """Section "balancer": the select groups whose load balancer is the declared kind,
    from the stats lines' ``balancers`` (netstats.balancers), next to the ports."""
    decl = SwitchColumns(section="balancer", kind="letflow",
                         counters={"flowlets": "flowlets", "path_changes": "moved"})

    def line(s1: int, s1_moved: int, s2: int) -> dict:
        return {"s1": {"ports": [_port(0, 0, 0, [[0, 1]])],
                       "balancers": [{"group": 1, "kind": "letflow", "flowlets": s1,
                                      "path_changes": s1_moved},
                                     {"group": 2, "kind": "hash"}]},
                "s2": {"ports": [], "balancers": [{"group": 1, "kind": "letflow",
                                                   "flowlets": s2, "path_changes": 0}]}}

    before, after = line(10, 4, 0), line(25, 9, 3)
    groups = netstats.balancers(after)
    assert sorted(groups) == ["s1:group1", "s1:group2", "s2:group1"]
    assert groups["s1:group1"]["balancer"]["flowlets"] == 25
    assert sorted(netstats.ports(after)) == ["s1:1"]
    row = switch_stats.run_row(
        {**netstats.ports(before), **netstats.balancers(before)},
        {**netstats.ports(after), **netstats.balancers(after)}, [decl])
    assert row == {"flowlets": 15 + 3, "moved": 5}
    # a group first seen after the "before" line counts from zero
    assert switch_stats.run_row({}, netstats.balancers(after), [decl])["flowlets"] == 28
    assert {"letflow_flowlets", "flowcell_cells"} <= set(switch_stats.COLUMNS)
