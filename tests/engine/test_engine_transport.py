"""A scheme-declared transport in the traffic agents (loopback, no root): every TCP flow
is sent by the transport's own sender process and received by its receiver, which the
agents run; each flow gets a record with the transport's FCT and byte count."""

from __future__ import annotations

from pathlib import Path

import pytest

from dcnlab.benchmarks.engine.replay import Endpoint, ReplayError, replay
from dcnlab.benchmarks.engine.workloads import Flow
from dcnlab.schemes import registry


def _hosts() -> dict[str, Endpoint]:
    return {"h1": Endpoint("h1", "127.0.0.1", addresses=("127.0.0.1", "127.0.0.3")),
            "h2": Endpoint("h2", "127.0.0.2")}


@pytest.mark.built  # the transport's sender and receiver are dcnlab-mp
@pytest.mark.parametrize("scheduler", ["cfs", "minrtt", "ecf"])
def test_flows_go_over_the_scheme_transport(tmp_path: Path, scheduler: str) -> None:
    transport = registry.get("cfs").transport
    assert transport is not None
    flows = [Flow(0, "h1", "h2", 64 * 1024, 0.0), Flow(1, "h1", "h2", 1 << 20, 0.05),
             Flow(2, "h2", "h1", 300_000, 0.1)]
    result = replay(flows, _hosts(), tmp_path, drain=30.0, transport=transport,
                    transport_options={"scheduler": scheduler})
    assert result.errors == []
    for flow in flows:
        rec = result.records[flow.id]
        assert rec["status"] == "ok", rec
        assert rec["bytes"] == flow.size, rec
        assert 0 < rec["fct"] <= rec["end"] - rec["start"] + 1e-3, rec
    # the sender ran with two subflows from h1's two addresses, with the scheduler asked
    import json
    plan = json.loads((tmp_path / "plan_h1.json").read_text())
    argv = plan["flows"][0]["argv"]
    assert argv[argv.index("--scheduler") + 1] == scheduler
    assert argv[argv.index("--via") + 1] == "127.0.0.1,127.0.0.3"
    assert plan["serve"][-2:] == ["--listen", "127.0.0.1:5600"]


def test_bad_transport_use_is_refused_before_anything_runs(tmp_path: Path) -> None:
    transport = registry.get("cfs").transport
    with pytest.raises(ReplayError, match="long-lived"):
        replay([Flow(0, "h1", "h2", 0, 0.0, stop=1.0)], _hosts(), tmp_path, drain=1.0,
               transport=transport)
    with pytest.raises(ValueError, match="valid: scheduler"):
        replay([Flow(0, "h1", "h2", 1000, 0.0)], _hosts(), tmp_path, drain=1.0,
               transport=transport, transport_options={"sched": "cfs"})


def _spec(**changes: object) -> dict:
    return {"topology": "twopath", "switch": "ext",
            "schemes": [{"name": "ecf", "app": "cfs",
                         "transport_options": {"scheduler": "ecf"}}, "cfs"],
            "workload": {"type": "sizes", "src": "h1", "dst": "h2", "repetitions": 4,
                         "gap": 1.5},
            "loads": [65536], "seeds": [1], "duration": 5, **changes}


def test_experiment_files_choose_the_transport_options() -> None:
    from dcnlab.benchmarks.engine.schema import SpecFileError
    from dcnlab.benchmarks.engine.spec import parse_spec

    spec = parse_spec(_spec())
    assert [s.transport_options for s in spec.schemes] == [{"scheduler": "ecf"},
                                                           {"scheduler": "cfs"}]
    with pytest.raises(SpecFileError, match=r"schemes\[0\]\.transport_options: unknown "
                                            r"option\(s\) sched .* valid: scheduler"):
        parse_spec(_spec(schemes=[{"name": "x", "app": "cfs",
                                   "transport_options": {"sched": "ecf"}}]))
    with pytest.raises(SpecFileError, match="has no transport"):
        parse_spec(_spec(schemes=[{"name": "x", "app": "single_path",
                                   "transport_options": {"scheduler": "ecf"}}]))


def test_sizes_workload_sends_one_size_one_flow_at_a_time() -> None:
    from dcnlab.benchmarks.engine.workloads import SizesWorkload, WorkloadError, generate
    from dcnlab.topo.spec import parse

    topo = parse("twopath")
    flows = generate(SizesWorkload(repetitions=4, gap=1.5), topo, 65536, 1, 5.0)
    assert [(f.src, f.dst, f.size, f.start) for f in flows] == [
        ("h1", "h2", 65536, 1.5 * i) for i in range(4)]
    with pytest.raises(WorkloadError, match="whole number"):
        generate(SizesWorkload(), topo, 0.5, 1, 5.0)
    with pytest.raises(WorkloadError):
        generate(SizesWorkload(dst="h9"), topo, 1000, 1, 5.0)


