"""``dcnlab reproduce PAPER`` and ``dcnlab report DIR --reproduction PAPER``.

``reproduce`` runs the paper's experiment files in the paper file's order, each exactly
as ``dcnlab run FILE --out OUT/<file's stem>`` would (the engine's run_experiment: its
time estimate, progress bar, scenarios under OUT/<stem>/<scenario>, flows that never
go unaccounted), then writes into OUT the summary (``reproduction.json``), the document
(``REPRODUCTION.md``) and its figure (``claims.png``).  The paper file may give an
experiment its own seeds (``seeds:``), run in place of the file's.  ``--resume OUT`` is
``dcnlab run --resume`` for each experiment: an experiment whose every scenario is
complete with every seed the paper file asks for is left alone (nothing runs, no root
needed), any other continues where it stopped (the runs recorded are kept; one that
never started starts; seeds the paper file added since run now), from the experiment
file it began with (runner.resume_source); a scenario that file lacks, which the
experiment file and the paper file gained since, starts afresh from the current file.
``report --reproduction`` does only the last step, from the results already in OUT.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import runner as engine
from ..results import FLOWS_CSV, META_JSON, SPEC_COPY, write_json
from ..spec import load_specs
from . import document, extract, figure, papers, registry
from .errors import ReproductionError
from .evaluate import Result, evaluate

REPRODUCTION_MD = "REPRODUCTION.md"
DEFAULT_RESULTS = Path("results")


@dataclass(frozen=True)
class Step:
    """One experiment file of the paper, and what running it means here."""

    file: str
    source: Path  # the experiment file to run
    target: Path  # OUT/<stem>: dcnlab run's --out
    scenarios: list[str] | None  # the scenarios to run (None: the file has none, or all)
    outputs: list[Path]  # the results directories it writes (one per scenario)
    complete: bool  # every output is complete with every seed wanted: nothing to run
    seeds: list[int] | None = None  # the paper file's seeds for it (None: the file's)
    # resuming: scenarios the paper file gained since the file they began with, which
    # start afresh from the current file (the others continue from the one they began with)
    fresh: bool = False


@dataclass
class ReproductionResult:
    out: Path
    paper: str
    results: list[Result]
    files: list[Path] = field(default_factory=list)


def default_out(paper_id: str) -> Path:
    return DEFAULT_RESULTS / paper_id


def _complete(path: Path, seeds: list[int] | None) -> bool:
    """``path`` holds a complete experiment with every seed of ``seeds`` (None: any)."""
    try:
        meta = json.loads((path / META_JSON).read_text())
        recorded = set(meta["spec"]["seeds"])
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return False
    return meta.get("status") == "complete" and (seeds is None or set(seeds) <= recorded)


def plan(paper: papers.Paper, out: Path, resume: bool,
         experiments: Path | None = None) -> list[Step]:
    """The steps of a reproduction into ``out``, checked before anything runs: without
    ``resume`` no output may hold results yet (engine.ExperimentError, as ``dcnlab run``
    says it); with it ``out`` must hold some of this paper's experiments
    (ReproductionError)."""
    base = registry.EXPERIMENTS_DIR if experiments is None else experiments
    steps = []
    for ref in paper.experiments:
        target = extract.experiment_dir(out, ref.file, None)
        wanted = paper.scenarios(ref.file)
        source, added = base / ref.file, []
        if resume and any(target.glob(f"**/{SPEC_COPY}")):
            began = engine.resume_source(target)  # the file it began with
            if began != source:  # changed since: did the paper file gain scenarios?
                added = _added_scenarios(began, wanted, target)
                wanted = [s for s in wanted if s not in added]
            source = began
        if wanted:
            steps.append(_step(out, ref, source, wanted))
        if added:  # they start afresh, from the current file
            steps.append(_step(out, ref, base / ref.file, added, fresh=True))
    if resume:
        if not out.is_dir():
            raise ReproductionError(f"--resume {out}: no such directory (give the output "
                                    "directory of an earlier dcnlab reproduce)")
        if not any(s.target.is_dir() for s in steps):
            raise ReproductionError(
                f"--resume {out}: it holds none of {paper.paper}'s experiments "
                f"({', '.join(s.target.name for s in steps)}): not a reproduction of "
                f"{paper.paper}")
        return steps
    for step in steps:
        for output in step.outputs:
            if (output / FLOWS_CSV).exists():
                raise engine.ExperimentError(
                    f"{output} already holds results ({FLOWS_CSV}); choose another output "
                    f"directory, remove it, or --resume {out}")
    return steps


def _step(out: Path, ref: papers.ExperimentRef, source: Path, wanted: list[str | None],
          fresh: bool = False) -> Step:
    outputs = [extract.experiment_dir(out, ref.file, s) for s in wanted]
    scenarios = [s for s in wanted if s is not None] or None
    return Step(ref.file, source, extract.experiment_dir(out, ref.file, None), scenarios,
                outputs, all(_complete(o, ref.seeds) for o in outputs), ref.seeds, fresh)


def _added_scenarios(began: Path, wanted: list[str | None], target: Path) -> list[str]:
    """The wanted scenarios that the file an experiment began with lacks and that have
    no results yet: a paper file that gained a scenario (and its experiment file with
    it) since the results were begun."""
    try:
        known = {spec.scenario for spec in load_specs(began)}
    except Exception:  # noqa: BLE001 - the engine reports an unreadable copy itself
        return []
    return [s for s in wanted if s is not None and s not in known
            and not (target / s / META_JSON).exists()]


def estimate_text(paper: papers.Paper, steps: list[Step], resume: bool) -> str:
    """One line before a reproduction starts: the runs left over all its experiment
    files and the time they take by the engine's estimate (each file prints its own as
    it starts)."""
    specs: list[Any] = []
    left: list[int] = []
    for step in steps:
        if step.complete:
            continue
        s, n = engine.runs_left(step.source, step.target, resume and not step.fresh,
                                step.scenarios, step.seeds)
        specs += s
        left += n
    low, high = engine.estimate_seconds(specs, left)
    files = len({step.file for step in steps if not step.complete})
    return (f"dcnlab reproduce {paper.paper}: {sum(left)} run(s) left in {files} experiment "
            f"file(s); estimated time {engine.hours(low)} (arrivals, settle and network "
            f"start-ups) to {engine.hours(high)} (every run draining for its full drain "
            "time)")


def run(paper: papers.Paper, out: Path, steps: list[Step], resume: bool,
        progress: bool = True, cluster: str | None = None) -> ReproductionResult:
    """Run the steps in order (engine.run_experiment, on the ``cluster`` target if one is
    given; an experiment that stops early raises its ExperimentError, the results so far
    kept for --resume), then write the reproduction's outputs."""
    out.mkdir(parents=True, exist_ok=True)
    if not all(step.complete for step in steps):
        print(estimate_text(paper, steps, resume), file=sys.stderr)
    for step in steps:
        if step.complete:
            continue  # resumed: every scenario of it is complete
        engine.run_experiment(step.source, step.target, progress=progress,
                              resume=resume and not step.fresh, scenarios=step.scenarios,
                              seeds=step.seeds, cluster=cluster)
    return regenerate(paper, out)


