"""``run_experiment(spec_path, out_dir, progress)``: schemes x sweep values x seeds.

Order of work:
1. load and validate the spec (a bad file raises SpecFileError; nothing runs), check
   that the machine can build networks, refuse an output directory holding results;
2. generate every flow list once per (seed, sweep value) -- the same lists are replayed
   for every scheme -- and save them (workload.csv);
3. per scheme, one network (``network: per_scheme``; ``per_run`` builds one per run),
   and on it every (seed, sweep value): agents on every host, replay, rows appended to
   flows.csv at once, switch drop counters before/after;  a scheme with host parts
   (``agents:``, declared in dcnlab.schemes) gets them in its TCP senders (and a
   management network if they need one), and its traffic agents join their cgroups;
   with ``agent.rx_interval`` the receivers' counts become fairness.csv /
   fairness_series.csv (fairness.py);
4. report(): summary table and plots.

An agent that dies, or a network that fails, ends the experiment after the run in which
it happened: that run's flows are all recorded (the dead agent's unrecorded ones as
``agent_died``, flows towards it as failed), the summary is rendered from what was
measured, meta.json says ``failed`` with the reason, and ExperimentError is raised with
the same message.  Ctrl-C stops the network cleanly and leaves status ``interrupted``.
Either way no generated flow goes unaccounted: every flow of a run that did not run (or
did not finish) gets a row with status ``not_run`` and the reason, later scenarios
included.  ``resume=True`` (``dcnlab run --resume DIR``) continues such an experiment in
its directory: the runs meta.json lists as done are kept, the ``not_run`` rows are
dropped and those runs run now, with the same flow lists (they are generated from the
seeds again, and checked against workload.csv).  Given one scenario's directory, the CLI
continues that scenario alone, in place (:func:`resume_target`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import sys
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dcnlab.hosts import dctcp
from dcnlab.model.runtime import ENV_SELECT_MODE
from dcnlab.schemes import registry
from dcnlab.schemes.base import HostPartsError, HostSession, Transport

from . import (
    controller_stats,
    environment,
    events,
    fairness,
    flowdiag,
    flowtap,
    netstats,
    pathdiag,
    queueseries,
    sections,
    switch_stats,
)
from .fabric import FabricRequest, Mininet, Place
from .marking import assign_marks
from .metrics import size_class
from .progress import Progress
from .replay import Endpoint, ReplayError, ReplayResult, replay
from .reporting import report
from .results import (
    FLOW_COLUMNS,
    FLOWS_CSV,
    META_JSON,
    META_TIME,
    SAMPLE_COLUMNS,
    SPEC_COPY,
    WORKLOAD_COLUMNS,
    CsvAppender,
    read_json,
    span_seconds,
    write_csv,
    write_json,
)
from .schema import SpecFileError
from .spec import NO_AGENTS, ExperimentSpec, Scheme, load_specs, scheme_topology
from .table import fmt
from .workloads import Flow, generate

DEFAULT_RESULTS = Path("results")


def select_scenarios(specs: list[ExperimentSpec], wanted: list[str] | None,
                     ) -> list[ExperimentSpec]:
    """The specs of the ``wanted`` scenarios, in the file's order (all when None)."""
    if wanted is None:
        return specs
    names = [spec.scenario for spec in specs if spec.scenario]
    unknown = [w for w in wanted if w not in names]
    if not names:
        raise SpecFileError("--scenarios", "this experiment has no scenarios to choose from")
    if unknown:
        raise SpecFileError("--scenarios", f"no scenario {', '.join(map(repr, unknown))} in this "
                              f"experiment; it has: {', '.join(names)}")
    return [spec for spec in specs if spec.scenario in wanted]


class ExperimentError(RuntimeError):
    """The experiment could not run, or stopped early; ``result`` holds what was saved."""

    def __init__(self, message: str, result: RunResult | None = None) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class RunResult:
    out_dir: Path
    flows_csv: Path
    table: str  # the summary table (summary.txt)
    rows: int  # rows in flows.csv
    not_ok: int  # rows whose status is not "ok" (failed, unfinished, agent_died...)
    runs: int  # (scheme, seed, value) runs completed
    errors: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    scenarios: dict[str, RunResult] = field(default_factory=dict)  # per scenario, if any

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass
class _State:
    spec: ExperimentSpec
    out: Path
    flows_csv: CsvAppender
    samples_csv: CsvAppender | None
    progress: Progress
    meta: dict[str, Any]
    controller_csv: CsvAppender  # controller_stats.COLUMNS, one row per run
    place: Place = field(default_factory=Mininet)  # where the fabrics come from
    network_csv: CsvAppender | None = None  # netstats.COLUMNS, one row per run
    switch_csv: CsvAppender | None = None  # switch_stats.COLUMNS, one row per run
    fairness_csv: CsvAppender | None = None  # fairness.COLUMNS, one row per run
    series_csv: CsvAppender | None = None  # fairness.SERIES_COLUMNS, one row per period
    paths_csv: CsvAppender | None = None  # pathdiag.COLUMNS, one row per run
    queue_csv: CsvAppender | None = None  # queueseries.COLUMNS, one row per stats line
    # the registered result sections' CSVs (sections.py), by section name
    section_csvs: dict[str, CsvAppender] = field(default_factory=dict)
    flowdiag_csv: CsvAppender | None = None  # flowdiag.COLUMNS, one row per run
    flowpaths_csv: CsvAppender | None = None  # flowdiag.PATH_COLUMNS, per measured elephant
    rows: int = 0
    not_ok: int = 0
    runs: int = 0
    errors: list[str] = field(default_factory=list)
    done: set[tuple[str, int, float]] = field(default_factory=set)  # (scheme, seed, value)


NOT_RUN = "not_run"


class _Stop(Exception):
    """Internal: end the experiment after an error already recorded in state.errors."""


