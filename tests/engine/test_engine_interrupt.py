"""No flow unaccounted: an experiment that stops early records every flow, Ctrl-C leaves
nothing behind, and ``dcnlab run --resume`` finishes it with the same flow list.

Real networks (root, Mininet, Open vSwitch, ryu-manager), driven through the CLI as a user
would: ``dcnlab run`` in a subprocess, SIGINT to it, then ``dcnlab run --resume``.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from engine_procs import leftovers
from engine_runs import csv_rows, dcnlab_argv, small_spec_file

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths, OVS)")

def _spec(tmp_path: Path, **changes: Any) -> Path:
    return small_spec_file(tmp_path, "stopme", **changes)


def _dcnlab(*args: str) -> list[str]:
    return dcnlab_argv(*args)


def _rows(out: Path) -> list[dict[str, str]]:
    return csv_rows(out / "flows.csv")


def _workload(out: Path) -> set[tuple[str, str, str]]:
    with open(out / "workload.csv", newline="") as fh:
        return {(r["seed"], r["load"], r["flow_id"]) for r in csv.DictReader(fh)}


FIRST_RUN_TIMEOUT = 300.0  # s; one run of _spec's takes about 30 s


def _wait_for_first_run(out: Path, proc: subprocess.Popen[str], timeout: float) -> None:
    """Return once ``out``'s meta.json lists a finished run; fail the test if ``proc``
    exits first or none is listed within ``timeout`` seconds (an interrupt before any
    run finished would test a different case: every flow not_run)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if json.loads((out / "meta.json").read_text())["runs"]:
                return
        except (OSError, ValueError, KeyError):
            pass
        assert proc.poll() is None, proc.communicate()
        if time.monotonic() >= deadline:
            pytest.fail(f"no run of {out} finished within {timeout:g} s: nothing to "
                        "interrupt after")
        time.sleep(0.2)


