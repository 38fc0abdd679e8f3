"""The main job on a lab: ``dcnlab run benchmarks/experiments/ecmp_vs_single.yaml --lab``
on an emulated lab of the file's own fat-tree (20 switch_ext processes for the hardware,
ports at the file's 20 Mbit/s, 16 servers with real sshd; tests/emulated_lab.py), against
the same file on Mininet, both at seed 1.

What must hold: the same flow list (workload.csv), every flow with a row on both, and a
summary with the same rows (scheme, load, metric, class) and the same plots: a lab's
results are read like a Mininet run's. One plot is drawn on what was measured, not on the
file: reorder_vs_throughput.png only when some run's long flows saw reordering, which two
datapaths at the same seed need not share; it must follow that rule on each."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest
from emulated_lab import EmulatedLab, available

from dcnlab.benchmarks.engine import pathdiag, run_experiment
from dcnlab.benchmarks.engine.results import read_flows
from dcnlab.lab import spec as lab_spec
from dcnlab.lab.fabric import LabPlace
from dcnlab.lab.ssh import SshLoop

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(available() is not None, reason=str(available()))]

MAIN_JOB = Path(__file__).resolve().parents[2] / "benchmarks/experiments/ecmp_vs_single.yaml"
TOPOLOGY = "fattree:4"  # the file's
PORT_RATE = 20_000_000  # bit/s: the file's link rate, as the lab's ports run


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def place() -> Iterator[LabPlace]:
    lab = EmulatedLab(TOPOLOGY, port_options=(f"rate={PORT_RATE}",))
    loop = SshLoop()
    try:
        yield LabPlace(lab_spec.parse(lab.lab_file()), loop)
    finally:
        loop.close()
        lab.close()


def test_the_main_job_on_a_lab_reads_like_the_same_job_on_mininet(
        place: LabPlace, tmp_path: Path) -> None:
    on_lab = run_experiment(MAIN_JOB, tmp_path / "lab", progress=False, seeds=[1],
                            place=place)
    on_mininet = run_experiment(MAIN_JOB, tmp_path / "mininet", progress=False, seeds=[1])
    assert on_lab.ok and on_mininet.ok, (on_lab.errors, on_mininet.errors)
    lab, mininet = tmp_path / "lab", tmp_path / "mininet"
    assert (lab / "workload.csv").read_text() == (mininet / "workload.csv").read_text()
    for out in (lab, mininet):  # every flow of the list has its row, under each scheme
        flows = {(r["seed"], r["load"], r["flow_id"]) for r in _rows(out / "workload.csv")}
        rows = [(r["scheme"], r["seed"], r["load"], r["flow_id"])
                for r in _rows(out / "flows.csv")]
        assert len(rows) == len(set(rows)) == 2 * len(flows) > 0, out
        assert {k[1:] for k in rows} == flows

    def keys(out: Path) -> set[tuple[str, str, str, str, str]]:
        return {(r["scheme"], r["load"], r["metric"], r["class"], r["baseline"])
                for r in _rows(out / "summary.csv")}
    assert keys(lab) == keys(mininet), (keys(lab) ^ keys(mininet))
    assert _plots(lab) == _plots(mininet)


def _plots(out: Path) -> set[str]:
    """The run's plot files less the one drawn on measured reordering, after checking that
    one is there exactly when the rule says (some run's long flows saw reordering)."""
    names = {p.name for p in (out / "plots").iterdir()}
    flows = read_flows(out / "flows.csv")
    assert any(r.get("reord_seen") is not None for r in flows), f"{out}: no TCP_INFO read"
    assert (pathdiag.PLOT_FILE in names) == pathdiag.some_run_reorders(flows), \
        (out, sorted(names))
    return names - {pathdiag.PLOT_FILE}