def run_experiment(spec_path: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None
                   = None, progress: bool = True, resume: bool = False,
                   scenarios: list[str] | None = None,
                   seeds: list[int] | None = None, place: Place | None = None,
                   cluster: str | None = None) -> RunResult:
    """Run the experiment in ``spec_path``; results go to ``out_dir``
    (default ``results/<name>``; with scenarios, one subdirectory per scenario).
    ``resume``: continue an interrupted or failed run in ``out_dir`` (see the module doc).
    ``scenarios``: run only these scenarios of the file.  ``seeds``: these seeds instead
    of the file's (every scenario); resuming, seeds may be added (see :func:`with_seeds`).
    ``place``: where the networks come from (default: Mininet on this machine; a lab:
    dcnlab.lab).  ``cluster``: run on the workers of this ``--cluster`` target instead of
    here (dcnlab.benchmarks.engine.cluster; docs/cluster.md).  See the module doc for
    what happens on errors."""
    place = place if place is not None else Mininet()
    specs = select_scenarios(load_specs(spec_path), scenarios)
    for spec in specs:
        why = place.refuse(spec)
        if why is not None:
            name = spec.name + (f" / {spec.scenario}" if spec.scenario else "")
            raise ExperimentError(f"{name} cannot run on {place.name}: {why}")
    out = Path(out_dir) if out_dir is not None else DEFAULT_RESULTS / specs[0].name
    outs = [out / spec.scenario if spec.scenario else out for spec in specs]
    specs = [with_seeds(spec, target if resume else None, seeds)
             for spec, target in zip(specs, outs, strict=True)]
    # Per spec: the runs already recorded (resuming), or None (a fresh directory).
    done: list[set[tuple[str, int, float]] | None] = [
        _done_runs(target, spec) if resume else None
        for spec, target in zip(specs, outs, strict=True)]
    if resume:  # a run continues where it began: a lab's results are not Mininet's
        for target in outs:
            recorded = (read_json(target / META_JSON).get("place", "mininet")
                        if (target / META_JSON).exists() else place.name)
            if recorded != place.name:
                how = "give --lab LAB.yaml" if recorded == "lab" else "without --lab"
                raise ExperimentError(f"{target} ran on {recorded}; resume it there ({how})")
    if not resume:
        for target in outs:
            if (target / FLOWS_CSV).exists():
                raise ExperimentError(f"{target} already holds results ({FLOWS_CSV}); choose "
                                      "another output directory, remove it, or --resume")
    if cluster is None:
        _preflight(specs)  # a cluster's workers are checked by the cluster client
    workloads = [{(seed, value): _flows(spec, seed, value) for seed in spec.seeds
                  for value in spec.loads} for spec in specs]
    if resume:
        for target, w in zip(outs, workloads, strict=True):
            _extend_workload(target, w)
    todo = [runs_todo(spec, d) for spec, d in zip(specs, done, strict=True)]
    if cluster is not None:
        return _on_cluster(cluster, specs, outs, out, workloads, done, todo, progress)
    total = sum(len(w[(seed, value)]) for w, t in zip(workloads, todo, strict=True)
                for _, seed, value in t)
    print(estimate_text(specs, [len(t) for t in todo]), file=sys.stderr)
    bar = Progress(total, enabled=progress, runs=sum(len(t) for t in todo))
    results: list[RunResult] = []
    try:
        for i, (spec, target, flows) in enumerate(zip(specs, outs, workloads, strict=True)):
            results.append(_run_spec(spec, target, flows, bar, done[i], place))
            if results[-1].errors:
                reason = f"an earlier scenario failed: {results[-1].errors[0].splitlines()[0]}"
                for later, later_out, later_flows in zip(specs[i + 1:], outs[i + 1:],
                                                         workloads[i + 1:], strict=True):
                    _record_skipped(later, later_out, later_flows, reason)
                break
    finally:
        bar.close()
    result = results[0] if specs[0].scenario is None else _combine(out, specs, results)
    return _concluded(result, out, progress)


def _concluded(result: RunResult, out: Path, progress: bool) -> RunResult:
    """The table under the progress bar; ExperimentError if the experiment stopped early."""
    if progress:
        print(f"\n{result.table}\nresults in {out}", file=sys.stderr)
    if result.errors:
        raise ExperimentError(
            "experiment stopped early: " + "\n".join(result.errors)
            + f"\n{result.rows} row(s) written to {result.flows_csv} ({result.not_ok} not "
            f"ok); summary and plots from them in {out}", result)
    return result


def _on_cluster(target: str, specs: list[ExperimentSpec], outs: list[Path], out: Path,
                workloads: list[dict[tuple[int, float], list[Flow]]],
                done: list[set[tuple[str, int, float]] | None],
                todo: list[set[tuple[str, int, float]]], progress: bool) -> RunResult:
    """run_experiment's second half on a cluster: the same results, the same errors."""
    from .cluster.driver import run_on_cluster

    finished = run_on_cluster(target, specs, outs, workloads, done, todo, progress,
                              estimate_seconds)
    results = [RunResult(e.out, e.out / FLOWS_CSV, rendered.table, e.rows, e.not_ok,
                         len(e.done), e.errors, rendered.files) for e, rendered in finished]
    result = results[0] if specs[0].scenario is None else _combine(out, specs, results)
    if any(e.meta["status"] == "interrupted" for e, _ in finished):
        raise KeyboardInterrupt  # after a clean stop; the directory says interrupted
    return _concluded(result, out, progress)


def _combine(out: Path, specs: list[ExperimentSpec], results: list[RunResult]) -> RunResult:
    by_name = {spec.scenario or "": r for spec, r in zip(specs, results, strict=False)}
    skipped = [spec.scenario for spec in specs[len(results):]]
    table = "\n".join(f"== scenario {name} ==\n{r.table}" for name, r in by_name.items())
    if skipped:
        table += f"\nnot run (an earlier scenario failed): {', '.join(map(str, skipped))}\n"
    return RunResult(out, results[0].flows_csv, table, sum(r.rows for r in results),
                     sum(r.not_ok for r in results), sum(r.runs for r in results),
                     [e for r in results for e in r.errors],
                     [f for r in results for f in r.files], by_name)


def open_results(spec: ExperimentSpec, out: Path,
                 workloads: dict[tuple[int, float], list[Flow]],
                 done: set[tuple[str, int, float]] | None, place: str) -> dict[str, Any]:
    """Make ``out`` ready to take runs and return its meta.json, status ``running``: a
    fresh directory gets the spec copy, workload.csv and a new meta.json; a resumed one
    (``done`` not None) keeps its meta.json, adds this session's code and machine, and
    loses the ``not_run`` rows of the runs about to run.  The local runner and the
    cluster client (cluster.driver) both start an experiment's directory here."""
    out.mkdir(parents=True, exist_ok=True)
    if done is not None and (out / META_JSON).exists():
        meta = json.loads((out / META_JSON).read_text())
        meta.setdefault("active_s", span_seconds(meta))  # written before active_s was kept
        meta.setdefault("resumed", []).append(time.strftime(META_TIME))
        # this session's code and machine: the runs it adds are theirs, not the first's
        meta.setdefault("resumed_sessions", []).append(
            {"versions": environment.versions(), "machine": environment.machine()})
        meta.setdefault("spec", {})["seeds"] = spec.seeds  # seeds may have been added
        meta["flow_counts"] = _flow_counts(spec, workloads)
        _drop_not_run_rows(out / FLOWS_CSV, done)
    else:
        if spec.source is not None and spec.source.resolve() != (out / SPEC_COPY).resolve():
            shutil.copyfile(spec.source, out / SPEC_COPY)
        write_csv(out / "workload.csv", WORKLOAD_COLUMNS, (
            {"seed": seed, "load": value, "flow_id": f.id, **f.to_dict()}
            for (seed, value), flows in workloads.items() for f in flows))
        meta = _initial_meta(spec, workloads)
        meta["place"] = place  # where the runs ran (resume checks)
    meta["status"] = "running"
    write_json(out / META_JSON, meta)
    return meta


