"""A lab as a place to run, on an emulated lab that shares no code with the Mininet path
(tests/emulated_lab.py: switch_ext processes in namespaces for the hardware switches,
namespaces with real sshd for the servers).

What must hold: the fabric starts (every switch connects to the controller on the lab
file's address and confirms the app's entries; every host answers over SSH as root), the
hosts reach each other through the switches, port counters come from OpenFlow, and a
small experiment runs with the lab as its place: the flow list is the one the same file
gives on Mininet, every flow completes, and nothing started on a host outlives the run."""

from __future__ import annotations

import csv
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from emulated_lab import EmulatedLab, available
from waiting import wait_for

from dcnlab.benchmarks.engine import ExperimentError, run_experiment
from dcnlab.benchmarks.engine.fabric import FabricRequest
from dcnlab.benchmarks.engine.spec import flows_for, load_spec
from dcnlab.benchmarks.engine.table import fmt
from dcnlab.check import check
from dcnlab.lab import spec as lab_spec
from dcnlab.lab.describe import describe, render
from dcnlab.lab.fabric import LabPlace
from dcnlab.lab.prepare import prepare
from dcnlab.lab.prepare import render as render_prepared
from dcnlab.lab.ssh import SshLoop

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(available() is not None, reason=str(available()))]

# 8 servers: 16 transfers between racks for check, so ECMP's spread over the two
# spines is not left to chance (all 16 on one: 2^-15)
TOPOLOGY = "spineleaf:2,2,4"
PORT_RATE = 10_000_000  # bit/s


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def lab() -> Iterator[EmulatedLab]:
    # hardware ports have a rate: 10 Mbit/s, the topology family's, so one transfer
    # loads its path (TCP-Path's check explores around a loaded spine)
    emulated = EmulatedLab(TOPOLOGY, port_options=(f"rate={PORT_RATE}",))
    try:
        yield emulated
    finally:
        emulated.close()


@pytest.fixture(scope="module")
def place(lab: EmulatedLab) -> Iterator[LabPlace]:
    loop = SshLoop()
    try:
        yield LabPlace(lab_spec.parse(lab.lab_file()), loop)
    finally:
        loop.close()


def test_the_fabric_starts_and_the_hosts_reach_each_other(place: LabPlace,
                                                          tmp_path: Path) -> None:
    fabric = place.make(FabricRequest(TOPOLOGY, "dcnlab.apps.ecmp", "ext", tmp_path))
    try:
        fabric.start()
        state = fabric.state()
        assert state is not None and state["ready"]
        assert sorted(state["connected"]) == [1, 2, 3, 4]
        h1, far = fabric.spec.host("h1"), fabric.spec.hosts[-1]  # in the other rack
        assert far.interfaces[0].switch != h1.interfaces[0].switch
        out = fabric.host("h1").cmd(f"ping -c 3 -i 0.2 -W 2 {far.ip}")
        assert " 0% packet loss" in out, out
        assert "0" == fabric.host(far.name).cmd("id -u").strip()
        leaf = h1.interfaces[0].switch

        def counted() -> bool:  # the app polls port counters on its own period
            return any((c.get("rx_bytes") or 0) > 0 for c in fabric.port_stats(leaf).values())
        assert wait_for(counted, 15.0, interval=0.5), \
            ("the ping's bytes never showed in the app's port counters", fabric.port_stats(leaf))
        assert fabric.host_files("h1").workdir == fabric.workdir
        started = fabric.host("h2").popen(["sleep", "300"])
        assert started.poll() is None
    finally:
        fabric.stop()
    assert all(not ssh.started for ssh in fabric.hosts.values())
    assert started.poll() is not None
    leftovers = place.make(FabricRequest(TOPOLOGY, "dcnlab.apps.ecmp", "ext", tmp_path))
    # a fresh connection sees no sleep and no run directory left behind
    ssh = leftovers.hosts["h2"]
    try:  # (the emulated hosts share this machine's processes: ask for that one only)
        assert ssh.cmd(f"kill -0 {started.pid} 2>/dev/null && echo alive || true") == ""
        assert ssh.cmd(f"test -e {fabric.workdir} && echo left || true").strip() == ""
    finally:
        ssh.close()