def test_the_shipped_seed003_experiment_parses() -> None:
    from dcnlab.benchmarks.engine.spec import load_specs

    path = Path(__file__).resolve().parents[2] / "benchmarks/experiments/seed003.yaml"
    specs = {s.scenario: s for s in load_specs(path)}
    assert list(specs) == ["short", "warm", "long", "web"]
    # warm: the claims' schedulers, each with both subflows up before its flows start
    assert [(s.name, s.transport_options) for s in specs.pop("warm").schemes] == [
        (name, {"scheduler": name, "warm": True}) for name in ("minrtt", "ecf", "cfs")]
    for spec in specs.values():
        mp = [s for s in spec.schemes if s.transport_options.get("mode", "mp") == "mp"]
        assert [s.transport_options["scheduler"] for s in mp] == [
            "minrtt", "ecf", "blest", "redundant", "cfs"]
        # the seed's references in the same run: plain TCP on each path, kernel MPTCP
        assert {s.name: (s.transport_options["mode"], s.transport_options.get("path"))
                for s in spec.schemes if s not in mp} == {
            "tcp-path1": ("tcp", 1), "tcp-path2": ("tcp", 2), "kernel-mptcp": ("mptcp", None)}
        assert spec.baseline == "minrtt"


@pytest.mark.built  # the transport's sender and receiver are dcnlab-mp
def test_transport_columns_come_from_each_flows_result(tmp_path: Path) -> None:
    """dup_bytes, reorder_peak_bytes and subflow_bytes from dcnlab-mp's result line, in
    flows.csv's rows (two subflows over loopback; redundant sends every byte twice once
    both subflows are up, so duplicates >= 0 and the subflows carried >= the size)."""
    from dcnlab.benchmarks.engine.results import read_flows
    from dcnlab.benchmarks.engine.runner import flow_columns, flow_rows
    from dcnlab.benchmarks.engine.spec import parse_spec

    transport = registry.get("cfs").transport
    assert transport is not None
    spec = parse_spec(_spec())
    assert flow_columns(spec)[-3:] == ["dup_bytes", "reorder_peak_bytes", "subflow_bytes"]
    flows = [Flow(0, "h1", "h2", 1 << 20, 0.0)]
    result = replay(flows, _hosts(), tmp_path, drain=30.0, transport=transport,
                    transport_options={"scheduler": "minrtt"})
    rows = flow_rows(spec, "minrtt", 1, 1 << 20, flows, result, transport)
    row = rows[0]
    assert row["status"] == "ok", row
    assert row["dup_bytes"] == 0  # minRTT never sends a byte twice
    per_subflow = [int(b) for b in row["subflow_bytes"].split(";")]
    assert len(per_subflow) == 2 and sum(per_subflow) >= 1 << 20
    assert row["reorder_peak_bytes"] >= 0
    # written and read back typed; the summary averages them, element by element
    from dcnlab.benchmarks.engine.metrics import summarize
    from dcnlab.benchmarks.engine.results import write_csv
    write_csv(tmp_path / "flows.csv", flow_columns(spec), rows)
    back = read_flows(tmp_path / "flows.csv")
    assert back[0]["dup_bytes"] == 0 and back[0]["subflow_bytes"] == row["subflow_bytes"]
    summary = {(r.metric, r.cls): r.mean
               for r in summarize(back, None, ["dup_bytes", "subflow_bytes"])}
    assert summary[("dup_bytes", "all")] == 0
    assert summary[("subflow_bytes_1", "all")] + summary[("subflow_bytes_2", "all")] == \
        sum(per_subflow)


@pytest.mark.built  # the transport's sender and receiver are dcnlab-mp
@pytest.mark.parametrize("options,proto", [({"mode": "tcp", "path": 2}, "plain-tcp"),
                                           ({"mode": "mptcp"}, "kernel-mptcp")])
def test_reference_modes_send_plain_tcp_or_kernel_mptcp(tmp_path: Path, options: dict,
                                                        proto: str) -> None:
    """The seed's references through the same transport entry: plain TCP bound to the
    client's second address, or one kernel MPTCP connection; intact, with no dcnlab-mp
    columns (their cells stay empty)."""
    import json

    transport = registry.get("cfs").transport
    assert transport is not None and transport.row is not None
    flows = [Flow(0, "h1", "h2", 300_000, 0.0), Flow(1, "h1", "h2", 1 << 20, 0.05)]
    result = replay(flows, _hosts(), tmp_path, drain=30.0, transport=transport,
                    transport_options=options)
    assert result.errors == []
    for flow in flows:
        rec = result.records[flow.id]
        assert rec["status"] == "ok" and rec["bytes"] == flow.size, rec
        assert rec["result"]["scheduler"] == proto
        assert transport.row(rec["result"]) == {}
    plan = json.loads((tmp_path / "plan_h1.json").read_text())
    argv = plan["flows"][0]["argv"]
    assert argv[1] == "plain-send"
    assert argv[argv.index("--via") + 1] == ("127.0.0.3" if "path" in options
                                             else "127.0.0.1")
    assert plan["serve"][1] == "plain-serve"
    assert ("--mptcp" in plan["serve"]) == (options["mode"] == "mptcp")


