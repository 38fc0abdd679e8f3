"""CFS (seed 003) on a lab: a scheme whose senders use its own transport (dcnlab-mp) over
a multi-homed server's two data-plane interfaces.

The lab is twopath, emulated without Mininet (tests/emulated_lab.py): switch_ext
processes for the hardware, started with twopath's link options on their ports as a lab
operator would start them (the paths differ by delay); the client namespace has ``eth1``
and ``eth2``, which the lab file lists as its interface and ``extra_interfaces``.
``dcnlab lab prepare`` installs dcnlab and dcnlab-mp into a virtual environment of the
test's own (the lab file's ``python``), and the engine runs dcnlab-mp from there.

What must hold: prepare installs dcnlab-mp (and UC3's native agent) once and finds them
ready the next time;
``dcnlab lab describe`` finds each of the client's interfaces where the file says;
``dcnlab check --lab`` passes for cfs (both schedulers' transfers intact, both paths
carrying bytes of the transfer long enough to need them); a small experiment runs every
flow under cfs and minRTT over both of the client's addresses, with the same flow list as
the file gives anywhere; nothing started on a host outlives either."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from emulated_lab import EmulatedLab, available

from dcnlab.benchmarks.engine import run_experiment
from dcnlab.benchmarks.engine.fabric import FabricRequest
from dcnlab.benchmarks.engine.spec import flows_for, load_spec
from dcnlab.check import check
from dcnlab.lab import spec as lab_spec
from dcnlab.lab.describe import describe, render
from dcnlab.lab.fabric import LabPlace
from dcnlab.lab.prepare import prepare
from dcnlab.lab.prepare import render as render_prepared
from dcnlab.lab.ssh import SshLoop

pytestmark = [pytest.mark.network, pytest.mark.built,  # dcnlab-mp, built by setup.sh
              pytest.mark.skipif(available() is not None, reason=str(available()))]

TOPOLOGY = "twopath"


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def lab() -> Iterator[EmulatedLab]:
    emulated = EmulatedLab(TOPOLOGY, emulate_links=True)
    try:
        yield emulated
    finally:
        emulated.close()


@pytest.fixture(scope="module")
def loop() -> Iterator[SshLoop]:
    loop = SshLoop()
    try:
        yield loop
    finally:
        loop.close()


@pytest.fixture(scope="module")
def place(lab: EmulatedLab, loop: SshLoop,
          tmp_path_factory: pytest.TempPathFactory) -> LabPlace:
    data = lab.lab_file()
    data["python"] = str(tmp_path_factory.mktemp("hostenv") / "venv" / "bin" / "python")
    spec = lab_spec.parse(data)
    first = prepare(spec, loop)
    text = render_prepared(first)
    assert all(r.ok for r in first), text
    # the hosts share this file system: the first copies each program, the other finds
    # it there
    for program in ("dcnlab-mp", "dcnlab-uc3-agentd"):
        said = [next(x for x in r.ready if x.startswith(f"{program} at ")) for r in first]
        assert said[0].endswith("(installed now)") and said[1].endswith("(this build's)"), \
            text
    again = prepare(spec, loop)
    assert all(sum(x.endswith("(this build's)") for x in r.ready) == 2 for r in again), \
        render_prepared(again)
    return LabPlace(spec, loop)


def _nothing_left(place: LabPlace, tmp_path: Path) -> str:
    """What of dcnlab-mp still runs on the hosts (they share this machine's process
    table: one look covers both)."""
    ssh = place.make(FabricRequest(TOPOLOGY, "dcnlab.apps.cfs", "ext", tmp_path)).hosts["h1"]
    try:  # the brackets keep the pattern from matching the shell that runs pgrep
        return ssh.cmd("pgrep -af '[d]cnlab-mp (serve|send)' || true").strip()
    finally:
        ssh.close()


def test_describe_finds_each_interface_of_the_multi_homed_host(
        place: LabPlace, lab: EmulatedLab, tmp_path: Path) -> None:
    desc = describe(place.lab, tmp_path, place.loop)
    assert desc.ok, render(desc)
    first, second = lab.topology.hosts[0].interfaces
    assert desc.located["h1"] == f"{first.switch}:{first.port}", desc.located
    assert desc.located["h1 eth2"] == f"{second.switch}:{second.port}", desc.located


def test_check_passes_for_cfs_on_the_lab(place: LabPlace, lab: EmulatedLab,
                                         tmp_path: Path) -> None:
    result = check(TOPOLOGY, "cfs", place.lab.switch_kind, place=place)
    assert result.ok, result.line()
    client = lab.topology.hosts[0]
    assert result.fields["paths"] == [x.ip for x in client.interfaces]
    assert result.fields["intact"] is True
    assert set(result.fields["fct_ms"]) == {"minrtt", "cfs"}
    # the long transfer outlasts the slow path's handshake: both paths carry data
    assert {s: b["64MB"] for s, b in result.fields["both_paths"].items()} == {
        "minrtt": True, "cfs": True}, result.line()
    assert _nothing_left(place, tmp_path) == ""


def test_a_cfs_experiment_runs_on_the_lab(place: LabPlace, lab: EmulatedLab,
                                          tmp_path: Path) -> None:
    spec = {
        "name": "labcfs", "topology": TOPOLOGY, "switch": "ext",
        "schemes": ["cfs", {"name": "minrtt", "app": "cfs",
                            "transport_options": {"scheduler": "minrtt"}}],
        "workload": {"type": "sizes", "src": "h1", "dst": "h2", "repetitions": 3,
                     "gap": 1.0},
        "loads": [1048576], "seeds": [1], "duration": 5, "drain": 30, "settle": 0.5,
    }
    path = tmp_path / "labcfs.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    result = run_experiment(path, out, progress=False, place=place)
    assert result.ok and result.not_ok == 0, result.errors
    flows = flows_for(load_spec(path), 1, 1048576)
    written = [(r["src"], r["dst"], int(r["size"])) for r in _rows(out / "workload.csv")]
    assert written == [(f.src, f.dst, f.size) for f in flows] and len(flows) == 3
    rows = _rows(out / "flows.csv")
    assert sorted((r["scheme"], r["flow_id"]) for r in rows) == sorted(
        (s, str(f.id)) for s in ("cfs", "minrtt") for f in flows)
    client = lab.topology.hosts[0]
    for r in rows:
        assert r["status"] == "ok", r
        carried = [int(b) for b in r["subflow_bytes"].split(";")]
        # one subflow per client address, from the addresses the lab file gives
        assert len(carried) == len(client.interfaces) and sum(carried) >= 1048576, r
    # whether a 1 MB flow's slow path carried any of it is timing (it may end before that
    # path's handshake does); that both paths carry data is the check's long transfer's
    assert _nothing_left(place, tmp_path) == ""