def test_an_experiment_runs_on_the_lab(place: LabPlace, tmp_path: Path) -> None:
    spec = {
        "name": "labmini", "topology": TOPOLOGY, "switch": "ext",
        "schemes": ["dcnlab.apps.ecmp"],
        "workload": {"type": "poisson", "cdf": "small.cdf", "pairs": "inter_rack"},
        "loads": [0.2], "seeds": [1], "duration": 3, "drain": 60, "settle": 0.5,
        "classes": {"mouse_max": "10KB", "elephant_min": "1MB"},
    }
    (tmp_path / "small.cdf").write_text("# sizes\n1000 0\n10000 0.5\n200000 1\n")
    path = tmp_path / "labmini.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run_experiment(path, tmp_path / "out", progress=False, place=place)
    assert result.ok and result.not_ok == 0, result.errors
    # the flow list the same file gives anywhere (Mininet's runs generate it alike)
    flows = flows_for(load_spec(path), 1, 0.2)
    with open(tmp_path / "out" / "workload.csv", newline="") as fh:
        written = [(r["src"], r["dst"], int(r["size"]), round(float(r["start"]), 6))
                   for r in csv.DictReader(fh)]
    assert written == [(f.src, f.dst, f.size, round(f.start, 6)) for f in flows]
    assert result.rows == len(flows) > 0


@pytest.mark.parametrize("app", ["ecmp", "tcppath"])
def test_check_passes_on_the_lab(place: LabPlace, app: str, tmp_path: Path) -> None:
    """dcnlab check --lab: the same generic part and scheme invariant as on Mininet,
    on the lab's switches and hosts (TCP-Path's probes run in the lab file's python),
    and nothing it started outlives it."""
    result = check(TOPOLOGY, app, place.lab.switch_kind, place=place)
    assert result.ok, result.line()
    fields = result.fields
    assert fields["pingall"] == 1.0 and fields["tcp_completed"] == fields["tcp_flows"] > 0
    assert fields["cores_used"] == fields["cores"] == 2  # both spines carried transfers
    if app == "tcppath":
        assert fields["congestion_probes"] == fields["congestion_completed"] > 0
        assert fields["connect_p50_ms"] > 0
    left = place.make(FabricRequest(TOPOLOGY, "dcnlab.apps.ecmp", "ext", tmp_path))
    ssh = left.hosts["h1"]
    try:  # no check process left on a host (they share this machine's process table;
        # the brackets keep the pattern from matching the shell that runs pgrep)
        assert ssh.cmd("pgrep -f '[i]perf3 -s -1|[t]cp_connect serve' || true").strip() == ""
    finally:
        ssh.close()


@pytest.mark.built  # the BPF DCTCP stands in where a kernel has no dctcp
def test_dctcp_is_made_usable_on_every_lab_host_and_dropped_after(
        place: LabPlace, tmp_path: Path) -> None:
    """A holder per host makes DCTCP usable there (this machine's kernel has none of
    its own: the BPF one is registered, by the hosts' own holders) and says what its
    sockets ask for; a transfer with it completes; when the fabric stops the holders end
    and the kernel has what it had before."""
    from dcnlab.hosts import dctcp

    before = dctcp.AVAILABLE_FILE.read_text().split()
    fabric = place.make(FabricRequest(TOPOLOGY, "dcnlab.apps.ecmp", "ext", tmp_path))
    try:
        fabric.start()
        with fabric.congestion_controls({"dctcp"}):
            names = {h.name: fabric.congestion_name(h.name, "dctcp")
                     for h in fabric.spec.hosts}
            assert set(names.values()) == {dctcp.resolve("dctcp")}, names
            assert fabric.congestion_name("h1", "cubic") == "cubic"
            far = fabric.spec.hosts[-1]  # in the other rack
            server = fabric.host(far.name).popen(["iperf3", "-s", "-1", "-p", "5301"])
            wait_for(lambda: "5301" in fabric.host(far.name).cmd("ss -ltn"), 15.0)
            client = fabric.host("h1").popen(
                ["iperf3", "-c", far.ip, "-p", "5301", "-n", "1M", "-C", names["h1"]])
            assert client.wait(60) == 0 and server.wait(30) == 0
    finally:
        fabric.stop()
    assert wait_for(lambda: dctcp.AVAILABLE_FILE.read_text().split() == before, 15.0), \
        (before, dctcp.AVAILABLE_FILE.read_text())


