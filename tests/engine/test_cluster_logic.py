"""The cluster run's logic, in memory: the task plan, --cluster targets, the worker
check, merging a task's results, the progress summed over workers, the child's events.
The real thing (Dask workers running networks) is tests/engine/test_cluster_network.py."""

from __future__ import annotations

import csv
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from dcnlab.benchmarks.engine.cluster import facts, merge, targets, tasks
from dcnlab.benchmarks.engine.cluster.child import EventProgress
from dcnlab.benchmarks.engine.cluster.driver import ClusterProgress
from dcnlab.benchmarks.engine.cluster.worker import LOG, Outcome
from dcnlab.benchmarks.engine.progress import Progress
from dcnlab.benchmarks.engine.runner import runs_todo
from dcnlab.benchmarks.engine.spec import load_specs

SMALL_CDF = "# test sizes\n1000 0\n10000 0.5\n200000 1\n"


def _specs(tmp_path: Path, **changes: Any) -> list:
    (tmp_path / "small.cdf").write_text(SMALL_CDF)
    spec = {"name": "spread", "topology": "spineleaf:2,2,2", "switch": "ovs",
            "schemes": ["ecmp", "single_path"],
            "workload": {"type": "poisson", "cdf": "small.cdf", "pairs": "inter_rack"},
            "loads": [0.1, 0.2], "seeds": [1, 2, 3], "duration": 4, **changes}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return load_specs(path)


def test_per_scheme_tasks_are_one_network_per_scheme_and_seed(tmp_path: Path) -> None:
    [spec] = _specs(tmp_path)
    plan = tasks.plan([spec], [runs_todo(spec, None)])
    assert [t.label for t in plan] == [f"{s}/seed{n}" for s in ("ecmp", "single_path")
                                       for n in (1, 2, 3)]
    assert plan[0].runs == (("ecmp", 1, 0.1), ("ecmp", 1, 0.2))  # both loads, in order
    assert tasks.runs_of(plan) == {(0, r) for r in runs_todo(spec, None)}  # each once


def test_per_run_tasks_and_a_resumed_plan_hold_only_what_is_left(tmp_path: Path) -> None:
    [spec] = _specs(tmp_path, network="per_run")
    plan = tasks.plan([spec], [runs_todo(spec, None)])
    assert len(plan) == 12 and all(len(t.runs) == 1 for t in plan)
    assert len({t.label for t in plan}) == 12
    [spec] = _specs(tmp_path)
    left = runs_todo(spec, {("ecmp", 1, 0.1), ("ecmp", 1, 0.2), ("ecmp", 2, 0.1)})
    plan = tasks.plan([spec], [left])
    assert [t.label for t in plan][:2] == ["ecmp/seed2", "ecmp/seed3"]
    assert plan[0].runs == (("ecmp", 2, 0.2),)


@pytest.mark.parametrize(("text", "prefix", "arg"), [
    ("local:2", "local:", "2"), ("tcp://10.0.0.1:8786", "tcp://", "10.0.0.1:8786"),
    ("ssh:a,b", "ssh:", "a,b"), ("slurm", "slurm", ""),
    ("slurm:jobs=4,queue=batch", "slurm", "jobs=4,queue=batch")])
def test_targets_parse(text: str, prefix: str, arg: str) -> None:
    kind, rest = targets.parse_target(text)
    assert (kind.prefix, rest) == (prefix, arg)


@pytest.mark.parametrize(("text", "says"), [
    ("local:0", "number of workers"), ("local:x", "number of workers"),
    ("tcp://nohost", "tcp://HOST:PORT"), ("ssh:", "ssh:HOST1"),
    ("slurm:nodes=3", "'nodes=3' is not KEY=VALUE"), ("slurm:jobs=x", "jobs must be"),
    ("slurmy", "give one of local:N"), ("kube:3", "give one of local:N")])
def test_bad_targets_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(targets.ClusterTargetError, match=says):
        targets.parse_target(text)


