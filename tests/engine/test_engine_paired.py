"""Per-flow paired ratios (benchmarks/engine/paired.py): each flow against itself under
the baseline, on the same seed, sweep value and flow id."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path
from typing import Any

import pytest

from dcnlab.benchmarks.engine import paired, report
from dcnlab.benchmarks.engine.results import FLOW_COLUMNS, CsvAppender, write_json


def _flow(scheme: str, seed: int, fid: int, size: int, fct: float, **extra: Any
          ) -> dict[str, Any]:
    cls = "mouse" if size < 10_000 else "elephant" if size > 10_000_000 else "rabbit"
    return {"scheme": scheme, "load": 0.4, "seed": seed, "flow_id": fid, "size": size,
            "kind": "tcp", "class": cls, "fct": fct, "bytes": size, "status": "ok",
            "measured": True, **extra}


def _workload(rng: random.Random) -> list[tuple[int, int, int, float]]:
    """(seed, flow id, size, ECMP's FCT): sizes and times spread over orders of magnitude,
    as a heavy-tailed workload's are."""
    out = []
    for seed in (1, 2, 3):
        for fid in range(40):
            size = rng.choice([2_000, 300_000, 30_000_000]) * rng.randint(1, 3)
            out.append((seed, fid, size, size * 8 / 10e6 * rng.uniform(1, 20)))
    return out


def test_each_flow_is_paired_with_itself_so_the_workloads_spread_cancels() -> None:
    rows = []
    for seed, fid, size, fct in _workload(random.Random(1)):
        rows.append(_flow("ecmp", seed, fid, size, fct))
        # Every flow of the scheme takes 0.8 of its ECMP time, whatever its size.
        rows.append(_flow("tcppath", seed, fid, size, fct * 0.8))
    got = {(r.figure, r.cls): r for r in paired.summarize(rows, "ecmp")}
    tput = got[("tput_mbps", "elephant")]
    assert tput.ratio == pytest.approx(1.25) and tput.better == 1.0
    assert tput.high - tput.low < 1e-9  # no spread left once flows are paired
    for cls in ("mouse", "rabbit", "elephant"):
        fct = got[("fct", cls)]
        assert fct.ratio == pytest.approx(0.8) and fct.better == 1.0
    assert sum(got[("fct", c)].pairs for c in ("mouse", "rabbit", "elephant")) == 120
    assert {r.scheme for r in got.values()} == {"tcppath"}  # not the baseline itself


def test_only_flows_completed_and_measured_under_both_are_paired() -> None:
    rows = [
        _flow("ecmp", 1, 0, 20_000_000, 20.0), _flow("tfe", 1, 0, 20_000_000, 10.0),
        _flow("ecmp", 1, 1, 20_000_000, 20.0), _flow("tfe", 1, 1, 20_000_000, 5.0,
                                                      status="failed"),
        _flow("ecmp", 1, 2, 20_000_000, 20.0, measured=False),
        _flow("tfe", 1, 2, 20_000_000, 5.0),
        _flow("tfe", 1, 3, 20_000_000, 5.0),  # never ran under ECMP
        _flow("ecmp", 2, 0, 20_000_000, 40.0),  # seed 2's flow 0 is another flow
    ]
    (tput,) = [r for r in paired.summarize(rows, "ecmp") if r.figure == "tput_mbps"]
    assert tput.pairs == 1 and tput.ratio == pytest.approx(2.0)
    assert math.isnan(tput.low)  # one pair: no interval


def test_mixed_outcomes_give_an_interval_around_the_geometric_mean() -> None:
    rows = []
    for fid, factor in enumerate([0.5, 2.0, 1.0, 1.0, 0.5, 2.0]):
        rows.append(_flow("ecmp", 1, fid, 5_000, 0.01))
        rows.append(_flow("tcppath", 1, fid, 5_000, 0.01 * factor))
    (mouse,) = [r for r in paired.summarize(rows, "ecmp") if r.cls == "mouse"]
    assert mouse.ratio == pytest.approx(1.0) and mouse.low < 1.0 < mouse.high
    assert mouse.better == pytest.approx(2 / 6)
    text = paired.render(paired.summarize(rows, "ecmp"), "load")
    assert "per-flow paired ratio to ecmp" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("mouse FCT"))
    assert "x1.00 [" in line and "(6; 33%)" in line
    assert paired.summarize(rows, None) == [] and paired.render([], "load") == ""


def test_report_writes_the_paired_section_and_csv(tmp_path: Path) -> None:
    out = tmp_path / "res"
    out.mkdir()
    write_json(out / "meta.json", {
        "name": "demo", "status": "complete",
        "spec": {"baseline": "ecmp", "sweep": "load", "topology": "spineleaf:2,2,2",
                 "workload_type": "poisson", "schemes": [{"name": "ecmp"}, {"name": "tp"}]}})
    appender = CsvAppender(out / "flows.csv", FLOW_COLUMNS)
    rows = []
    for seed, fid, size, fct in _workload(random.Random(2)):
        rows += [_flow("ecmp", seed, fid, size, fct), _flow("tp", seed, fid, size, fct / 2)]
    appender.write(rows)
    appender.close()
    result = report(out)
    assert "per-flow paired ratio to ecmp" in result.table
    assert out / "paired.csv" in result.files
    with open(out / "paired.csv", newline="") as fh:
        table = {(r["figure"], r["class"]): r for r in csv.DictReader(fh)}
    assert float(table[("tput_mbps", "elephant")]["ratio"]) == pytest.approx(2.0)
    assert float(table[("fct", "mouse")]["better_frac"]) == 1.0
