"""``dcnlab lab describe lab.yaml``: what the lab is, found on the lab itself, and where it
differs from what the lab file expects.

1. Every host over SSH: reachable, root, kernel, its data-plane interface up with the
   file's address, and the python the file names with dcnlab importable.
2. The controller starts here in discovery mode (no topology: Ryu's LLDP finds the fabric
   links, ARP the hosts) on the file's address; every host pings every other host once
   through its data-plane interface, so the controller sees each address.
3. The fabric links and host attachments it found (the state file's ``fabric`` and
   ``host_locations``) against the file's ``fabric`` and hosts' ``switch``/``port``.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from dcnlab.model.runtime import ENV_STATE_FILE, ControllerState, read_state
from dcnlab.topo.controller_process import ControllerProcess
from dcnlab.topo.errors import NetworkError

from .spec import LabSpec
from .ssh import HostError, SshHost, SshLoop, Target

DISCOVERY_APP = "dcnlab.apps.ecmp"
CONNECT_TIMEOUT = 60.0  # seconds for every switch to connect and LLDP to settle


@dataclass
class HostReport:
    name: str
    problems: list[str] = field(default_factory=list)
    kernel: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class Description:
    hosts: list[HostReport]
    connected: list[int]  # datapath ids that connected
    links: list[tuple[str, str]]  # ("spine1:1", "leaf1:1"), as found
    # host -> "leaf1:3", where its address was seen ("h1 eth2": a further interface's)
    located: dict[str, str]
    differences: list[str]

    @property
    def ok(self) -> bool:
        return all(h.ok for h in self.hosts) and not self.differences


def check_host(lab: LabSpec, ssh: SshHost) -> HostReport:
    """What one host lacks for a run, each with its fix."""
    report = HostReport(ssh.name)
    host = lab.host(ssh.name)
    try:
        ssh.connect()
    except HostError as exc:
        report.problems.append(str(exc))
        return report
    uid = ssh.run("id -u", timeout=15.0).stdout.strip()
    if uid != "0":
        report.problems.append(f"the login {ssh.target.user} is not root (uid {uid}): log "
                               "in as root")
    report.kernel = ssh.run("uname -r", timeout=15.0).stdout.strip()
    for interface, address in host.data_interfaces():
        addr = ssh.run(f"ip -4 -o addr show dev {shlex.quote(interface)}", timeout=15.0)
        if addr.returncode != 0:
            report.problems.append(f"no interface {interface} (a data-plane interface of "
                                   "the lab file)")
        elif f" {address}/" not in addr.stdout:
            report.problems.append(f"{interface} does not carry {address}: "
                                   f"ip addr add {address}/8 dev {interface}")
    probe = ssh.run([lab.python, "-c", "import dcnlab.benchmarks.engine.agent"],
                    timeout=30.0)
    if probe.returncode != 0:
        report.problems.append(f"{lab.python} cannot import dcnlab: dcnlab lab prepare "
                               "installs it")
    return report


def describe(lab: LabSpec, run_dir: Path, loop: SshLoop | None = None,
             timeout: float = CONNECT_TIMEOUT) -> Description:
    """The lab as found; raises NetworkError when the controller cannot start."""
    from dcnlab.topo.preflight import find_ryu_manager

    own_loop = loop is None
    loop = loop or SshLoop()
    hosts = {h.name: SshHost(_target(lab, h.name), loop) for h in lab.hosts}
    run_dir.mkdir(parents=True, exist_ok=True)
    state_file = run_dir / "state.json"
    state_file.unlink(missing_ok=True)
    controller = ControllerProcess(
        find_ryu_manager(), DISCOVERY_APP, [], lab.controller.port,
        env={ENV_STATE_FILE: str(state_file), "PYTHONUNBUFFERED": "1"}, cwd=run_dir,
        log_file=run_dir / "controller.log", listen_host=lab.controller.address)
    try:
        reports = [check_host(lab, ssh) for ssh in hosts.values()]
        controller.start(None)
        controller.wait_listening(15.0)
        state = _wait_discovered(lab, controller, state_file, timeout)
        for report in reports:
            if report.ok:
                _ping_all(lab, hosts[report.name])
        time.sleep(1.0)  # the next state snapshot holds what the pings taught
        state = read_state(str(state_file)) or state
        return _compare(lab, reports, state)
    finally:
        controller.stop()
        for ssh in hosts.values():
            ssh.close()
        if own_loop:
            loop.close()


def _target(lab: LabSpec, name: str) -> Target:
    address, port, user, key = lab.ssh_target(lab.host(name))
    return Target(name, address, port, user, key, lab.ssh.connect_timeout,
                  lab.ssh.known_hosts)


def _wait_discovered(lab: LabSpec, controller: ControllerProcess, state_file: Path,
                     timeout: float) -> ControllerState:
    deadline = time.monotonic() + timeout
    state: ControllerState | None = None
    want = {s.datapath_id for s in lab.switches}
    while time.monotonic() < deadline:
        controller.check_alive()
        state = read_state(str(state_file))
        if state is not None and want <= set(state.get("connected") or []) \
                and state.get("settled"):
            return state
        time.sleep(0.3)
    if state is None:
        raise NetworkError(f"the controller wrote no state within {timeout:g} s (see "
                           f"{controller.log_file})")
    return state  # what connected: _compare names the rest


def _ping_all(lab: LabSpec, ssh: SshHost) -> None:
    """From each of the host's data-plane interfaces to every other host's address: the
    controller sees each interface's address where it is cabled."""
    mine = lab.host(ssh.name)
    targets = " ".join(shlex.quote(h.address) for h in lab.hosts if h.name != ssh.name)
    for interface, _address in mine.data_interfaces():
        ssh.run(f"for a in {targets}; do ping -c 1 -W 1 -I {shlex.quote(interface)} "
                "$a >/dev/null 2>&1 & done; wait", timeout=30.0)