def test_slurm_options_and_the_workers_to_wait_for() -> None:
    assert targets.slurm_options("jobs=4,walltime=02:00:00") == {"jobs": "4",
                                                                 "walltime": "02:00:00"}
    kind, arg = targets.parse_target("ssh:a,b,c")
    assert kind.workers(arg) == 3
    kind, arg = targets.parse_target("local:2")
    assert kind.workers(arg) == 2


def test_needs_list_the_kinds_host_parts_and_tap(tmp_path: Path) -> None:
    [spec] = _specs(tmp_path)
    assert facts.Needs.of([spec]) == facts.Needs(("ovs",), (), False)


def _facts(**changes: Any) -> dict[str, Any]:
    return {"dcnlab": "0.1.0", "commit": "a" * 40, "changes": None, "python": "3.11",
            "host": "n1", "uid": 0, "problems": [], **changes}


def test_a_worker_like_the_client_is_accepted_and_each_difference_named() -> None:
    mine = _facts()
    assert facts.refusals("n1/0", _facts(), mine) == []
    [why] = facts.refusals("n1/0", _facts(commit="b" * 40), mine)
    assert "worker n1/0 runs dcnlab commit " + "b" * 40 in why and "a" * 40 in why
    [why] = facts.refusals("n1/0", _facts(changes="1234"), mine)
    assert "other uncommitted changes" in why
    [why] = facts.refusals("n1/0", _facts(uid=1000), mine)
    assert "uid 1000" in why and "root" in why
    [why] = facts.refusals("n1/0", _facts(problems=["cannot build networks with 'ext'"]),
                           mine)
    assert why == "worker n1/0: cannot build networks with 'ext'"


def test_code_identity_is_this_checkout() -> None:
    mine = facts.code_identity()
    assert mine["commit"] and len(mine["commit"]) == 40


FLOW_HEADER = ["scheme", "load", "seed", "flow_id", "status", "error"]


