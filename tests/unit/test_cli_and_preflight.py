"""Bad input at the edges: the CLI and the lifecycle's preflight say what is wrong."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dcnlab import cli
from dcnlab.topo import network, ofss_builds, ovs, switches
from dcnlab.topo.switches import get_switch_kind


def test_bad_topology_spec_exits_2_listing_valid_forms(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["check", "--topo", "fatree:4", "--app", "ecmp"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown family 'fatree'" in err and "fattree:K" in err and "spineleaf:S,L,H" in err


def test_not_root_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SystemExit) as exc:
        cli.main(["check", "--topo", "fattree:4", "--app", "ecmp"])
    assert exc.value.code == 2
    assert "needs root" in capsys.readouterr().err
    with pytest.raises(network.NetworkError, match="needs root"):
        network.preflight(get_switch_kind("ovs"))


def test_missing_open_vswitch_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(ovs, "_search_path", lambda: "/nonexistent")
    with pytest.raises(network.NetworkError) as exc:
        network.preflight(get_switch_kind("ovs"))
    assert "openvswitch-switch" in str(exc.value) and "scripts/setup.sh" in str(exc.value)


def test_missing_tool_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(network.NetworkError) as exc:
        network.preflight(get_switch_kind("ovs"))
    text = str(exc.value)
    assert "missing program" in text and "Debian package" in text and "setup.sh" in text


def test_bad_experiment_file_exits_2_naming_the_field(tmp_path: pytest.TempPathFactory,
                                                      capsys: pytest.CaptureFixture) -> None:
    spec = tmp_path / "bad.yaml"  # type: ignore[operator]
    spec.write_text("name: x\ntopology: fattree:4\nschemes: [dcnlab.apps.ecmp]\nseeds: [1]\n"
                    "workload: {type: poisson, cdf: websearch}\nloads: [2.5]\nduration: 10\n")
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", str(spec)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "dcnlab: error:" in err and "loads" in err


def test_report_on_a_directory_without_results(tmp_path: pytest.TempPathFactory,
                                               capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["report", str(tmp_path)])
    assert exc.value.code == 2
    assert "dcnlab: error:" in capsys.readouterr().err


def _stand_in_builds(root: Path) -> Path:
    """A DCNLAB_OFSS_BUILDS directory with the authors' switch kinds (kind.json and
    stand-in programs) that python -m dcnlab.benchmarks.authors_switch build writes."""
    from dcnlab.benchmarks.authors_switch import KIND_PREFIX, MODES

    builds = root / "builds"
    for mode in MODES:
        (builds / (KIND_PREFIX + mode) / "bin").mkdir(parents=True)
        for program in switches.OFSS_BINARIES:
            (builds / (KIND_PREFIX + mode) / "bin" / program).write_text("")
        (builds / (KIND_PREFIX + mode) / ofss_builds.OFSS_BUILD_FILE).write_text(
            '{"forwards": true}')
    return builds


SHIPPED = sorted((Path(__file__).parents[2] / "benchmarks" / "experiments").glob("*.yaml"))


@pytest.mark.parametrize("spec", [
    # a file asking for DCTCP needs its BPF object, which scripts/setup.sh builds
    pytest.param(p, marks=pytest.mark.built) if "dctcp" in p.read_text() else p
    for p in SHIPPED], ids=lambda p: p.name)
def test_shipped_experiments_pass_the_cli_validation(spec: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture,
                                                      tmp_path: Path) -> None:
    # Not root: the run stops right after validation, so reaching the root check means
    # the file (with or without scenarios) was accepted.
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    builds = _stand_in_builds(tmp_path)
    if "authors-" in spec.read_text():  # the authors' switch builds, as stand-ins
        monkeypatch.setenv(switches.ENV_OFSS_BUILDS, str(builds))
    try:
        with pytest.raises(SystemExit) as exc:
            cli.main(["run", str(spec)])
    finally:
        ofss_builds.unload_ofss_builds(builds)
    assert exc.value.code == 2
    assert "needs root" in capsys.readouterr().err


def test_run_names_the_scenario_files_holding_unfinished_flows(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
        tmp_path: Path) -> None:
    from dcnlab.benchmarks import engine
    from dcnlab.benchmarks.engine.runner import RunResult

    def scenario(name: str, not_ok: int) -> RunResult:
        return RunResult(tmp_path / name, tmp_path / name / "flows.csv", "", 10, not_ok, 1)

    parts = {"websearch": scenario("websearch", 0), "datamining": scenario("datamining", 3)}
    combined = RunResult(tmp_path, parts["websearch"].flows_csv, "table", 20, 3, 2,
                         scenarios=parts)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(engine, "run_experiment", lambda *a, **k: combined)
    spec = Path(__file__).parents[2] / "benchmarks/experiments/seed001.yaml"
    assert cli.main(["run", str(spec), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "3 flow(s) did not complete" in err
    assert str(tmp_path / "datamining" / "flows.csv") in err
    assert "websearch" not in err


def test_unknown_scenario_is_named_with_the_valid_ones(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture) -> None:
    spec = Path(__file__).parents[2] / "benchmarks" / "experiments" / "seed004.yaml"
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # reaching the root check = accepted
    with pytest.raises(SystemExit):
        cli.main(["run", str(spec), "--scenarios", "clients16,alpha"])
    assert "needs root" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", str(spec), "--scenarios", "clients16,clients7"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "'clients7'" in err and "clients4, clients16" in err and "needs root" not in err


class _PingHost:
    """A host whose ping answers from a script: per destination, one reply per call."""

    def __init__(self, name: str, ip: str, replies: dict[str, list[bool]]) -> None:
        self.name, self.ip, self.replies = name, ip, replies
        self.commands: list[str] = []

    def IP(self) -> str:  # noqa: N802 - Mininet's spelling
        return self.ip

    def cmd(self, command: str) -> str:
        self.commands.append(command)
        script = self.replies.get(command.split()[-1])
        ok = script.pop(0) if script else True
        return f"1 packets transmitted, {1 if ok else 0} received"


def test_all_pairs_ping_counts_a_lost_first_ping_as_lost() -> None:
    """One ping per pair, waiting PING_TIMEOUT_S for ARP and the echo: a first ping that
    is lost fails the pair, whatever a second one would do (no second chance hides a
    fabric that drops packets to a host located just now)."""
    from dcnlab.check import PING_TIMEOUT_S, all_pairs_ping

    a = _PingHost("h1", "10.0.0.1", {"10.0.0.2": [False, True],   # lost, then would pass
                                     "10.0.0.3": [False, False]})  # unreachable
    b, c = _PingHost("h2", "10.0.0.2", {}), _PingHost("h3", "10.0.0.3", {})
    d = _PingHost("h4", "10.0.0.4", {})
    lost, pairs = all_pairs_ping([a, b, c, d])
    assert pairs == 12
    assert lost == [("h1", "h2"), ("h1", "h3")]
    assert a.commands == [f"ping -c1 -W{PING_TIMEOUT_S} 10.0.0.{i}" for i in (2, 3, 4)]


def test_all_pairs_ping_stops_when_the_first_host_reaches_nobody() -> None:
    """A fabric that forwards nothing fails after the first host's pings, not after
    PING_TIMEOUT_S for every pair; one that reaches someone is pinged whole."""
    from dcnlab.check import all_pairs_ping

    dead = {"10.0.0.2": [False], "10.0.0.3": [False]}
    a, b, c = (_PingHost("h1", "10.0.0.1", dead), _PingHost("h2", "10.0.0.2", {}),
               _PingHost("h3", "10.0.0.3", {}))
    assert all_pairs_ping([a, b, c]) == ([("h1", "h2"), ("h1", "h3")], 2)
    assert b.commands == [] and c.commands == []
    a = _PingHost("h1", "10.0.0.1", {"10.0.0.2": [False]})  # reaches h3
    b, c = _PingHost("h2", "10.0.0.2", {}), _PingHost("h3", "10.0.0.3", {})
    assert all_pairs_ping([a, b, c]) == ([("h1", "h2")], 6)
    assert len(b.commands) == len(c.commands) == 2
