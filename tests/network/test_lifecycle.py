"""Network lifecycle on a real network: private OVS, Mininet, ryu-manager (root only).

Each test checks behaviour and that the run leaves nothing behind: no process it started,
nothing in its namespaces, no interface with its prefix, no directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from dcnlab.topo.network import EmulationWarning, Network, NetworkError, process_running
from dcnlab.topo.ovs import OvsError, OvsInstance
from dcnlab.topo.spec import SpecError, parse

pytestmark = [
    pytest.mark.network,
    pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths, OVS)"),
]

LEARNING_SWITCH = "ryu.app.simple_switch_13"  # fine on loop-free trees


def _assert_clean(net: Network) -> None:
    assert net.leftovers() == {"processes": [], "links": [], "dirs": []}


def _assert_addresses(net: Network) -> None:
    for spec_host in net.spec.hosts:
        host = net.host(spec_host.name)
        for index, iface in enumerate(spec_host.interfaces):
            intf = host.intf(f"{host.name}-eth{index}")
            assert intf.IP() == iface.ip
            assert intf.MAC() == iface.mac


def _ping_all(net: Network) -> None:
    loss = net.mn.pingAll(timeout=1)
    if loss:  # a learning switch may drop the very first packets while it learns
        loss = net.mn.pingAll(timeout=1)
    assert loss == 0


def _ping(src, dst, count: int = 2) -> bool:
    out = src.cmd(f"ping -c{count} -i0.2 -W1 {dst.IP()}")
    return f" {count} received" in out or " 0% packet loss" in out


# ---------------------------------------------------------------------------


def test_private_ovs_starts_and_stops_cleanly() -> None:
    # A namespace of its own: the userspace datapath's "ovs-netdev" tap is per namespace.
    holder = subprocess.Popen(["mnexec", "-cdn", "sleep", "120"])
    try:
        before = os.environ.get("OVS_RUNDIR")
        ovs = OvsInstance(netns_pid=holder.pid).start()
        directory, pids = ovs.directory, ovs.pids
        try:
            assert set(pids) == {"ovsdb-server", "ovs-vswitchd"}
            assert all(process_running(pid) for pid in pids.values())
            assert os.environ["OVS_RUNDIR"] == str(directory)
            ovs.vsctl("add-br", "tbr0", "--", "set", "bridge", "tbr0", "datapath_type=netdev")
            assert ovs.bridges() == ["tbr0"]
            # Plain ovs-ofctl finds the bridge through OVS_RUNDIR, as Mininet's calls do.
            out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", "tbr0"],
                                 capture_output=True, text=True, check=True).stdout
            assert "port LOCAL" in out
            # Its own ovs-vswitchd answers ovs-appctl: adding the bridge reconfigured it.
            assert ovs.coverage("bridge_reconfigure") > 0
        finally:
            ovs.stop()
        assert not directory.exists()
        with pytest.raises(OvsError, match="not running"):
            ovs.coverage("bridge_reconfigure")
        assert not any(process_running(pid) for pid in pids.values())
        assert os.environ.get("OVS_RUNDIR") == before
    finally:
        holder.kill()
        holder.wait()


def test_spineleaf_learning_switch_ping_and_tcp() -> None:
    net = Network(parse("spineleaf:1,2,2"), app=LEARNING_SWITCH, switch="ovs")
    with net:
        assert net.prefix and net.ovs is not None
        # Everything of the run lives in its namespaces, nothing in the root namespace.
        assert net.leftovers()["links"] == []
        _assert_addresses(net)
        _ping_all(net)
        h1, h4 = net.host("h1"), net.host("h4")  # on different leaves: through the spine
        h4.cmd("iperf3 -s -1 >/dev/null 2>&1 &")
        time.sleep(0.5)
        out = h1.cmd(f"timeout 20 iperf3 -c {h4.IP()} -t 2 -J")
        result = json.loads(out[out.index("{"):])
        received = result["end"]["sum_received"]["bytes"]
        assert received > 1_000_000  # ~2.5 MB at the spec's 10 Mbit/s
        spine = net.port_stats("s1")
        assert sum(row["rx_bytes"] or 0 for row in spine.values()) >= received
        # The transfer's packets crossed three bridges of the one datapath: a few were
        # translated (upcalls), the rest matched the datapath flows those installed,
        # still alive (OVS keeps an idle one 10 s).
        dp = net.ovs.datapath_stats()
        assert dp["packets"] > 3 * received // 1500
        assert 0 < dp["upcalls"] < dp["packets"] // 20 and dp["flows"] > 0
        assert net.controller_log.exists()
    _assert_clean(net)


def test_two_networks_at_once_do_not_collide() -> None:
    with Network("spineleaf:1,1,2", app=LEARNING_SWITCH) as first:
        second = Network("incast:2", app=LEARNING_SWITCH)  # delay/buffer: ext only
        with pytest.warns(EmulationWarning, match="needs --switch ext; ignored on ovs"):
            second.start()
        try:
            assert first.prefix != second.prefix
            assert first.ovs.directory != second.ovs.directory
            assert first.netns_pid != second.netns_pid
            _ping_all(first)
            _ping_all(second)
        finally:
            second.stop()
        _assert_clean(second)
        # The first one still works (and still finds its own OVS) after the second left.
        _ping_all(first)
        assert first.port_stats("s1")
    _assert_clean(first)


def test_bad_app_fails_clearly_and_leaves_nothing() -> None:
    net = Network("spineleaf:1,1,1", app="dcnlab.apps.no_such_app")
    with pytest.raises(NetworkError, match="ryu-manager exited") as info:
        net.start()
    assert "no_such_app" in str(info.value)  # the log tail names the missing module
    _assert_clean(net)


STATE_APP = """
import json, os
from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, set_ev_cls
from ryu.ofproto import ofproto_v1_3
from dcnlab.model.runtime import ENV_STATE_FILE, ENV_TOPOLOGY, write_state