def test_check_on_the_lab_refuses_what_lab_hosts_cannot_run(place: LabPlace) -> None:
    """Before anything starts: a topology whose host has more data-plane interfaces
    than the lab's (twopath's multi-homed client), and one of other switches."""
    result = check("twopath", "cfs", place.lab.switch_kind, place=place)
    assert len(result.failures) == 1 and "host h1 has 2 data-plane interface(s) in the " \
        "topology (10.0.0.1, 10.1.0.1), 1 in the lab file (10.0.0.1)" in result.failures[0], \
        result.line()
    assert "startup_s" not in result.fields
    other = check("spineleaf:3,2,4", "ecmp", place.lab.switch_kind, place=place)
    assert other.failures and "0x5 are not in the lab file" in other.failures[0], other.line()


@pytest.mark.built  # the agents' BPF program
def test_uc3_agents_run_on_lab_hosts_and_clamp_a_flow(place: LabPlace, tmp_path: Path) -> None:
    """UC3's host parts on lab servers: the secret travels to each host, the agents
    start at the lab file's python, the app reaches them at their management addresses,
    a sender that joins its agent's cgroup gets clamped, and at the end the agents are
    stopped and their logs and status fetched into the run directory."""
    from dcnlab.schemes import registry

    parts = registry.host_parts("uc3")
    session = parts.open(parts.default_interval)
    fabric = place.make(FabricRequest(TOPOLOGY, "dcnlab.apps.uc3", "ext", tmp_path,
                                      app_env=session.app_env(), management=True))
    sender, far = "h1", fabric.spec.hosts[-1]
    try:
        fabric.start()
        session.start(fabric, [sender])
        procs = session.cgroup_procs(sender)
        assert procs is not None
        server = fabric.host(far.name).popen(["iperf3", "-s", "-1", "-p", "5302"])
        wait_for(lambda: "5302" in fabric.host(far.name).cmd("ss -ltn"), 15.0)
        client = fabric.host(sender).popen(
            ["sh", "-c", f"echo $$ > {procs} && exec iperf3 -c {far.ip} -p 5302 -t 4"])
        assert client.wait(60) == 0 and server.wait(30) == 0
        counters = session.counters(fabric)
        assert counters["clamps_applied"] > 0 and counters["agent_reports"] > 0, counters
        assert session.dead() == []
    finally:
        session.stop(tmp_path)
        fabric.stop()
    kept = sorted(p.name for p in (tmp_path / "uc3_agents").iterdir())
    assert kept == [f"agent-{sender}.json", f"agent-{sender}.log"], kept
    ssh = place.make(FabricRequest(TOPOLOGY, "dcnlab.apps.ecmp", "ext", tmp_path)).hosts[sender]
    try:  # the brackets keep the pattern from matching the shell that runs pgrep
        assert ssh.cmd("pgrep -f '[d]cnlab.hosts.uc3_agent' || true").strip() == ""
    finally:
        ssh.close()


def test_describe_finds_what_the_lab_file_says(lab: EmulatedLab, place: LabPlace,
                                               tmp_path: Path) -> None:
    desc = describe(place.lab, tmp_path / "as_is", place.loop)
    assert desc.ok, render(desc)
    topo = lab.topology
    assert sorted(desc.connected) == [sw.dpid for sw in topo.switches]
    assert len(desc.links) == len(list(topo.fabric_links()))
    assert desc.located == {h.name: f"{h.interfaces[0].switch}:{h.interfaces[0].port}"
                            for h in topo.hosts}
    assert "the lab is as the lab file says" in render(desc)
    # the same lab, described by a file that expects another cabling
    data = lab.lab_file()
    first = next(iter(topo.fabric_links()))
    data["fabric"] = [{"a": f"{first.a}:{first.a_port}", "b": f"{first.b}:{first.b_port}"},
                      {"a": f"{first.a}:9", "b": f"{first.b}:9"}]
    data["hosts"][0]["port"] = 7
    wrong = describe(lab_spec.parse(data), tmp_path / "wrong", place.loop)
    assert not wrong.ok
    text = "\n".join(wrong.differences)
    a, b = sorted((f"{first.a}:9", f"{first.b}:9"))
    assert f"link {a} -- {b} is in the lab file but LLDP did not find it" in text, text
    assert "was found but is not in the lab file" in text
    h1 = topo.hosts[0]
    assert (f"host h1 is at {h1.interfaces[0].switch}:{h1.interfaces[0].port}, the lab file "
            f"says {h1.interfaces[0].switch}:7") in text


