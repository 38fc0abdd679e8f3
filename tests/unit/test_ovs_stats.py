"""Parsing Open vSwitch's datapath statistics (topo/ovs.py), as ovs-appctl prints them."""

from __future__ import annotations

from dcnlab.topo.ovs import parse_datapath_stats

# ovs-appctl dpif-netdev/pmd-stats-show and upcall/show of Open vSwitch 3.1 (a main
# thread and one PMD thread; upcall/show shortened).
PMD_STATS = """\
pmd thread numa_id 0 core_id 1:
  packets received: 40
  packet recirculations: 0
  avg. datapath passes per packet: 1.00
  emc hits: 10
  megaflow hits: 25
  avg. subtable lookups per megaflow hit: 1.20
  miss with success upcall: 5
  miss with failed upcall: 0
main thread:
  packets received: 1200
  packet recirculations: 0
  avg. datapath passes per packet: 1.00
  phwol hits: 0
  mfex opt hits: 0
  simple match hits: 0
  emc hits: 800
  smc hits: 0
  megaflow hits: 310
  avg. subtable lookups per megaflow hit: 2.05
  miss with success upcall: 90
  miss with failed upcall: 0
  avg. packets per output batch: 1.10
"""
UPCALL_SHOW = """\
netdev@ovs-netdev:
  flows         : (current 137) (avg 120) (max 410) (limit 10000)
  dump duration : 3ms
  ufid enabled : true
"""


def test_datapath_stats_sum_the_threads_and_read_the_live_flows() -> None:
    assert parse_datapath_stats(PMD_STATS, UPCALL_SHOW) == {
        "packets": 1240, "megaflow_hits": 335, "upcalls": 95, "flows": 137}


def test_datapath_stats_of_an_idle_instance_are_zero() -> None:
    assert parse_datapath_stats("main thread:\n  packets received: 0\n", "") == {
        "packets": 0, "megaflow_hits": 0, "upcalls": 0, "flows": 0}