def _run_spec(spec: ExperimentSpec, out: Path, workloads: dict[tuple[int, float], list[Flow]],
              bar: Progress, done: set[tuple[str, int, float]] | None = None,
              place: Place | None = None, render: bool = True) -> RunResult:
    """One experiment (or scenario) into ``out``; errors end up in the result.  ``done``
    (resuming; None for a fresh directory): runs already recorded there, kept and
    skipped.  ``render=False``: no summary and plots (a cluster task's part, which the
    client merges and renders once)."""
    began = time.monotonic()
    meta = open_results(spec, out, workloads, done, (place or Mininet()).name)
    state = _State(spec, out, CsvAppender(out / FLOWS_CSV, flow_columns(spec)),
                   CsvAppender(out / "samples.csv", SAMPLE_COLUMNS)
                   if spec.agent.sample_interval > 0 else None, bar, meta,
                   CsvAppender(out / controller_stats.CONTROLLER_CSV,
                               controller_stats.COLUMNS),
                   place if place is not None else Mininet())
    state.network_csv = CsvAppender(out / netstats.NETWORK_CSV, netstats.COLUMNS)
    state.switch_csv = CsvAppender(out / switch_stats.SWITCH_CSV, switch_stats.COLUMNS)
    state.paths_csv = CsvAppender(out / pathdiag.PATHS_CSV, pathdiag.COLUMNS)
    state.queue_csv = CsvAppender(out / queueseries.QUEUE_CSV, queueseries.COLUMNS)
    state.section_csvs = {sec.name: CsvAppender(out / sec.csv, sec.columns)
                          for sec in sections.recording(spec) if sec.csv is not None}
    if spec.diagnosis.flow_paths:
        state.flowdiag_csv = CsvAppender(out / flowdiag.FLOWDIAG_CSV, flowdiag.COLUMNS)
        state.flowpaths_csv = CsvAppender(out / flowdiag.FLOWPATHS_CSV,
                                          flowdiag.PATH_COLUMNS)
    if (spec.agent.rx_interval or 0) > 0:
        state.fairness_csv = CsvAppender(out / fairness.FAIRNESS_CSV, fairness.COLUMNS)
        state.series_csv = CsvAppender(out / fairness.SERIES_CSV, fairness.SERIES_COLUMNS)
    state.done = set(done or ())
    try:
        for scheme in spec.schemes:
            _run_scheme(state, scheme, workloads)
        meta["status"] = "complete"
    except _Stop:
        meta["status"] = "failed"
    except KeyboardInterrupt:
        meta["status"] = "interrupted"
        raise
    finally:
        reason = (state.errors[-1].splitlines()[0] if state.errors
                  else "interrupted (Ctrl-C or SIGTERM)" if meta["status"] == "interrupted" else "")
        if meta["status"] != "complete":
            state.flows_csv.write(_not_run_rows(state, workloads, reason))
        state.flows_csv.close()
        state.controller_csv.close()
        for csv_out in (state.network_csv, state.switch_csv, state.paths_csv,
                        state.queue_csv, state.flowdiag_csv, state.flowpaths_csv,
                        *state.section_csvs.values()):
            if csv_out is not None:
                csv_out.close()
        for appender in (state.fairness_csv, state.series_csv):
            if appender is not None:
                appender.close()
        if state.samples_csv is not None:
            state.samples_csv.close()
        meta["finished"] = time.strftime(META_TIME)
        # the time spent running, summed over resumed sessions ("started" to "finished"
        # would count the pauses between them)
        meta["active_s"] = round(meta.get("active_s", 0.0) + time.monotonic() - began, 1)
        meta["errors"] = state.errors
        write_json(out / META_JSON, meta)
    if not render:
        return RunResult(out, out / FLOWS_CSV, "", state.rows, state.not_ok, state.runs,
                         state.errors)
    rendered = report(out)
    return RunResult(out, out / FLOWS_CSV, rendered.table, state.rows, state.not_ok,
                     state.runs, state.errors, rendered.files)


# ---------------------------------------------------------------------------


NETWORK_SETUP_S = 30.0  # a network's start-up and stop, roughly (meta.json: startup_s)


def runs_left(spec_path: str | os.PathLike[str], out_dir: str | os.PathLike[str],
              resume: bool = False, scenarios: list[str] | None = None,
              seeds: list[int] | None = None) -> tuple[list[ExperimentSpec], list[int]]:
    """The specs :func:`run_experiment` would run with these arguments and how many runs
    each has left (all of them, or, resuming, those ``out_dir`` has not recorded), for an
    estimate before anything starts."""
    specs = select_scenarios(load_specs(spec_path), scenarios)
    out = Path(out_dir)
    left = []
    for i, spec in enumerate(specs):
        target = out / spec.scenario if spec.scenario else out
        spec = specs[i] = with_seeds(spec, target if resume else None, seeds)
        left.append(len(runs_todo(spec, _done_runs(target, spec) if resume else None)))
    return specs, left


def runs_todo(spec: ExperimentSpec, done: set[tuple[str, int, float]] | None
              ) -> set[tuple[str, int, float]]:
    """The (scheme, seed, sweep value) runs of ``spec`` not in ``done`` (the runs a
    resumed directory recorded; None: a fresh one).  :func:`run_experiment` runs these and
    :func:`runs_left` counts them: one set, so the estimate and the run cannot disagree."""
    return {(s.name, seed, float(value)) for s in spec.schemes for seed in spec.seeds
            for value in spec.loads} - (done or set())


def estimate_seconds(specs: list[ExperimentSpec], runs: list[int]) -> tuple[float, float]:
    """(low, high) seconds for ``runs[i]`` runs of ``specs[i]``: each run takes its arrival
    window plus the settle pause, and at most ``drain`` more for the last flows; each
    network about NETWORK_SETUP_S to start and stop."""
    low = high = 0.0
    for spec, n in zip(specs, runs, strict=True):
        if not n:
            continue
        networks = (n if spec.network == "per_run"
                    else min(n, len(spec.schemes)))
        base = n * (spec.duration + spec.settle) + networks * NETWORK_SETUP_S
        low += base
        high += base + n * spec.drain
    return low, high


def estimate_text(specs: list[ExperimentSpec], runs: list[int]) -> str:
    low, high = estimate_seconds(specs, runs)
    total = sum(runs)
    return (f"dcnlab run: {total} run(s); estimated time {hours(low)} (arrivals, settle "
            f"and network start-ups) to {hours(high)} (every run draining for its full "
            "drain time)")


