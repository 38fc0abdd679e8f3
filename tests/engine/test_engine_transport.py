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
    specs = load_specs(path)
    assert len(specs) == 3
    for spec in specs:
        assert [s.transport_options["scheduler"] for s in spec.schemes] == [
            "minrtt", "ecf", "blest", "redundant", "cfs"]
        assert spec.baseline == "minrtt"
