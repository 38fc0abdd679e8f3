"""The TFE/TCP-Path table-size benchmark: its spec is valid and its arithmetic right."""

from __future__ import annotations

import csv
from pathlib import Path

import yaml

from dcnlab.benchmarks import tfe_table_size as bench
from dcnlab.benchmarks.engine.spec import load_specs


def test_generated_spec_validates_with_both_scenarios(tmp_path: Path) -> None:
    args = bench.argparse.Namespace(topo="spineleaf:4,4,4", switch="ovs", rate="10M",
                                    loads=[0.1, 0.2], seeds=[1, 2], duration=20.0,
                                    drain=30.0, cdf=["websearch", "datamining"])
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(bench.experiment(args), sort_keys=False))
    specs = load_specs(path)
    assert [s.scenario for s in specs] == ["websearch", "datamining"]
    assert [s.name for s in specs[0].schemes] == ["tcppath", "tfe"]
    assert specs[0].settle > 10  # every run starts after the previous entries aged out


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_summary_ratio_and_elephant_share(tmp_path: Path) -> None:
    run = tmp_path / "websearch"
    run.mkdir()
    _write(run / "controller.csv", [
        {"scheme": "tcppath", "load": "0.2", "seed": 1, "entries_mean": 100.0,
         "entries_max": 150, "explorations": 40},
        {"scheme": "tcppath", "load": "0.2", "seed": 2, "entries_mean": 300.0,
         "entries_max": 400, "explorations": 60},
        {"scheme": "tfe", "load": "0.2", "seed": 1, "entries_mean": 10.0,
         "entries_max": 12, "explorations": 2},
        {"scheme": "tfe", "load": "0.2", "seed": 2, "entries_mean": 12.0,
         "entries_max": 20, "explorations": ""},
    ])
    _write(run / "workload.csv", [{"load": "0.2", "size": s}
                                  for s in [1_000, 20_000_000, 5_000, 7_000]])
    out = bench.summarize(tmp_path, ["websearch"])["websearch"]["0.2"]
    assert out["flows"] == 4 and out["elephant_share_pct"] == 25.0
    assert out["tcppath"] == {"entries_mean": 200.0, "entries_max": 400, "explorations": 100}
    assert out["tfe"]["entries_mean"] == 11.0 and out["tfe"]["explorations"] == 2
    assert out["tfe_over_tcppath_pct"] == 5.5