def hours(seconds: float) -> str:
    """``1 h 05 min``, or ``12 min`` under an hour."""
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def _preflight(specs: list[ExperimentSpec]) -> None:
    """Root, programs and switch kinds: fail before anything is generated or started."""
    from dcnlab.topo.network import NetworkError, preflight
    from dcnlab.topo.switches import SwitchKindError, get_switch_kind

    if any(spec.diagnosis.flow_paths for spec in specs):
        try:
            flowtap.check_available()
        except flowtap.TapError as exc:
            raise ExperimentError(f"diagnosis.flow_paths: {exc}") from None

    kinds = [s.switch or spec.switch for spec in specs for s in spec.schemes]
    for kind_name in dict.fromkeys(kinds):
        try:
            preflight(get_switch_kind(kind_name))
        except (NetworkError, SwitchKindError) as exc:
            raise ExperimentError(f"cannot build networks with switch {kind_name!r}: "
                                  f"{exc}") from None


def _flows(spec: ExperimentSpec, seed: int, value: float) -> list[Flow]:
    flows = generate(spec.workload, spec.topo(), value, seed, spec.duration, spec.base_dir)
    return assign_marks(flows, spec.marking, seed)


def _initial_meta(spec: ExperimentSpec, workloads: dict[tuple[int, float], list[Flow]]
                  ) -> dict[str, Any]:
    return {
        "name": spec.name,
        "scenario": spec.scenario,
        "status": "running",
        "started": time.strftime(META_TIME),
        "spec_file": str(spec.source) if spec.source else None,
        "spec": spec_summary(spec),
        "flow_counts": _flow_counts(spec, workloads),
        "versions": environment.versions(),
        "machine": environment.machine(),
        "runs": [],
        "networks": [],
        "errors": [],
    }


def _flow_counts(spec: ExperimentSpec, workloads: dict[tuple[int, float], list[Flow]]
                 ) -> dict[str, int]:
    return {f"seed{s}_{spec.sweep}{fmt(v)}": len(f) for (s, v), f in workloads.items()}


def spec_summary(spec: ExperimentSpec) -> dict[str, Any]:
    """The parsed spec with every default filled in (meta.json "spec")."""
    return {
        "name": spec.name, "scenario": spec.scenario, "topology": spec.topology,
        "switch": spec.switch,
        "schemes": [dataclasses.asdict(s) for s in spec.schemes], "baseline": spec.baseline,
        "other_baselines": spec.other_baselines,
        "workload_type": spec.workload_type, "workload": dataclasses.asdict(spec.workload),
        "sweep": spec.sweep, "loads": spec.loads, "seeds": spec.seeds,
        "duration": spec.duration, "warmup": spec.warmup, "cooldown": spec.cooldown,
        "drain": spec.drain, "settle": spec.settle, "network": spec.network,
        "classes": dataclasses.asdict(spec.classes),
        "marking": dataclasses.asdict(spec.marking), "congestion": spec.congestion,
        "sysctls": spec.sysctls,
        "agent": dataclasses.asdict(spec.agent),
        "diagnosis": dataclasses.asdict(spec.diagnosis),
        "plots": spec.plots, "tables": spec.tables,
        "slowdown_bins": list(spec.slowdown_bins),
        "events": [dataclasses.asdict(e) for e in spec.events],
    }


def _run_scheme(state: _State, scheme: Scheme,
                workloads: dict[tuple[int, float], list[Flow]]) -> None:
    spec = state.spec
    runs = [(seed, value) for seed in spec.seeds for value in spec.loads
            if (scheme.name, seed, value) not in state.done]
    if not runs:
        return  # resumed: everything of this scheme is recorded already
    if spec.network == "per_scheme":
        with _network(state, scheme, None, list(workloads.values())) as (net, agents):
            for i, (seed, value) in enumerate(runs):
                if i:
                    time.sleep(spec.settle)  # let queues drain and timers settle
                _run_one(state, net, scheme, seed, value, workloads[(seed, value)], agents)
    else:
        for seed, value in runs:
            flows = workloads[(seed, value)]
            with _network(state, scheme, seed, [flows]) as (net, agents):
                _run_one(state, net, scheme, seed, value, flows, agents)


def tcp_senders(host_order: Iterable[str], runs: Iterable[Iterable[Flow]]) -> list[str]:
    """Hosts that send TCP in any run, in topology order: they get the host parts."""
    senders = {f.src for flows in runs for f in flows if f.kind == "tcp"}
    return [h for h in host_order if h in senders]


def switch_options(scheme: Scheme, kind: str, seed: int | None) -> dict[str, Any]:
    """The switch kind's options: the registered scheme's defaults for that kind, then
    the experiment's; per-run networks of ext switches are seeded with the run's seed."""
    known = registry.lookup(scheme.app)
    options = {**(known.options_for(kind) if known else {}), **scheme.switch_options}
    if seed is not None and kind == "ext":
        options.setdefault("seed", seed)  # per-run networks: the switch's randomness too
    return options


def app_environment(env: Mapping[str, str], options: Mapping[str, Any],
                    host_parts: Mapping[str, str]) -> dict[str, str]:
    """The app's environment: the experiment's ``env`` for the scheme and what its host
    parts need.  An app that asks the switches for a load balancer is told the one they
    start with (the switch option ``select_mode``) unless ``env`` names one: else its own
    default would undo the experiment's option at connection time."""
    out = {**env, **host_parts}
    if "select_mode" in options:
        out.setdefault(ENV_SELECT_MODE, str(options["select_mode"]))
    return out


