"""The lab description (lab.yaml): a good file loads with its defaults, and every bad
field gives an error naming the file and the field, before anything touches the lab."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dcnlab.lab import spec as lab

GOOD: dict[str, Any] = {
    "controller": {"listen": "192.0.2.1"},
    "ssh": {"user": "lab", "key": "~/.ssh/dcnlab_lab"},
    "switches": [{"dpid": "0x1", "name": "spine1"}, {"dpid": 2}, {"dpid": "0x3"},
                 {"dpid": "4"}],
    "fabric": [{"a": "spine1:1", "b": "s3:1"}, {"a": "spine1:2", "b": "s4:1"},
               {"a": "s2:1", "b": "s3:2"}, {"a": "s2:2", "b": "s4:2"}],
    "hosts": [
        {"name": "h1", "ssh": "192.0.2.11", "interface": "eth1", "address": "10.0.0.1",
         "switch": "s3", "port": 3},
        {"name": "h2", "ssh": "192.0.2.12:2222", "interface": "eth1",
         "address": "10.0.0.2", "user": "root", "key": "/keys/h2"},
        {"name": "h3", "ssh": "[2001:db8::13]", "interface": "enp3s0f1",
         "address": "10.0.0.3", "management": "192.0.2.13"},
    ],
}


def _load(tmp_path: Path, data: Any) -> lab.LabSpec:
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return lab.load(path)


def _error(tmp_path: Path, data: Any) -> str:
    with pytest.raises(lab.LabFileError) as info:
        _load(tmp_path, data)
    return str(info.value)


def _with(path: str, value: Any) -> dict[str, Any]:
    """GOOD with the field at ``path`` (``hosts.0.address``) set (None: removed)."""
    data = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    node: Any = data
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    if value is None:
        del node[int(last) if last.isdigit() else last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return data


def test_a_good_lab_loads_with_its_defaults(tmp_path: Path) -> None:
    spec = _load(tmp_path, GOOD)
    assert (spec.controller.address, spec.controller.port) == ("192.0.2.1", 6653)
    assert spec.switch_names() == {1: "spine1", 2: "s2", 3: "s3", 4: "s4"}
    assert [s.name for s in spec.switches] == ["spine1", "s2", "s3", "s4"]
    home = str(Path("~").expanduser())
    assert spec.ssh_target(spec.host("h1")) == ("192.0.2.11", 22, "lab",
                                                f"{home}/.ssh/dcnlab_lab")
    assert spec.ssh_target(spec.host("h2")) == ("192.0.2.12", 2222, "root", "/keys/h2")
    assert spec.ssh_target(spec.host("h3"))[:2] == ("2001:db8::13", 22)
    assert spec.ssh.connect_timeout == 10.0 and spec.ssh.known_hosts is None
    assert spec.topology is None and spec.host("h3").switch is None
    bare = _load(tmp_path, {"controller": {"listen": "10.9.0.1:6633"},
                            "switches": [{"dpid": 1}],
                            "hosts": [{"name": "a", "ssh": "h", "interface": "eth0",
                                       "address": "10.0.0.9"}]})
    assert bare.controller.port == 6633 and bare.fabric == []
    assert bare.ssh_target(bare.hosts[0]) == ("h", 22, "root", None)


def test_a_topology_must_name_the_labs_switches_and_hosts(tmp_path: Path) -> None:
    hosts = [{"name": f"h{i}", "ssh": f"192.0.2.{10 + i}", "interface": "eth1",
              "address": f"10.{1 + (i - 1) // 2}.0.{i}"} for i in range(1, 5)]
    data = {"controller": {"listen": "192.0.2.1"}, "topology": "spineleaf:2,2,2",
            "switches": [{"dpid": d} for d in range(1, 5)], "hosts": hosts}
    from dcnlab.topo.spec import parse

    topo = parse("spineleaf:2,2,2")
    for h, want in zip(hosts, topo.hosts, strict=True):
        h["address"] = want.ip  # the family's own addressing
    assert _load(tmp_path, data).topology == "spineleaf:2,2,2"
    wrong = copy.deepcopy(data)
    wrong["hosts"][0]["address"] = "10.200.0.1"
    assert re.search(rf"topology: spineleaf:2,2,2: the topology addresses h1 "
                     rf"{topo.hosts[0].ip}, the lab file 10\.200\.0\.1", _error(tmp_path, wrong))
    fewer = copy.deepcopy(data)
    fewer["switches"] = fewer["switches"][:3]
    assert "the lab's switches differ (missing 0x4, not in it none)" in _error(tmp_path,
                                                                           fewer)
    assert "family" in _error(tmp_path, {**data, "topology": "spineleef:2,2,2"})


def test_a_multi_homed_host_gives_each_interface_of_the_topology(tmp_path: Path) -> None:
    """twopath's client has two data-plane interfaces: the lab host lists the second in
    extra_interfaces, and a lab that gives it one is told which is missing."""
    from dcnlab.topo.spec import parse

    topo = parse("twopath")
    client, server = topo.hosts
    data: dict[str, Any] = {
        "controller": {"listen": "192.0.2.1"}, "topology": "twopath",
        "switches": [{"dpid": sw.dpid} for sw in topo.switches],
        "hosts": [{"name": "h1", "ssh": "192.0.2.11", "interface": "eth1",
                   "address": client.interfaces[0].ip,
                   "extra_interfaces": [{"interface": "eth2",
                                         "address": client.interfaces[1].ip,
                                         "switch": "s2", "port": 2}]},
                  {"name": "h2", "ssh": "192.0.2.12", "interface": "eth1",
                   "address": server.ip}]}
    spec = _load(tmp_path, data)
    assert spec.host("h1").data_interfaces() == [("eth1", client.interfaces[0].ip),
                                                 ("eth2", client.interfaces[1].ip)]
    assert spec.host("h2").data_interfaces() == [("eth1", server.ip)]
    single = copy.deepcopy(data)
    del single["hosts"][0]["extra_interfaces"]
    assert (f"host h1 has 2 data-plane interface(s) in the topology ("
            f"{client.interfaces[0].ip}, {client.interfaces[1].ip}), 1 in the lab file "
            f"({client.interfaces[0].ip}): a further one goes in its extra_interfaces"
            ) in _error(tmp_path, single)


@pytest.mark.parametrize("path, value, field, expected", [
    ("controller", None, "controller", "required field is missing"),
    ("controller.listen", "192.0.2.1:99999", "controller.listen", "port 99999 is not"),
    ("controller.port", 6653, "controller.port", "unknown field"),
    ("switches", [], "switches", "needs at least one switch"),
    ("hosts", [], "hosts", "needs at least one host"),
    ("switches.1.dpid", "0xZZ", "switches[1].dpid", "a datapath id is a number"),
    ("switches.1.dpid", 0, "switches[1].dpid", "not 1 .. 2^64-1"),
    ("switches.1.dpid", "1", "switches[1].dpid", "1 is switches[0]'s datapath id too"),
    ("switches.1.name", "spine1", "switches[1].name", "'spine1' is used twice"),
    ("switches.1.name", "Spine 2", "switches[1].name", "a lower-case letter"),
    ("fabric.0.a", "spine1", "fabric[0].a", "expected SWITCH:PORT"),
    ("fabric.0.a", "spine9:1", "fabric[0].a", "'spine9' is not a switch of the lab"),
    ("fabric.1.a", "spine1:1", "fabric[1].a", "port 1 of spine1 is cabled twice"),
    ("fabric.0.b", "spine1:7", "fabric[0]", "both ends on switch spine1"),
    ("hosts.0.address", "10.0.0.2", "hosts[1].address", "10.0.0.2 is hosts[0]'s address"),
    ("hosts.0.address", "10.0.0", "hosts[0].address", "the data-plane interface's IPv4"),
    ("hosts.1.name", "h1", "hosts[1].name", "'h1' is used twice"),
    ("hosts.1.name", "s2", "hosts[1].name", "hosts and switches share names"),
    ("hosts.1.ssh", "192.0.2.11:22", "hosts[1].ssh", "hosts[0]'s SSH address too"),
    ("hosts.1.ssh", "a:b:c", "hosts[1].ssh", "expected ADDRESS or ADDRESS:PORT"),
    ("hosts.0.port", None, "hosts[0].port", "switch and port go together"),
    ("hosts.0.switch", "s9", "hosts[0].switch", "'s9' is not a switch of the lab"),
    ("hosts.0.port", 1, "hosts[0].switch", "port 1 of s3 is cabled twice"),
    ("hosts.0.port", 0, "hosts[0].port", "must be >= 1"),
    ("hosts.0.interface", "eth1; rm -rf /", "hosts[0].interface", "a network interface"),
    ("hosts.0.extra_interfaces", [{"interface": "eth1", "address": "10.1.0.1"}],
     "hosts[0].extra_interfaces[0].interface", "'eth1' is used twice in h1"),
    ("hosts.0.extra_interfaces", [{"interface": "eth2", "address": "10.0.0.1"}],
     "hosts[0].extra_interfaces[0].address", "10.0.0.1 is hosts[0]'s address too"),
    ("hosts.0.extra_interfaces", [{"interface": "eth2", "address": "10.1.0.1",
                                   "switch": "s3", "port": 3}],
     "hosts[0].extra_interfaces[0].switch", "port 3 of s3 is cabled twice"),
    ("hosts.0.extra_interfaces", [{"interface": "eth2", "address": "10.1.0.1", "port": 5}],
     "hosts[0].extra_interfaces[0].switch", "switch and port go together"),
    ("hosts.2.management", "not-an-ip", "hosts[2].management", "an IP address"),
    ("hosts.0.adress", "10.0.0.1", "hosts[0].adress", "did you mean 'address'"),
    ("ssh.port", 0, "ssh.port", "must be >= 1"),
    ("ssh.connect_timeout", "soon", "ssh.connect_timeout", "expected a time in seconds"),
])
def test_bad_fields_name_the_file_and_the_field(tmp_path: Path, path: str, value: Any,
                                                field: str, expected: str) -> None:
    message = _error(tmp_path, _with(path, value))
    assert message.startswith(f"{tmp_path / 'lab.yaml'}: {field}: "), message
    assert expected in message, message


def test_a_file_that_is_not_a_lab(tmp_path: Path) -> None:
    assert "not valid YAML at line" in _error(tmp_path, "controller: [1,\n")
    assert "a lab file is a YAML mapping" in _error(tmp_path, "- a\n- b\n")
    with pytest.raises(lab.LabFileError, match="cannot read it"):
        lab.load(tmp_path / "absent.yaml")
