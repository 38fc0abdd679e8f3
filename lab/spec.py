"""The lab description (``lab.yaml``): where the controller listens, which OpenFlow
switches and Linux hosts make up the lab, how to reach each host over SSH, and (optionally)
the fabric links and topology the operator expects.  docs/lab.md documents every field;
a test holds that page to the dataclasses below.

Loading checks everything that can be checked without touching the lab: each field's
type and value (the experiment files' schema code, so errors read the same: the field's
path first, an unknown field's closest known name), that names, datapath ids, SSH
endpoints and data-plane addresses are unique, that every link end and attachment names
a switch of the file and uses a port once, and that a given topology has the lab's
switches (by datapath id) and hosts (by name and address).  What only the lab can tell
(is the host reachable, does the switch connect, do LLDP's links match) is
``dcnlab lab describe``'s job.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dcnlab.benchmarks.engine import schema
from dcnlab.benchmarks.engine.schema import SpecFileError, from_mapping, join, read_yaml
from dcnlab.model.topology import TopologySpec

NAME = re.compile(r"[a-z][a-z0-9_-]{0,14}")  # fits a Linux interface prefix, as Mininet's
DEFAULT_OF_PORT = 6653
DEFAULT_SSH_PORT = 22


class LabFileError(ValueError):
    """A lab file that cannot be used; the message names the file and the field."""

    def __init__(self, path: Path | str, field: str, message: str) -> None:
        self.path = Path(path)
        self.field = field
        where = f"{path}: {field}: " if field else f"{path}: "
        super().__init__(where + message)


@dataclass(frozen=True)
class Controller:
    """Where ryu-manager listens for the switches (this machine's address on the lab's
    control network; the switches are configured to connect there)."""

    listen: str  # ADDRESS or ADDRESS:PORT (port 6653 when left out)

    @property
    def address(self) -> str:
        return _split_port(self.listen, DEFAULT_OF_PORT)[0]

    @property
    def port(self) -> int:
        return _split_port(self.listen, DEFAULT_OF_PORT)[1]


@dataclass(frozen=True)
class SshDefaults:
    """SSH settings every host takes unless it gives its own."""

    user: str = "root"
    key: str | None = None  # a private key file; None: the SSH agent and ~/.ssh's keys
    port: int = schema.field(DEFAULT_SSH_PORT, min=1, max=65535)
    connect_timeout: float = schema.field(10.0, unit="seconds", min=0.1)
    known_hosts: str | None = None  # a known_hosts file; None: no host key check


@dataclass(frozen=True)
class Switch:
    """An OpenFlow 1.3 switch of the lab."""

    dpid: str  # its datapath id: decimal, or hex with 0x (0x1, 0x00000000000000a1)
    name: str | None = None  # None: s<dpid in decimal>

    @property
    def datapath_id(self) -> int:
        return int(self.dpid, 0)


@dataclass(frozen=True)
class Link:
    """A fabric link between two switch ports, as the operator cabled it."""

    a: str  # "SWITCH:PORT"
    b: str


@dataclass(frozen=True)
class ExtraInterface:
    """A further data-plane interface of a multi-homed server: a scheme's own transport
    (CFS's dcnlab-mp) sends one subflow from each of the host's addresses."""

    interface: str
    address: str  # its IPv4 address
    switch: str | None = None  # where it is cabled, if known
    port: int | None = schema.field(None, min=1)


@dataclass(frozen=True)
class Host:
    """A Linux server of the lab."""

    name: str
    ssh: str  # ADDRESS or ADDRESS:PORT the controller machine reaches it at
    interface: str  # its data-plane interface (the one cabled to a switch)
    address: str  # that interface's IPv4 address
    user: str | None = None  # None: ssh.user
    key: str | None = None  # None: ssh.key
    switch: str | None = None  # where the interface is cabled, if known (else: ARP/LLDP)
    port: int | None = schema.field(None, min=1)
    # the address host agents reach the controller from (schemes with host parts);
    # None: the SSH address
    management: str | None = None
    # further data-plane interfaces, in the order of the topology host's interfaces
    # after its first (``twopath``'s client has two)
    extra_interfaces: list[ExtraInterface] = schema.field([])

    def data_interfaces(self) -> list[tuple[str, str]]:
        """(interface, address) of every data-plane interface, the first one first."""
        return [(end.interface, end.address) for end in self.cabling()]

    def cabling(self) -> list[ExtraInterface]:
        """Every data-plane interface with where it is cabled (if the file says), the
        first one first."""
        return [ExtraInterface(self.interface, self.address, self.switch, self.port),
                *self.extra_interfaces]


@dataclass(frozen=True)
class LabSpec:
    controller: Controller
    switches: list[Switch]
    hosts: list[Host]
    ssh: SshDefaults = schema.field(SshDefaults())
    fabric: list[Link] = schema.field([])
    # a topology spec (``spineleaf:2,2,2``) the lab is cabled as; None: discovered
    topology: str | None = None
    # "openflow": hardware (or any OpenFlow 1.3 switch), links as cabled; "ext": dcnlab's
    # switch_ext, which can also emulate link rates, delays and queue options
    switch_kind: str = schema.field("openflow", choices=("openflow", "ext"))
    # the interpreter with dcnlab on every host (``dcnlab lab prepare`` installs it)
    python: str = "/opt/dcnlab/venv/bin/python"

    def switch_names(self) -> dict[int, str]:
        """{datapath id: name}."""
        return {s.datapath_id: s.name or f"s{s.datapath_id}" for s in self.switches}

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def ssh_target(self, host: Host) -> tuple[str, int, str, str | None]:
        """(address, port, user, key file) of a host, its own settings over the
        defaults; the key file with ~ expanded."""
        address, port = _split_port(host.ssh, self.ssh.port)
        key = host.key if host.key is not None else self.ssh.key
        return (address, port, host.user or self.ssh.user,
                os.path.expanduser(key) if key else None)


# ---------------------------------------------------------------------------- loading


def load(path: str | os.PathLike[str]) -> LabSpec:
    """Read and check a lab file; raises LabFileError naming the file and the field."""
    path = Path(path)
    try:
        data = read_yaml(path)
    except ValueError as exc:
        raise LabFileError(path, "", str(exc)) from None
    try:
        return parse(data)
    except SpecFileError as exc:
        raise LabFileError(path, exc.field, str(exc).removeprefix(f"{exc.field}: ")) \
            from None


def parse(data: Any) -> LabSpec:
    """A checked LabSpec from a mapping (as read from a lab file); raises SpecFileError."""
    if not isinstance(data, dict):
        raise SpecFileError("", "a lab file is a YAML mapping of fields (controller, "
                            "switches, hosts, ...)")
    lab = from_mapping(LabSpec, data, "")
    _split_port(lab.controller.listen, DEFAULT_OF_PORT, "controller.listen")
    if not lab.switches:
        raise SpecFileError("switches", "needs at least one switch")
    if not lab.hosts:
        raise SpecFileError("hosts", "needs at least one host")
    switches = _check_switches(lab.switches)
    used: set[tuple[str, int]] = set()
    for i, link in enumerate(lab.fabric):
        ends = []
        for end in ("a", "b"):
            ends.append(_port_of(getattr(link, end), switches, used,
                                 join(join("fabric", i), end)))
        if ends[0][0] == ends[1][0]:
            raise SpecFileError(join("fabric", i), f"both ends on switch {ends[0][0]}")
    _check_hosts(lab, switches, used)
    if lab.topology is not None:
        _check_topology(lab)
    return replace(lab, switches=[replace(s, name=s.name or f"s{s.datapath_id}")
                                  for s in lab.switches])


def _split_port(text: str, default: int, where: str = "") -> tuple[str, int]:
    """ADDRESS or ADDRESS:PORT (IPv6 in brackets: [::1]:22)."""
    text = text.strip()
    match = re.fullmatch(r"\[([^\]]+)\](?::(\d+))?|([^:]+)(?::(\d+))?", text)
    if not match or not text:
        raise SpecFileError(where, f"{text!r}: expected ADDRESS or ADDRESS:PORT")
    address = match.group(1) or match.group(3)
    port_text = match.group(2) or match.group(4)
    port = int(port_text) if port_text else default
    if not 1 <= port <= 65535:
        raise SpecFileError(where, f"{text!r}: port {port} is not 1-65535")
    return address, port


def _check_switches(switches: list[Switch]) -> dict[str, Switch]:
    by_name: dict[str, Switch] = {}
    dpids: dict[int, int] = {}
    for i, sw in enumerate(switches):
        where = join("switches", i)
        try:
            dpid = sw.datapath_id
        except ValueError:
            raise SpecFileError(join(where, "dpid"), f"{sw.dpid!r}: a datapath id is a "
                                "number, decimal or hex with 0x") from None
        if not 0 < dpid < 1 << 64:
            raise SpecFileError(join(where, "dpid"), f"{sw.dpid}: not 1 .. 2^64-1")
        if dpid in dpids:
            raise SpecFileError(join(where, "dpid"), f"{sw.dpid} is switches[{dpids[dpid]}]'s "
                                "datapath id too")
        dpids[dpid] = i
        name = sw.name or f"s{dpid}"
        if not NAME.fullmatch(name):
            raise SpecFileError(join(where, "name"), f"{name!r}: a lower-case letter, then "
                                "letters, digits, '-' or '_', at most 15 characters")
        if name in by_name:
            raise SpecFileError(join(where, "name"), f"{name!r} is used twice")
        by_name[name] = sw
    return by_name


def _port_of(end: str, switches: dict[str, Switch], used: set[tuple[str, int]],
             where: str) -> tuple[str, int]:
    name, sep, port_text = end.partition(":")
    if not sep or not port_text.isdigit() or int(port_text) < 1:
        raise SpecFileError(where, f"{end!r}: expected SWITCH:PORT (a port number from 1)")
    if name not in switches:
        raise SpecFileError(where, f"{name!r} is not a switch of the lab "
                            f"({', '.join(switches)})")
    port = int(port_text)
    if (name, port) in used:
        raise SpecFileError(where, f"port {port} of {name} is cabled twice")
    used.add((name, port))
    return name, port


def _check_hosts(lab: LabSpec, switches: dict[str, Switch],
                 used: set[tuple[str, int]]) -> None:
    names: set[str] = set()
    addresses: dict[str, int] = {}
    targets: dict[tuple[str, int], int] = {}
    for i, host in enumerate(lab.hosts):
        where = join("hosts", i)
        if not NAME.fullmatch(host.name):
            raise SpecFileError(join(where, "name"), f"{host.name!r}: a lower-case letter, "
                                "then letters, digits, '-' or '_', at most 15 characters")
        if host.name in names or host.name in switches:
            raise SpecFileError(join(where, "name"), f"{host.name!r} is used twice "
                                "(hosts and switches share names)")
        names.add(host.name)
        interfaces: set[str] = set()
        for k, end in enumerate(host.cabling()):
            at = where if k == 0 else join(join(where, "extra_interfaces"), k - 1)
            _check_data_interface(at, end, switches, used, addresses, i)
            if end.interface in interfaces:
                raise SpecFileError(join(at, "interface"), f"{end.interface!r} is used "
                                    f"twice in {host.name}")
            interfaces.add(end.interface)
        target = _split_port(host.ssh, lab.ssh.port, join(where, "ssh"))
        if target in targets:
            raise SpecFileError(join(where, "ssh"), f"{host.ssh} is hosts[{targets[target]}]"
                                "'s SSH address too: one host per machine")
        targets[target] = i
        if host.management is not None:
            try:
                ipaddress.ip_address(host.management)
            except ValueError:
                raise SpecFileError(join(where, "management"), f"{host.management!r}: an IP "
                                    "address") from None


def _check_data_interface(where: str, end: ExtraInterface, switches: dict[str, Switch],
                          used: set[tuple[str, int]], addresses: dict[str, int],
                          index: int) -> None:
    """One data-plane interface of host ``index``: its address (unique in the lab), its
    name, and where it is cabled (switch and port together, a port once)."""
    try:
        ip = ipaddress.IPv4Address(end.address)
    except ValueError:
        raise SpecFileError(join(where, "address"), f"{end.address!r}: the data-plane "
                            "interface's IPv4 address (10.0.0.1)") from None
    if str(ip) in addresses:
        raise SpecFileError(join(where, "address"), f"{ip} is hosts[{addresses[str(ip)]}]"
                            "'s address too")
    addresses[str(ip)] = index
    if not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}", end.interface):
        raise SpecFileError(join(where, "interface"), f"{end.interface!r}: a network "
                            "interface name (eth1, enp3s0f1)")
    if (end.switch is None) != (end.port is None):
        raise SpecFileError(join(where, "switch" if end.switch is None else "port"),
                            "switch and port go together: where the interface is "
                            "cabled (leave both out to discover it)")
    if end.switch is not None and end.port is not None:
        _port_of(f"{end.switch}:{end.port}", switches, used, join(where, "switch"))


def interface_mismatch(host: Host, topology_addresses: list[str]) -> str | None:
    """Where a lab host's data-plane addresses are not a topology host's (None: they
    are, one interface each, in order)."""
    have = [address for _name, address in host.data_interfaces()]
    if have == topology_addresses:
        return None
    if len(have) != len(topology_addresses):
        return (f"host {host.name} has {len(topology_addresses)} data-plane interface(s) in "
                f"the topology ({', '.join(topology_addresses)}), {len(have)} in the lab "
                f"file ({', '.join(have)}): a further one goes in its extra_interfaces")
    return (f"the topology addresses {host.name} {', '.join(topology_addresses)}, the lab "
            f"file {', '.join(have)}")


def _check_topology(lab: LabSpec) -> None:
    """The topology's switches are the lab's (by datapath id) and its hosts the lab's (by
    name and address), so results name the same machines the file does."""
    from dcnlab.topo.spec import SpecError, parse

    try:
        topo: TopologySpec = parse(str(lab.topology))
    except SpecError as exc:
        raise SpecFileError("topology", str(exc)) from None
    want = {sw.dpid for sw in topo.switches}
    have = {sw.datapath_id for sw in lab.switches}
    if want != have:
        missing = sorted(want - have)
        extra = sorted(have - want)
        raise SpecFileError("topology", f"{lab.topology} has datapath ids "
                            f"{_ids(sorted(want))}; the lab's switches differ (missing "
                            f"{_ids(missing) or 'none'}, not in it {_ids(extra) or 'none'})")
    by_name = {h.name: h for h in lab.hosts}
    for h in topo.hosts:
        mine = by_name.get(h.name)
        if mine is None:
            raise SpecFileError("topology", f"{lab.topology} has host {h.name} ({h.ip}); "
                                "the lab has no host of that name")
        wrong = interface_mismatch(mine, [x.ip for x in h.interfaces])
        if wrong is not None:
            raise SpecFileError("topology", f"{lab.topology}: {wrong}")
    if len(topo.hosts) != len(lab.hosts):
        extra_hosts = sorted(set(by_name) - {h.name for h in topo.hosts})
        raise SpecFileError("topology", f"the lab's hosts {', '.join(extra_hosts)} are not "
                            f"in {lab.topology}")


def _ids(ids: list[int]) -> str:
    return ", ".join(f"{d:#x}" for d in ids)