@contextmanager
def _network(state: _State, scheme: Scheme, seed: int | None, runs: list[list[Flow]]
             ) -> Iterator[tuple[Any, HostSession | None]]:
    """A started network for ``scheme`` (and its host parts, if it has them) that will
    carry ``runs``; stopped, with the host parts, when the block ends."""
    from dcnlab.topo.errors import EmulationWarning, NetworkError
    from dcnlab.topo.teardown import deferred_interrupts

    spec = state.spec
    kind = scheme.switch or spec.switch
    options = switch_options(scheme, kind, seed)
    run_dir = state.out / "runs" / scheme.name / (f"network_seed{seed}" if seed is not None
                                                  else "network")
    topology = scheme_topology(spec, scheme)
    state.progress.set_phase(f"{scheme.name}: starting network ({topology}, {kind})")
    session: HostSession | None = None
    if scheme.agents not in (None, NO_AGENTS):
        parts = registry.host_parts(str(scheme.agents))
        session = parts.open(scheme.agents_interval or parts.default_interval)
    congestion = {scheme.congestion, *spec.congestion.values()} - {None}
    provided = ExitStack()
    net = state.place.make(FabricRequest(
        topology, scheme.app, kind, run_dir,
        app_env=app_environment(scheme.env, options, session.app_env() if session else {}),
        app_args=scheme.app_args, switch_options=options or None,
        management=session is not None and session.management))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmulationWarning)  # kept in net.warnings
            net.start()
    except NetworkError as exc:
        if session is not None:
            session.stop(None)
        state.errors.append(f"scheme {scheme.name}: the network did not start: {exc}")
        raise _Stop from None
    started: HostSession | None = None
    try:
        try:  # on the hosts' kernels: this machine's for Mininet, each lab host's own
            provided.enter_context(net.congestion_controls(congestion))
        except (dctcp.DctcpError, NetworkError) as exc:
            state.errors.append(f"scheme {scheme.name}: congestion control: {exc}")
            raise _Stop from None
        _host_settings(state, net, scheme, congestion)
        known = registry.lookup(scheme.app)
        transport = known.transport if known is not None else None
        if transport is not None and transport.prepare is not None:
            for host in net.spec.hosts:
                if len(host.interfaces) > 1:
                    transport.prepare(net, host.name)
        if session is not None:
            hosts = tcp_senders([h.name for h in net.spec.hosts], runs)
            state.progress.set_phase(f"{scheme.name}: starting {len(hosts)} "
                                     f"{scheme.agents} agents")
            try:
                session.start(net, hosts)
            except HostPartsError as exc:
                state.errors.append(f"scheme {scheme.name}: {scheme.agents} agents: {exc}")
                raise _Stop from None
            started = session
        state.meta["networks"].append({
            "scheme": scheme.name, "seed": seed,
            "startup_s": round(net.startup_seconds or 0, 2), "warnings": net.warnings,
            "prefix": net.prefix,
            "agents": scheme.agents if started else None,
            "agent_hosts": started.hosts if started else [], "run_dir": str(run_dir)})
        for message in net.warnings:
            state.progress.message(f"warning: {message}")
        yield net, started
    finally:
        # to the end, whatever stop (Ctrl-C, SIGTERM) lands meanwhile: it is delivered
        # when everything is stopped
        with deferred_interrupts():
            try:
                if session is not None:
                    session.stop(run_dir)
            finally:
                try:
                    net.stop()
                except NetworkError as exc:
                    state.errors.append(f"scheme {scheme.name}: clean-up: {exc}")
                finally:
                    try:
                        provided.close()
                    except dctcp.DctcpError as exc:
                        state.errors.append(f"scheme {scheme.name}: clean-up: {exc}")


def _host_settings(state: _State, net: Any, scheme: Scheme, congestion: set[str]) -> None:
    """ECN on in every host when a congestion control needs it (dctcp), the experiment's
    RTO floor on every host route, and its TCP sysctls in every host's namespace."""
    ecn = dctcp.NAME in congestion
    commands = []
    if ecn or state.spec.rto_min is not None:
        commands.append(dctcp.host_commands(ecn=ecn, rto_min=state.spec.rto_min))
    commands += [f"sysctl -qw {shlex.quote(f'{k}={v}')}" for k, v in state.spec.sysctls.items()]
    if not commands:
        return
    command = " && ".join(commands)
    for h in net.spec.hosts:
        proc = net.host(h.name).popen(["sh", "-c", command])
        if proc.wait() != 0:
            state.errors.append(f"scheme {scheme.name}: host settings in {h.name} failed "
                                f"({command})")
            raise _Stop


def _run_one(state: _State, net: Any, scheme: Scheme, seed: int, value: float,
             flows: list[Flow], agents: HostSession | None = None) -> None:
    spec = state.spec
    label = f"seed{seed}_{spec.sweep}{fmt(value)}"
    run_dir = state.out / "runs" / scheme.name / label
    state.progress.set_phase(f"{scheme.name} seed {seed} {spec.sweep} {fmt(value)}")
    endpoints = {h.name: Endpoint(h.name, h.ip, net.host(h.name).popen, spec.agent.port,
                                  net.congestion_name(h.name, scheme.congestion
                                                      or spec.congestion_for(h.name)),
                                  agents.cgroup_procs(h.name) if agents else None,
                                  tuple(i.ip for i in h.interfaces), net.host_files(h.name))
                 for h in net.spec.hosts}
    known = registry.lookup(scheme.app)
    transport = known.transport if known is not None else None
    marking = spec.marking
    ranges = {True: tuple(marking.elephant_ports) if marking.ports
              else tuple(marking.other_ports), False: tuple(marking.other_ports)}
    horizon = max([spec.duration] + [max(f.start, f.stop or 0.0) for f in flows])
    base = state.progress.done
    drops_before = _drops(net)
    lines_before = _quietly(lambda: netstats.switch_lines(net), {})
    ports_before = netstats.ports(lines_before)
    rtos_before = _quietly(lambda: netstats.host_timeouts(net), None)
    paths_before = _paths_before(net)
    app_before = controller_stats.snapshot(net)
    leaves = _leaf_switches(net)
    # the leaves' received bytes: the denominator of a scheme's exploration overhead
    explores = bool(known is not None and known.controller.copies_section)
    leaf_rx_before = _quietly(lambda: _rx_bytes(net, leaves), None) if explores else None
    hosts_before = agents.counters(net) if agents else None
    tap = _start_tap(state, net, run_dir, label, scheme.name)
    fabric_events = (events.Scheduler(events.timeline(spec.events),
                                      lambda link, up: net.set_link(*link.split("-", 1), up))
                     if spec.events else None)
    taps: tuple[dict[str, Any], dict[str, Any]] | None = None
    began = time.monotonic()
    wall_began = time.time()
    try:
        result = replay(flows, endpoints, run_dir, drain=spec.drain, horizon=horizon,
                        sample_interval=spec.agent.sample_interval, port_ranges=ranges,
                        elephant=marking.is_elephant,
                        on_done=lambda _fid, _status: state.progress.advance(),
                        rx_interval=spec.agent.rx_interval or 0.0,
                        transport=transport, transport_options=scheme.transport_options,
                        on_start=fabric_events.start if fabric_events is not None else None)
        if tap is not None:
            try:
                taps = tap[0].stop()
            except flowtap.TapError as exc:
                state.progress.message(f"warning: {scheme.name} {label}: {exc}")
    except ReplayError as exc:
        state.errors.append(f"run {scheme.name} {label}: {exc}")
        raise _Stop from None
    finally:
        if fabric_events is not None:
            fabric_events.stop()  # every link back up before the counters are read
        if tap is not None:
            tap[0].kill()
    elapsed = time.monotonic() - began
    wall_ended = time.time()
    drops_after = _drops(net)
    lines_after = _quietly(lambda: netstats.switch_lines(net, after=wall_ended), {})
    ports_after = netstats.ports(lines_after)
    rtos_after = _quietly(lambda: netstats.host_timeouts(net), None)
    # every switch's stats lines of the run, read once: paths.csv and queue_series.csv
    stats_lines = _quietly(lambda: pathdiag.stats_lines(net, paths_before[0]), {})
    if state.paths_csv is not None:
        state.paths_csv.write([_paths_row(net, scheme.name, value, seed, stats_lines,
                                          paths_before[1])])
    leaf_rx_after = _quietly(lambda: _rx_bytes(net, leaves), None) if explores else None
    app = controller_stats.run_stats(
        app_before, controller_stats.snapshot(net), wall_began, wall_ended, scheme.app,
        {str(net.spec.switch(name).dpid) for name in leaves},
        None if leaf_rx_before is None or leaf_rx_after is None
        else leaf_rx_after - leaf_rx_before)
    state.controller_csv.write([{"scheme": scheme.name, "load": value, "seed": seed, **app}])
    hosts_run = (_counter_delta(hosts_before, agents.counters(net))
                 if agents and hosts_before is not None else {})
    fair = _fairness(state, scheme, seed, value, flows, run_dir, hosts_run)
    rows = flow_rows(spec, scheme.name, seed, value, flows, result, transport)
    if state.network_csv is not None:
        dropped = _delta(drops_before, drops_after) or {}
        edges = dict.fromkeys(leaves)
        net_row = netstats.run_row(
            scheme.name, value, seed, netstats.hists(ports_before),
            netstats.hists(ports_after), dropped.get("drops", dropped.get("tx_dropped")),
            None if rtos_before is None or rtos_after is None else rtos_after - rtos_before,
            rows, netstats.edge_drops(ports_before, ports_after, edges))
        state.network_csv.write([net_row])
        if state.queue_csv is not None:
            state.queue_csv.write(queueseries.run_rows(
                scheme.name, value, seed, stats_lines, net_row.get("bottleneck"),
                result.wall_start))
    switch_row = _quietly(lambda: switch_stats.run_row(
        switch_stats.units(lines_before), switch_stats.units(lines_after)), {})
    if state.switch_csv is not None:
        state.switch_csv.write([{"scheme": scheme.name, "load": value, "seed": seed,
                                 **switch_row}])
    if tap is not None and taps is not None:
        try:
            _flowdiag_rows(state, net, scheme.name, value, seed, rows, tap[1], taps,
                           result.wall_start)
        except Exception as exc:  # noqa: BLE001 - a diagnosis is informative, never fatal
            state.progress.message(f"warning: {scheme.name} {label}: flow paths: {exc!r}")
    _section_rows(state, sections.RunContext(
        scheme.name, value, seed, net.spec, result.wall_start, rows, stats_lines,
        fabric_events.rows(scheme.name, value, seed) if fabric_events is not None else ()))
    state.rows += state.flows_csv.write(rows)
    state.done.add((scheme.name, seed, value))
    not_ok = sum(1 for r in rows if r["status"] != "ok")
    state.not_ok += not_ok
    if state.samples_csv is not None:
        state.samples_csv.write(_samples(run_dir, scheme.name, seed, value))
    state.runs += 1
    state.progress.done = base  # flows that never reported still count as handled
    state.progress.advance(len(flows))
    state.progress.run_done()
    state.meta["runs"].append({
        "scheme": scheme.name, "seed": seed, "load": value, "flows": len(flows),
        "not_ok": not_ok, "elapsed_s": round(elapsed, 2),
        "replay_s": round(result.elapsed, 2), "agents": result.agents,
        "switch_drops": _delta(drops_before, drops_after), "controller": app,
        "switch": switch_row or None,
        "host_parts": hosts_run or None, "fairness": fair, "errors": result.errors,
        "run_dir": str(run_dir)})
    write_json(state.out / META_JSON, state.meta)
    state.progress.message(f"{scheme.name} seed {seed} {spec.sweep} {fmt(value)}: "
                           f"{len(flows)} flows, {not_ok} not ok, {elapsed:.1f} s")
    dead = agents.dead() if agents else []
    if result.errors or dead:
        state.errors += [f"run {scheme.name} {label}: {e}" for e in result.errors + dead]
        raise _Stop


