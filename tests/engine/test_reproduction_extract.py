"""From results directories written with the engine's own writers to the summary, the
verdicts, the document and its figure (reproduction/extract.py, evaluate.py,
document.py, figure.py).  The fixture's numbers are in reproduction_results.py."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from figure_content import panels, saved_figures
from reproduction_results import EXPERIMENTS, FIXTURE, PAPERS, X, write_results

from dcnlab.benchmarks.engine import netstats
from dcnlab.benchmarks.engine.reproduction import (
    document,
    extract,
    figure,
    papers,
    publish,
    registry,
)
from dcnlab.benchmarks.engine.reproduction import verdict as rule
from dcnlab.benchmarks.engine.reproduction.errors import (
    MissingResultsError,
    ReproductionError,
)
from dcnlab.benchmarks.engine.reproduction.evaluate import counts, evaluate
from dcnlab.benchmarks.engine.results import read_json, write_csv, write_json

T2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # t(0.975, 2) (test_reproduction_verdict.py)

# Each fixture claim's verdict per sweep value, by hand (reproduction_results.py's numbers):
EXPECTED = {
    # fast / base queue = e^x, x = -1, -0.9, -1.1: [0.28696, 0.47162] holds 0.4
    "fast-queue": ["reproduced", "reproduced"],
    # the same interval does not hold 0.6
    "fast-queue-tail": ["direction"],
    # the same, and the paper states no value: at most a direction
    "fast-queue-direction": ["direction"],
    # slow / base = e^-x: [2.12, 3.48], above 1 where the paper says lower
    "slow-queue": ["opposite"],
    # drops differences 5, 7, 9: 7 +- 4.968 holds 5, above 0
    "fast-more-drops": ["reproduced"],
    # differences 1, -1, 3: 1 +- 4.968 holds 0; 18 seeds would decide it
    "slow-fewer-drops": ["inconclusive"],
    # every FCT halved: each seed's (each flow's) ratio is exactly 0.5
    "fast-mouse-fct": ["reproduced", "reproduced"],
    "fast-fct-per-flow": ["reproduced", "reproduced"],
    "short-sizes": ["direction", "direction"],  # 0.5, where the paper says 0.8
    "long-elephants": ["reproduced"],
}


@pytest.fixture()
def paper() -> papers.Paper:
    return papers.load_file(PAPERS / "p900.yaml", EXPERIMENTS)


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    return write_results(tmp_path / "out")


def _entry(summary: dict[str, Any], **key: Any) -> dict[str, Any]:
    (found,) = [e for e in summary["series"] + summary["paired"]
                if all(e.get(k) == v for k, v in key.items())]
    return found


def test_the_summary_holds_the_values_written(paper: papers.Paper, results: Path) -> None:
    summary = extract.extract(paper, results)
    assert (summary["format"], summary["paper"]) == (1, "p900")
    queue = _entry(summary, metric="qout_mean", scheme="fast", load=2.0)
    assert queue["seeds"] == {str(s): pytest.approx(100 * math.exp(x)) for s, x in X.items()}
    assert _entry(summary, metric="qout_mean", scheme="base", load=2.0)["seeds"] == \
        {"1": 100.0, "2": 100.0, "3": 100.0}
    # flows: mean FCT of the two mice (0.125 s and 0.375 s under base, half under fast)
    assert _entry(summary, metric="fct_mean", scheme="base", load=3.0)["seeds"] == \
        {"1": 0.25, "2": 0.25, "3": 0.25}
    assert _entry(summary, metric="fct_mean", scheme="fast", load=3.0)["seeds"]["2"] == 0.125
    # sizes: mean FCT in ms of the three flows of 64 KB: 250, 500, 750 ms
    assert _entry(summary, table="sizes", scheme="base", load=65536.0)["seeds"] == \
        {"1": 500.0, "2": 500.0}
    # per flow: 4 flows x 3 seeds paired at 2 senders, every ratio 0.5; 3 x 2 elephants
    pooled = _entry(summary, metric="fct", scheme="fast", load=2.0)
    assert (pooled["pairs"], pooled["ratio"], pooled["baseline"]) == (12, 0.5, "base")
    assert _entry(summary, metric="fct", scenario="long")["pairs"] == 6
    # only what the claims need: no series of slow's p95, none of unneeded loads
    assert not [e for e in summary["series"] if e["scheme"] == "slow" and
                e["metric"] == "qout_p95"]
    assert not [e for e in summary["series"] if e["metric"] == "drops" and e["load"] == 3.0]
    run = summary["run"]
    assert run["commits"] == ["0123456789abcdef0123456789abcdef01234567"]
    assert (run["date"], run["duration_s"], run["dcnlab"]) == ("2026-11-28", 3 * 1800,
                                                               ["0.1.0"])
    assert run["machines"] == [{"os": "Debian GNU/Linux 12 (bookworm)", "cpus": 2,
                                "kernel": "6.1.0-test", "cpu_model": "Test CPU"}]
    assert [(e["file"], e["scenario"], e["status"]) for e in run["experiments"]] == [
        ("tiny.yaml", None, "complete"), ("tiny_sizes.yaml", "short", "complete"),
        ("tiny_sizes.yaml", "long", "complete")]


def test_a_resumed_experiment_names_every_sessions_commit_and_machine(
        paper: papers.Paper, results: Path) -> None:
    """Seeds added at a later commit, with local changes, on another machine: the
    provenance names both commits, says 'with local changes' and lists both machines."""
    meta_path = results / "tiny" / "meta.json"
    meta = read_json(meta_path)
    later = {**meta["versions"], "git_commit": "fedcba9876543210fedcba9876543210fedcba98",
             "git_dirty": True}
    other = {**meta["machine"], "cpus": 8}
    write_json(meta_path, {**meta, "resumed": ["2026-11-29T10:00:00+0000"],
                           "resumed_sessions": [{"versions": later, "machine": other}]})
    run = extract.extract(paper, results)["run"]
    assert run["commits"] == ["0123456789abcdef0123456789abcdef01234567",
                              "fedcba9876543210fedcba9876543210fedcba98"]
    assert run["dirty"] is True
    assert [m["cpus"] for m in run["machines"]] == [2, 8]
    assert document.provenance(run).startswith(
        "Run at commits 0123456, fedcba9 (with local changes), ")


def test_the_committed_fixture_summary_is_what_extraction_gives(
        paper: papers.Paper, results: Path) -> None:
    """tests/fixtures/reproduction/p900.json (the summary the document test renders) is
    the summary of these fabricated results, exactly, through JSON."""
    write_json(results / "s.json", extract.extract(paper, results))
    assert read_json(results / "s.json") == read_json(FIXTURE / "p900.json")


def test_verdicts_by_hand(paper: papers.Paper, results: Path) -> None:
    out = evaluate(paper, extract.extract(paper, results))
    got: dict[str, list[str]] = {}
    for r in out:
        got.setdefault(r.claim.id, []).append(r.verdict)
    assert got == EXPECTED
    by = {(r.claim.id, r.value): r for r in out}
    inconclusive = by[("slow-fewer-drops", 2.0)]
    assert inconclusive.needed == "18" and inconclusive.measured.estimate == pytest.approx(1)
    assert inconclusive.measured.high == pytest.approx(1 + T2 * 2 / math.sqrt(3))
    assert all(r.needed == "" for r in out if r.verdict != "inconclusive")
    assert by[("fast-fct-per-flow", 3.0)].measured.per == "flow"
    assert counts(out) == {"reproduced": 8, "direction": 4, "inconclusive": 1,
                           "opposite": 1}


def test_a_seed_without_a_value_is_left_out(paper: papers.Paper, results: Path) -> None:
    rows = netstats.read_rows(results / "tiny" / "network.csv")
    for row in rows:
        if row["scheme"] == "fast" and row["seed"] == "3":
            row["qout_mean"] = ""
    write_csv(results / "tiny" / "network.csv", netstats.COLUMNS, rows)
    summary = extract.extract(paper, results)
    assert _entry(summary, metric="qout_mean", scheme="fast", load=2.0)["seeds"]["3"] is None
    r = next(r for r in evaluate(paper, summary) if r.claim.id == "fast-queue")
    assert (r.measured.n, r.measured.left_out) == (2, 1)
    assert "2 seeds, 1 left out" in document.render(paper, summary)


def _missing(paper: papers.Paper, results: Path) -> str:
    with pytest.raises(MissingResultsError) as info:
        extract.extract(paper, results)
    return str(info.value)


def test_missing_results_name_the_claim_and_what_is_missing(
        paper: papers.Paper, results: Path) -> None:
    tiny = results / "tiny"
    (tiny / "network.csv").rename(tiny / "network.keep")
    assert _missing(paper, results) == (
        f"claim fast-queue (network qout_mean, class all): {tiny / 'network.csv'} does not "
        "exist")
    # a column the file does not have (an older dcnlab's network.csv, say)
    rows = netstats.read_rows(tiny / "network.keep")
    write_csv(tiny / "network.csv", [c for c in netstats.COLUMNS if c != "qout_p95"], rows)
    assert _missing(paper, results) == (
        f"claim fast-queue-tail (network qout_p95, class all): {tiny / 'network.csv'} has "
        "no column qout_p95")
    # the column, but no value for the scheme (a switch without histograms, say)
    write_csv(tiny / "network.csv", netstats.COLUMNS,
              [{**r, "qout_mean": "" if r["scheme"] == "fast" else r["qout_mean"]}
               for r in rows])
    assert _missing(paper, results) == (
        f"claim fast-queue (network qout_mean, class all): {tiny / 'network.csv'}: "
        "qout_mean has no value for fast at senders = 2 (seeds [1, 2, 3])")
    # no run of the scheme at that sweep value
    write_csv(tiny / "network.csv", netstats.COLUMNS,
              [r for r in rows if not (r["scheme"] == "fast" and float(r["load"]) == 2)])
    assert _missing(paper, results) == (
        f"claim fast-queue (network qout_mean, class all): {tiny / 'network.csv'}: no run "
        "of fast at senders = 2")
    # an experiment that never ran
    shutil.rmtree(results / "tiny_sizes" / "long")
    (tiny / "network.keep").rename(tiny / "network.csv")
    assert _missing(paper, results) == (
        "claim long-elephants (paired fct, class elephant): no results of tiny_sizes.yaml "
        f"scenario long: {results / 'tiny_sizes' / 'long' / 'meta.json'} does not exist "
        "(has it run?)")


def test_per_flow_claims_need_completed_pairs(paper: papers.Paper, results: Path) -> None:
    flows = results / "tiny_sizes" / "long" / "flows.csv"
    text = flows.read_text().splitlines()
    header = text[0].split(",")
    status = header.index("status")
    rows = [line.split(",") for line in text[1:]]
    for row in rows:
        if row[0] == "fast":
            row[status] = "failed"
    flows.write_text("\n".join([text[0], *(",".join(r) for r in rows)]) + "\n")
    assert _missing(paper, results) == (
        f"claim long-elephants (paired fct, class elephant): {flows}: no flow of class "
        "elephant measured and completed under both fast and base at size = 8388608")


def test_a_results_directory_without_flows_csv(paper: papers.Paper, results: Path) -> None:
    (results / "tiny" / "flows.csv").unlink()
    message = _missing(paper, results)
    assert message.startswith("claim fast-mouse-fct (flows fct_mean, class mouse): ")
    assert "flows.csv does not exist" in message


# ---------------------------------------------------------------------------- document


def test_the_document_is_deterministic_and_survives_json(
        paper: papers.Paper, results: Path) -> None:
    summary = extract.extract(paper, results)
    text = document.render(paper, summary)
    assert document.render(paper, summary) == text
    write_json(results / "s.json", summary)
    assert document.render(paper, read_json(results / "s.json")) == text


def test_the_document_says_everything(paper: papers.Paper, results: Path) -> None:
    text = document.render(paper, extract.extract(paper, results))
    assert text.startswith("# p900: Fixture: a made-up paper on tiny incasts (tests only)\n")
    assert ("Run at commit 0123456, 2026-11-28, on Debian GNU/Linux 12 (bookworm), 2 CPUs, "
            "Test CPU, kernel 6.1.0-test; 1 h 30 min of experiments; dcnlab 0.1.0.") in text
    assert "not-in-the-summary" not in text  # the host name is no part of the summary
    assert ("**Verdicts**: 8 reproduced, 4 direction, 1 inconclusive, 1 opposite (14 "
            "comparisons of 10 claims; the rule is at the end); 1 claim of the paper is not "
            "measured here (listed below, with why).") in text
    assert ("| `fast-queue-direction` | senders = 2 | no value (lower) | 0.368 [0.287, 0.472] "
            "| 3 seeds | **direction** |") in text
    assert ("| `queue-over-time` | the queue oscillates between empty and full | Fig. 5 | a "
            "time series \\| no experiment records queue length over time |") in text
    for claim in paper.claims:
        assert f"| `{claim.id}` | {claim.says}" in text
        assert text.count(f"| `{claim.id}` |") == len(claim.values) + 1
    assert ("| `slow-fewer-drops` | senders = 2 | -5 (lower) | 1.00 [-3.97, 5.97] | 3 seeds "
            "| **inconclusive** | 18 |") in text
    assert ("| `fast-queue` | senders = 2 | 0.4 (lower) | 0.368 [0.287, 0.472] | 3 seeds | "
            "**reproduced** |  |") in text
    assert "| 12 flows (per flow) |" in text and "| size = 8388608 |" in text
    assert "fast halves the mean FCT of mice (the paper's value at: 100 senders)" in text
    for deviation in paper.deviations:
        assert f"| {deviation.what} |" in text
    assert "a 2-core machine \\| cannot switch 1 Gbit/s" in text  # one cell, not two
    assert "| measured: drops 0.29-0.92 of ECN's with IW 10 |" in text
    assert "| ns-3 simulation |" in text and "| repetitions | 3 |" in text
    assert "| tiny_sizes.yaml | long | complete | 1, 2 | 2026-11-28T10:00:00+0000 |" in text
    assert rule.RULE in text
    assert "![each claim's measured interval" in text and "(claims.png)" in text
    # no table row with a cell count other than its header's
    for block in re.split(r"\n\n", text):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        cells = {len(re.split(r"(?<!\\)\|", line)) for line in rows}
        assert len(cells) <= 1, block


def test_significant_digits() -> None:
    assert [document.sig(v) for v in (0.5, 0.36788, 12.04, 1234.5, 0.000123456, 7e-6,
                                      2.5e7, -3.97, 0, math.nan, None)] == \
        ["0.500", "0.368", "12.0", "1230", "0.000123", "7.00e-06", "2.50e+07", "-3.97", "0",
         "-", "-"]


def test_a_summary_must_be_the_papers_and_complete(paper: papers.Paper, results: Path) -> None:
    summary = extract.extract(paper, results)
    with pytest.raises(ReproductionError, match="the summary is of paper 'p002', not p900"):
        evaluate(paper, {**summary, "paper": "p002"})
    with pytest.raises(ReproductionError, match="summary format 2; this dcnlab reads "
                                                "format 1"):
        evaluate(paper, {**summary, "format": 2})
    short = {**summary, "series": [e for e in summary["series"]
                                   if not (e["metric"] == "drops" and e["scheme"] == "slow")]}
    with pytest.raises(MissingResultsError, match=r"claim slow-fewer-drops: the summary has "
                       r"no network drops \(class all\) of slow at senders = 2; regenerate "
                       r"it from the results \(dcnlab report DIR --reproduction p900\)"):
        document.render(paper, short)


# ---------------------------------------------------------------------------- figure


def test_the_figure_draws_each_claim(paper: papers.Paper, results: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    figures = saved_figures(monkeypatch)
    summary = extract.extract(paper, results)
    path = figure.draw(paper, summary, tmp_path / "claims.png")
    assert path.stat().st_size > 0
    axes = panels(figures["claims.png"])
    assert [ax.get_title(loc="left").split(":")[0] for ax in axes] == \
        [c.id for c in paper.claims]
    by_id = dict(zip([c.id for c in paper.claims], axes, strict=True))
    for claim in paper.claims:
        ax = by_id[claim.id]
        ratio = claim.compare == "ratio"
        assert ax.get_xscale() == ("log" if ratio else "linear"), claim.id
        assert [t.get_text() for t in ax.get_yticklabels()] == [
            f"{claim.sweep} = {v:.10g}" + (" (per flow)" if claim.per == "flow" else "")
            for v in claim.values]
        # the no-change line and the paper's value on every row
        assert any(list(line.get_xdata()) == [1.0 if ratio else 0.0] * 2
                   for line in ax.get_lines())
        crosses = [line for line in ax.get_lines() if line.get_marker() == "x"]
        if claim.paper_value is None:  # a direction only: nothing to mark
            assert crosses == []
            continue
        assert [list(line.get_xdata()) for line in crosses] == \
            [[claim.paper_value]] * len(claim.values)
        low, high = ax.get_xlim()
        assert low < claim.paper_value < high
    verdicts = [t.get_text() for t in by_id["slow-queue"].texts]
    assert verdicts == ["opposite"]
    # the interval drawn is the measured one: slow's queue ratio e^1 in [2.12, 3.48]
    (bar,) = [c for c in by_id["slow-queue"].containers]
    segment = bar.lines[2][0].get_segments()[0]
    assert segment[0][0] == pytest.approx(math.exp(1 - T2 * 0.1 / math.sqrt(3)))
    assert segment[1][0] == pytest.approx(math.exp(1 + T2 * 0.1 / math.sqrt(3)))


def test_the_figure_and_document_need_no_network(paper: papers.Paper) -> None:
    """The committed fixture summary renders alone (no results directory)."""
    summary = json.loads((FIXTURE / "p900.json").read_text())
    assert document.render(paper, summary).count("| **reproduced** |") == 8


def test_an_inconclusive_per_flow_claim_needs_flows_not_seeds(paper: papers.Paper) -> None:
    from dcnlab.benchmarks.engine.reproduction.evaluate import Result

    claim = next(c for c in paper.claims if c.per == "flow")
    # 10 pairs, ratio 0.9 in [0.7, 1.157]: s = log(1.157 / 0.9) * sqrt(10) / t(9)
    measured = rule.per_flow(0.9, 0.7, 1.157, 10)
    needed = rule.seeds_needed(measured)
    assert rule.verdict(measured, 0.5, "lower") == "inconclusive" and needed.isdigit()
    result = Result(claim, 2.0, measured, "inconclusive", needed)
    assert document.needed_text(result) == f"{needed} flows"
    assert document.needed_text(Result(claim, 2.0, measured, "inconclusive", "unknown")) == \
        "unknown"


def _across_scenarios(tmp_path: Path) -> papers.Paper:
    """A paper whose one claim compares two scenarios of tiny_sizes.yaml: fast in
    'short' against base in 'again' (baseline_scenario)."""
    data = {
        "paper": "p901", "title": "T",
        "setting": {"platform": "ns-3", "rates": "1 Gbit/s", "run_length": "1 s"},
        "experiments": [{"file": "tiny_sizes.yaml", "scenarios": ["short", "again"]}],
        "claims": [{"id": "across", "says": "twice as fast as the other workload",
                    "source": "Fig. 9", "experiment": "tiny_sizes.yaml",
                    "scenario": "short", "baseline_scenario": "again", "table": "sizes",
                    "metric": "fct_mean_ms", "scheme": "fast", "baseline": "base",
                    "paper_value": 0.5, "direction": "lower"}]}
    return papers.parse(data, tmp_path / "p901.yaml", EXPERIMENTS)


def test_a_baseline_from_another_scenario_is_read_from_its_results(
        results: Path, tmp_path: Path) -> None:
    paper = _across_scenarios(tmp_path)
    summary = extract.extract(paper, results)
    sides = sorted((e["scenario"], e["scheme"]) for e in summary["series"])
    assert sides == [("again", "base")] * 2 + [("short", "fast")] * 2  # two sizes each
    (first, second) = evaluate(paper, summary)
    # every fast FCT in short is half the base one in again: exactly 0.5 per seed
    assert math.isclose(first.measured.estimate, 0.5) and first.verdict == "reproduced"
    assert second.verdict == "reproduced"
    text = document.render(paper, summary)
    assert "fast (short) / base (again) (ratio, per seed)" in text
    shutil.rmtree(results / "tiny_sizes" / "again")
    with pytest.raises(MissingResultsError, match=r"claim across .*no results of "
                       r"tiny_sizes\.yaml scenario again \(the baseline's\)"):
        extract.extract(paper, results)


# ---------------------------------------------------------------------------- updates


def _rerun(results: Path, tmp_path: Path, factor: float) -> Path:
    """A results directory holding only tiny.yaml, run again at another commit on
    another machine for 600 s, with every queue of ``fast`` scaled by ``factor``."""
    fresh = tmp_path / "fresh"
    shutil.copytree(results / "tiny", fresh / "tiny")
    meta = read_json(fresh / "tiny" / "meta.json")
    write_json(fresh / "tiny" / "meta.json", {
        **meta, "active_s": 600.0, "machine": {**meta["machine"], "cpus": 4},
        "versions": {**meta["versions"], "git_commit": "f" * 40}})
    with open(fresh / "tiny" / netstats.NETWORK_CSV, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        if row["scheme"] == "fast":
            row["qout_mean"] = float(row["qout_mean"]) * factor
    write_csv(fresh / "tiny" / netstats.NETWORK_CSV, netstats.COLUMNS, rows)
    return fresh


def test_an_update_reads_what_the_results_hold_and_keeps_the_rest(
        paper: papers.Paper, results: Path, tmp_path: Path) -> None:
    """tiny.yaml run again (fast's queue doubled): its claims' values are the new ones;
    tiny_sizes.yaml's, which the new results lack, are the earlier summary's, and the
    provenance names both runs, with tiny.yaml's earlier time replaced by its new."""
    earlier = extract.extract(paper, results)
    fresh = _rerun(results, tmp_path, 2.0)
    updated = extract.extract(paper, fresh, previous=earlier)
    queue = _entry(updated, metric="qout_mean", scheme="fast", load=2.0)
    assert queue["seeds"] == {str(s): pytest.approx(200 * math.exp(x)) for s, x in X.items()}
    for entry in earlier["series"] + earlier["paired"]:
        if entry["experiment"] == "tiny_sizes.yaml":
            assert entry in updated["series"] + updated["paired"], entry
    assert len(updated["series"]) == len(earlier["series"])
    assert len(updated["paired"]) == len(earlier["paired"])
    run = updated["run"]
    assert run["commits"] == ["0123456789abcdef0123456789abcdef01234567", "f" * 40]
    assert [m["cpus"] for m in run["machines"]] == [2, 4]
    # 3 x 1800 s before; tiny.yaml's 1800 s replaced by 600 s
    assert run["duration_s"] == 2 * 1800 + 600
    assert [(e["file"], e["scenario"], e["active_s"]) for e in run["experiments"]] == [
        ("tiny.yaml", None, 600), ("tiny_sizes.yaml", "short", 1800),
        ("tiny_sizes.yaml", "long", 1800)]
    # the verdicts follow the new values: fast's queue at 2 e^x is no longer 0.4 of base's
    verdicts = {(r.claim.id, r.condition) for r in evaluate(paper, updated)
                if r.verdict == "direction" and r.claim.id == "fast-queue"}
    assert verdicts, [(r.claim.id, r.verdict) for r in evaluate(paper, updated)]


def test_an_update_drops_the_commits_and_machines_of_what_it_replaced(
        paper: papers.Paper, results: Path, tmp_path: Path) -> None:
    """tiny.yaml first ran at commit aaa... on a 1-CPU machine, the rest at 0123...; run
    again at fff... on 4 CPUs, the update names 0123... and fff... and their machines:
    no experiment of the summary ran at aaa... any more."""
    meta = read_json(results / "tiny" / "meta.json")
    write_json(results / "tiny" / "meta.json", {
        **meta, "machine": {**meta["machine"], "cpus": 1},
        "versions": {**meta["versions"], "git_commit": "a" * 40}})
    earlier = extract.extract(paper, results)
    assert earlier["run"]["commits"][0] == "a" * 40
    assert [m["cpus"] for m in earlier["run"]["machines"]] == [1, 2]
    fresh = _rerun(results, tmp_path, 2.0)
    run = extract.extract(paper, fresh, previous=earlier)["run"]
    assert run["commits"] == ["0123456789abcdef0123456789abcdef01234567", "f" * 40]
    assert [m["cpus"] for m in run["machines"]] == [2, 4]


def test_an_update_names_a_value_neither_side_has(paper: papers.Paper, results: Path,
                                                  tmp_path: Path) -> None:
    earlier = extract.extract(paper, results)
    earlier["series"] = [e for e in earlier["series"]
                         if not (e["experiment"] == "tiny_sizes.yaml" and e["scheme"] == "fast")]
    earlier["paired"] = [e for e in earlier["paired"] if e["scenario"] != "long"]
    fresh = _rerun(results, tmp_path, 1.0)
    with pytest.raises(MissingResultsError, match=r"claim short-sizes .*do not hold "
                       r"tiny_sizes\.yaml scenario short, and the earlier summary has no "
                       r"values of fast at size = 65536"):
        extract.extract(paper, fresh, previous=earlier)
    earlier = extract.extract(paper, results)
    earlier["paired"] = [e for e in earlier["paired"] if e["scenario"] != "long"]
    with pytest.raises(MissingResultsError, match=r"claim long-elephants .*no paired flows "
                       r"of fast and base at size = 8388608"):
        extract.extract(paper, fresh, previous=earlier)


def test_an_update_of_an_experiment_of_unknown_length_says_its_time_is_a_bound(
        paper: papers.Paper, results: Path, tmp_path: Path) -> None:
    """A summary written before experiments kept active_s: an experiment it holds that
    the update replaces cannot have its time taken off, so the total keeps it and the
    document calls it an upper bound; an experiment it lacked adds its time, exactly."""
    earlier = extract.extract(paper, results)
    for entry in earlier["run"]["experiments"]:
        del entry["active_s"]
    fresh = _rerun(results, tmp_path, 1.0)
    run = extract.extract(paper, fresh, previous=earlier)["run"]
    assert (run["duration_s"], run["duration_upper_bound"]) == (3 * 1800 + 600, True)
    assert "; at most 1 h 40 min of experiments (the total still counts runs that were " \
        "replaced later" in document.provenance(run)
    tiny = next(e for e in earlier["run"]["experiments"] if e["file"] == "tiny.yaml")
    tiny.update(status="missing", started=None, finished=None)
    earlier["run"]["duration_s"] = 2 * 1800
    run = extract.extract(paper, fresh, previous=earlier)["run"]
    assert run["duration_s"] == 2 * 1800 + 600 and "duration_upper_bound" not in run
    assert "; 1 h 10 min of experiments; " in document.provenance(run)


def test_publish_update_folds_new_results_into_the_committed_summary(
        results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``publish PAPER --update DIR``: the committed summary updated with what DIR holds,
    the document rendered from it (what the committed-documents test then checks)."""
    monkeypatch.setattr(registry, "PAPERS_DIR", PAPERS)
    monkeypatch.setattr(registry, "EXPERIMENTS_DIR", EXPERIMENTS)
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in publish.names("p900"):
        shutil.copy(FIXTURE / name, docs / name)
    fresh = _rerun(results, tmp_path, 2.0)
    assert publish.main(["p900", "--update", str(fresh), "--docs", str(docs)]) == 0
    summary = read_json(docs / "p900.json")
    assert summary["run"]["commits"][-1] == "f" * 40
    assert _entry(summary, metric="qout_mean", scheme="fast", load=2.0)["seeds"]["1"] == \
        pytest.approx(200 * math.exp(-1))
    paper = papers.load_file(PAPERS / "p900.yaml", EXPERIMENTS)
    assert (docs / "p900.md").read_text() == publish.render(paper, summary)
    assert "commits 0123456, fffffff" in (docs / "p900.md").read_text()
    # a directory that is not there, and --from with --update, are the caller's mistakes
    assert publish.main(["p900", "--update", str(tmp_path / "none"), "--docs",
                         str(docs)]) == 2
    with pytest.raises(SystemExit) as exc:
        publish.main(["p900", "--update", str(fresh), "--from", str(fresh)])
    assert exc.value.code == 2


def test_an_update_never_compares_two_runs(results: Path, tmp_path: Path) -> None:
    """A claim whose baseline comes from another scenario: an update that holds one of
    the two scenarios is refused (the sides would be two runs); holding both, it reads
    both from the results given."""
    paper = _across_scenarios(tmp_path)
    earlier = extract.extract(paper, results)
    for missing, held in (("again", "short"), ("short", "again")):
        fresh = tmp_path / f"only-{held}"
        shutil.copytree(results / "tiny_sizes" / held, fresh / "tiny_sizes" / held)
        with pytest.raises(MissingResultsError, match=rf"claim across .*hold tiny_sizes\.yaml "
                           rf"scenario {held} but not scenario {missing}, the other side"):
            extract.extract(paper, fresh, previous=earlier)
    both = tmp_path / "both"
    for scenario in ("short", "again"):
        shutil.copytree(results / "tiny_sizes" / scenario, both / "tiny_sizes" / scenario)
    assert extract.extract(paper, both, previous=earlier)["series"] == earlier["series"]