def test_bad_reference_options_are_refused_when_the_file_is_read() -> None:
    from dcnlab.benchmarks.engine.schema import SpecFileError
    from dcnlab.benchmarks.engine.spec import parse_spec

    def entry(options: dict) -> dict:
        return _spec(schemes=[{"name": "x", "app": "cfs", "transport_options": options}])

    with pytest.raises(SpecFileError, match="mode 'udp': one of mp, tcp, mptcp"):
        parse_spec(entry({"mode": "udp"}))
    with pytest.raises(SpecFileError, match="path: only with mode tcp"):
        parse_spec(entry({"path": 2}))
    with pytest.raises(SpecFileError, match="path 0: the client address's number"):
        parse_spec(entry({"mode": "tcp", "path": 0}))
    with pytest.raises(SpecFileError, match="unknown scheduler 'fast'; valid: minrtt"):
        parse_spec(entry({"scheduler": "fast"}))
    with pytest.raises(SpecFileError, match="warm 'yes': true or false"):
        parse_spec(entry({"warm": "yes"}))
    with pytest.raises(SpecFileError, match="warm: only with mode mp"):
        parse_spec(entry({"mode": "tcp", "warm": True}))
    transport = registry.get("cfs").transport
    assert transport is not None
    warm = transport.send("dcnlab-mp", "127.0.0.2:5600", 1000, ("127.0.0.1",), {"warm": True})
    assert warm[warm.index("--warm") + 1] == "1"
    assert "--warm" not in transport.send("dcnlab-mp", "127.0.0.2:5600", 1000, ("127.0.0.1",),
                                          {"warm": False})
    with pytest.raises(ValueError, match="path 3: the sending host has 2 address"):
        transport.send("dcnlab-mp", "127.0.0.2:5600", 1000, ("127.0.0.1", "127.0.0.3"),
                       {"mode": "tcp", "path": 3})


class _FarFiles:
    """A lab server's files (replay.HostFiles): nothing travels in this test."""

    workdir = "/var/tmp/dcnlab-lab1-1"
    python = "/opt/dcnlab/venv/bin/python"

    def put(self, local: Path, remote: str) -> None:
        raise AssertionError("nothing travels while planning")

    def get(self, remote: str, local: Path) -> None:
        raise AssertionError("nothing travels while planning")


def test_a_lab_host_runs_the_transport_beside_its_dcnlab(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The sender and receiver argv name the program where the host has it: beside the
    lab file's python on a lab server (where `dcnlab lab prepare` installs it), this
    machine's build on a host that shares these files."""
    import sys

    from dcnlab.benchmarks.engine.replay import plan_for

    monkeypatch.setenv("DCNLAB_MP_BINARY", sys.executable)  # an executable: "the build"
    transport = registry.get("cfs").transport
    assert transport is not None
    far = Endpoint("h1", "10.0.0.1", addresses=("10.0.0.1", "10.1.0.1"), files=_FarFiles())
    near = Endpoint("h2", "10.2.0.1")
    hosts = {"h1": far, "h2": near}
    flows = [Flow(0, "h1", "h2", 1000, 0.0), Flow(1, "h2", "h1", 1000, 0.0)]
    on_lab = plan_for(far, flows, hosts, "records", None, 0.0, transport=transport)
    assert on_lab["flows"][0]["argv"][0] == "/opt/dcnlab/venv/bin/dcnlab-mp"
    assert on_lab["serve"][0] == "/opt/dcnlab/venv/bin/dcnlab-mp"
    here = plan_for(near, flows, hosts, "records", None, 0.0, transport=transport)
    assert here["flows"][0]["argv"][0] == here["serve"][0] == sys.executable


def test_a_host_without_the_transport_program_fails_before_any_flow(tmp_path: Path) -> None:
    """A host where the program is not (a lab host `dcnlab lab prepare` has not seen):
    the replay stops before its first flow, naming the host, the program and the fix."""
    import dataclasses

    transport = registry.get("cfs").transport
    assert transport is not None
    missing = dataclasses.replace(transport, local_program=lambda: str(tmp_path / "dcnlab-mp"))
    with pytest.raises(ReplayError) as info:
        replay([Flow(0, "h1", "h2", 1000, 0.0)], _hosts(), tmp_path, drain=5.0,
               transport=missing)
    text = str(info.value)
    assert "failed to start" in text and f"{tmp_path / 'dcnlab-mp'}" in text, text
    assert "dcnlab lab prepare installs it" in text, text
