"""The result-section seam (sections.py): the registry, a section added by a test reaching
summary.csv and summary.txt through report() alone, and the runner writing each
recording section's rows, a failing section costing only its own."""

from __future__ import annotations

import csv
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from results_dir import minimal_results
from toy_section import CSV, ToySection, toy_registered

from dcnlab.benchmarks.engine import report, runner, sections
from dcnlab.benchmarks.engine.results import CsvAppender, write_csv
from dcnlab.topo.spec import parse


def test_builtin_sections_in_report_order_and_no_name_twice() -> None:
    assert sections.names()[:3] == ["slowdown", "imbalance", "throughput"]
    with pytest.raises(ValueError, match="registered twice"):
        sections.register(type(sections.registered()[0])())
    with toy_registered():
        assert sections.names()[-1] == "toy"
        assert [s.name for s in sections.recording(object())] == ["imbalance", "throughput",
                                                                  "toy"]
    assert "toy" not in sections.names()


def _results(out: Path) -> None:
    minimal_results(out, ("ecmp", "spray"), 0.3)
    write_csv(out / CSV, ToySection.columns,
              [{"scheme": "ecmp", "load": 0.3, "seed": 1, "flows": 7,
                "switches_with_lines": 0},
               {"scheme": "spray", "load": 0.3, "seed": 1, "flows": 9,
                "switches_with_lines": 0}])


def test_a_section_added_in_a_test_reaches_the_summary(tmp_path: Path) -> None:
    out = tmp_path / "res"
    _results(out)
    assert "toy section" not in report(out).table  # not registered: not reported
    with toy_registered():
        table = report(out).table
    assert "toy section: ecmp 7 flows per run" in table
    assert "toy section: spray 9 flows per run" in table
    with open(out / "summary.csv", newline="") as fh:
        toy = {r["scheme"]: r for r in csv.DictReader(fh) if r["metric"] == "toy_flows"}
    assert toy["spray"]["mean"] == "9.0" and toy["spray"]["baseline"] == "ecmp"
    assert toy["spray"]["ratio"] in ("", "nan")  # a count: no ratio


class _Broken(ToySection):
    name = "broken"

    def run_rows(self, ctx: sections.RunContext) -> list[dict[str, Any]]:
        raise RuntimeError("boom")


def test_the_runner_writes_each_recording_section_and_survives_a_broken_one(
        tmp_path: Path) -> None:
    broken = _Broken()
    messages: list[str] = []
    with toy_registered() as toy:
        sections.register(broken)
        try:
            state = SimpleNamespace(
                section_csvs={s.name: CsvAppender(tmp_path / f"{s.name}.csv", s.columns)
                              for s in (toy, broken)},
                progress=SimpleNamespace(message=messages.append))
            ctx = sections.RunContext("ecmp", 0.3, 2, parse("fattree:4"), 0.0,
                                      [{"flow_id": 1}, {"flow_id": 2}], {"s7": []})
            runner._section_rows(state, ctx)  # type: ignore[arg-type]
        finally:
            sections.unregister(broken.name)
    for appender in state.section_csvs.values():
        appender.close()
    with open(tmp_path / "toy.csv", newline="") as fh:
        assert list(csv.DictReader(fh)) == [{"scheme": "ecmp", "load": "0.3", "seed": "2",
                                             "flows": "2", "switches_with_lines": "1"}]
    assert messages == ["warning: ecmp seed 2: result section broken: RuntimeError('boom')"]
