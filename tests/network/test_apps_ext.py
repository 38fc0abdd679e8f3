"""The apps on switch_ext switches (issue 3): per-packet spraying really sprays.

fattree:4 with ``dcnlab-switch`` switches and ryu-manager: all-pairs ping and transfers
with each app; ECMP keeps a flow on one path; spray (random and rr) splits ONE TCP
flow's packets evenly over the two uplinks (within 5 %, from port counters).
"""

from __future__ import annotations

import pytest

from dcnlab.check import check, inter_pod_pairs, one_flow_split
from dcnlab.schemes.spray import SPLIT_TOLERANCE
from dcnlab.topo.network import Network
from dcnlab.topo.spec import parse

pytestmark = pytest.mark.network


@pytest.mark.parametrize("app", ["single_path", "ecmp", "spray"])
def test_check_passes_on_ext(app: str) -> None:
    result = check("fattree:4", app, "ext")
    assert result.fields["pingall"] == 1.0, result.line()
    assert result.ok, result.line()


def test_ecmp_keeps_a_flow_on_one_path() -> None:
    spec = parse("fattree:4")
    with Network(spec, app="dcnlab.apps.ecmp", switch="ext") as net:
        for src, dst in inter_pod_pairs(spec, 3):
            done, share = one_flow_split(net, src, dst)
            assert done
            assert max(share) >= 0.99, (src, dst, share)


@pytest.mark.parametrize("mode", ["random", "rr"])
def test_spray_splits_one_flow_evenly(mode: str) -> None:
    spec = parse("fattree:4")
    with Network(spec, app="dcnlab.apps.spray", switch="ext",
                 app_env={"DCNLAB_SELECT_MODE": mode}) as net:
        state = net.state() or {}
        assert state["counters"].get("balanced_switches") == 20, state
        src, dst = inter_pod_pairs(spec, 1)[0]
        done, share = one_flow_split(net, src, dst)
        assert done
        assert len(share) == 2 and all(abs(x - 0.5) <= SPLIT_TOLERANCE for x in share), share