def _part(tmp_path: Path, worker_dir: str = "/tmp/dcnlab-task-x-1/out") -> Outcome:
    """A task's archive as a worker returns it: one run done, one not run."""
    part = tmp_path / "part"
    run = part / "out" / "runs" / "ecmp" / "seed1_load0.1"
    run.mkdir(parents=True)
    (run / "h1.log").write_text("agent log\n")
    with open(part / "out" / "flows.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(FLOW_HEADER)
        writer.writerow(["ecmp", "0.1", "1", "0", "ok", ""])
        writer.writerow(["ecmp", "0.1", "1", "1", "failed", "reset"])
        writer.writerow(["ecmp", "0.2", "1", "0", "not_run", "run failed"])
    (part / "out" / "network.csv").write_text("scheme,load,seed,drops\necmp,0.1,1,3\n")
    (part / "out" / "workload.csv").write_text("seed,load,flow_id\n1,0.1,0\n")
    (part / "out" / "meta.json").write_text(json.dumps({
        "status": "failed", "errors": ["run ecmp seed1_load0.2: agent died\nmore"],
        "runs": [{"scheme": "ecmp", "seed": 1, "load": 0.1,
                  "run_dir": f"{worker_dir}/runs/ecmp/seed1_load0.1"}],
        "networks": [{"scheme": "ecmp", "prefix": "dab1-",
                      "run_dir": f"{worker_dir}/runs/ecmp/network"}]}))
    (part / LOG).write_text("child output\n")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(part / "out", arcname="out")
        tar.add(part / LOG, arcname=LOG)
    return Outcome("ecmp/seed1", "n1/0", 1, buffer.getvalue())


def test_a_part_merges_its_rows_runs_and_files_with_the_worker_named(tmp_path: Path
                                                                     ) -> None:
    out = tmp_path / "exp"
    out.mkdir()
    with open(out / "flows.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([FLOW_HEADER, ["single_path", "0.1", "1", "0", "ok", ""]])
    meta: dict[str, Any] = {"runs": [], "networks": []}
    part = merge.merge(out, meta, _part(tmp_path))
    assert part.status == "failed" and part.runs == {("ecmp", 1, 0.1)}
    assert part.errors[0].startswith("run ecmp seed1_load0.2")
    with open(out / "flows.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    # the part's not_run row is the client's to write (once, with its reason)
    assert [(r["scheme"], r["status"]) for r in rows] == [
        ("single_path", "ok"), ("ecmp", "ok"), ("ecmp", "failed")]
    assert (part.rows, part.not_ok) == (2, 1)
    assert (out / "network.csv").read_text().splitlines() == ["scheme,load,seed,drops",
                                                              "ecmp,0.1,1,3"]
    assert not (out / "workload.csv").exists()  # the client's own, never a part's
    assert (out / "runs" / "ecmp" / "seed1_load0.1" / "h1.log").read_text() == "agent log\n"
    assert meta["runs"] == [{"scheme": "ecmp", "seed": 1, "load": 0.1, "worker": "n1/0",
                             "run_dir": str(out / "runs" / "ecmp" / "seed1_load0.1")}]
    assert meta["networks"][0]["worker"] == "n1/0"
    assert meta["networks"][0]["run_dir"] == str(out / "runs" / "ecmp" / "network")
    assert (out / "cluster" / "ecmp_seed1.log").read_text() == "child output\n"


def test_a_part_without_results_says_so_with_its_log(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    (tmp_path / LOG).write_text("Traceback\nImportError: no module named x\n")
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(tmp_path / LOG, arcname=LOG)
    out = tmp_path / "exp"
    out.mkdir()
    part = merge.merge(out, {}, Outcome("ecmp/seed1", "n1/0", 1, buffer.getvalue()))
    assert part.status == "missing" and not part.runs
    assert "wrote no results (exit status 1)" in part.errors[0]
    assert "ImportError" in part.errors[0]


def test_progress_sums_the_workers_and_forgets_a_dead_attempt() -> None:
    bar = Progress(100, enabled=False, runs=4)
    follow = ClusterProgress(bar, {"a": 50, "b": 50}, names={"tcp://w2:1": "w2"})
    follow.event({"task": "a", "attempt": "w1:10", "worker": "w1", "kind": "done", "value": 20})
    follow.event({"task": "b", "attempt": "w2:11", "worker": "w2", "kind": "done", "value": 5})
    follow.event({"task": "a", "attempt": "w1:10", "worker": "w1", "kind": "run_done"})
    assert (bar.done, bar.runs_done) == (25, 1)
    follow.event({"task": "b", "attempt": "w2:11", "worker": "tcp://w2:1", "kind": "phase",
                  "text": "ecmp seed 2 load 0.1"})
    assert "w2: ecmp seed 2 load 0.1" in bar.line()  # by its label, as meta.json names it
    assert "tcp://" not in bar.line()
    # w1 died: task a starts again on w2; what the dead attempt counted is gone
    follow.event({"task": "a", "attempt": "w2:12", "worker": "w2", "kind": "done", "value": 1})
    assert (bar.done, bar.runs_done) == (6, 0)
    follow.task_ended(tasks.Task(0, "x", 1, (("x", 1, 0.1), ("x", 1, 0.2)), "a"), 2)
    assert (bar.done, bar.runs_done) == (55, 2)  # a task's flows all count once it ended


def test_the_child_reports_progress_as_json_lines() -> None:
    stream = io.StringIO()
    bar = EventProgress(stream, 10, 2)
    bar.set_phase("ecmp seed 1")
    bar.advance(3)
    bar.run_done()
    bar.message("warning: x")
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert events == [{"kind": "phase", "text": "ecmp seed 1"}, {"kind": "done", "value": 3},
                      {"kind": "run_done"}, {"kind": "message", "text": "warning: x"}]


def test_the_projection_gives_each_task_in_turn_to_the_first_free_machine() -> None:
    from dcnlab.benchmarks.cluster_scaling import _makespan

    assert _makespan([1, 1, 4], 2) == 5  # in submission order, not longest first (4)
    assert _makespan([3, 3, 2, 2, 2], 2) == 7  # 3+2+2 | 3+2
    assert _makespan([5, 1, 1, 1], 4) == 5  # the longest task bounds it
    assert _makespan([2.0] * 8, 1) == 16
