"""``dcnlab run --cluster``: real Dask workers (a LocalCluster of worker processes, or a
scheduler and a worker started here) running real networks (root, Mininet, Open
vSwitch, ryu-manager, TCP flows), driven through the CLI as a user would.

- ``local:2`` gives the same workload, the same (scheme, seed, load, flow) rows, the same
  files and columns and the same summary rows as a sequential run of the same file;
- a worker killed mid-task: its task runs again elsewhere (or its runs are ``not_run``),
  no flow is lost and nothing is left on the machine;
- Ctrl-C on the client: every worker stops its networks, finished runs are kept, and
  ``--resume`` finishes the experiment on another set of workers (one);
- a worker at another commit is refused before any run.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from emulated_lab import EmulatedHosts, available
from engine_procs import leftovers, marked_processes
from engine_runs import csv_rows, dcnlab_argv, small_spec_file
from waiting import wait_for

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths, OVS)")
pytestmark = [pytest.mark.network, needs_root]

RUN_TIMEOUT = 900.0  # s, a whole small experiment (each run takes about 30 s)
CHILD = "dcnlab.benchmarks.engine.cluster.child"


def _spec(tmp_path: Path, **changes: Any) -> Path:
    return small_spec_file(tmp_path, "spread", duration=3, **changes)


_dcnlab = dcnlab_argv
_rows = csv_rows


def _header(path: Path) -> list[str]:
    with open(path, newline="") as fh:
        return next(csv.reader(fh))


def _flow_keys(out: Path) -> list[tuple[str, str, str, str]]:
    return [(r["scheme"], r["seed"], r["load"], r["flow_id"]) for r in _rows(out / "flows.csv")]


def _expected_keys(out: Path, schemes: list[str]) -> set[tuple[str, str, str, str]]:
    return {(s, r["seed"], r["load"], r["flow_id"]) for r in _rows(out / "workload.csv")
            for s in schemes}


def _children() -> list[int]:
    """PIDs of task children (cluster.child processes) on this machine."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if CHILD.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _task_dirs() -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob("dcnlab-task-*"))


def _nothing_left(prefixes: list[str]) -> list[str]:
    """Whatever a cluster run left: task children and the processes they started (a
    network's controller), task directories, a network's links, processes or run
    directory."""
    found = [f"pid {pid}: a task child" for pid in _children()]
    found += marked_processes("dcnlab-task-")  # a task's processes, its network's too
    found += [str(d) for d in _task_dirs()]
    for prefix in prefixes:
        found += leftovers(prefix)
    return found


def _popen(args: list[str]) -> subprocess.Popen[str]:
    # SIGINT must reach the client whoever started the suite (a background job ignores
    # it; the default handler is restored across exec only if held while starting)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    finally:
        signal.signal(signal.SIGINT, previous)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()  # ours
        proc.wait()


@pytest.fixture(autouse=True)
def _no_task_dirs_before() -> None:
    assert _task_dirs() == [], "task directories of an earlier run: remove them first"