def test_the_wait_for_a_finished_run_fails_when_none_finishes(tmp_path: Path) -> None:
    """The network test below must not interrupt (and pass) when no run ever finished."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "meta.json").write_text(json.dumps({"runs": [], "status": "running"}))
    proc = subprocess.Popen(["sleep", "30"], text=True)  # stands in for `dcnlab run`
    try:
        with pytest.raises(pytest.fail.Exception, match="no run .* finished within 0.5 s"):
            _wait_for_first_run(out, proc, 0.5)
        (out / "meta.json").write_text(json.dumps({"runs": [{"scheme": "ecmp"}]}))
        _wait_for_first_run(out, proc, 0.5)  # a finished run: returns
    finally:
        proc.kill()  # ours
        proc.wait()


@pytest.mark.network
@needs_root
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_ctrl_c_leaves_nothing_behind_and_resume_finishes_the_same_flows(
        tmp_path: Path, signum: int) -> None:
    """Ctrl-C, and SIGTERM (``kill PID``, a batch scheduler's time limit) alike."""
    out = tmp_path / "out"
    # Ctrl-C reaches the run whoever started the suite: a shell starts a background
    # job (`scripts/test.sh &`) with SIGINT ignored, inherited down to here and across
    # exec; a handler is not (exec resets it to the default), so hold one while starting.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(_dcnlab("run", str(_spec(tmp_path)), "--out", str(out),
                                        "--quiet"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        _wait_for_first_run(out, proc, FIRST_RUN_TIMEOUT)  # interrupt after a finished run
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()  # ours
            proc.wait()
    assert proc.returncode == 130, err
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "interrupted"
    for network in meta["networks"]:
        assert leftovers(network["prefix"], network["run_dir"]) == [], network
    done = {(r["scheme"], str(r["seed"])) for r in meta["runs"]}
    rows = _rows(out)
    flows = _workload(out)
    for scheme in ("ecmp", "single_path"):
        for seed in ("1", "2"):
            mine = [r for r in rows if (r["scheme"], r["seed"]) == (scheme, seed)]
            assert {(r["seed"], r["load"], r["flow_id"]) for r in mine} == \
                {f for f in flows if f[0] == seed}, (scheme, seed)  # every flow, once
            statuses = {r["status"] for r in mine}
            if (scheme, seed) in done:
                assert "not_run" not in statuses
            else:
                assert statuses == {"not_run"}
                assert all("interrupted" in r["error"] for r in mine)

    resumed = subprocess.run(_dcnlab("run", "--resume", str(out), "--quiet"),
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["resumed"]
    rows = _rows(out)
    keys = [(r["scheme"], r["seed"], r["load"], r["flow_id"]) for r in rows]
    assert len(keys) == len(set(keys)) == 2 * len(flows)  # each flow once per scheme
    assert {r["status"] for r in rows} == {"ok"}
    assert _workload(out) == flows
    assert len(meta["runs"]) == 4


@pytest.mark.network
@needs_root
def test_a_scheme_whose_network_fails_leaves_not_run_rows_with_the_reason(
        tmp_path: Path) -> None:
    broken = tmp_path / "broken_app.py"
    broken.write_text("raise RuntimeError('this app cannot start')\n")
    out = tmp_path / "out"
    spec = _spec(tmp_path, schemes=["ecmp", {"name": "broken", "app": str(broken)}],
                 seeds=[1])
    result = subprocess.run(_dcnlab("run", str(spec), "--out", str(out), "--quiet"),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 1
    assert "did not start" in result.stderr
    rows = _rows(out)
    flows = _workload(out)
    broken_rows = [r for r in rows if r["scheme"] == "broken"]
    assert len(broken_rows) == len(flows)
    assert {r["status"] for r in broken_rows} == {"not_run"}
    assert all("did not start" in r["error"] for r in broken_rows)
    assert {r["status"] for r in rows if r["scheme"] == "ecmp"} == {"ok"}
    # Resuming keeps ecmp's rows, tries broken again, and still accounts each flow once.
    again = subprocess.run(_dcnlab("run", "--resume", str(out), "--quiet"),
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 1 and "did not start" in again.stderr
    rows_again = _rows(out)
    assert len(rows_again) == len(rows)
    assert [r for r in rows_again if r["scheme"] == "ecmp"] == \
        [r for r in rows if r["scheme"] == "ecmp"]


def test_a_scenario_that_never_started_still_has_a_row_per_flow(tmp_path: Path) -> None:
    from dcnlab.benchmarks.engine.runner import _flows, _record_skipped
    from dcnlab.benchmarks.engine.spec import load_specs

    spec = load_specs(_spec(tmp_path))[0]
    workloads = {(seed, value): _flows(spec, seed, value) for seed in spec.seeds
                 for value in spec.loads}
    out = tmp_path / "later"
    _record_skipped(spec, out, workloads, "an earlier scenario failed: boom")
    rows = _rows(out)
    assert len(rows) == 2 * sum(len(f) for f in workloads.values())
    assert {r["status"] for r in rows} == {"not_run"}
    assert all(r["error"] == "an earlier scenario failed: boom" for r in rows)
    assert json.loads((out / "meta.json").read_text())["status"] == "not_run"


@pytest.mark.network
@needs_root
def test_resume_with_more_seeds_runs_only_the_new_seeds(tmp_path: Path) -> None:
    """``--resume DIR --seeds`` adds seeds to a finished experiment: the recorded runs and
    rows stay as they were, the added seeds' flows join workload.csv and run, each once."""
    out = tmp_path / "out"
    spec = _spec(tmp_path, schemes=["ecmp"], seeds=[1])
    first = subprocess.run(_dcnlab("run", str(spec), "--out", str(out), "--quiet"),
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    rows_before = _rows(out)
    flows_before = _workload(out)
    assert {r["seed"] for r in rows_before} == {"1"}
    more = subprocess.run(_dcnlab("run", "--resume", str(out), "--seeds", "1-2", "--quiet"),
                          capture_output=True, text=True, timeout=600)
    assert more.returncode == 0, more.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["spec"]["seeds"] == [1, 2]
    assert [(r["scheme"], r["seed"]) for r in meta["runs"]] == [("ecmp", 1), ("ecmp", 2)]
    rows = _rows(out)
    assert rows[:len(rows_before)] == rows_before  # seed 1 was not run again
    flows = _workload(out)
    assert flows > flows_before and {f[0] for f in flows} == {"1", "2"}
    keys = [(r["seed"], r["load"], r["flow_id"]) for r in rows]
    assert len(keys) == len(set(keys)) and set(keys) == flows  # every flow once
    assert {r["status"] for r in rows} == {"ok"}
    assert meta["active_s"] > 0
    # the resumed session's code and machine are recorded next to the first session's
    (session,) = meta["resumed_sessions"]
    assert session["versions"]["git_commit"] == meta["versions"]["git_commit"]
    assert session["machine"]["cpus"] == meta["machine"]["cpus"]
