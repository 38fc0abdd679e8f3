"""The switch-side load balancers as schemes (issue 29): LetFlow, flowcells, DRILL and
CONGA on fattree:4 with ``dcnlab-switch`` switches and a real ryu-manager.

``dcnlab check`` runs each scheme's invariant (LetFlow: a flow without idle gaps keeps
one uplink, one with gaps of three flowlet timeouts moves between them; flowcell: one
4 MB flow splits evenly over the uplinks and the top tier, one cell per 64 KiB of its
frames; DRILL: two flows that together outrun one uplink spread
over both; CONGA: new flowlets avoid the way a UDP flow fills); the
balancers' and the overlay's counters reach switch.csv's columns through the stats file.
"""

from __future__ import annotations

import time

import pytest

from dcnlab.benchmarks.engine import netstats, switch_stats
from dcnlab.check import bursty_flow, check, inter_pod_pairs
from dcnlab.schemes import letflow
from dcnlab.topo.network import Network
from dcnlab.topo.spec import parse

pytestmark = pytest.mark.network


def test_letflow_check_moves_gapped_flows_only() -> None:
    result = check("fattree:4", "letflow", "ext")
    assert result.ok, result.line()
    assert max(result.fields["steady_split"]) >= letflow.STEADY_SHARE, result.line()
    assert min(result.fields["gapped_split"]) >= letflow.MIN_SHARE, result.line()


def test_flowcell_check_splits_one_flow_in_cells() -> None:
    result = check("fattree:4", "flowcell", "ext")
    assert result.ok, result.line()
    assert len(result.fields["uplink_split"]) == 2, result.line()
    assert len(result.fields["top_tier_split"]) == 4, result.line()
    sent = result.fields["uplink_bytes"]
    assert 4 * 1024 * 1024 < sent and sent // 65536 <= result.fields["cells"], result.line()


def test_drill_check_splits_a_flow_as_its_queue_grows() -> None:
    result = check("fattree:4", "drill", "ext")
    assert result.ok, result.line()
    assert min(result.fields["uplink_split"]) >= 0.3, result.line()


def test_conga_check_steers_new_flowlets_off_a_filled_path() -> None:
    result = check("fattree:4", "conga", "ext")
    assert result.ok, result.line()
    assert result.fields["share_into_filled"] <= 0.3, result.line()


def test_conga_counts_its_labels_and_feedback_in_switch_csv_columns() -> None:
    """A TCP connection between two leaves: labels reach both leaves, feedback goes both
    ways, and the source leaf's flowlet decisions had path metrics to go on."""
    spec = parse("spineleaf:2,2,1,rate=10M")
    with Network(spec, app="dcnlab.apps.conga", switch="ext",
                 switch_options={"select_mode": "conga/timeout=50ms"},
                 app_env={"DCNLAB_SELECT_MODE": "conga/timeout=50ms"}) as net:
        state = net.state() or {}
        assert state["counters"].get("balanced_switches") == 4, state
        src, dst = spec.hosts[0].name, spec.hosts[-1].name
        before = netstats.switch_lines(net, after=time.time())
        assert bursty_flow(net, src, dst, 8, 16 * 1024, 0.2)
        after = netstats.switch_lines(net, after=time.time())
        leaves = {n for n, line in after.items() if "leaf" in line.get("overlay", {})}
        row = switch_stats.run_row(switch_stats.units(before), switch_stats.units(after))
    assert len(leaves) == 2, after
    assert row["conga_labels_in"] > 0 and row["conga_feedback_in"] > 0, row
    assert row["conga_feedback_out"] >= row["conga_feedback_in"], row
    assert row["conga_flowlets"] >= 8 and row["conga_informed"] >= 1, row


def test_letflow_counters_become_switch_csv_columns() -> None:
    """Each burst after a gap longer than the timeout starts a flowlet at the source's
    switch: the run's letflow_flowlets column counts at least one per burst."""
    spec = parse("fattree:4")
    bursts = 6
    with Network(spec, app="dcnlab.apps.letflow", switch="ext",
                 switch_options={"select_mode": "letflow/timeout=50ms"},
                 app_env={"DCNLAB_SELECT_MODE": "letflow/timeout=50ms"}) as net:
        src, dst = inter_pod_pairs(spec, 1)[0]
        before = netstats.switch_lines(net, after=time.time())
        assert bursty_flow(net, src, dst, bursts, 16 * 1024, 0.2)
        after = netstats.switch_lines(net, after=time.time())
        row = switch_stats.run_row(switch_stats.units(before), switch_stats.units(after))
    # the source's switch starts a flowlet per burst, the receiver's one per ACK train
    assert row["letflow_flowlets"] >= bursts, row
    assert 0 <= row["letflow_path_changes"] <= row["letflow_flowlets"], row
    assert "flowcell_cells" not in row, "no switch ran flowcell: its columns stay empty"
