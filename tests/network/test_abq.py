"""ABQ (seed 002) on real networks: switch_ext's ``abq`` ingress discipline, the abq app,
DCTCP hosts.

- An incast through the receiver's ABQ port: ACKs are held and released, every flow
  completes, the counters add up (held = released + forced + superseded + still held),
  and the senders' sockets really run DCTCP (the kernel's own answer on each socket).
- The app's experimenter message changes K and the mode at run time (the switch was
  started with other values on its command line).
- Bad ``abq`` options fail with the switch's own message before a namespace or an
  interface exists.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import pytest

from dcnlab.hosts import dctcp
from dcnlab.schemes.abq.check import abq_incast, port_line, receiver_port
from dcnlab.topo import ext_switch as ext
from dcnlab.topo.network import Network
from dcnlab.topo.spec import parse
from dcnlab.topo.switches import SwitchKindError

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths)")]

APP = "dcnlab.apps.abq"


def _binary_or_skip() -> None:
    try:
        ext.find_binary()
    except SwitchKindError as exc:
        pytest.skip(str(exc))


def test_bad_abq_options_fail_before_anything_is_built() -> None:
    _binary_or_skip()
    net = Network("incast:2,ingress@host=abq/k=lots", app=APP, switch="ext")
    with pytest.raises(ext.ExtSwitchError) as info:
        net.start()
    message = str(info.value)
    assert message.startswith("switch s1: --port '1=check1,")
    assert "ingress discipline 'abq': option k=lots: size 'lots'" in message
    assert net.leftovers() == {"processes": [], "links": [], "dirs": []}
    assert net.prefix is None or not any(n.startswith(net.prefix or "-") for n in
                                         os.listdir("/sys/class/net"))


def test_incast_holds_and_releases_acks_and_every_flow_completes() -> None:
    _binary_or_skip()
    if dctcp.needs_bpf() and not dctcp.OBJECT.exists():
        pytest.skip(f"{dctcp.OBJECT} not built (scripts/setup.sh)")
    spec = parse("incast:8,ingress@host=abq/k=10p/mode=ece")
    with dctcp.provided(["dctcp"]), Network(spec, app=APP, switch="ext") as net:
        for h in spec.hosts:
            assert net.host(h.name).popen(
                ["sh", "-c", dctcp.host_commands(ecn=True, rto_min="10ms")]).wait() == 0
        routes = net.host("h2").cmd("ip -4 route show")
        assert re.search(r"rto_min (lock )?10ms", routes), routes
        fields, failures = abq_incast(net, spec, "dctcp")
    assert failures == [], (failures, fields)
    assert fields["abq_held"] > 0 and fields["abq_released"] > 0
    assert fields["flows_lost"] == 0 and fields["flows"] == 8 * 5
    assert fields["abq_ece_marked"] > 0  # mode=ece: released ACKs carry ECE
    assert fields["incast_congestion"] == [dctcp.resolve("dctcp")]


def _abq_counters(net: Any, switch: str, port: int) -> dict[str, Any]:
    return (port_line(net, switch, port, time.time()).get("ingress") or {})


def test_experimenter_message_changes_k_and_mode_at_run_time() -> None:
    _binary_or_skip()
    spec = parse("incast:2,ingress@host=abq/k=20p/mode=ece")
    env = {"DCNLAB_ABQ_K": "7p", "DCNLAB_ABQ_MODE": "window"}
    with Network(spec, app=APP, switch="ext", app_env=env) as net:
        switch, port = receiver_port(net, spec, "h1")
        argv = " ".join(net.switch(switch).argv)
        assert "ingress=abq/k=20p/mode=ece" in argv  # the command line says otherwise
        deadline = time.time() + 20
        counters = _abq_counters(net, switch, port)
        while (counters.get("k"), counters.get("mode")) != (7, 1) and time.time() < deadline:
            time.sleep(0.2)
            counters = _abq_counters(net, switch, port)
        assert (counters.get("k"), counters.get("mode"), counters.get("enabled")) == (7, 1, 1)
        # Every ABQ port got it (OFPP_ALL), and the app counted the switch.
        for p in (net.switch(switch).stats() or {}).get("ports", []):
            assert (p["ingress"]["k"], p["ingress"]["mode"]) == (7, 1)
        assert (net.state() or {}).get("counters", {}).get("abq_configured_switches") == 1
