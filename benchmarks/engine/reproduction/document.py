"""``REPRODUCTION.md``: a paper's claims, the paper's values next to the measured ones,
the verdicts, the setting, the deviations and the rule, as Markdown.

Deterministic by construction: the same paper file and summary give the same bytes (the
regeneration test of docs/reproductions/ depends on it).  Numbers are printed with
three significant digits (the paper's own values as written); the only times in it are
the run's own, from the summary; the order is the paper file's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import verdict as rule
from .evaluate import Result, counts, evaluate
from .extract import SUMMARY_JSON
from .papers import PER_FLOW, RATIO, Claim, Paper
from .tables import value_text

FIGURE = "claims.png"
DIGITS = 3


def sig(value: float | None, digits: int = DIGITS) -> str:
    """``value`` to ``digits`` significant digits, without an exponent between 1e-4 and
    1e6 (0.000123, 1230), with one outside; "-" for no value."""
    if value is None or not math.isfinite(value):
        return "-"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude < -4 or magnitude >= 6:
        return f"{value:.{digits - 1}e}"
    decimals = digits - 1 - magnitude
    rounded = round(value, decimals)
    return f"{rounded:.{max(decimals, 0)}f}"


def _cell(text: Any) -> str:
    """Text for a table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _duration(seconds: Any) -> str:
    minutes = round(float(seconds or 0) / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def provenance(run: Mapping[str, Any]) -> str:
    """One line: the commit(s), date, machine(s), time and dcnlab version of the run."""
    commits = [c[:7] for c in run.get("commits") or []]
    what = (f"commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}" if commits
            else "an unknown commit")
    if run.get("dirty"):
        what += " (with local changes)"
    machines = []
    for m in run.get("machines") or []:
        parts = [m.get("os") or "unknown OS"]
        if m.get("cpus"):
            parts.append(f"{m['cpus']} CPUs")
        if m.get("cpu_model"):
            parts.append(str(m["cpu_model"]))
        if m.get("kernel"):
            parts.append(f"kernel {m['kernel']}")
        machines.append(", ".join(parts))
    versions = ", ".join(run.get("dcnlab") or []) or "unknown"
    took = _duration(run.get("duration_s")) + " of experiments"
    if run.get("duration_upper_bound"):
        took = (f"at most {took} (the total still counts runs that were replaced later, "
                "whose time the earlier summary did not record)")
    return (f"Run at {what}, {run.get('date') or 'an unknown date'}, on "
            f"{'; '.join(machines) or 'an unknown machine'}; {took}; dcnlab {versions}.")


def _comparison(claim: Claim) -> str:
    sign = "/" if claim.compare == RATIO else "-"
    how = "paired per flow" if claim.per == PER_FLOW else "per seed"
    if claim.baseline_scenario:  # two workloads: name each side's scenario
        return (f"{claim.scheme} ({claim.scenario}) {sign} {claim.baseline} "
                f"({claim.baseline_scenario}) ({claim.compare}, {how})")
    return f"{claim.scheme} {sign} {claim.baseline} ({claim.compare}, {how})"


def measured_text(result: Result) -> str:
    """The estimate with its interval in brackets, or why there is none."""
    m = result.measured
    if not math.isfinite(m.estimate):
        return "no value"
    text = sig(m.estimate)
    return text + (f" [{sig(m.low)}, {sig(m.high)}]" if m.has_interval else " (no interval)")


def _n(result: Result) -> str:
    m = result.measured
    text = f"{m.n} flows (per flow)" if m.per == PER_FLOW else \
        f"{m.n} seed{'' if m.n == 1 else 's'}"
    if m.left_out:
        text += f", {m.left_out} left out"
    return text


def needed_text(result: Result) -> str:
    """An inconclusive claim's seeds needed ("18"), or flow pairs for a per-flow claim
    ("40 flows"); empty for a decided one."""
    if result.measured.per == PER_FLOW and result.needed not in ("", rule.UNKNOWN):
        return f"{result.needed} flows"
    return result.needed


def paper_text(claim: Claim) -> str:
    """The paper's value and direction ("0.5 (lower)"; "no value (lower)" when the paper
    states the direction only)."""
    value = "no value" if claim.paper_value is None else value_text(claim.paper_value)
    return f"{value} ({claim.direction})"


def render(paper: Paper, summary: Mapping[str, Any], figure: str | None = FIGURE,
           summary_name: str = SUMMARY_JSON) -> str:
    """The document's text; ``figure``: the claims figure's file name beside it (None:
    no figure), ``summary_name``: the summary's (named in the header)."""
    results = evaluate(paper, summary)
    tally = counts(results)
    lines = [
        f"# {paper.paper}: {paper.title}",
        "",
        f"<!-- generated by dcnlab from {summary_name} and the paper file "
        f"benchmarks/papers/{paper.paper}.yaml; do not edit by hand: `dcnlab report DIR "
        f"--reproduction {paper.paper}` regenerates it from results -->",
        "",
        provenance(summary.get("run") or {}),
        "",
        "**Verdicts**: " + ", ".join(f"{n} {name}" for name, n in tally.items())
        + f" ({_count(len(results), 'comparison')} of {_count(len(paper.claims), 'claim')}; "
        "the rule is at the "
        "end)" + (f"; {_count(len(paper.unmeasured), 'claim')} of the paper "
                  f"{'is' if len(paper.unmeasured) == 1 else 'are'} not measured here "
                  "(listed below, with why)" if paper.unmeasured else "") + ".",
        "",
        "## Claims and verdicts",
        "",
        "Measured: the estimate and its 95 % interval in brackets; n: the seeds (or flow "
        "pairs, per flow) it is taken over.",
        "",
        *_table(["claim", "condition", "paper", "measured", "n", "verdict",
                 "needed to decide"],
                ([f"`{r.claim.id}`", r.condition, paper_text(r.claim), measured_text(r), _n(r),
                  f"**{r.verdict}**", needed_text(r)] for r in results)),
        "",
        "## What each claim compares",
        "",
        *_table(["claim", "the paper says", "source", "comparison", "metric",
                 "experiment"],
                ([f"`{c.id}`", c.says + (f" (the paper's value at: {c.paper_setting})"
                                         if c.paper_setting else ""),
                  c.source, _comparison(c),
                  f"{c.table} `{c.metric}`" + (f", {c.cls}" if c.cls != "all" else ""),
                  c.experiment + (f" / {c.scenario}" if c.scenario else "")]
                 for c in paper.claims)),
        "",
    ]
    if figure:
        lines += [f"![each claim's measured interval, the paper's value and no change]"
                  f"({figure})", ""]
    if paper.unmeasured:
        lines += ["## Claims not measured here", "",
                  *_table(["claim", "the paper says", "source", "why not"],
                          ([f"`{u.id}`", u.says, u.source, u.why] for u in paper.unmeasured)),
                  ""]
    setting = paper.setting
    lines += [
        "## The paper's setting",
        "",
        *_table(["", "the paper"], [("platform", setting.platform),
                                    ("rates", setting.rates),
                                    ("run length", setting.run_length),
                                    ("repetitions", setting.repetitions)]),
        "",
        "## What ran",
        "",
        *_table(["experiment", "scenario", "status", "seeds", "started", "finished"],
                ([e.get("file"), e.get("scenario") or "-", e.get("status"),
                  ", ".join(str(s) for s in e.get("seeds") or []) or "-",
                  e.get("started") or "-", e.get("finished") or "-"]
                 for e in (summary.get("run") or {}).get("experiments", []))),
        "",
        "## Deviations",
        "",
    ]
    if paper.deviations:
        lines += _table(["what", "the paper", "here", "why", "status"],
                        ([d.what, d.paper, d.here, d.reason,
                          d.status + (f": {d.measured}" if d.measured else "")]
                         for d in paper.deviations))
    else:
        lines.append("None listed.")
    lines += ["", "## The rule", "", rule.RULE.rstrip("\n")]
    return "\n".join(lines) + "\n"