def test_prepare_installs_dcnlab_once(lab: EmulatedLab, place: LabPlace,
                                      tmp_path: Path) -> None:
    data = lab.lab_file()
    data["python"] = str(tmp_path / "venv" / "bin" / "python")  # not this machine's /opt
    spec = lab_spec.parse(data)
    first = prepare(spec, place.loop)
    assert [r.name for r in first] == [h.name for h in spec.hosts]
    # the hosts share this file system: the first installs, the others find it there
    assert first[0].installed and first[0].ok, render_prepared(first)
    assert all(r.ok and "dcnlab at" in r.ready[0] for r in first), render_prepared(first)
    again = prepare(spec, place.loop)
    assert not any(r.installed for r in again), render_prepared(again)
    assert all("(this checkout's)" in r.ready[0] for r in again)


def test_a_host_lost_mid_run_keeps_every_row_and_resume_finishes(
        lab: EmulatedLab, place: LabPlace, tmp_path: Path) -> None:
    spec = {
        "name": "lablost", "topology": TOPOLOGY, "switch": "ext",
        "schemes": ["dcnlab.apps.ecmp"],
        "workload": {"type": "poisson", "cdf": "small.cdf", "pairs": "inter_rack"},
        "loads": [0.3], "seeds": [1, 2], "duration": 4, "drain": 60, "settle": 0.5,
        "classes": {"mouse_max": "10KB", "elephant_min": "1MB"},
    }
    (tmp_path / "small.cdf").write_text("# sizes\n1000 0\n10000 0.5\n200000 1\n")
    path = tmp_path / "lablost.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    # a host that sends in the first run: it has an agent there to lose
    sender = flows_for(load_spec(path), 1, 0.3)[0].src
    lost = next(h for h in lab.hosts if h.name == sender)
    plan = out / "runs" / "ecmp" / f"seed1_load{fmt(0.3)}" / f"plan_{lost.name}.json"

    def agent_sends() -> bool:
        """Its agent has recorded a flow: it runs, and its start is long over.  (The
        emulated hosts share this machine's files, so the host's run directory is
        visible here.)"""
        return plan.exists() and any(
            p.stat().st_size > 0
            for p in Path("/var/tmp").glob(f"dcnlab-lab{os.getpid()}-*/records_{lost.name}.jsonl"))

    def cut_when_running() -> None:
        wait_for(agent_sends, 120.0)
        lab.cut(lost)

    cutter = threading.Thread(target=cut_when_running)
    cutter.start()
    try:
        with pytest.raises(ExperimentError) as stopped:
            run_experiment(path, out, progress=False, place=place)
    finally:
        cutter.join()
        lab.cut(lost, up=True)
    first = stopped.value.result
    assert first is not None and not first.ok
    assert any(f"agent on {lost.name}" in e for e in first.errors), first.errors
    rows = _rows(out / "flows.csv")
    flows = flows_for(load_spec(path), 1, 0.3) + flows_for(load_spec(path), 2, 0.3)
    assert len(rows) == len(flows)  # every generated flow has a row
    sent = [r for r in rows if r["seed"] == "1" and r["src"] == lost.name]
    assert sent and all(r["status"] == "agent_died" and r["error"] for r in sent), sent
    assert {r["status"] for r in rows if r["seed"] == "2"} == {"not_run"}
    again = run_experiment(path, out, progress=False, resume=True, place=place)
    assert again.ok, again.errors
    rows = _rows(out / "flows.csv")
    assert {r["status"] for r in rows if r["seed"] == "2"} == {"ok"}
    assert len(rows) == len(flows)