def _section_rows(state: _State, ctx: sections.RunContext) -> None:
    """Every recording section's rows of the run into its CSV. A section's failure is
    reported and costs its rows only: the run's flows are recorded all the same."""
    for section in sections.registered():
        appender = state.section_csvs.get(section.name)
        if appender is None:
            continue
        try:
            appender.write(section.run_rows(ctx))
        except Exception as exc:  # noqa: BLE001 - one family's bug must not lose the run
            state.progress.message(f"warning: {ctx.scheme} seed {ctx.seed}: result section "
                                   f"{section.name}: {exc!r}")


def _not_run_rows(state: _State, workloads: dict[tuple[int, float], list[Flow]],
                  reason: str) -> list[dict[str, Any]]:
    """A ``not_run`` row for every flow of every run not recorded, with the reason."""
    rows = not_run_rows(state.spec, workloads, state.done, reason)
    state.not_ok += len(rows)
    return rows


def not_run_rows(spec: ExperimentSpec, workloads: dict[tuple[int, float], list[Flow]],
                 done: set[tuple[str, int, float]], reason: str) -> list[dict[str, Any]]:
    """A ``not_run`` row, with the reason, for every flow of every (scheme, seed, value)
    run of ``workloads`` that is not in ``done``."""
    low, high = spec.measure_window()
    rows = []
    for scheme in spec.schemes:
        for (seed, value), flows in workloads.items():
            if (scheme.name, seed, value) in done:
                continue
            rows += [{"scheme": scheme.name, "load": value, "seed": seed, "flow_id": f.id,
                      "src": f.src, "dst": f.dst, "size": f.size,
                      "class": size_class(f.size, f.kind, spec.classes.mouse_max,
                                          spec.classes.elephant_min),
                      "kind": f.kind, "tag": f.tag, "sport": f.sport, "dscp": f.dscp,
                      "sched": f.start, "status": NOT_RUN,
                      "measured": is_measured(f, low, high), "error": reason or NOT_RUN}
                     for f in flows]
    return rows


def _record_skipped(spec: ExperimentSpec, out: Path,
                    workloads: dict[tuple[int, float], list[Flow]], reason: str) -> None:
    """A scenario that never started: its directory holds its workload, a meta.json that
    says why, and a ``not_run`` row per flow."""
    out.mkdir(parents=True, exist_ok=True)
    if spec.source is not None:
        shutil.copyfile(spec.source, out / SPEC_COPY)
    write_csv(out / "workload.csv", WORKLOAD_COLUMNS, (
        {"seed": seed, "load": value, "flow_id": f.id, **f.to_dict()}
        for (seed, value), flows in workloads.items() for f in flows))
    meta = {**_initial_meta(spec, workloads), "status": NOT_RUN, "errors": [reason]}
    write_json(out / META_JSON, meta)
    appender = CsvAppender(out / FLOWS_CSV, flow_columns(spec))
    state = _State(spec, out, appender, None, Progress(0, enabled=False), meta, appender)
    try:
        appender.write(_not_run_rows(state, workloads, reason))
    finally:
        appender.close()


