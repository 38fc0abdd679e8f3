"""A lab as a place to run, before anything touches it: which experiments it refuses and
why (its topology must be the lab's machines; hardware switches emulate no link; a lab's
links are cables, not veths to tap)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dcnlab.benchmarks.engine.spec import parse_spec
from dcnlab.lab import spec as lab
from dcnlab.lab.fabric import LabPlace, mismatch
from dcnlab.topo.spec import parse

TOPOLOGY = "spineleaf:2,2,2"


def _lab(**changes: Any) -> lab.LabSpec:
    topo = parse(TOPOLOGY)
    data: dict[str, Any] = {
        "controller": {"listen": "192.0.2.1"},
        "switches": [{"dpid": sw.dpid} for sw in topo.switches],
        "hosts": [{"name": h.name, "ssh": f"192.0.2.{10 + i}", "interface": "eth1",
                   "address": h.ip} for i, h in enumerate(topo.hosts, start=1)],
        **changes}
    return lab.parse(data)


def _experiment(**changes: Any) -> Any:
    data: dict[str, Any] = {
        "name": "x", "topology": TOPOLOGY, "schemes": ["dcnlab.apps.ecmp"],
        "workload": {"type": "poisson", "cdf": "websearch"}, "loads": [0.1],
        "seeds": [1], "duration": 5, **changes}
    return parse_spec(data, check_apps=False)


def test_an_experiment_on_the_labs_machines_is_taken() -> None:
    place = LabPlace(_lab())
    assert place.refuse(_experiment()) is None
    assert mismatch(place.lab, parse(TOPOLOGY)) is None


def test_a_topology_of_other_machines_is_refused() -> None:
    place = LabPlace(_lab())
    # three hosts a leaf: h3 is the first leaf's third host, not the lab's h3
    assert place.refuse(_experiment(topology="spineleaf:2,2,3")) == (
        "the topology addresses h3 10.0.0.3, the lab file 10.0.1.1")
    assert place.refuse(_experiment(topology="fattree:4")) == (
        "the topology's switches 0x5, 0x6, 0x7, 0x8, 0x9, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, "
        "0x10, 0x11, 0x12, 0x13, 0x14 are not in the lab file")
    fewer = LabPlace(_lab(hosts=[{"name": "h1", "ssh": "192.0.2.11", "interface": "eth1",
                                  "address": "10.0.0.1"}]))
    assert fewer.refuse(_experiment()) == (
        "the topology's host h2 (10.0.0.2) is not in the lab file")


def test_link_emulation_needs_switch_ext_switches() -> None:
    emulated = _experiment(link={"rate": "10M"})
    why = LabPlace(_lab()).refuse(emulated)
    assert why is not None and "only switch_ext switches provide" in why, why
    assert "(rate=10M)" in why and "switch_kind: openflow" in why
    queues = LabPlace(_lab()).refuse(_experiment(schemes=[
        {"name": "ecn", "app": "dcnlab.apps.ecmp", "topology_options": ["ecn=40"]}]))
    assert queues is not None and "(ecn=40)" in queues, queues
    assert LabPlace(_lab(switch_kind="ext")).refuse(emulated) is None


def test_the_flow_tap_has_no_veths_to_tap_on_a_lab() -> None:
    why = LabPlace(_lab()).refuse(_experiment(diagnosis={"flow_paths": True}))
    assert why is not None and "a lab's links are cables" in why


def test_fabric_events_are_refused_on_a_lab() -> None:
    why = LabPlace(_lab()).refuse(_experiment(events=[{"at": 1, "type": "cut",
                                                        "link": "s1-s3"}]))
    assert why is not None and "which dcnlab does not pull" in why, why


def test_run_with_a_lab_refuses_before_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    import os

    import yaml

    from dcnlab import cli

    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # reaching the root check: accepted
    experiment = tmp_path / "x.yaml"
    experiment.write_text(yaml.safe_dump({
        "name": "x", "topology": TOPOLOGY, "schemes": ["dcnlab.apps.ecmp"],
        "workload": {"type": "poisson", "cdf": "websearch"}, "loads": [0.1],
        "seeds": [1], "duration": 5, "link": {"delay": "1ms"}}))
    bad = tmp_path / "bad.yaml"
    bad.write_text("controller: {listen: 192.0.2.1}\nswitches: []\nhosts: []\n")
    for lab_file, expected in [
        (bad, f"{bad}: switches: needs at least one switch"),
        (tmp_path / "absent.yaml", "cannot read it"),
    ]:
        with pytest.raises(SystemExit) as exc:
            cli.main(["run", str(experiment), "--lab", str(lab_file)])
        assert exc.value.code == 2
        assert expected in capsys.readouterr().err
    topo = parse(TOPOLOGY)
    good = tmp_path / "lab.yaml"
    good.write_text(yaml.safe_dump({
        "controller": {"listen": "192.0.2.1"},
        "switches": [{"dpid": sw.dpid} for sw in topo.switches],
        "hosts": [{"name": h.name, "ssh": f"192.0.2.{10 + i}", "interface": "eth1",
                   "address": h.ip} for i, h in enumerate(topo.hosts, start=1)]}))
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", str(experiment), "--lab", str(good)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"x cannot run on the lab {good}: " in err
    assert "(delay=1000us)" in err and "only switch_ext switches provide" in err
    plain = yaml.safe_load(experiment.read_text())
    del plain["link"]
    experiment.write_text(yaml.safe_dump(plain))
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", str(experiment), "--lab", str(good)])
    assert exc.value.code == 2 and "needs root" in capsys.readouterr().err


def test_a_run_resumes_only_where_it_began(tmp_path: Path) -> None:
    import json

    import yaml

    from dcnlab.benchmarks.engine import ExperimentError, run_experiment

    experiment = tmp_path / "x.yaml"
    experiment.write_text(yaml.safe_dump({
        "name": "x", "topology": TOPOLOGY, "schemes": ["dcnlab.apps.ecmp"],
        "workload": {"type": "poisson", "cdf": "websearch"}, "loads": [0.1],
        "seeds": [1], "duration": 5}))
    out = tmp_path / "out"
    out.mkdir()
    meta = {"name": "x", "scenario": None, "status": "interrupted", "place": "lab",
            "spec": {"seeds": [1]}, "runs": []}
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ExperimentError, match=rf"{out} ran on lab; resume it there "
                                              r"\(give --lab LAB.yaml\)"):
        run_experiment(experiment, out, progress=False, resume=True)
    (out / "meta.json").write_text(json.dumps({**meta, "place": "mininet"}))
    with pytest.raises(ExperimentError, match=r"ran on mininet; resume it there "
                                              r"\(without --lab\)"):
        run_experiment(experiment, out, progress=False, resume=True,
                       place=LabPlace(_lab()))


def _twopath_lab(extra: bool) -> lab.LabSpec:
    """twopath's machines as a lab; its client with its second interface (``extra``)
    or without."""
    topo = parse("twopath")
    hosts = []
    for i, h in enumerate(topo.hosts, start=1):
        entry: dict[str, Any] = {"name": h.name, "ssh": f"192.0.2.{10 + i}",
                                 "interface": "eth1", "address": h.ip}
        if extra and len(h.interfaces) > 1:
            entry["extra_interfaces"] = [{"interface": f"eth{k + 1}", "address": x.ip}
                                         for k, x in enumerate(h.interfaces) if k > 0]
        hosts.append(entry)
    return lab.parse({"controller": {"listen": "192.0.2.1"}, "switch_kind": "ext",
                      "switches": [{"dpid": sw.dpid} for sw in topo.switches],
                      "hosts": hosts})


def test_a_scheme_transport_needs_the_multi_homed_hosts_its_topology_has() -> None:
    """CFS's dcnlab-mp runs on lab hosts (from where `lab prepare` puts it); twopath's
    client needs its second data-plane interface in the lab file."""
    place = LabPlace(_lab())
    assert place.refuse(_experiment(schemes=["uc3"])) is None  # its agents run there
    twopath = _experiment(topology="twopath", schemes=["cfs"], switch="ext", loads=[65536],
                          workload={"type": "sizes", "src": "h1", "dst": "h2"})
    assert LabPlace(_twopath_lab(extra=True)).refuse(twopath) is None
    assert LabPlace(_twopath_lab(extra=True)).refuse_network("twopath", "cfs") is None
    single = LabPlace(_twopath_lab(extra=False)).refuse(twopath)
    assert single == ("host h1 has 2 data-plane interface(s) in the topology (10.0.0.1, "
                      "10.1.0.1), 1 in the lab file (10.0.0.1): a further one goes in "
                      "its extra_interfaces"), single


@pytest.mark.built  # an experiment naming DCTCP loads only where its BPF object is built
def test_dctcp_on_lab_hosts_is_taken() -> None:
    """Each lab host's kernel is asked when the fabric starts (a holder per host), not
    refused up front."""
    assert LabPlace(_lab()).refuse(_experiment(congestion="dctcp")) is None


def test_check_with_a_lab_takes_its_switch_kind_and_topology(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """dcnlab check --lab: the lab file's switch kind, its topology when --topo is not
    given; --switch with --lab, or neither --topo nor a lab topology, is a usage error,
    before root."""
    import os

    import yaml

    from dcnlab import check as check_module
    from dcnlab import cli

    topo = parse(TOPOLOGY)
    base = {"controller": {"listen": "192.0.2.1"},
            "switches": [{"dpid": sw.dpid} for sw in topo.switches],
            "hosts": [{"name": h.name, "ssh": f"192.0.2.{10 + i}", "interface": "eth1",
                       "address": h.ip} for i, h in enumerate(topo.hosts, start=1)]}
    bare, given = tmp_path / "bare.yaml", tmp_path / "given.yaml"
    bare.write_text(yaml.safe_dump(base))
    given.write_text(yaml.safe_dump({**base, "topology": TOPOLOGY, "switch_kind": "ext"}))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for argv, expected in [
        (["check", "--app", "ecmp", "--lab", str(given), "--switch", "ovs"],
         "--switch and --lab"),
        (["check", "--app", "ecmp", "--lab", str(bare)], "give --topo"),
        (["check", "--app", "ecmp"], "--topo SPEC is required"),
        (["check", "--app", "ecmp", "--lab", str(given)], "needs root"),
    ]:
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == 2, argv
        assert expected in capsys.readouterr().err, argv
    calls: list[tuple[Any, ...]] = []

    def fake(topo: str, app: str, switch: str, mode: str, place: Any = None) -> Any:
        calls.append((topo, app, switch, type(place).__name__))
        return check_module.CheckResult({"topo": topo})
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(check_module, "check", fake)
    assert cli.main(["check", "--app", "ecmp", "--lab", str(given)]) == 0
    assert calls == [(TOPOLOGY, "ecmp", "ext", "LabPlace")]


def test_check_on_a_lab_refuses_other_machines() -> None:
    """What dcnlab check asks the place before it builds anything."""
    place = LabPlace(_lab())
    assert place.refuse_network(TOPOLOGY, "ecmp") is None
    assert place.refuse_network(TOPOLOGY, "uc3", host_parts="uc3") is None
    assert "data-plane interface(s) in the topology" in (
        place.refuse_network("twopath", "cfs") or "")
    assert place.refuse_network(TOPOLOGY, "ecmp", congestion=frozenset({"dctcp"})) is None
    assert "are not in the lab file" in (place.refuse_network("spineleaf:3,2,2", "ecmp")
                                        or "")
