"""The client of a cluster run: check the workers, submit the tasks, follow their
progress, merge what comes back, and write the experiment's directory as a local run
would (:func:`run_on_cluster`, called by ``runner.run_experiment`` with the flow lists it
generated once).

Failures, as locally: a run or network that fails ends the experiment after it (tasks
running elsewhere finish their runs, no new task starts), and every run that did not run
gets ``not_run`` rows with the reason.  A task whose worker died is retried once by Dask
(targets.ALLOWED_FAILURES); dying twice, its runs are ``not_run`` and the status is
``failed``.  Ctrl-C (or SIGTERM) asks every worker to stop its task (its networks are
stopped, its finished runs come back and are kept), waits for that, and leaves status
``interrupted``; ``--resume DIR`` then continues with any set of workers.
"""

from __future__ import annotations

import dataclasses
import queue
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..progress import Progress
from ..reporting import report
from ..results import FLOWS_CSV, META_JSON, META_TIME, CsvAppender, write_json
from ..spec import ExperimentSpec
from ..workloads import Flow
from . import facts, merge, worker
from .facts import RESOURCE, Needs
from .targets import parse_target
from .tasks import Run, Task, plan

STOP_WAIT_S = 300.0  # for the workers to stop their networks after Ctrl-C
POLL_S = 0.5  # how often the client looks at its futures between progress events
Workloads = dict[tuple[int, float], list[Flow]]


@dataclass
class _Experiment:
    """One spec's (scenario's) directory, as the client fills it."""

    spec: ExperimentSpec
    out: Path
    workloads: Workloads
    todo: set[Run]
    meta: dict[str, Any]
    began: float
    done: set[Run] = field(default_factory=set)
    reasons: dict[Run, str] = field(default_factory=dict)  # why a run did not run
    rows: int = 0
    not_ok: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class ClusterProgress:
    """The bar over the whole cluster: flows and runs summed over the tasks, and each
    worker's current run."""

    bar: Progress
    flows: dict[str, int]  # task label -> its flow count
    merged_flows: int = 0
    merged_runs: int = 0
    # task label -> (attempt, flows done, runs done) of the attempt running it now
    live: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    phases: dict[str, str] = field(default_factory=dict)  # worker -> phase
    # worker address -> its label (vm/0), as the start line and meta.json name it
    names: dict[str, str] = field(default_factory=dict)

    def _worker(self, event: dict[str, Any]) -> str:
        address = str(event.get("worker", "?"))
        return self.names.get(address, address)

    def event(self, event: dict[str, Any]) -> None:
        task, attempt = event.get("task", ""), event.get("attempt", "")
        seen = self.live.get(task)
        flows, runs = (seen[1], seen[2]) if seen and seen[0] == attempt else (0, 0)
        kind = event.get("kind")
        if kind == "done":
            flows = int(event.get("value", 0))
        elif kind == "run_done":
            runs += 1
        elif kind == "phase":
            self.phases[self._worker(event)] = str(event.get("text", ""))
            self.bar.phase = "; ".join(f"{w}: {p}" for w, p in sorted(self.phases.items()))
        elif kind == "message":
            self.bar.message(f"{self._worker(event)}: {event.get('text', '')}")
        self.live[task] = (attempt, flows, runs)
        self._show()

    def task_ended(self, task: Task, runs: int) -> None:
        self.live.pop(task.label, None)
        self.merged_flows += self.flows[task.label]
        self.merged_runs += runs
        self._show()

    def _show(self) -> None:
        self.bar.set_counts(self.merged_flows + sum(f for _, f, _ in self.live.values()),
                            self.merged_runs + sum(r for _, _, r in self.live.values()))


