"""From a reproduction's results (one directory per experiment and scenario, as ``dcnlab
run`` writes them) to its summary, ``reproduction.json``: exactly the numbers the paper's
claims need, and the run's provenance.

The summary is what docs/reproductions/ commits: small (per-seed aggregates, never raw
flows) and enough to regenerate the document byte for byte with the paper file.  Layout::

    {"format": 1, "paper": "p002",
     "run": {"commits": [...], "dirty": false, "date": "2026-11-28",
             "machines": [{"os": ..., "cpus": 2, "kernel": ..., "cpu_model": ...}],
             "duration_s": 3120, "dcnlab": ["0.1.0"],
             "experiments": [{"file": "seed002.yaml", "scenario": null,
                              "status": "complete", "seeds": [1, 2],
                              "started": ..., "finished": ...}]},
     "series": [{"experiment": "seed002.yaml", "scenario": null, "table": "network",
                 "metric": "qout_mean", "class": "all", "scheme": "abq_ece",
                 "load": 10.0, "seeds": {"1": 30.2, "2": 31.0}}, ...],
     "paired": [{"experiment": ..., "scenario": ..., "metric": "fct", "class": "all",
                 "scheme": ..., "baseline": ..., "load": ..., "pairs": 30,
                 "ratio": 0.91, "low": 0.85, "high": 0.97}, ...]}

``series``: per (experiment, scenario, table, metric, class, scheme, sweep value) the
value of every seed (null where a run has none), for the claim's scheme and its
baseline; ``paired``: per-flow claims' paired aggregate.  Numbers carry 10 significant
digits, so the file is stable across machines that parse the CSVs alike.  Each entry of
``run.experiments`` also keeps ``active_s``, the seconds that experiment ran, and the
``commits``, ``dirty`` and ``machines`` of the sessions that ran it (an update drops those
of the experiments it replaces).

An *update* (``extract(..., previous=SUMMARY)``) reads the results that ``out`` holds
and takes everything else from an earlier summary: a paper that gained an experiment,
or a scenario run again, needs only that experiment's runs, not the raw results of all
the others (which a summary never keeps).  An experiment and scenario that ``out``
holds is read from ``out`` whole (its values replace the earlier ones); one it does
not hold keeps the earlier summary's values, and a claim whose values are in neither
names what is missing.  The provenance is merged: every commit and machine of both,
the earlier time less that of the experiments ``out`` replaces, plus ``out``'s.  A claim
never compares values of two runs: when its sides come from two scenarios
(``baseline_scenario``), ``out`` holds both or neither (the same flow lists measured on
two days can differ by more than their intervals: docs/diagnoses/p000.md).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..results import META_JSON, ResultsError, meta_time, read_json, span_seconds
from . import tables
from .errors import MissingResultsError
from .papers import PER_FLOW, Claim, Paper

FORMAT = 1
SUMMARY_JSON = "reproduction.json"


def experiment_dir(out: Path, file: str, scenario: str | None) -> Path:
    """Where ``dcnlab reproduce`` puts an experiment's results: OUT/<file's stem>, and a
    scenario's OUT/<stem>/<scenario> (as ``dcnlab run --out OUT/<stem>`` does)."""
    base = out / Path(file).stem
    return base / scenario if scenario else base


def number(value: Any) -> float | None:
    """A value as the summary stores it: 10 significant digits, None if not finite."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return float(f"{x:.10g}") if math.isfinite(x) else None


def series_key(experiment: str, scenario: str | None, table: str, metric: str, cls: str,
               scheme: str, load: float) -> tuple[Any, ...]:
    return (experiment, scenario, table, metric, cls, scheme, tables.value_key(load))


def paired_key(experiment: str, scenario: str | None, metric: str, cls: str, scheme: str,
               baseline: str, load: float) -> tuple[Any, ...]:
    return (experiment, scenario, metric, cls, scheme, baseline, tables.value_key(load))


def _where(claim: Claim) -> str:
    return claim.experiment + (f" scenario {claim.scenario}" if claim.scenario else "")


class _Earlier:
    """An earlier summary's values, by key: what an update keeps of it."""

    def __init__(self, summary: dict[str, Any]) -> None:
        self.series = {series_key(e["experiment"], e["scenario"], e["table"], e["metric"],
                                  e["class"], e["scheme"], e["load"]): e
                       for e in summary.get("series") or []}
        self.paired = {paired_key(e["experiment"], e["scenario"], e["metric"], e["class"],
                                  e["scheme"], e["baseline"], e["load"]): e
                       for e in summary.get("paired") or []}


