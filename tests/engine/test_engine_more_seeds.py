"""Seeds given on the command line (``dcnlab run --seeds``) and seeds added to a recorded
experiment on resume, in memory: the seed list syntax, which seeds a resumed experiment
runs, and workload.csv growing by the added seeds' flows (every flow run has its row).
The network test of the same is in test_engine_interrupt.py."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from dcnlab import cli
from dcnlab.benchmarks.engine import runner
from dcnlab.benchmarks.engine.results import WORKLOAD_COLUMNS, span_seconds, write_csv
from dcnlab.benchmarks.engine.spec import parse_seeds, parse_spec

SPEC = {"name": "grow", "topology": "spineleaf:2,2,2", "switch": "ovs",
        "schemes": ["ecmp"], "workload": {"type": "incast", "size": 1000, "rounds": 2},
        "loads": [2], "seeds": [1, 2]}


@pytest.mark.parametrize("text, seeds", [
    ("3", [3]), ("1-4", [1, 2, 3, 4]), ("4,7", [4, 7]), ("1-3,8", [1, 2, 3, 8]),
    ("0-1", [0, 1]), (" 2 , 5-6 ", [2, 5, 6])])
def test_seed_lists(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text, message", [
    ("a", r"'a' is not a seed or a range such as 1-10"),
    ("1-", r"'1-' is not a seed or a range"),
    ("5-3", r"'5-3' is not a range LOW-HIGH with 0 <= LOW <= HIGH"),
    ("1-3,2", r"2 given twice"),
    ("", r"'' is not a seed")])
def test_bad_seed_lists_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_seeds(text)


def _recorded(out: Path, seeds: list[int]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").write_text(json.dumps({"name": "grow", "scenario": None,
                                               "spec": {"seeds": seeds}}))
    return out


def test_a_resumed_experiment_runs_the_seeds_it_recorded_or_more(tmp_path: Path) -> None:
    spec = parse_spec(SPEC)
    assert runner.with_seeds(spec, None, None).seeds == [1, 2]  # a fresh run: the file's
    assert runner.with_seeds(spec, None, [5, 6]).seeds == [5, 6]
    out = _recorded(tmp_path / "out", [1, 2, 3])
    # resumed without --seeds: the seeds it recorded (added ones included), not the file's
    assert runner.with_seeds(spec, out, None).seeds == [1, 2, 3]
    assert runner.with_seeds(spec, out, [1, 2, 3, 4]).seeds == [1, 2, 3, 4]
    with pytest.raises(runner.ExperimentError,
                       match=r"cannot resume .*out with seeds 1,4: it recorded seed\(s\) 2, 3 "
                       r"too; seeds can be added to an experiment, not removed"):
        runner.with_seeds(spec, out, [1, 4])
    # a scenario that never started has nothing recorded: the seeds asked for, or the file's
    assert runner.with_seeds(spec, tmp_path / "never", None).seeds == [1, 2]


def _workload_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_added_seeds_flows_join_workload_csv_and_recorded_ones_must_not_change(
        tmp_path: Path) -> None:
    spec = parse_spec({**SPEC, "seeds": [1, 2, 3]})
    flows = {(seed, value): runner._flows(spec, seed, value)
             for seed in spec.seeds for value in spec.loads}
    out = tmp_path / "out"
    out.mkdir()
    write_csv(out / "workload.csv", WORKLOAD_COLUMNS, (
        {"seed": seed, "load": value, "flow_id": f.id, **f.to_dict()}
        for (seed, value), fl in flows.items() if seed == 1 for f in fl))
    before = _workload_rows(out / "workload.csv")
    runner._extend_workload(out, flows)
    after = _workload_rows(out / "workload.csv")
    assert after[:len(before)] == before  # the recorded rows, unchanged and first
    assert sorted({r["seed"] for r in after}) == ["1", "2", "3"]
    assert len(after) == sum(len(fl) for fl in flows.values())
    runner._extend_workload(out, flows)  # nothing added twice
    assert _workload_rows(out / "workload.csv") == after
    # a recorded seed whose flows the experiment no longer generates: refused
    other = {k: runner._flows(parse_spec({**SPEC, "workload": {
        "type": "incast", "size": 2000, "rounds": 2}}), *k) for k in flows}
    with pytest.raises(runner.ExperimentError, match="now generates other flows"):
        runner._extend_workload(out, other)


def test_resuming_with_fewer_seeds_is_a_usage_error_before_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    import yaml

    out = _recorded(tmp_path / "out", [1, 2])
    (out / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--resume", str(out), "--seeds", "2-3"])
    assert exc.value.code == cli.EXIT_USAGE
    assert "it recorded seed(s) 1 too; seeds can be added" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--resume", str(out), "--seeds", "1-x"])
    assert exc.value.code == cli.EXIT_USAGE
    assert "seeds '1-x': '1-x' is not a seed or a range" in capsys.readouterr().err


def test_results_from_before_active_s_count_from_start_to_finish() -> None:
    assert span_seconds({"started": "2026-11-28T10:00:00+0000",
                           "finished": "2026-11-28T10:30:00+0000"}) == 1800.0
    assert span_seconds({"started": "2026-11-28T10:00:00+0000"}) == 0.0