def run_on_cluster(target: str, specs: list[ExperimentSpec], outs: list[Path],
                   workloads: list[Workloads], done: list[set[Run] | None],
                   todo: list[set[Run]], progress: bool,
                   estimate: Callable[[list[ExperimentSpec], list[int]], tuple[float, float]],
                   ) -> list[tuple[_Experiment, Any]]:
    """Run ``todo[i]`` of ``specs[i]`` into ``outs[i]`` on the cluster ``target``;
    returns each experiment with its report (the caller makes its RunResult).  Raises
    ExperimentError (nothing started) when a worker is refused, KeyboardInterrupt after
    a clean stop."""
    from ..runner import hours, open_results

    kind, arg = parse_target(target)
    tasks = plan(specs, todo)
    needs = Needs.of(specs)
    mine = facts.code_identity()
    token = uuid.uuid4().hex[:12]
    with kind.open(arg) as client:
        labels = _checked_workers(client, kind.workers(arg), kind.wait_s, needs, mine)
        machines = len(labels)
        low, high = _estimate(specs, tasks, machines, estimate)
        print(f"dcnlab run: {sum(len(t.runs) for t in tasks)} run(s) in {len(tasks)} "
              f"task(s) on {machines} worker(s) ({', '.join(sorted(labels.values()))}); "
              f"estimated time {hours(low)} to {hours(high)}", file=sys.stderr)
        experiments = []
        for spec, out, w, d, t in zip(specs, outs, workloads, done, todo, strict=True):
            meta = open_results(spec, out, w, d, "mininet")
            meta.setdefault("clusters", []).append({
                "target": target, "token": token, "started": time.strftime(META_TIME),
                "workers": {label: address for address, label in sorted(labels.items())}})
            write_json(out / META_JSON, meta)
            experiments.append(_Experiment(spec, out, w, t, meta, time.monotonic()))
        flows = {t.label: sum(len(experiments[t.scenario].workloads[(t.seed, v)])
                              for v in t.values) for t in tasks}
        bar = Progress(sum(flows.values()), enabled=progress,
                       runs=sum(len(t.runs) for t in tasks))
        follow = ClusterProgress(bar, flows, names=labels)
        try:
            status = _follow(client, token, tasks, experiments, needs, mine, follow)
        except KeyboardInterrupt:  # a second one while the workers were told to stop
            status = "interrupted"
        except Exception as exc:  # noqa: BLE001 - the cluster itself failed (scheduler lost)
            status = "failed"
            for e in experiments:
                e.errors.append(f"the cluster failed: {type(exc).__name__}: {exc}")
        finally:
            bar.close()
    return [(e, _finish(e, status)) for e in experiments]


def _estimate(specs: list[ExperimentSpec], tasks: list[Task], machines: int,
              estimate: Callable[[list[ExperimentSpec], list[int]], tuple[float, float]],
              ) -> tuple[float, float]:
    """(low, high) seconds: the local estimate of every task, spread over the machines,
    never shorter than the longest task."""
    each = [estimate([specs[t.scenario]], [len(t.runs)]) for t in tasks] or [(0.0, 0.0)]
    return (max(sum(lo for lo, _ in each) / machines, max(lo for lo, _ in each)),
            max(sum(hi for _, hi in each) / machines, max(hi for _, hi in each)))


def _checked_workers(client: Any, expected: int, wait_s: float, needs: Needs,
                     mine: dict[str, Any]) -> dict[str, str]:
    """Wait for the workers and check each (facts.refusals); address -> label."""
    from ..runner import ExperimentError

    try:
        client.wait_for_workers(expected, timeout=wait_s)
    except TimeoutError:
        have = len(client.scheduler_info()["workers"])
        raise ExperimentError(f"the cluster has {have} worker(s) after {wait_s:g} s, "
                              f"{expected} wanted; nothing was run") from None
    info = client.scheduler_info()["workers"]
    found = client.run(facts.worker_facts, needs)
    labels, why = {}, []
    for address, entry in info.items():
        got = found.get(address, {})
        label = f"{got.get('host', entry.get('host'))}/{entry.get('name')}"
        labels[address] = label
        if float(entry.get("resources", {}).get(RESOURCE, 0)) < 1:
            why.append(f"worker {label} has no {RESOURCE!r} resource: start it with "
                       f"dcnlab worker SCHEDULER (or dask worker --resources {RESOURCE}=1)")
        why += facts.refusals(label, got, mine)
    if why:
        raise ExperimentError("cluster refused before any run:\n  " + "\n  ".join(why))
    return labels


