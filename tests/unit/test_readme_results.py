"""scripts/readme_results.py renders the README's "What you get" section from a results
directory (written here with the engine's own writers, as a run writes it), and the
README holds the section's markers for it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dcnlab.benchmarks.engine.results import FLOW_COLUMNS, CsvAppender, write_json

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "readme_results.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_results", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rr = _load()


def _results(out: Path, status: str = "complete") -> None:
    """Two schemes, two loads, two seeds; single's FCTs are 1.5 x ECMP's on every flow."""
    out.mkdir(parents=True)
    write_json(out / "meta.json", {
        "name": "ecmp_vs_single", "scenario": None, "status": status,
        "started": "2026-11-30T10:00:00+0000", "finished": "2026-11-30T10:05:10+0000",
        "versions": {"git_commit": "0123456789abcdef", "git_dirty": False},
        "machine": {"os": "Debian GNU/Linux 12 (bookworm)", "cpus": 2,
                    "kernel": "6.1.0-test"},
        "spec": {"baseline": "ecmp", "sweep": "load", "topology": "fattree:4,rate=20M",
                 "workload_type": "poisson", "loads": [0.2, 0.4], "seeds": [1, 2],
                 "schemes": [{"name": "ecmp"}, {"name": "single"}]}})
    appender = CsvAppender(out / "flows.csv", FLOW_COLUMNS)
    rows: list[dict[str, Any]] = []
    for seed in (1, 2):
        for load in (0.2, 0.4):
            for scheme, slow in (("ecmp", 1.0), ("single", 1.5)):
                for size, fct in ((5_000, 0.01), (300_000, 0.3), (20_000_000, 12.0)):
                    rows.append({
                        "scheme": scheme, "load": load, "seed": seed, "flow_id": len(rows),
                        "size": size, "kind": "tcp", "status": "ok", "measured": True,
                        "class": ("mouse" if size < 10_000 else "elephant"
                                  if size > 10_000_000 else "rabbit"),
                        "fct": fct * slow * (1 + load) * (1 + 0.1 * seed), "bytes": size,
                        "ooo": 1, "segs_in": 100, "sched": 0.0})
    appender.write(rows)
    appender.close()


def _readme(path: Path) -> None:
    path.write_text(f"# x\n\n## What you get\n\n{rr.BEGIN}\nplaceholder\n{rr.END}\n\n"
                    "## Next\n\nkept\n")


def test_section_from_a_results_directory(tmp_path: Path) -> None:
    _results(tmp_path / "res")
    readme = tmp_path / "README.md"
    _readme(readme)
    assert rr.main([str(tmp_path / "res"), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert "placeholder" not in text
    assert text.startswith("# x\n\n## What you get\n\n" + rr.BEGIN)
    assert text.endswith(rr.END + "\n\n## Next\n\nkept\n")
    section = text[text.index(rr.BEGIN):text.index(rr.END)]
    # where, when, what: from meta.json
    assert "ecmp vs single on `fattree:4,rate=20M`, poisson workload" in section
    assert "load 0.20, 0.40, seeds 1, 2" in section
    assert "Debian GNU/Linux 12 (bookworm), 2 CPUs" in section
    assert "commit 0123456, 2026-11-30, 5 min" in section
    # the summary table as summary.txt has it, the main rows only
    assert "load = 0.20 (2 seeds)" in section and "load = 0.40 (2 seeds)" in section
    mouse = next(ln for ln in section.splitlines() if ln.startswith("mouse FCT mean"))
    assert "x1.50 [1.50, 1.50]" in mouse
    assert "elephant throughput (Mbit/s)" in section
    assert "reorder events" not in section  # a row the section leaves out
    # the plot, beside the README, linked relative to it
    image = tmp_path / "docs" / "img" / "main_job_fct_by_class.png"
    assert image.read_bytes().startswith(b"\x89PNG")
    assert "](docs/img/main_job_fct_by_class.png)" in section
    # the same results render the same README
    assert rr.main([str(tmp_path / "res"), "--readme", str(readme)]) == 0
    assert readme.read_text() == text


def test_incomplete_runs_and_missing_markers_are_refused(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture
                                                         ) -> None:
    _results(tmp_path / "stopped", status="interrupted")
    readme = tmp_path / "README.md"
    _readme(readme)
    before = readme.read_text()
    assert rr.main([str(tmp_path / "stopped"), "--readme", str(readme)]) == 2
    assert "'interrupted'" in capsys.readouterr().err
    assert readme.read_text() == before
    _results(tmp_path / "res")
    readme.write_text("# no markers\n")
    assert rr.main([str(tmp_path / "res"), "--readme", str(readme)]) == 2
    assert "what-you-get:begin" in capsys.readouterr().err
    assert not (tmp_path / "docs").exists()  # nothing written for nothing
    assert rr.main([str(tmp_path / "nothing"), "--readme", str(readme)]) == 2