def _compare(lab: LabSpec, reports: list[HostReport],
             state: ControllerState) -> Description:
    names = lab.switch_names()

    def end(dpid: int, port: int) -> str:
        return f"{names.get(dpid, f'{dpid:#x}')}:{port}"

    connected = sorted(state.get("connected") or [])
    differences = [f"switch {names[d]} ({d:#x}) did not connect to "
                   f"{lab.controller.address}:{lab.controller.port}"
                   for d in sorted(set(names) - set(connected))]
    differences += [f"an unknown switch {d:#x} connected (not in the lab file)"
                    for d in connected if d not in names]
    found = [tuple(sorted((end(a, ap), end(b, bp)))) for a, ap, b, bp, _up
             in state.get("fabric") or []]
    links = sorted((str(x), str(y)) for x, y in found)
    if lab.fabric:
        want = {tuple(sorted((lk.a, lk.b))) for lk in lab.fabric}
        differences += [f"link {a} -- {b} is in the lab file but LLDP did not find it"
                        for a, b in sorted(want - set(links))]
        differences += [f"link {a} -- {b} was found but is not in the lab file"
                        for a, b in sorted(set(links) - want)]
    seen = state.get("host_locations") or {}
    located = {}
    for host in lab.hosts:
        for k, cabled in enumerate(host.cabling()):
            # the first interface is the host; a further one is named with it
            name = host.name if k == 0 else f"{host.name} {cabled.interface}"
            where = seen.get(cabled.address)
            if where is None:
                differences.append(f"host {name} ({cabled.address}) was not seen on the "
                                   f"fabric (is {cabled.interface} cabled to a switch?)")
                continue
            located[name] = end(where["dpid"], where["port"])
            if cabled.switch is not None and \
                    located[name] != f"{cabled.switch}:{cabled.port}":
                differences.append(f"host {name} is at {located[name]}, the lab file says "
                                   f"{cabled.switch}:{cabled.port}")
    return Description(reports, connected, links, located, differences)


def render(desc: Description) -> str:
    lines = ["hosts:"]
    for h in desc.hosts:
        status = "ready" if h.ok else "; ".join(h.problems)
        kernel = f" (kernel {h.kernel})" if h.kernel else ""
        lines.append(f"  {h.name}{kernel}: {status}")
    lines.append(f"switches connected: {len(desc.connected)}")
    lines.append("fabric links found:")
    lines += [f"  {a} -- {b}" for a, b in desc.links] or ["  (none)"]
    lines.append("hosts found at:")
    lines += [f"  {name}: {where}" for name, where in sorted(desc.located.items())] \
        or ["  (none)"]
    if desc.differences:
        lines.append("differences from the lab file:")
        lines += [f"  {d}" for d in desc.differences]
    else:
        lines.append("the lab is as the lab file says")
    return "\n".join(lines)