def extract(paper: Paper, out: Path, previous: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    """The summary of the results under ``out`` for ``paper``'s claims; with
    ``previous`` (an earlier summary of the same paper), an update of it (module doc).
    Raises MissingResultsError naming the claim and the file or column that is
    missing."""
    readers: dict[Path, tables.ResultsDir] = {}
    series: dict[tuple[Any, ...], dict[str, Any]] = {}
    paired: dict[tuple[Any, ...], dict[str, Any]] = {}
    earlier = _Earlier(previous) if previous is not None else None

    def reader(scenario: str | None, claim: Claim, whose: str) -> tables.ResultsDir | None:
        """The results directory of the claim's experiment and ``scenario``; None when
        ``out`` lacks it and an earlier summary is to give its values."""
        where = experiment_dir(out, claim.experiment, scenario)
        if (where / META_JSON).is_file():
            return readers.setdefault(where, tables.ResultsDir(where))
        if earlier is not None:
            return None
        what = (_where(claim) if whose == "scheme" else
                f"{claim.experiment} scenario {scenario} (the baseline's)")
        raise MissingResultsError(f"no results of {what}: {where / META_JSON} does not "
                                  "exist (has it run?)")

    for claim in paper.claims:
        try:
            if claim.per == PER_FLOW:
                results = reader(claim.scenario, claim, "scheme")
                if results is None:
                    _carry_paired(claim, earlier, paired)
                else:
                    _paired(claim, results, paired)
            else:
                sides = [(claim.scheme, claim.scenario, reader(claim.scenario, claim, "scheme")),
                         (claim.baseline or "", claim.baseline_where,
                          reader(claim.baseline_where, claim, "baseline"))]
                if (sides[0][2] is None) != (sides[1][2] is None):
                    # one side new, one from the earlier summary: two runs, perhaps at
                    # other commits or on other machines, would be compared as one
                    fresh = sides[0][1] if sides[0][2] is not None else sides[1][1]
                    stale = sides[1][1] if sides[0][2] is not None else sides[0][1]
                    raise MissingResultsError(
                        f"the results given hold {claim.experiment} scenario {fresh} but "
                        f"not scenario {stale}, the other side of the comparison: its two "
                        "sides must come from one run (run both scenarios into the results "
                        "directory)")
                _series(claim, sides, series, earlier)
        except MissingResultsError as exc:
            raise MissingResultsError(f"claim {claim.id} ({claim.table} {claim.metric}, "
                                      f"class {claim.cls}): {exc}") from None
    run = run_info(paper, out)
    if previous is not None:
        run = merge_runs(previous.get("run") or {}, run)
    return {"format": FORMAT, "paper": paper.paper, "run": run,
            "series": list(series.values()), "paired": list(paired.values())}


def _series(claim: Claim, sides: list[tuple[str, str | None, tables.ResultsDir | None]],
            into: dict[tuple[Any, ...], dict[str, Any]], earlier: _Earlier | None) -> None:
    """The per-seed values of both sides of the claim's comparison (scheme, the
    scenario and the results directory its values come from, None: the earlier
    summary's) at its sweep values."""
    for value in claim.values:
        for scheme, scenario, reader in sides:
            if reader is None:
                _carry_side(claim, scheme, scenario, value, earlier, into)
            else:
                _side(claim, scheme, scenario, reader, value, into)


def _carry_side(claim: Claim, scheme: str, scenario: str | None, value: float,
                earlier: _Earlier | None, into: dict[tuple[Any, ...], dict[str, Any]]
                ) -> None:
    """One side's per-seed values at one sweep value, as the earlier summary has them."""
    key = series_key(claim.experiment, scenario, claim.table, claim.metric, claim.cls,
                     scheme, value)
    if key in into:
        return
    entry = earlier.series.get(key) if earlier is not None else None
    if entry is None:
        where = claim.experiment + (f" scenario {scenario}" if scenario else "")
        raise MissingResultsError(
            f"the results given do not hold {where}, and the earlier summary has no "
            f"values of {scheme} at {claim.sweep} = {tables.value_text(value)} (run "
            f"{where} into the results directory)")
    into[key] = entry


def _carry_paired(claim: Claim, earlier: _Earlier | None,
                  into: dict[tuple[Any, ...], dict[str, Any]]) -> None:
    baseline = claim.baseline or ""
    for value in claim.values:
        key = paired_key(claim.experiment, claim.scenario, claim.metric, claim.cls,
                         claim.scheme, baseline, value)
        entry = earlier.paired.get(key) if earlier is not None else None
        if entry is None:
            raise MissingResultsError(
                f"the results given do not hold {_where(claim)}, and the earlier summary "
                f"has no paired flows of {claim.scheme} and {baseline} at {claim.sweep} = "
                f"{tables.value_text(value)} (run {_where(claim)} into the results "
                "directory)")
        into[key] = entry


def _side(claim: Claim, scheme: str, scenario: str | None, reader: tables.ResultsDir,
          value: float, into: dict[tuple[Any, ...], dict[str, Any]]) -> None:
    """One side's per-seed values at one sweep value (once per key)."""
    key = series_key(claim.experiment, scenario, claim.table, claim.metric, claim.cls,
                     scheme, value)
    if key in into:
        return
    runs = reader.run_values(claim.table, claim.metric, claim.cls)
    path = reader.path / tables.TABLES[claim.table].file
    seeds = {seed: v for (s, load, seed), v in runs.items()
             if s == scheme and load == tables.value_key(value)}
    at = f"{claim.sweep} = {tables.value_text(value)}"
    if not seeds:
        raise MissingResultsError(f"{path}: no run of {scheme} at {at}")
    if not any(math.isfinite(v) for v in seeds.values()):
        raise MissingResultsError(f"{path}: {claim.metric} has no value for "
                                  f"{scheme} at {at} (seeds {sorted(seeds)})")
    into[key] = {"experiment": claim.experiment, "scenario": scenario,
                 "table": claim.table, "metric": claim.metric, "class": claim.cls,
                 "scheme": scheme, "load": number(value),
                 "seeds": {str(s): number(seeds[s]) for s in sorted(seeds)}}


def _paired(claim: Claim, reader: tables.ResultsDir,
            into: dict[tuple[Any, ...], dict[str, Any]]) -> None:
    baseline = claim.baseline or ""
    rows = reader.paired_rows(claim.metric, claim.cls, baseline)
    for value in claim.values:
        key = paired_key(claim.experiment, claim.scenario, claim.metric, claim.cls,
                         claim.scheme, baseline, value)
        row = rows.get((claim.scheme, tables.value_key(value)))
        if row is None:
            raise MissingResultsError(
                f"{reader.path / tables.TABLES[tables.PAIRED].file}: no flow of class "
                f"{claim.cls} measured and completed under both {claim.scheme} and "
                f"{baseline} at {claim.sweep} = {tables.value_text(value)}")
        into[key] = {"experiment": claim.experiment, "scenario": claim.scenario,
                     "metric": claim.metric, "class": claim.cls, "scheme": claim.scheme,
                     "baseline": baseline, "load": number(value), "pairs": row.pairs,
                     "ratio": number(row.ratio), "low": number(row.low),
                     "high": number(row.high)}


def run_info(paper: Paper, out: Path) -> dict[str, Any]:
    """Provenance from the experiments' meta.json: commit(s), date, machine(s), time
    spent running (summed over experiments and resumed sessions) and dcnlab version."""
    experiments, metas = [], []
    for ref in paper.experiments:
        for scenario in paper.scenarios(ref.file):
            path = experiment_dir(out, ref.file, scenario) / META_JSON
            try:
                meta = read_json(path)
            except ResultsError:
                meta = {}
            if meta:
                metas.append(meta)
            spec = meta.get("spec") or {}
            entry = {"file": ref.file, "scenario": scenario,
                     "status": meta.get("status", "missing"), "seeds": spec.get("seeds"),
                     "started": meta.get("started"), "finished": meta.get("finished")}
            if meta:
                entry["active_s"] = round(_active_s(meta))
                # its own, so that an update which replaces it drops them (merge_runs)
                entry.update({k: v for k, v in _sessions_info([meta]).items()
                              if k in ("commits", "dirty", "machines")})
            experiments.append(entry)
    starts = [t for t in (meta_time(m.get("started")) for m in metas) if t is not None]
    # time spent running: active_s sums a resumed experiment's sessions; older results
    # have only their first start and last finish
    spans = [_active_s(m) for m in metas]
    sessions = _sessions_info(metas)
    return {
        "commits": sessions["commits"],
        "dirty": sessions["dirty"],
        "date": min(starts).strftime("%Y-%m-%d") if starts else None,
        "machines": sessions["machines"],
        "duration_s": round(sum(spans)),
        "dcnlab": sessions["dcnlab"],
        "experiments": experiments,
    }


def _sessions_info(metas: list[dict[str, Any]]) -> dict[str, Any]:
    """The commits, dirtiness and machines of every session that ran these experiments:
    the first one's and each resumed one's (an experiment resumed at another commit or on
    another machine ran part of its runs there)."""
    sessions = [s for m in metas for s in (m, *(m.get("resumed_sessions") or []))]
    versions = [s.get("versions") or {} for s in sessions]
    machines: list[dict[str, Any]] = []
    for s in sessions:
        machine = s.get("machine") or {}
        entry = {k: machine.get(k) for k in ("os", "cpus", "kernel", "cpu_model")}
        if entry not in machines:
            machines.append(entry)
    return {"commits": list(dict.fromkeys(v["git_commit"] for v in versions
                                          if v.get("git_commit"))),
            "dirty": any(bool(v.get("git_dirty")) for v in versions),
            "machines": machines,
            "dcnlab": list(dict.fromkeys(v["dcnlab"] for v in versions if v.get("dcnlab")))}


def _active_s(meta: dict[str, Any]) -> float:
    """The seconds an experiment ran: active_s sums a resumed experiment's sessions;
    older results have only their first start and last finish."""
    active = meta.get("active_s")
    return float(active) if isinstance(active, int | float) else float(span_seconds(meta))


def merge_runs(earlier: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The provenance of an update: ``new`` (run_info of the results given) over the
    earlier summary's ``earlier``.  An experiment the results hold replaces the earlier
    entry and its earlier time is taken off the total; where the earlier entry does not
    record it (summaries written before ``active_s`` was kept) the total keeps it and
    says so (``duration_upper_bound``: the document calls the time an upper bound)."""
    def key(e: dict[str, Any]) -> tuple[Any, Any]:
        return (e.get("file"), e.get("scenario"))

    fresh = {key(e): e for e in new.get("experiments") or [] if e.get("status") != "missing"}
    old = {key(e): e for e in earlier.get("experiments") or []}
    duration = float(earlier.get("duration_s") or 0)
    upper_bound = bool(earlier.get("duration_upper_bound"))
    for k in fresh:
        replaced = old.get(k)
        if replaced is None or replaced.get("status") == "missing":
            continue
        if isinstance(replaced.get("active_s"), int | float):
            duration -= float(replaced["active_s"])
        else:
            upper_bound = True  # its time is in the total, and cannot be taken off
    # the paper's experiments, in its order (new lists them all, "missing" where the
    # results given do not hold them: those keep their earlier entry)
    experiments = [fresh.get(key(e)) or old.get(key(e)) or e
                   for e in new.get("experiments") or []]
    dates = [d for d in (earlier.get("date"), new.get("date")) if d]
    ran = [e for e in experiments if e.get("status") != "missing"]
    if ran and all("commits" in e for e in ran):
        # every kept experiment names its sessions: the commits and machines are theirs,
        # and a replaced experiment's go with it (in the order the summaries gave them)
        used = {c for e in ran for c in e["commits"]}
        commits = [c for c in dict.fromkeys([*(earlier.get("commits") or []),
                                             *(new.get("commits") or [])]) if c in used]
        dirty = any(bool(e.get("dirty")) for e in ran)
        kept = [m for e in ran for m in e.get("machines") or []]
        machines = []
        for m in [*(earlier.get("machines") or []), *(new.get("machines") or [])]:
            if m in kept and m not in machines:
                machines.append(m)
    else:  # an earlier summary's entries do not say whose commits they were: keep all
        commits = list(dict.fromkeys([*(earlier.get("commits") or []),
                                      *(new.get("commits") or [])]))
        dirty = bool(earlier.get("dirty")) or bool(new.get("dirty"))
        machines = list(earlier.get("machines") or [])
        machines += [m for m in new.get("machines") or [] if m not in machines]
    merged = {
        "commits": commits,
        "dirty": dirty,
        "date": min(dates) if dates else None,
        "machines": machines,
        "duration_s": round(duration + float(new.get("duration_s") or 0)),
        "dcnlab": list(dict.fromkeys([*(earlier.get("dcnlab") or []),
                                      *(new.get("dcnlab") or [])])),
        "experiments": experiments,
    }
    if upper_bound:
        merged["duration_upper_bound"] = True
    return merged
