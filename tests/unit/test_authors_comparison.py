"""The authors' switch comparison table (benchmarks/authors_comparison.py), in memory:
per-seed ratios, the paper's values taken from its file, the one verdict rule, and the
datapaths' retransmitted share."""

from __future__ import annotations

import math
from typing import Any

import pytest

from dcnlab.benchmarks import authors_comparison as ac
from dcnlab.benchmarks.engine.reproduction import papers


def _flow(scheme: str, seed: int, load: float, cls: str, size: int, fct: float,
          retransmits: int = 0) -> dict[str, Any]:
    return {"scheme": scheme, "seed": seed, "load": load, "class": cls, "size": size,
            "bytes": size, "fct": fct, "status": "ok", "measured": True, "kind": "tcp",
            "retransmits": retransmits, "ooo": 0, "segs_in": 1}


def _rows(factor: dict[str, float]) -> list[dict[str, Any]]:
    """Per scheme, every elephant's FCT scaled by ``factor`` (throughput by its inverse),
    seeds 1-3 with a little spread, one mouse each."""
    rows = []
    for scheme, f in factor.items():
        for seed, spread in ((1, 1.0), (2, 1.05), (3, 0.95)):
            rows.append(_flow(scheme, seed, 0.4, "elephant", 20_000_000, 20.0 * f * spread,
                              retransmits=100))
            rows.append(_flow(scheme, seed, 0.4, "mouse", 5_000, 0.02))
    return rows


def test_ratios_paper_values_and_verdicts() -> None:
    # authors' TCP-Path elephants take 1/1.5 of ECMP's time: throughput x1.5, the paper's
    rows = _rows({"ecmp": 1.0, "tcppath": 1.0, "authors_tcppath": 1 / 1.5})
    paper = ac.paper_values(papers.load("p001"))
    assert paper[("tcppath", "tput_mbps", "elephant", 0.4)] == 1.5
    found = {(r["scheme"], r["baseline"], r["metric"], r["class"]): r
             for r in ac.comparisons(ac.per_seed_values(rows), paper)}
    theirs = found[("authors_tcppath", "ecmp", "tput_mbps", "elephant")]
    # the same spread on both sides' seeds: the ratio is exactly 1.5 per seed
    assert theirs["ratio"] == pytest.approx(1.5) and theirs["seeds"] == 3
    assert theirs["paper"] == 1.5
    ours = found[("tcppath", "ecmp", "tput_mbps", "elephant")]
    assert ours["ratio"] == pytest.approx(1.0)
    against = found[("authors_tcppath", "tcppath", "tput_mbps", "elephant")]
    assert against["paper"] is None  # the paper compares with ECMP only
    # the ARP-Path pairs are absent: no such scheme ran
    assert not any(k[0].endswith("arppath") or k[1].endswith("arppath") for k in found)


def test_retransmitted_share_counts_data_segments() -> None:
    rows = _rows({"ecmp": 1.0})
    pct = ac.retransmitted_pct(rows)
    segs = 3 * (math.ceil(20_000_000 / ac.MSS) + math.ceil(5_000 / ac.MSS))
    assert pct[("ecmp", 0.4)] == pytest.approx(100 * 300 / segs)
    text = ac.render(ac.comparisons(ac.per_seed_values(rows), {}), pct)
    assert f"retransmitted segments per 100 data segments: ecmp {100 * 300 / segs:.2f}" \
        in text


def test_the_diagnosis_averages_each_scheme_over_its_runs(tmp_path) -> None:
    (tmp_path / "flowdiag.csv").write_text(
        "scheme,load,seed,eleph_shared_frac,eleph_contention,least_loaded_path_frac\n"
        "ecmp,0.4,1,0.8,1.0,0.25\necmp,0.4,2,0.6,0.5,\n"
        "authors_tcppath,0.4,1,0.2,0.1,0.5\n")
    (tmp_path / "paths.csv").write_text("scheme,load,seed,recoveries,timeouts\n"
                                        "ecmp,0.4,1,100,4\necmp,0.4,2,300,6\n")
    found = ac.diagnosis(tmp_path)
    assert found[("ecmp", 0.4)] == pytest.approx({
        "elephants sharing": 0.7, "contention": 0.75, "least loaded path": 0.25,
        "TCP recoveries": 200, "TCP timeouts": 5})  # a run without a value is left out
    assert "TCP recoveries" not in found[("authors_tcppath", 0.4)]  # no paths.csv row
    table = ac.render_diagnosis(found)
    assert "| 0.4 | authors_tcppath | 0.2 | 0.1 | 0.5 | - | - |" in table