def _follow(client: Any, token: str, tasks: list[Task], experiments: list[_Experiment],
            needs: Needs, mine: dict[str, Any], follow: ClusterProgress) -> str:
    """Submit every task and merge each as it ends; the experiment's status."""
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    client.subscribe_topic(worker.topic(token), lambda event: events.put(event[1]))
    pending = {}
    for task in tasks:
        e = experiments[task.scenario]
        # the spec without its file: a worker's machine has no such path (and the client
        # keeps the copy, spec.yaml)
        payload = worker.Payload(token, task, dataclasses.replace(e.spec, source=None), {
            (task.seed, v): e.workloads[(task.seed, v)] for v in task.values}, needs, mine)
        future = client.submit(worker.run_task, payload, key=f"dcnlab-{token}-{task.label}",
                               resources={RESOURCE: 1}, pure=False)
        pending[future] = task
    stop: str | None = None  # why no more tasks start
    status = "complete"
    deadline: float | None = None
    while pending:
        try:
            try:
                follow.event(events.get(timeout=POLL_S))
                while True:
                    follow.event(events.get_nowait())
            except queue.Empty:
                pass
            for future in [f for f in pending if f.done()]:
                task = pending.pop(future)
                why = _ended(future, task, experiments[task.scenario], follow, stop)
                if why is not None and stop is None:
                    stop, status = f"not run: an earlier run failed: {why}", "failed"
                    worker.stop_everywhere(client, token, running=False)  # no new task
            if deadline is not None and time.monotonic() > deadline:
                _abandon(client, pending, experiments,
                         f"{stop}; the worker did not stop within {STOP_WAIT_S:g} s")
                break
        except KeyboardInterrupt:
            if deadline is not None:  # a second Ctrl-C: stop waiting
                _abandon(client, pending, experiments, stop or "interrupted")
                break
            stop, status = "interrupted (Ctrl-C or SIGTERM)", "interrupted"
            follow.bar.message("dcnlab: stopping the workers' runs (their networks are "
                               "stopped, finished runs kept)...")
            worker.stop_everywhere(client, token, running=True)
            deadline = time.monotonic() + STOP_WAIT_S
    return status


def _abandon(client: Any, pending: dict[Any, Task], experiments: list[_Experiment],
             reason: str) -> None:
    """Stop waiting for the ``pending`` tasks: cancelled, their runs not run for ``reason``."""
    client.cancel(list(pending))
    for task in pending.values():
        _not_run(experiments[task.scenario], task, reason)


def _ended(future: Any, task: Task, e: _Experiment, follow: ClusterProgress,
           stop: str | None) -> str | None:
    """Merge an ended task; the first line of its failure, if it failed."""
    from distributed import KilledWorker

    if future.status == "finished":
        outcome = future.result()
        part = merge.merge(e.out, e.meta, outcome)
        e.done |= part.runs
        e.rows += part.rows
        e.not_ok += part.not_ok
        follow.task_ended(task, len(part.runs))
        write_json(e.out / META_JSON, e.meta)
        if part.status == "complete":
            return None
        reason = (part.errors[0].splitlines()[0] if part.errors
                  else stop or f"task {task.label} ended {part.status}")
        _not_run(e, task, reason)
        if part.status == "interrupted" and stop is not None:
            return None  # stopped by us
        e.errors += part.errors or [reason]
        return reason
    exc = future.exception() if future.status == "error" else None
    follow.task_ended(task, 0)
    if isinstance(exc, worker.TaskStopped) or (exc is None and stop is not None):
        _not_run(e, task, stop or "not run: the experiment was stopped")
        return None
    if isinstance(exc, KilledWorker):
        reason = (f"task {task.label}: its worker died while running it, twice (Dask "
                  f"retried it once on another worker): {exc}")
    else:
        reason = f"task {task.label}: {type(exc).__name__}: {exc}"
    _not_run(e, task, reason)
    e.errors.append(reason)
    return reason


def _not_run(e: _Experiment, task: Task, reason: str) -> None:
    for run in task.runs:
        if run not in e.done:
            e.reasons.setdefault(run, reason)


def _finish(e: _Experiment, status: str) -> Any:
    """not_run rows for every run no task finished, meta.json's last word, the report."""
    from ..runner import flow_columns, not_run_rows

    missing = e.todo - e.done
    if missing:
        appender = CsvAppender(e.out / FLOWS_CSV, flow_columns(e.spec))
        try:
            by_reason: dict[str, set[Run]] = {}
            for run in missing:
                by_reason.setdefault(e.reasons.get(run, "not run"), set()).add(run)
            for reason, runs in by_reason.items():
                others = {(s.name, seed, float(v)) for s in e.spec.schemes
                          for (seed, v) in e.workloads} - runs
                rows = not_run_rows(e.spec, e.workloads, others, reason)
                e.rows += appender.write(rows)
                e.not_ok += len(rows)
        finally:
            appender.close()
    e.meta["status"] = ("complete" if not missing and status == "complete" and not e.errors
                        else status if status != "complete" else "failed")
    e.meta["finished"] = time.strftime(META_TIME)
    e.meta["active_s"] = round(e.meta.get("active_s", 0.0) + time.monotonic() - e.began, 1)
    e.meta["errors"] = e.errors
    write_json(e.out / META_JSON, e.meta)
    return report(e.out)
