"""A paper's claims against a summary: per claim and sweep value, the measured
comparison and its verdict by the rule (verdict.py).  Pure: the document and the figure
are drawn from what this returns, so they cannot disagree with each other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import verdict as rule
from .errors import MissingResultsError, ReproductionError
from .extract import FORMAT, paired_key, series_key
from .papers import PER_FLOW, Claim, Paper
from .tables import value_text


@dataclass(frozen=True)
class Result:
    claim: Claim
    value: float  # the sweep value
    measured: rule.Measured
    verdict: str
    needed: str  # seeds needed to decide ('' unless inconclusive)

    @property
    def condition(self) -> str:
        return f"{self.claim.sweep} = {value_text(self.value)}"


def _seeds(entry: Mapping[str, Any]) -> dict[int, float | None]:
    return {int(seed): value for seed, value in (entry.get("seeds") or {}).items()}


def _missing(paper: Paper, claim: Claim, value: float, what: str) -> MissingResultsError:
    return MissingResultsError(
        f"claim {claim.id}: the summary has no {what} at {claim.sweep} = {value_text(value)}; "
        f"regenerate it from the results (dcnlab report DIR --reproduction {paper.paper})")


def evaluate(paper: Paper, summary: Mapping[str, Any]) -> list[Result]:
    """One Result per claim and sweep value, in the paper's order."""
    if summary.get("format") != FORMAT:
        raise ReproductionError(f"summary format {summary.get('format')!r}; this dcnlab "
                                f"reads format {FORMAT}")
    if summary.get("paper") != paper.paper:
        raise ReproductionError(f"the summary is of paper {summary.get('paper')!r}, not "
                                f"{paper.paper}")
    series = {series_key(e["experiment"], e["scenario"], e["table"], e["metric"],
                         e["class"], e["scheme"], e["load"]): e
              for e in summary.get("series", [])}
    paired = {paired_key(e["experiment"], e["scenario"], e["metric"], e["class"],
                         e["scheme"], e["baseline"], e["load"]): e
              for e in summary.get("paired", [])}
    out = []
    for claim in paper.claims:
        baseline = claim.baseline or ""
        for value in claim.values:
            if claim.per == PER_FLOW:
                entry = paired.get(paired_key(claim.experiment, claim.scenario, claim.metric,
                                              claim.cls, claim.scheme, baseline, value))
                if entry is None:
                    raise _missing(paper, claim, value, f"paired {claim.metric} (class "
                                   f"{claim.cls}) of {claim.scheme} against {baseline}")
                measured = rule.per_flow(_float(entry["ratio"]), _float(entry["low"]),
                                         _float(entry["high"]), int(entry["pairs"]))
            else:
                sides = []
                for scheme, scenario in ((claim.scheme, claim.scenario),
                                         (baseline, claim.baseline_where)):
                    entry = series.get(series_key(claim.experiment, scenario,
                                                  claim.table, claim.metric, claim.cls,
                                                  scheme, value))
                    if entry is None:
                        raise _missing(paper, claim, value, f"{claim.table} {claim.metric} "
                                       f"(class {claim.cls}) of {scheme}")
                    sides.append(_seeds(entry))
                measured = rule.per_seed(claim.compare, sides[0], sides[1])
            name = rule.verdict(measured, claim.paper_value, claim.direction)
            needed = rule.seeds_needed(measured) if name == rule.INCONCLUSIVE else ""
            out.append(Result(claim, value, measured, name, needed))
    return out


def _float(value: Any) -> float:
    return float("nan") if value is None else float(value)


def counts(results: list[Result]) -> dict[str, int]:
    """How many comparisons got each verdict, in the rule's order."""
    return {name: sum(1 for r in results if r.verdict == name) for name in rule.VERDICTS}
