"""benchmarks/seed000_tables.py on a summary.csv written in memory."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from figure_content import (
    assert_readable,
    bar_heights,
    bar_series,
    intervals,
    panels,
    saved_figures,
)

from dcnlab.benchmarks import seed000_tables as t
from dcnlab.benchmarks.engine.results import SUMMARY_COLUMNS


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=SUMMARY_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in SUMMARY_COLUMNS})


def _row(scheme: str, metric: str, cls: str, mean: float, ratio: object = "",
         low: object = "", high: object = "", baseline: str = "ecmp") -> dict[str, object]:
    return {"scheme": scheme, "load": 8.0, "metric": metric, "class": cls, "seeds": 3,
            "mean": mean, "ci95": 1.0, "ratio": ratio, "ratio_low95": low,
            "ratio_high95": high, "baseline": baseline}


def test_tables_show_ratios_to_both_baselines_and_the_diagnosis(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [_row("ecmp", "tput_mbps", "elephant", 28.0),
            _row("single", "tput_mbps", "elephant", 26.0, 0.95, 0.7, 1.3),
            _row("spray", "tput_mbps", "elephant", 24.5, 0.88, 0.70, 1.12),
            _row("spray", "tput_mbps", "elephant", 24.5, 0.93, 0.76, 1.15, "single"),
            _row("spray", "fct_mean", "rabbit", 0.15, 0.5, 0.4, 0.6),
            _row("spray", "ooo_pct", "elephant", 51.8),
            _row("spray", "recoveries", "path", 140.0),
            _row("spray", "undos", "path", 139.0),
            _row("ecmp", "drops", "net", 0.0),
            _row("spray", "tput_mbps", "elephant", 24.5, 1.4, 1.2, 1.6, "first_path")]
    _write(tmp_path / "sweep" / "linux" / "summary.csv", rows)
    _write(tmp_path / "main" / "random" / "summary.csv", rows)
    main = t.main_table(t.scenarios(tmp_path / "main")["random"])
    assert "x0.88 [0.70-1.12]" in main and "x0.93 [0.76-1.15]" in main
    assert "x0.50 [0.40-0.60]" in main and "51.8" in main
    assert "long tput /first_path" in main and "x1.40 [1.20-1.60]" in main
    sweep = t.sweep_table(t.scenarios(tmp_path / "sweep"))
    line = next(ln for ln in sweep.splitlines() if ln.startswith("linux"))
    assert "26.0" in line and "28.0" in line and "24.5" in line and "140/139" in line
    figures = saved_figures(monkeypatch)
    png = t.sweep_plot(t.scenarios(tmp_path / "sweep"), tmp_path / "plot" / "s.png")
    assert png.is_file()
    assert_readable(figures["s.png"], "s.png")
    (ax,) = panels(figures["s.png"])  # a bar per scheme, a group per setting (the ticks)
    assert [label.get_text() for label in ax.get_xticklabels()] == ["linux"]
    assert bar_series(ax) == ["single", "ecmp", "spray"]
    assert [bar_heights(ax, s)[0] for s in ("single", "ecmp", "spray")] == [26.0, 28.0, 24.5]


def test_sweep_plot_names_its_axes_and_cuts_intervals_at_zero(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two settings; spray's throughput under reno is 2 +- 5 Mbit/s (three seeds far
    apart): its whisker stops at 0, not at -3 (a throughput is never negative), the
    others keep their symmetric interval; the x axis says what its ticks are."""
    for name, spray in (("linux", (24.5, 1.0)), ("reno", (2.0, 5.0))):
        rows = [_row("single", "tput_mbps", "elephant", 26.0),
                _row("ecmp", "tput_mbps", "elephant", 28.0),
                {**_row("spray", "tput_mbps", "elephant", spray[0]), "ci95": spray[1]}]
        _write(tmp_path / "sweep" / name / "summary.csv", rows)
    figures = saved_figures(monkeypatch)
    t.sweep_plot(t.scenarios(tmp_path / "sweep"), tmp_path / "s.png")
    fig = figures["s.png"]
    assert_readable(fig, "s.png")
    (ax,) = panels(fig)
    assert "setting" in ax.get_xlabel()
    assert [label.get_text() for label in ax.get_xticklabels()] == ["linux", "reno"]
    assert bar_heights(ax, "spray") == [24.5, 2.0]
    # whiskers per scheme in plotting order (single, ecmp, spray), a setting each:
    # mean -+ 1 (_row's ci95), spray under reno from max(2 - 5, 0) to 2 + 5
    assert intervals(ax) == [(25.0, 27.0), (25.0, 27.0), (27.0, 29.0), (27.0, 29.0),
                             (23.5, 25.5), (0.0, 7.0)]


def test_a_directory_without_summaries_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no summary.csv"):
        t.scenarios(tmp_path)


def test_host_link_bound_is_the_fluid_max_min_over_host_links() -> None:
    mb = 1_000_000.0
    # two flows into one receiver share its 50 Mbit/s and finish together
    assert t.host_link_bound([("h1", "h3", mb), ("h2", "h3", mb)], 50) == pytest.approx(
        [25, 25])
    # a third flow from h1 elsewhere: h1's uplink is shared by two, h3's downlink too:
    # every flow gets 25 until all finish together
    assert t.host_link_bound([("h1", "h3", mb), ("h2", "h3", mb), ("h1", "h4", mb)],
                             50) == pytest.approx([25, 25, 25])
    # a lone flow at line rate; a short one alongside finishes first, then it speeds up
    assert t.host_link_bound([("h1", "h2", mb)], 50) == pytest.approx([50])
    fast = t.host_link_bound([("h1", "h2", 2 * mb), ("h3", "h2", mb)], 50)
    # 25 each until the 1 MB flow ends at 0.32 s; the 2 MB flow's last 1 MB at 50: 0.48 s
    assert fast == pytest.approx([16 / 0.48, 25])