def test_local_cluster_writes_what_a_sequential_run_writes(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    seq, clu = tmp_path / "seq", tmp_path / "clu"
    ran = subprocess.run(_dcnlab("run", str(spec), "--out", str(seq), "--quiet"),
                         capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert ran.returncode == 0, ran.stderr
    ran = subprocess.run(_dcnlab("run", str(spec), "--out", str(clu), "--quiet",
                                 "--cluster", "local:2"),
                         capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert ran.returncode == 0, ran.stderr
    assert "4 run(s) in 4 task(s) on 2 worker(s)" in ran.stderr
    assert (clu / "workload.csv").read_bytes() == (seq / "workload.csv").read_bytes()
    keys = _flow_keys(clu)
    assert len(keys) == len(set(keys))  # every flow once
    assert set(keys) == set(_flow_keys(seq)) == _expected_keys(seq, ["ecmp", "single_path"])
    assert [r["status"] for r in _rows(clu / "flows.csv")].count("not_run") == 0
    # the same files, each with the same columns
    files = sorted(p.name for p in seq.glob("*.csv"))
    assert sorted(p.name for p in clu.glob("*.csv")) == files
    for name in files:
        assert _header(clu / name) == _header(seq / name), name
    # the same summary rows, each over the same number of seeds
    summary_keys = ("scheme", "load", "metric", "class", "seeds")
    assert sorted(tuple(r[k] for k in summary_keys) for r in _rows(clu / "summary.csv")) == \
        sorted(tuple(r[k] for k in summary_keys) for r in _rows(seq / "summary.csv"))
    meta = json.loads((clu / "meta.json").read_text())
    assert meta["status"] == "complete"
    workers = set(meta["clusters"][0]["workers"])  # label -> address
    assert len(workers) == 2
    assert {r["worker"] for r in meta["runs"]} <= workers and len(meta["runs"]) == 4
    for network in meta["networks"]:
        assert leftovers(network["prefix"]) == [], network
    assert wait_for(lambda: _nothing_left([]) == [], 60), _nothing_left([])
    rendered = subprocess.run(_dcnlab("report", str(clu)), capture_output=True, text=True,
                              timeout=300)
    assert rendered.returncode == 0, rendered.stderr
    assert (clu / "summary.txt").read_text().strip()


def test_a_worker_killed_mid_task_loses_no_flow_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _popen(_dcnlab("run", str(_spec(tmp_path, schemes=["ecmp"])), "--out", str(out),
                          "--quiet", "--cluster", "local:2"))
    try:
        # a task whose network is up (its part's meta.json lists it): kill its worker
        def started() -> tuple[int, str] | None:
            for task_dir in _task_dirs():
                try:
                    meta = json.loads((task_dir / "out" / "meta.json").read_text())
                except (OSError, ValueError):
                    continue
                if meta.get("networks"):
                    for pid in _children():
                        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                        if str(task_dir).encode() in cmdline:
                            return pid, meta["networks"][0]["prefix"]
            return None

        found = wait_for(started, 300, interval=0.2)
        assert found, proc.poll() is None or proc.communicate()
        child, killed_prefix = found
        worker_pid = int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1])
        os.kill(worker_pid, signal.SIGKILL)  # a worker our run started
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        _stop(proc)
    assert proc.returncode in (0, 1), stderr
    meta = json.loads((out / "meta.json").read_text())
    keys = _flow_keys(out)
    assert len(keys) == len(set(keys)) and set(keys) == _expected_keys(out, ["ecmp"])
    rows = _rows(out / "flows.csv")
    if proc.returncode == 0:  # retried on another worker: every run ran
        assert meta["status"] == "complete" and len(meta["runs"]) == 2
        assert "not_run" not in {r["status"] for r in rows}
    else:  # retried and lost again: its runs say so
        assert meta["status"] == "failed"
        assert any("died" in r["error"] for r in rows if r["status"] == "not_run")
    prefixes = [killed_prefix] + [n["prefix"] for n in meta["networks"]]
    assert wait_for(lambda: _nothing_left(prefixes) == [], 120), _nothing_left(prefixes)


def test_ctrl_c_stops_every_worker_and_resume_finishes_elsewhere(tmp_path: Path) -> None:
    out = tmp_path / "out"
    spec = _spec(tmp_path, schemes=["ecmp"], seeds=[1, 2, 3])
    proc = _popen(_dcnlab("run", str(spec), "--out", str(out), "--quiet",
                          "--cluster", "local:2"))
    try:
        def merged() -> bool:
            try:
                return bool(json.loads((out / "meta.json").read_text())["runs"])
            except (OSError, ValueError, KeyError):
                return False

        assert wait_for(merged, 400, interval=0.2), proc.poll() is None or proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=400)
    finally:
        _stop(proc)
    assert proc.returncode == 130, stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "interrupted"
    assert wait_for(lambda: _nothing_left([n["prefix"] for n in meta["networks"]]) == [],
                    60), _nothing_left([n["prefix"] for n in meta["networks"]])
    keys = _flow_keys(out)
    assert len(keys) == len(set(keys)) and set(keys) == _expected_keys(out, ["ecmp"])
    done = {str(r["seed"]) for r in meta["runs"]}
    for row in _rows(out / "flows.csv"):
        assert (row["status"] == "not_run") == (row["seed"] not in done), row
    assert len(done) < 3, "every run finished before the interrupt: nothing was stopped"

    resumed = subprocess.run(_dcnlab("run", "--resume", str(out), "--quiet",
                                     "--cluster", "local:1"),
                             capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "complete" and len(meta["runs"]) == 3
    assert len(meta["clusters"]) == 2
    keys = _flow_keys(out)
    assert len(keys) == len(set(keys)) and set(keys) == _expected_keys(out, ["ecmp"])
    assert "not_run" not in {r["status"] for r in _rows(out / "flows.csv")}


def test_a_worker_at_another_commit_is_refused_before_any_run(tmp_path: Path) -> None:
    """A real scheduler and a worker started with ``dcnlab worker``, the worker's git
    pointing at a clone with one more commit (a second checkout would need a venv of its
    own to be imported from)."""
    repo = Path(__file__).resolve().parents[2]
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(repo), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "another commit"], check=True)
    other = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], check=True,
                           capture_output=True, text=True).stdout.strip()
    address_file = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", "0", "--dashboard-address", "127.0.0.1:0", "--scheduler-file",
         str(address_file)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        assert wait_for(address_file.exists, 60), "the scheduler did not start"
        address = json.loads(address_file.read_text())["address"]
        worker = subprocess.Popen(_dcnlab("worker", address, "--name", "elsewhere"),
                                  env={**os.environ, "GIT_DIR": str(clone / ".git")},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = tmp_path / "out"
        ran = subprocess.run(_dcnlab("run", str(_spec(tmp_path)), "--out", str(out),
                                     "--quiet", "--cluster", address),
                             capture_output=True, text=True, timeout=300)
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                proc.terminate()  # ours
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    assert ran.returncode == 1, ran.stderr
    assert "refused before any run" in ran.stderr
    assert f"worker {os.uname().nodename}/elsewhere runs dcnlab commit {other}" in ran.stderr
    assert not (out / "flows.csv").exists()  # nothing ran
    assert _children() == [] and _task_dirs() == []


def test_an_ssh_cluster_runs_the_experiment_on_its_machines(tmp_path: Path) -> None:
    """``ssh:A,B`` through Dask's SSHCluster to two emulated machines (namespaces with
    their own sshd, sharing this file system as NFS-mounted lab servers would): the
    scheduler on A, a worker on each, every run on one of them."""
    why = available()
    assert why is None, why
    machines = EmulatedHosts(2)
    try:
        home = tmp_path / "home"
        (home / ".ssh").mkdir(parents=True)
        key = home / ".ssh" / "id_ed25519"  # asyncssh's default key and known hosts
        key.write_bytes(machines.key.read_bytes())
        key.chmod(0o600)
        host_key = machines.host_key.read_text().split()
        (home / ".ssh" / "known_hosts").write_text("".join(
            f"{m.address} {host_key[0]} {host_key[1]}\n" for m in machines.hosts))
        for m in machines.hosts:  # a route out, so Dask finds each machine's address
            subprocess.run(["ip", "-n", m.netns, "route", "add", "default", "via",
                            machines.gateway], check=True)
        out = tmp_path / "out"
        target = "ssh:" + ",".join(m.address for m in machines.hosts)
        ran = subprocess.run(_dcnlab("run", str(_spec(tmp_path, schemes=["ecmp"])), "--out",
                                     str(out), "--quiet", "--cluster", target),
                             capture_output=True, text=True, timeout=RUN_TIMEOUT,
                             env={**os.environ, "HOME": str(home)})
        assert ran.returncode == 0, ran.stderr
        meta = json.loads((out / "meta.json").read_text())
        workers = meta["clusters"][0]["workers"]
        assert {a.removeprefix("tcp://").rsplit(":", 1)[0] for a in workers.values()} == \
            {m.address for m in machines.hosts}
        assert {r["worker"] for r in meta["runs"]} <= set(workers) and len(meta["runs"]) == 2
        keys = _flow_keys(out)
        assert len(keys) == len(set(keys)) and set(keys) == _expected_keys(out, ["ecmp"])
        prefixes = [n["prefix"] for n in meta["networks"]]

        def left() -> list[str]:  # the networks were built in the machines' namespaces
            found = _nothing_left(prefixes)
            for m in machines.hosts:
                links = subprocess.run(["ip", "-n", m.netns, "-o", "link"], text=True,
                                       capture_output=True, check=True).stdout
                found += [f"{m.netns}: {line.split()[1]}" for line in links.splitlines()
                          if any(p in line for p in prefixes)]
            return found

        assert wait_for(lambda: left() == [], 60), left()
    finally:
        machines.close()
