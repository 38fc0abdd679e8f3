"""Metrics math in memory: classes, percentiles, CIs, paired ratios, and the table."""

from __future__ import annotations

import math
from typing import Any

import pytest
from scipy import stats

from dcnlab.benchmarks.engine.metrics import (
    mean_ci,
    percentile,
    ratio_ci,
    run_metrics,
    size_class,
    summarize,
    throughput_mbps,
)
from dcnlab.benchmarks.engine.table import render


def test_ratio_interval_is_positive_and_log_symmetric() -> None:
    ratio, low, high = ratio_ci([2.0, 0.5, 1.0])
    assert ratio == pytest.approx(1.0)
    assert low > 0 and low == pytest.approx(1 / high)
    one = ratio_ci([3.0])
    assert one[0] == pytest.approx(3.0) and math.isnan(one[1])
    assert all(math.isnan(v) for v in ratio_ci([0.0]))


def test_size_classes_use_strict_bounds() -> None:
    assert size_class(9_999, "tcp", 10_000, 10_000_000) == "mouse"
    assert size_class(10_000, "tcp", 10_000, 10_000_000) == "rabbit"
    assert size_class(10_000_000, "tcp", 10_000, 10_000_000) == "rabbit"
    assert size_class(10_000_001, "tcp", 10_000, 10_000_000) == "elephant"
    assert size_class(0, "tcp", 10_000, 10_000_000) == "elephant"  # long-lived
    assert size_class(5, "udp", 10_000, 10_000_000) == "udp"


def test_percentiles_interpolate_linearly() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 99) == pytest.approx(4.96)
    assert math.isnan(percentile([], 50))


def test_confidence_interval_is_student_t() -> None:
    m, half = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0
    assert half == pytest.approx(stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3))
    m1, h1 = mean_ci([4.0])
    assert m1 == 4.0 and math.isnan(h1)
    m0, h0 = mean_ci([float("nan")])
    assert math.isnan(m0) and math.isnan(h0)


def _row(scheme: str, seed: int, size: int, fct: float | None, status: str = "ok",
         ooo: int = 0, segs: int = 10, load: float = 0.2, measured: bool = True
         ) -> dict[str, Any]:
    cls = size_class(size, "tcp", 10_000, 10_000_000)
    return {"scheme": scheme, "load": load, "seed": seed, "size": size, "class": cls,
            "fct": fct, "bytes": size if status == "ok" else size // 2, "status": status,
            "ooo": ooo, "segs_in": segs, "measured": measured, "kind": "tcp"}


def test_run_metrics_counts_failures_and_pools_out_of_order() -> None:
    rows = [
        _row("a", 1, 5_000, 0.010, ooo=1, segs=4),
        _row("a", 1, 5_000, 0.030, ooo=0, segs=4),
        _row("a", 1, 100_000, 0.200, ooo=3, segs=70),
        _row("a", 1, 20_000_000, 16.0, ooo=10, segs=14_000),
        _row("a", 1, 50_000, None, status="failed", ooo=0, segs=0),
    ]
    m = run_metrics(rows)
    assert m[("flows", "all")] == 5 and m[("failed", "all")] == 1
    assert m[("fct_mean", "mouse")] == pytest.approx(0.020)
    assert m[("fct_p50", "rabbit")] == pytest.approx(0.200)  # the failed flow has no FCT
    assert m[("tput_mbps", "elephant")] == pytest.approx(20e6 * 8 / 16.0 / 1e6)
    assert m[("ooo_pct", "mouse")] == pytest.approx(100 * 1 / 8)
    assert m[("ooo_pct", "all")] == pytest.approx(100 * 14 / (8 + 70 + 14_000))
    assert throughput_mbps({"fct": 0, "bytes": 5}) != throughput_mbps({"fct": 0, "bytes": 5})


def test_long_lived_flows_count_for_throughput_not_fct() -> None:
    # A long-lived flow's "FCT" is how long the workload let it run: no FCT figure.
    long_lived = _row("a", 1, 0, 12.0) | {"bytes": 30_000_000}
    m = run_metrics([long_lived, _row("a", 1, 20_000_000, 16.0)])
    assert m[("fct_mean", "elephant")] == pytest.approx(16.0)
    assert m[("tput_mbps", "elephant")] == pytest.approx((20.0 + 10.0) / 2)
    only = run_metrics([long_lived])
    assert math.isnan(only[("fct_mean", "elephant")]) and only[("flows", "all")] == 1


def test_ratios_are_paired_by_seed() -> None:
    rows = []
    # Seed 1: baseline 10 ms, other 5 ms; seed 2: baseline 40 ms, other 30 ms.
    for seed, base, other in ((1, 0.010, 0.005), (2, 0.040, 0.030)):
        rows.append(_row("ecmp", seed, 1_000, base))
        rows.append(_row("x", seed, 1_000, other))
    rows.append(_row("x", 2, 1_000, 9.0, measured=False))  # warm-up: ignored
    summary = {(r.scheme, r.metric, r.cls): r for r in summarize(rows, "ecmp")}
    x = summary[("x", "fct_mean", "mouse")]
    assert x.mean == pytest.approx(0.0175)
    assert x.seeds == 2
    # Geometric mean of the per-seed ratios (0.5 and 0.75), not the ratio of means (0.7).
    assert x.ratio == pytest.approx(math.sqrt(0.5 * 0.75))
    # In logs: sd of (log 0.5, log 0.75) is log(1.5) / sqrt(2), half-width t * sd / sqrt(2).
    half = stats.t.ppf(0.975, 1) * math.log(1.5) / 2
    assert x.ratio_low == pytest.approx(x.ratio * math.exp(-half))
    assert x.ratio_high == pytest.approx(x.ratio * math.exp(half))
    assert x.ratio_low > 0
    base = summary[("ecmp", "fct_mean", "mouse")]
    assert base.ratio == pytest.approx(1.0)
    assert math.isnan(summary[("x", "flows", "all")].ratio)  # counts get no ratio


def test_table_shows_every_scheme_and_ratio() -> None:
    rows = [_row(s, seed, 1_000, f) for seed in (1, 2, 3)
            for s, f in (("ecmp", 0.010 * seed), ("single", 0.012 * seed))]
    text = render(summarize(rows, "ecmp"), "ecmp", "load", "demo")
    assert "demo" in text and "load = 0.20 (3 seeds)" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("mouse FCT mean"))
    assert line.index("20") < line.index("24")  # ecmp column first, in ms
    assert "x1.20 [1.20, 1.20]" in line


def test_ratio_intervals_past_two_decades_are_not_printed_in_full() -> None:
    from dcnlab.benchmarks.engine.table import ratio_interval

    assert ratio_interval(0.5, 1.25) == "[0.50, 1.25]"
    assert ratio_interval(0.001, 45816106.94) == "[<0.01, >100]"
    assert ratio_interval(0.01, 100.0) == "[0.01, 100.00]"