def regenerate(paper: papers.Paper, out: Path) -> ReproductionResult:
    """reproduction.json, REPRODUCTION.md and claims.png in ``out`` from the results
    there.  Raises MissingResultsError naming the claim and what is missing."""
    if not out.is_dir():
        raise ReproductionError(f"{out} is not a directory")
    summary = extract.extract(paper, out)
    return ReproductionResult(out, paper.paper, evaluate(paper, summary),
                              write(paper, summary, out))


def write(paper: papers.Paper, summary: dict, out: Path,
          names: tuple[str, str, str] = (extract.SUMMARY_JSON, REPRODUCTION_MD,
                                         document.FIGURE)) -> list[Path]:
    """The summary, the document and the figure into ``out`` under ``names``; the
    document is rendered first, so a summary it cannot use writes nothing."""
    summary_name, doc_name, figure_name = names
    text = document.render(paper, summary, figure_name, summary_name)
    write_json(out / summary_name, summary)
    (out / doc_name).write_text(text)
    return [out / summary_name, out / doc_name,
            figure.draw(paper, summary, out / figure_name)]


def verdict_lines(results: list[Result]) -> list[str]:
    """One line per claim and sweep value: what the command prints."""
    return [f"{r.claim.id} ({r.condition}): {r.verdict}, measured "
            f"{document.measured_text(r)} against the paper's "
            f"{document.paper_text(r.claim)}"
            + (f"; needed to decide: {document.needed_text(r)}" if r.needed else "")
            for r in results]