class StateApp(app_manager.RyuApp):
    # Floods everything (loop-free topologies only) and reports per the state contract.
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with open(os.environ[ENV_TOPOLOGY]) as fh:
            self.expected = sorted(s["dpid"] for s in json.load(fh)["switches"])
        self.expected += [int(x) for x in os.environ.get("EXTRA_DPIDS", "").split()]
        self.connected = set()
        self.write()

    def write(self):
        write_state(os.environ[ENV_STATE_FILE], {
            "app": "state_app", "pid": os.getpid(), "expected": self.expected,
            "connected": sorted(self.connected), "counters": {}, "warnings": [],
            "ready": set(self.expected) <= self.connected})

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        actions = [parser.OFPActionOutput(ofp.OFPP_FLOOD)]
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=0, match=parser.OFPMatch(),
                                      instructions=inst))
        self.connected.add(dp.id)
        self.write()
"""


def test_app_state_file_gates_readiness(tmp_path: Path) -> None:
    app = tmp_path / "state_app.py"
    app.write_text(STATE_APP)
    with Network("spineleaf:1,1,2", app=str(app), wait_app_ready=True) as net:
        state = net.state()
        assert state is not None and state["ready"] and state["pid"] == net.controller_pid
        assert state["connected"] == [sw.dpid for sw in net.spec.switches]
        _ping_all(net)
    _assert_clean(net)
    # An app that never gets ready: a clear timeout naming the app's view and its log.
    net = Network("spineleaf:1,1,2", app=str(app), app_env={"EXTRA_DPIDS": "99"},
                  ready_timeout=3)
    with pytest.raises(NetworkError, match=r"app not ready: ready=false, 2/3 datapaths"):
        net.start()
    _assert_clean(net)


def test_bad_spec_raises_spec_error_unchanged() -> None:
    with pytest.raises(SpecError, match="valid forms"):
        Network("fattree:3", app=LEARNING_SWITCH)


def test_restart_controller_keeps_network_usable(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with Network("spineleaf:1,2,1", app=LEARNING_SWITCH, run_dir=run_dir) as net:
        h1, h2 = net.host("h1"), net.host("h2")
        assert _ping(h1, h2)
        old = net.controller_pid
        net.restart_controller()
        assert net.controller_pid != old and not process_running(old)
        assert _ping(h1, h2)
        # Fabric link down: the leaves lose each other; up again: back.
        net.set_link("s2", "s1", up=False)
        assert not _ping(h1, h2, count=1)
        net.set_link("s2", "s1", up=True)
        time.sleep(0.5)
        assert _ping(h1, h2, count=3)
    _assert_clean(net)
    # A given run_dir is kept, with the controller's log of both runs.
    assert (run_dir / "ryu-manager.log").read_text().count("=== ") == 2
    shutil.rmtree(run_dir)