def resume_source(out: str | os.PathLike[str]) -> Path:
    """The experiment file to resume ``out`` with: the original (for its relative paths,
    such as CDF files) when it still exists unchanged, else the copy kept in ``out``."""
    base = Path(out)
    copies = [base / SPEC_COPY] + sorted(base.glob(f"*/{SPEC_COPY}"))
    copy = next((c for c in copies if c.is_file()), None)
    if copy is None:
        raise ExperimentError(f"cannot resume {base}: no {SPEC_COPY} there (is it the output "
                              "directory of a dcnlab run?)")
    try:
        meta = json.loads((copy.parent / META_JSON).read_text())
        original = Path(meta.get("spec_file") or "")
        if original.is_file() and original.read_bytes() == copy.read_bytes():
            return original
    except (OSError, ValueError):
        pass
    return copy


def resume_target(out: str | os.PathLike[str]) -> tuple[Path, str | None]:
    """Where ``--resume out`` continues: ``out`` itself, or, when ``out`` is one
    scenario's directory (its meta.json names that scenario, and so does the directory),
    the experiment's directory above it and that scenario alone."""
    base = Path(out)
    try:
        scenario = json.loads((base / META_JSON).read_text()).get("scenario")
    except (OSError, ValueError, AttributeError):
        return base, None
    if scenario and base.name == scenario:
        return base.parent, str(scenario)
    return base, None


def _done_runs(out: Path, spec: ExperimentSpec) -> set[tuple[str, int, float]]:
    """The runs an earlier (interrupted) experiment recorded in ``out``."""
    try:
        meta = json.loads((out / META_JSON).read_text())
    except (OSError, ValueError):
        if (out / FLOWS_CSV).exists():
            raise ExperimentError(f"cannot resume {out}: {META_JSON} is missing or "
                                  "unreadable") from None
        return set()  # a scenario that never started: everything runs
    if meta.get("name") != spec.name or meta.get("scenario") != spec.scenario:
        raise ExperimentError(f"cannot resume {out}: it holds experiment "
                              f"{meta.get('name')!r}, not {spec.name!r}")
    return {(str(r["scheme"]), int(r["seed"]), float(r["load"])) for r in meta.get("runs", [])}


def with_seeds(spec: ExperimentSpec, resumed: Path | None, seeds: list[int] | None
               ) -> ExperimentSpec:
    """``spec`` with the seeds to run: ``seeds`` when given, else, resuming, the ones the
    directory ``resumed`` recorded (an experiment that had seeds added keeps them), else the
    file's.  Resuming may add seeds, never drop one: the runs of a dropped seed would stay
    in flows.csv with no seed of the experiment naming them."""
    recorded: list[int] | None = None
    if resumed is not None:
        try:
            recorded = json.loads((resumed / META_JSON).read_text())["spec"]["seeds"]
        except (OSError, ValueError, KeyError, TypeError):
            recorded = None
    if seeds is not None:
        if not seeds or len(set(seeds)) != len(seeds):
            raise ExperimentError(f"seeds {seeds}: give at least one seed, each once")
        if recorded is not None and not set(recorded) <= set(seeds):
            dropped = ", ".join(str(x) for x in recorded if x not in seeds)
            raise ExperimentError(
                f"cannot resume {resumed} with seeds {_seed_text(seeds)}: it recorded seed(s) "
                f"{dropped} too; seeds can be added to an experiment, not removed")
        wanted = list(seeds)
    else:
        wanted = list(recorded) if recorded is not None else spec.seeds
    return dataclasses.replace(spec, seeds=wanted)


def _seed_text(seeds: list[int]) -> str:
    return ",".join(str(s) for s in seeds)


def _extend_workload(out: Path, workloads: dict[tuple[int, float], list[Flow]]) -> None:
    """Resuming: the regenerated flow lists of the (seed, sweep value) pairs the directory
    recorded must be the ones in its workload.csv; those of seeds added since are appended
    to it (every flow run has its row there)."""
    path = out / "workload.csv"
    if not path.exists():
        return
    import csv

    with open(path, newline="") as fh:
        saved = {(int(r["seed"]), float(r["load"]), int(r["flow_id"])): (r["src"], r["dst"],
                                                                         int(r["size"]))
                 for r in csv.DictReader(fh)}
    recorded = {(seed, value) for seed, value, _ in saved}
    now = {(seed, value, f.id): (f.src, f.dst, f.size)
           for (seed, value), flows in workloads.items() if (seed, value) in recorded
           for f in flows}
    if saved != now:
        raise ExperimentError(f"cannot resume {out}: the experiment now generates other flows "
                              "than the ones recorded in workload.csv (was the spec file or "
                              "dcnlab changed?)")
    added = {k: flows for k, flows in workloads.items() if k not in recorded}
    if added:
        appender = CsvAppender(path, WORKLOAD_COLUMNS)
        try:
            appender.write({"seed": seed, "load": value, "flow_id": f.id, **f.to_dict()}
                           for (seed, value), flows in added.items() for f in flows)
        finally:
            appender.close()


def _drop_not_run_rows(path: Path, done: set[tuple[str, int, float]]) -> None:
    """Keep the rows of the runs that are done; the others run again."""
    import csv

    if not path.exists():
        return
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        rows = [r for r in reader
                if (r["scheme"], int(r["seed"]), float(r["load"])) in done
                and r["status"] != NOT_RUN]
        columns = list(reader.fieldnames or FLOW_COLUMNS)
    write_csv(path, columns, rows)


def _counter_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """A run's share of cumulative counters."""
    return {k: after[k] - before.get(k, 0) for k in after}


def _fairness(state: _State, scheme: Scheme, seed: int, value: float, flows: list[Flow],
              run_dir: Path, host_counters: dict[str, int]) -> dict[str, Any] | None:
    """Jain's index and throughput per period from the receivers' counts (fairness.py):
    the run's row and series go to their CSVs; the row is returned for meta.json."""
    if state.fairness_csv is None or state.series_csv is None:
        return None
    spec = state.spec
    key = {"scheme": scheme.name, "load": value, "seed": seed}
    row, series = fairness.analyze_run(run_dir, flows, spec.agent.rx_interval or 0.0,
                                       spec.measure_window())
    state.series_csv.write({**key, **r} for r in series)
    row = {**key, **row, **host_counters}
    state.fairness_csv.write([row])
    return {k: v for k, v in row.items() if k not in key}


def is_measured(flow: Flow, low: float, high: float) -> bool:
    """A flow of a size is measured when it starts inside the window [low, high); one
    that sends until a stop time (long-lived TCP, UDP) when it sends inside it -- such
    flows start at 0 and span the run, so their start alone would leave them out."""
    if flow.stop is not None and flow.size == 0:
        return flow.start < high and flow.stop > low
    return low <= flow.start < high


def flow_columns(spec: ExperimentSpec) -> list[str]:
    """flows.csv's columns: FLOW_COLUMNS, then those of the schemes' transports."""
    extra: list[str] = []
    for scheme in spec.schemes:
        known = registry.lookup(scheme.app)
        if known is not None and known.transport is not None:
            extra += [c for c in known.transport.columns
                      if c not in extra and c not in FLOW_COLUMNS]
    return FLOW_COLUMNS + extra


