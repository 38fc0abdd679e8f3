"""Experiment spec files: shipped specs load; every mistake names its field; nothing runs."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from dcnlab.benchmarks.engine import ExperimentError, SpecFileError, load_spec, run_experiment
from dcnlab.benchmarks.engine.spec import load_specs, parse_spec, parse_specs

GOOD: dict[str, Any] = {
    "topology": "spineleaf:1,2,4",
    "link": {"rate": "10M"},
    "schemes": ["ryu.app.simple_switch_13", {"name": "again",
                                             "app": "ryu.app.simple_switch_13"}],
    "workload": {"type": "poisson", "cdf": "websearch"},
    "loads": [0.1, 0.3],
    "seeds": [1],
    "duration": 10,
}


def _spec(**changes: Any) -> dict[str, Any]:
    data = {**GOOD, **changes}
    return {k: v for k, v in data.items() if v is not None}


def _error(data: Any) -> SpecFileError:
    with pytest.raises(SpecFileError) as info:
        parse_specs(data)
    return info.value


def test_shipped_specs_load() -> None:
    folder = resources.files("dcnlab.benchmarks").joinpath("experiments")
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".yaml"))
    assert {"ecmp_vs_single.yaml", "seed000.yaml"} <= set(names)
    evs = load_spec(Path(str(folder.joinpath("ecmp_vs_single.yaml"))))
    assert evs.topology.startswith("fattree:4") and len(evs.seeds) == 3
    assert len(evs.loads) == 2 and evs.baseline == "ecmp"
    assert [s.app for s in evs.schemes] == ["dcnlab.apps.ecmp", "dcnlab.apps.single_path"]
    seed000 = load_specs(Path(str(folder.joinpath("seed000.yaml"))))
    assert [s.scenario for s in seed000][:2] == ["static", "random"]
    assert {s.name for s in seed000[0].schemes} == {"single", "ecmp", "spray"}
    assert "rate=50M" in seed000[0].topology


@pytest.mark.built  # DCTCP hosts: validation needs the BPF DCTCP object
def test_shipped_seed002_specs_sweep_n_size_and_interarrival() -> None:
    from dcnlab.topo.preflight import check_size

    folder = Path(str(resources.files("dcnlab.benchmarks").joinpath("experiments")))
    specs = {name: load_spec(folder / f"{name}.yaml")
             for name in ("seed002", "seed002_size", "seed002_atscale")}
    assert [s.sweep for s in specs.values()] == ["senders", "size", "interarrival"]
    assert specs["seed002_size"].workload.count == 30
    assert specs["seed002_size"].loads == [16000, 64000, 256000, 1000000]
    for name, spec in specs.items():
        # seed002 also runs the paper's other reading of ABQ's CE marking
        extra = ["abq_ece_ce40"] if name == "seed002" else []
        assert [s.name for s in spec.schemes] == ["droptail_tcp", "ecn_dctcp", "abq_ece",
                                                  "abq_window", *extra]
        assert spec.baseline == "ecn_dctcp" and spec.plots
        check_size(spec.topo())  # buildable here
    assert {p["name"] for p in specs["seed002"].plots} >= {"fig4_queue_goodput_drops",
                                                          "fig5a_fct"}
    assert specs["seed002_atscale"].tables[0]["ranks"] == ["elephant_tput", "edge_drops"]
    assert specs["seed002_atscale"].topo().spec.startswith("torcore:4,4")


def test_defaults_and_short_forms() -> None:
    spec = parse_spec(_spec())
    assert spec.name == "experiment" and spec.switch == "ovs"
    assert [s.name for s in spec.schemes] == ["simple_switch_13", "again"]
    assert spec.baseline == "simple_switch_13"  # no "ecmp" scheme: the first one
    assert spec.topology == "spineleaf:1,2,4,rate=10M"
    assert spec.congestion_for("h1") == "cubic"
    assert spec.classes.mouse_max == 10_000 and spec.classes.elephant_min == 10_000_000
    assert spec.measure_window() == (0.0, 10.0)
    assert spec.sweep == "load"


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"topolgy": "fattree:4"}, "topolgy", "did you mean 'topology'"),
    ({"topology": "fattree:5"}, "topology", "even K"),
    ({"topology": None}, "topology", "required"),
    ({"link": {"rate": "fast"}}, "link.rate", "rate in Mbit/s"),
    ({"link": {"speed": 1}}, "link.speed", "unknown field"),
    ({"switch": "ovz"}, "switch", "ovz"),
    ({"schemes": []}, "schemes", "at least one"),
    ({"schemes": ["dcnlab.apps.nosuch"]}, "schemes[0].app", "no module"),
    ({"schemes": [{"app": "ryu.app.simple_switch_13", "evn": {}}]}, "schemes[0].evn",
     "did you mean 'env'"),
    ({"schemes": ["ryu.app.simple_switch_13", "ryu.app.simple_switch_13"]}, "schemes[1]",
     "used twice"),
    ({"baseline": "ecmp"}, "baseline", "not a scheme"),
    ({"workload": {"type": "poison"}}, "workload.type", "did you mean 'poisson'"),
    ({"workload": {"type": "poisson", "cdf": "nosuch.cdf"}}, "workload.cdf", "neither"),
    ({"workload": {"type": "poisson", "pairs": "inter-rack"}}, "workload.pairs",
     "inter_rack"),
    ({"workload": {"type": "poisson", "hosts": ["h1", "h99"]}}, "workload.hosts", "h99"),
    ({"workload": {"type": "incast", "size": "32 potatoes"}}, "workload.size", "bytes"),
    ({"loads": [0.2, 40]}, "loads[1]", "fraction"),
    ({"loads": [0.2, 0.2]}, "loads[1]", "twice"),
    ({"loads": "lots"}, "loads[0]", "number"),
    ({"seeds": [1.5]}, "seeds[0]", "integer"),
    ({"duration": None}, "duration", "required"),
    ({"duration": 10, "warmup": 6, "cooldown": 5}, "warmup", "nothing"),
    ({"drain": -1}, "drain", "negative"),
    ({"network": "shared"}, "network", "per_scheme"),
    ({"classes": {"mouse_max": "20MB"}}, "classes", "elephant_min"),
    ({"marking": {"dscp": 64}}, "marking.dscp", "<= 63"),
    ({"marking": {"other_ports": [20000, 40000]}}, "marking", "overlap"),
    ({"congestion": "vegas-ish"}, "congestion.default", "not available"),
    ({"congestion": {"h77": "reno"}}, "congestion.h77", "host"),
    ({"agent": {"port": 0}}, "agent.port", ">= 1"),
    ({"rto_min": "10"}, "rto_min", "duration like 10ms"),
    ({"rto_min": "ten ms"}, "rto_min", "duration like 10ms"),
    ({"schemes": [{"app": "ryu.app.simple_switch_13", "topology_options": ["ecn=lots"]}]},
     "schemes[0].topology_options", "ecn"),
    ({"agent": {"rx_interval": "fast"}}, "agent.rx_interval", "time in seconds"),
    # a schedule event past the duration is caught at load, before root or a network
    ({"topology": "dumbbell:4", "loads": [4], "duration": 10,
      "workload": {"type": "longlived", "schedule": [{"at": "12s", "stop": 1}]}},
     "workload.schedule[0].at", "12 s is not before the clients stop (10 s"),
    # an error inside a list of mappings names its path once
    ({"topology": "dumbbell:4", "loads": [4],
      "workload": {"type": "longlived", "schedule": [{"at": "7s", "go": 1}]}},
     "workload.schedule[0].go", "unknown"),
    ({"agent": {"rx_interval": 0.001}}, "agent.rx_interval", "shorter than"),
    ({"schemes": [{"app": "ryu.app.simple_switch_13", "agents": "uc4"}]},
     "schemes[0].agents", "did you mean 'uc3'"),
    ({"schemes": [{"app": "ryu.app.simple_switch_13", "agents": True}]},
     "schemes[0].agents", "expected a string"),
    ({"schemes": [{"app": "ryu.app.simple_switch_13", "agents_interval": 0.2}]},
     "schemes[0].agents_interval", "agents: uc3"),
    ({"schemes": [{"app": "ryu.app.simple_switch_13", "agents": "uc3",
                   "agents_interval": "1ms"}]}, "schemes[0].agents_interval", ">= 0.01"),
])
def test_bad_fields_are_named(changes: dict[str, Any], field: str, words: str) -> None:
    error = _error(_spec(**changes))
    assert error.field == field
    assert str(error).startswith(f"{field}: ")
    assert words in str(error)


def test_per_scheme_topology_options_and_rto_min() -> None:
    from dcnlab.benchmarks.engine.spec import scheme_topology
    spec = parse_spec(_spec(rto_min="10ms", schemes=[
        "ryu.app.simple_switch_13",
        {"name": "marked", "app": "ryu.app.simple_switch_13", "topology_options": "ecn=40p"}]))
    assert spec.rto_min == "10ms"
    assert [scheme_topology(spec, s) for s in spec.schemes] == [
        "spineleaf:1,2,4,rate=10M", "spineleaf:1,2,4,rate=10M,ecn=40p"]
    assert parse_spec(_spec()).rto_min is None


def test_dctcp_is_provided_without_the_kernel_module(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    from dcnlab.benchmarks.engine import spec as spec_module
    from dcnlab.hosts import dctcp
    fake = tmp_path / "available"
    fake.write_text("reno cubic\n")
    monkeypatch.setattr(spec_module, "CONGESTION_FILE", fake)
    obj = tmp_path / "dctcp.bpf.o"
    monkeypatch.setattr(dctcp, "OBJECT", obj)
    assert _error(_spec(congestion="dctcp")).field == "congestion.default"  # not built
    obj.write_bytes(b"")
    assert parse_spec(_spec(congestion="dctcp")).congestion_for("h1") == "dctcp"
    monkeypatch.setattr(dctcp, "AVAILABLE_FILE", fake)
    assert dctcp.resolve("dctcp") == "dcnlab_dctcp" and dctcp.resolve("cubic") == "cubic"
    fake.write_text("reno cubic dctcp\n")  # a kernel with its own: used as is
    assert dctcp.resolve("dctcp") == "dctcp"
    assert dctcp.provides({"dctcp"}) == set()


def test_scenarios_name_their_fields() -> None:
    base = _spec()
    data = {**base, "scenarios": {"one": {"loads": [0.2]},
                                  "two": {"workload": {"type": "incast", "rounds": 0},
                                          "loads": [3]}}}
    error = _error(data)
    assert error.field == "scenarios.two.workload.rounds"
    data["scenarios"]["two"] = {"name": "x"}
    assert _error(data).field == "scenarios.two.name"
    data["scenarios"] = {"one": {"loads": [0.2]}, "two": {"loads": [0.4]}}
    specs = parse_specs(data)
    assert [(s.scenario, s.loads) for s in specs] == [("one", [0.2]), ("two", [0.4])]


def test_bad_file_runs_nothing(tmp_path: Path) -> None:
    spec_file = tmp_path / "bad.yaml"
    spec_file.write_text(yaml.safe_dump(_spec(workload={"type": "poisson", "cdf": "x.cdf"})))
    out = tmp_path / "out"
    with pytest.raises(SpecFileError, match=r"^workload\.cdf: "):
        run_experiment(spec_file, out, progress=False)
    assert not out.exists()
    spec_file.write_text("topology: [unclosed\n")
    with pytest.raises(SpecFileError, match="not valid YAML at line"):
        run_experiment(spec_file, out, progress=False)
    with pytest.raises(SpecFileError, match="cannot read"):
        run_experiment(tmp_path / "missing.yaml", out, progress=False)
    assert not out.exists()


def test_existing_results_are_never_overwritten(tmp_path: Path) -> None:
    spec_file = tmp_path / "ok.yaml"
    spec_file.write_text(yaml.safe_dump(_spec()))
    out = tmp_path / "out"
    out.mkdir()
    (out / "flows.csv").write_text("scheme\n")
    with pytest.raises(ExperimentError, match="already holds results"):
        run_experiment(spec_file, out, progress=False)
    assert (out / "flows.csv").read_text() == "scheme\n"


def test_uc3_agents_follow_the_app_unless_given() -> None:
    spec = parse_spec(_spec(schemes=[
        "dcnlab.apps.uc3", "dcnlab.apps.single_path",
        {"name": "plain-uc3", "app": "dcnlab.apps.uc3", "agents": "none"},
        {"name": "forced", "app": "dcnlab.apps.single_path", "agents": "uc3"},
        {"name": "file", "app": str(Path(__file__).parents[2] / "apps" / "uc3.py")}]))
    assert [s.agents for s in spec.schemes] == ["uc3", "none", "none", "uc3", "uc3"]
    assert [s.agents_interval for s in spec.schemes] == [0.1, None, None, 0.1, 0.1]
    slow = parse_spec(_spec(schemes=[{"app": "dcnlab.apps.uc3", "agents_interval": "200ms"}]))
    assert slow.schemes[0].agents_interval == 0.2


def test_receiver_interval_defaults_by_workload() -> None:
    assert parse_spec(_spec()).agent.rx_interval == 0.0  # poisson: off
    longlived = _spec(topology="dumbbell:4", workload={"type": "longlived"}, loads=[4])
    assert parse_spec(longlived).agent.rx_interval == 0.1
    assert parse_spec({**longlived, "agent": {"rx_interval": "50ms"}}).agent.rx_interval \
        == 0.05
    assert parse_spec({**longlived, "agent": {"rx_interval": 0}}).agent.rx_interval == 0.0


def test_flows_that_send_inside_the_window_are_measured() -> None:
    from dcnlab.benchmarks.engine.runner import is_measured
    from dcnlab.benchmarks.engine.workloads import Flow

    # Flows of a size: by their start.  Long-lived TCP and UDP: by the time they send.
    assert is_measured(Flow(0, "h1", "h2", 1_000, 2.0), 2.0, 10.0)
    assert not is_measured(Flow(0, "h1", "h2", 1_000, 1.9), 2.0, 10.0)
    assert not is_measured(Flow(0, "h1", "h2", 1_000, 10.0), 2.0, 10.0)
    assert is_measured(Flow(0, "h1", "h2", 0, 0.0, stop=20.0), 2.0, 10.0)
    assert is_measured(Flow(0, "h1", "h2", 0, 4.0, kind="udp", stop=9.0), 2.0, 10.0)
    assert not is_measured(Flow(0, "h1", "h2", 0, 0.0, stop=2.0), 2.0, 10.0)
    assert not is_measured(Flow(0, "h1", "h2", 0, 10.0, kind="udp", stop=12.0), 2.0, 10.0)


def test_baseline_can_be_a_list_of_schemes() -> None:
    spec = parse_spec(_spec(schemes=["ecmp", {"name": "single", "app": "single_path"},
                                     "spray"], baseline=["ecmp", "single"]))
    assert spec.baseline == "ecmp" and spec.other_baselines == ["single"]
    assert parse_spec(_spec(schemes=["ecmp", "spray"])).other_baselines == []
    for bad, where, words in (([], "baseline", "needs a scheme"),
                              (["ecmp", "nope"], "baseline[1]", "not a scheme name"),
                              (["ecmp", "ecmp"], "baseline[1]", "twice")):
        with pytest.raises(SpecFileError, match=words) as info:
            parse_spec(_spec(schemes=["ecmp", "spray"], baseline=bad))
        assert info.value.field == where


def test_sysctls_are_per_namespace_tcp_settings_only() -> None:
    spec = parse_spec(_spec(sysctls={"net.ipv4.tcp_reordering": 7,
                                     "net.ipv4.tcp_recovery": 0}))
    assert spec.sysctls == {"net.ipv4.tcp_reordering": "7", "net.ipv4.tcp_recovery": "0"}
    for bad, words in (({"vm.swappiness": 1}, "only net.ipv4.tcp_"),
                       ({"net.core.rmem_max": 1}, "only net.ipv4.tcp_"),
                       ({"net.ipv4.tcp_no_such_knob": 1}, "no such setting"),
                       ({"net.ipv4.tcp_reordering": "3; reboot"}, "plain value"),
                       ([1], "expected a mapping")):
        with pytest.raises(SpecFileError, match=words):
            parse_spec(_spec(sysctls=bad))
