"""The state file matches its declared schema (dcnlab.model.runtime.ControllerState).

Apps are driven in memory (fake datapaths, no network) until every part of their state
has content, then the state goes through write_state/read_state, the way the lifecycle,
the checks and the benchmarks get it, and is checked key by key and type by type.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from app_harness import app_from_topology
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser
from state_schema import mismatches

from dcnlab.controller.fabric_app import FabricApp
from dcnlab.controller.oftable import FakeDatapath
from dcnlab.hosts.uc3_agent.bpf import Tuple4
from dcnlab.hosts.uc3_agent.protocol import FlowStats
from dcnlab.model.runtime import ControllerState, read_state, write_state
from dcnlab.schemes.uc3.state_file import Uc3ControllerState
from dcnlab.topo.spec import parse


def _ev(**msg: Any) -> SimpleNamespace:
    return SimpleNamespace(msg=SimpleNamespace(**msg))


def _start(app_cls: type, topo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
           **env: str) -> tuple[Any, dict[int, FakeDatapath]]:
    """An app on the given topology with every switch connected and synced."""
    app, spec = app_from_topology(app_cls, topo, tmp_path, monkeypatch, **env)
    dps = {s.dpid: FakeDatapath(s.dpid) for s in spec.switches}
    for dp in dps.values():
        app._features(_ev(datapath=dp))
        barrier = next(m for m in dp.take() if isinstance(m, parser.OFPBarrierRequest))
        app._barrier(_ev(datapath=dp, xid=barrier.xid))
    return app, dps


def _report_everything(app: Any, dps: dict[int, FakeDatapath], link_down: bool = True) -> None:
    """Descriptions, port counters, a link down and a warning: no empty section left."""
    for dp in dps.values():
        app._desc(_ev(datapath=dp, body=SimpleNamespace(mfr_desc=b"acme\0", hw_desc=b"hw",
                                                        sw_desc=b"sw")))
        body = [SimpleNamespace(port_no=port, rx_packets=1, tx_packets=2, rx_bytes=3,
                                tx_bytes=4, rx_dropped=0, tx_dropped=5)
                for port in (1, 2)]
        app._port_stats(_ev(datapath=dp, body=body))
    if link_down:
        a, b = next((a, b) for a, _pa, b, _pb, _up in app.view.links())
        port = app.view.graph.edges[a, b]["ports"][a]
        desc = SimpleNamespace(port_no=port, state=ofp.OFPPS_LINK_DOWN, config=0)
        app._port_status(_ev(datapath=dps[a], reason=ofp.OFPPR_MODIFY, desc=desc))
    app.warn("a warning for the schema test")


def _as_written(app: Any, tmp_path: Path) -> ControllerState:
    path = str(tmp_path / "state.json")
    write_state(path, app.state())
    state = read_state(path)
    assert state is not None
    return state


def test_fabric_app_state_matches_the_schema(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    app, dps = _start(FabricApp, "fattree:4", tmp_path, monkeypatch)
    _report_everything(app, dps)
    state = _as_written(app, tmp_path)
    assert state["ready"] and state["links_down"] and state["port_stats"]
    assert state["descriptions"] and state["entries"] and state["warnings"]
    assert "tcppath" not in state and "uc3" not in state
    # what a lab's discovery is read from: every fabric link (one down) and host
    assert len(state["fabric"]) == 32 and [ln[4] for ln in state["fabric"]].count(0) == 1
    assert len(state["host_locations"]) == 16
    assert mismatches(state, ControllerState) == []


def test_the_check_catches_missing_keys_wrong_types_and_undeclared_keys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app, dps = _start(FabricApp, "spineleaf:1,2,1", tmp_path, monkeypatch)
    _report_everything(app, dps)
    state: Any = _as_written(app, tmp_path)
    del state["ready"]
    state["pid"] = "1234"
    state["counters"]["errors"] = 1.5
    next(iter(next(iter(state["port_stats"].values())).values()))["rx_bytes"] = None
    state["surprise"] = 1
    found = mismatches(state, ControllerState)
    assert any("missing key 'ready'" in m for m in found)
    assert any(m.startswith("state.pid:") for m in found)
    assert any("state.counters['errors']" in m for m in found)
    assert any(".rx_bytes:" in m for m in found)
    assert any("undeclared key 'surprise'" in m for m in found)
    assert len(found) == 5


def test_uc3_section_matches_the_schema(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from dcnlab.apps.uc3 import Uc3

    app, dps = _start(Uc3, "dumbbell:2,0", tmp_path, monkeypatch)
    _report_everything(app, dps, link_down=False)  # the flow needs the one fabric link
    spec = parse("dumbbell:2,0")
    client = next(h for h in spec.hosts if h.role == "client")
    server = next(h for h in spec.hosts if h.role == "server")
    flow = Tuple4(client.ip, 40000, server.ip, 5001)
    app.flow_table.report(client.ip, [FlowStats(flow, rtt_us=5000.0, mss=1448, cwnd=10,
                                                delivery_bps=5e6, throughput_bps=5e6,
                                                bytes_acked=1 << 20)])
    app.allocate_once()
    state = _as_written(app, tmp_path)
    uc3 = state["uc3"]  # type: ignore[typeddict-item]
    assert uc3["flows"] and uc3["links"] and uc3["config"]["method"]
    assert mismatches(state, Uc3ControllerState) == []
    # the common schema alone does not know the section: it is declared by the scheme
    assert mismatches(state, ControllerState) == ["state: undeclared key 'uc3'"]