def flow_rows(spec: ExperimentSpec, scheme: str, seed: int, value: float,
              flows: list[Flow], result: ReplayResult,
              transport: Transport | None = None) -> list[dict[str, Any]]:
    """flows.csv rows of one run: one per flow, whatever became of it (with a scheme
    transport, its own columns from each flow's result)."""
    low, high = spec.measure_window()
    rows = []
    for f in flows:
        rec = result.records[f.id]
        own: Mapping[str, Any] = {}
        if transport is not None and transport.row is not None and rec.get("result"):
            own = {k: v for k, v in transport.row(rec["result"]).items()
                   if k in transport.columns}
        rows.append({
            "scheme": scheme, "load": value, "seed": seed, "flow_id": f.id,
            "src": f.src, "dst": f.dst, "size": f.size,
            "class": size_class(f.size, f.kind, spec.classes.mouse_max,
                                spec.classes.elephant_min),
            "kind": f.kind, "tag": f.tag, "sport": rec.get("sport"), "dscp": f.dscp,
            "sched": f.start, "start": rec.get("start"), "end": rec.get("end"),
            "fct": rec.get("fct"), "bytes": rec.get("bytes"),
            "retransmits": rec.get("retrans"), "ooo": rec.get("ooo"),
            "segs_in": rec.get("segs_in"), "reord_seen": rec.get("reord_seen"),
            "dsack_dups": rec.get("dsack_dups"), "reordering": rec.get("reordering"),
            "status": rec.get("status"),
            "measured": is_measured(f, low, high), "late": rec.get("late"),
            "error": rec.get("error", ""), **own,
        })
    return rows


def _samples(run_dir: Path, scheme: str, seed: int, value: float) -> Iterator[dict[str, Any]]:
    for path in sorted(run_dir.glob("samples_*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                sample = json.loads(line)
            except ValueError:
                continue
            yield {"scheme": scheme, "load": value, "seed": seed,
                   "flow_id": sample.get("id"), **sample}


def _paths_before(net: Any) -> tuple[dict[str, int], dict[str, int] | None]:
    """Where the switches' stats files end and the hosts' TCP counters, before a run."""
    return (_quietly(lambda: pathdiag.stats_offsets(net), {}),
            _quietly(lambda: pathdiag.host_counters(net), None))


def _paths_row(net: Any, scheme: str, value: float, seed: int,
               lines: Mapping[str, list[dict[str, Any]]],
               counters: dict[str, int] | None) -> dict[str, Any]:
    """paths.csv's row of a run (pathdiag.py) from the run's stats ``lines`` and the
    hosts' TCP ``counters`` before it; informative, never fatal."""
    figures = _quietly(lambda: pathdiag.path_figures(pathdiag.topology_ups(net), lines), {})
    return pathdiag.run_row(scheme, value, seed, figures, counters,
                            _quietly(lambda: pathdiag.host_counters(net), None))


def _start_tap(state: _State, net: Any, run_dir: Path, label: str, scheme: str
               ) -> tuple[flowtap.TapSession, dict[str, flowdiag.Link]] | None:
    """The run's flow tap, attached (``diagnosis.flow_paths``), with the directed link
    behind each tapped interface; None when off.  Failing to attach ends the experiment:
    the file asked for the diagnosis."""
    if not state.spec.diagnosis.flow_paths:
        return None
    spec = net.spec
    ifaces = flowtap.fabric_ifaces(net.prefix, [(lk.a, lk.a_port, lk.b, lk.b_port)
                                                for lk in spec.links],
                                   [s.name for s in spec.switches])
    links = {name: flowdiag.Link(*ends) for name, ends in ifaces.items()}
    session = flowtap.TapSession(net.netns_pid, list(ifaces), run_dir / "flowtap",
                                 state.spec.diagnosis.interval)
    try:
        session.start()
    except flowtap.TapError as exc:
        state.errors.append(f"run {scheme} {label}: diagnosis.flow_paths: {exc}")
        raise _Stop from None
    return session, links


def _flowdiag_rows(state: _State, net: Any, scheme: str, value: float, seed: int,
                   rows: list[dict[str, Any]], links: Mapping[str, flowdiag.Link],
                   taps: tuple[dict[str, Any], dict[str, Any]], wall_start: float) -> None:
    """flowdiag.csv's row and flowpaths.csv's rows of a run (flowdiag.py); times as in
    flows.csv, seconds since the replay's T0 (``wall_start``)."""
    tapped, timeline = taps
    spec = net.spec
    ips = {h.name: h.ip for h in spec.hosts}
    paths = flowdiag.flow_paths(tapped.get("entries", []), links)
    # every tapped interface is also a switch port: its tx bytes are that port's load
    tx_ports = {name: (link.dst, link.dst_port) for name, link in links.items()}
    line = flowdiag.Timeline.from_samples(timeline.get("samples", []), tx_ports)
    figures, path_rows = flowdiag.analyze(
        rows, flowdiag.flow_keys(rows, ips, state.spec.agent.port), paths,
        pathdiag.topology_ups(net), line,
        int(tapped.get("wall_minus_mono_ns", 0)) - round(wall_start * 1e9),
        int((tapped.get("stats") or {}).get("lost", 0)), list(links.values()))
    key = {"scheme": scheme, "load": value, "seed": seed}
    if state.flowdiag_csv is not None:
        state.flowdiag_csv.write([{**key, **figures}])
    if state.flowpaths_csv is not None:
        state.flowpaths_csv.write([{**key, **r} for r in path_rows])


def _drops(net: Any) -> dict[str, int] | None:
    """Sum of every drop counter over every switch port (best effort; None if unknown)."""
    totals: dict[str, int] = {}
    try:
        for sw in net.spec.switches:
            for counters in net.port_stats(sw.name).values():
                for key, value in counters.items():
                    if "drop" in key and isinstance(value, int):
                        totals[key] = totals.get(key, 0) + value
    except Exception:  # noqa: BLE001 - counters are informative, never fatal
        return None
    return totals


def _leaf_switches(net: Any) -> list[str]:
    """The switches hosts attach to (leaves, ToRs, edges)."""
    return list(dict.fromkeys(i.switch for h in net.spec.hosts for i in h.interfaces))


def _rx_bytes(net: Any, switches: list[str]) -> int | None:
    """Bytes received on every port of ``switches`` so far (None if a counter is unknown)."""
    total = 0
    for sw in switches:
        for name, counters in net.port_stats(sw).items():
            if name == "LOCAL":
                continue
            value = counters.get("rx_bytes")
            if value is None:
                return None
            total += value
    return total


def _quietly(fn: Any, default: Any) -> Any:
    """Informative network figures are never fatal to a run."""
    try:
        return fn()
    except Exception:  # noqa: BLE001
        return default


def _delta(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int] | None:
    if before is None or after is None:
        return None
    return {k: after[k] - before.get(k, 0) for k in after}
