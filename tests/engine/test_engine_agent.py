"""Traffic agents on loopback (no root, no network): every flow is recorded, whatever
happens to it.  Each "host" is an agent process bound to its own 127.0.0.x address."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from engine_procs import agent_pid

from dcnlab.benchmarks.engine.replay import Endpoint, ReplayError, merge_records, replay
from dcnlab.benchmarks.engine.workloads import Flow


def _hosts(n: int) -> dict[str, Endpoint]:
    return {f"h{i}": Endpoint(f"h{i}", f"127.0.0.{i}") for i in range(1, n + 1)}


def test_every_kind_of_flow_completes(tmp_path: Path) -> None:
    flows = [Flow(i, f"h{1 + i % 3}", f"h{1 + (i + 1) % 3}", size, 0.02 * i,
                  sport=20000 + i)
             for i, size in enumerate([1, 500, 9_999, 200_000, 3_000_000, 64_000])]
    flows.append(Flow(6, "h1", "h2", 0, 0.0, stop=0.4, sport=30001, dscp=8, tag="long"))
    flows.append(Flow(7, "h3", "h1", 0, 0.1, kind="udp", stop=0.4, rate_mbit=10.0,
                      sport=20100))
    done: list[int] = []
    result = replay(flows, _hosts(3), tmp_path, drain=10.0, sample_interval=0.05,
                    on_done=lambda fid, status: done.append(fid))
    assert result.errors == []
    assert sorted(done) == list(range(8))
    for flow in flows:
        rec = result.records[flow.id]
        assert rec["status"] == "ok", rec
        assert rec["start"] is not None and rec["end"] >= rec["start"]
        assert rec["sport"] == flow.sport
        if flow.kind == "tcp" and flow.size:
            assert rec["bytes"] == flow.size
            # (retransmissions happen even on loopback: tail-loss probes count)
            assert rec["fct"] > 0 and rec["retrans"] is not None and rec["segs_in"] > 0
    long_lived = result.records[6]
    assert long_lived["bytes"] > 1_000_000 and long_lived["end"] >= 0.4
    udp = result.records[7]
    expected = 10e6 * 0.3 / 8  # 10 Mbit/s for 0.3 s, headers excluded
    assert 0.5 * expected < udp["bytes"] <= 1.05 * expected
    assert udp["pkts_sent"] > 0
    samples = (tmp_path / "samples_h1.jsonl").read_text().splitlines()
    assert any(json.loads(s)["id"] == 6 for s in samples)
    assert all(info["exit"] == 0 for info in result.agents.values())


def test_busy_source_port_moves_to_the_next_one(tmp_path: Path) -> None:
    blocker = socket.create_server(("127.0.0.1", 21000))
    try:
        flows = [Flow(0, "h1", "h2", 10_000, 0.0, sport=21000)]
        result = replay(flows, _hosts(2), tmp_path, drain=5.0,
                        port_ranges={False: (21000, 21010), True: (30001, 30010)},
                        elephant=lambda f: False)
    finally:
        blocker.close()
    assert result.records[0]["status"] == "ok"
    assert result.records[0]["sport"] == 21001


def test_unfinished_flows_are_recorded_at_the_deadline(tmp_path: Path) -> None:
    # A long-lived flow that outlives horizon + drain is stopped and kept as unfinished.
    flows = [Flow(0, "h1", "h2", 1_000, 0.0, sport=20000),
             Flow(1, "h1", "h2", 0, 0.0, stop=60.0, sport=30001)]
    result = replay(flows, _hosts(2), tmp_path, drain=0.3, horizon=0.0)
    assert result.records[0]["status"] == "ok"
    assert result.records[1]["status"] == "unfinished", result.records[1]
    assert result.records[1]["bytes"] > 0
    assert result.errors == []


# Forwards control lines to the agent it starts, all but "start" half a second late: a
# host whose agent is slow to hear the deadline.
_SLOW_CONTROL = """
import subprocess, sys, time
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE)
for line in iter(sys.stdin.buffer.readline, b""):
    if not line.startswith(b"start"):
        time.sleep(0.5)
    child.stdin.write(line)
    child.stdin.flush()
child.stdin.close()
sys.exit(child.wait())
"""


def test_a_sender_slow_to_stop_records_unfinished_not_a_reset(tmp_path: Path) -> None:
    # The receiver's agent stops at once, the sender's half a second later: the
    # receiver must not close the connection under a sender that is still sending.
    import subprocess
    import sys

    def slow_popen(argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", _SLOW_CONTROL, *argv],
                                **kwargs)  # type: ignore[call-overload]

    hosts = _hosts(2)
    hosts["h1"].popen = slow_popen
    flows = [Flow(0, "h1", "h2", 0, 0.0, stop=60.0, sport=30001)]
    result = replay(flows, hosts, tmp_path, drain=0.5, horizon=0.0)
    assert result.records[0]["status"] == "unfinished", result.records[0]
    assert result.records[0]["bytes"] > 0
    assert result.errors == []


def test_an_agent_that_dies_is_reported_and_its_flows_kept(tmp_path: Path) -> None:
    flows = [
        Flow(0, "h1", "h3", 20_000, 0.0, sport=20000),  # finishes before the kill
        Flow(1, "h2", "h3", 0, 0.0, stop=30.0, sport=30001),  # running when h2 dies
        Flow(2, "h1", "h2", 0, 0.0, stop=30.0, sport=30002),  # towards the dying host
        Flow(3, "h2", "h1", 5_000, 20.0, sport=20001),  # scheduled after the death
        Flow(4, "h3", "h1", 5_000, 1.5, sport=20002),  # unaffected, after the death
    ]
    killed: list[int] = []

    def kill_h2() -> None:
        pid = agent_pid(tmp_path / "plan_h2.json")
        records = tmp_path / "records_h1.jsonl"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (
                records.exists() and '"id":0' in records.read_text()):
            time.sleep(0.05)
        time.sleep(0.3)
        os.kill(pid, signal.SIGKILL)  # our own child, by its PID
        killed.append(pid)

    killer = threading.Thread(target=kill_h2)
    killer.start()
    result = replay(flows, _hosts(3), tmp_path, drain=2.0, horizon=2.0)
    killer.join()
    assert killed
    assert len(result.errors) == 1
    assert "agent on h2" in result.errors[0] and "signal 9" in result.errors[0]
    status = {fid: rec["status"] for fid, rec in result.records.items()}
    assert status[0] == "ok" and status[4] == "ok"
    assert status[1] == "agent_died" and status[3] == "agent_died"
    assert status[2] == "failed"
    # the sender towards the dead host sees its connection go, as a socket error says
    error = result.records[2]["error"].lower()
    assert any(w in error for w in ("reset", "refused", "broken pipe", "timed out")), error


def test_merge_prefers_the_receiver_for_bytes() -> None:
    flows = [Flow(0, "h1", "h2", 100, 0.0), Flow(1, "h1", "h2", 100, 0.0),
             Flow(2, "h3", "h2", 100, 0.0)]
    rows = [
        {"role": "tx", "id": 0, "status": "ok", "fct": 0.1, "bytes": 100, "ooo": 2,
         "segs_in": 5, "retrans": 1},
        {"role": "rx", "id": 0, "bytes": 100, "ooo": 2, "segs_in": 5},
        {"role": "tx", "id": 1, "status": "failed", "error": "recv: reset", "bytes": 60},
        {"role": "rx", "id": 1, "bytes": 40, "ooo": 0, "segs_in": 1, "error": "early"},
    ]
    merged = merge_records(rows, flows, dead={"h3"})
    assert merged[0]["bytes"] == 100 and merged[0]["retrans"] == 1 and merged[0]["ooo"] == 2
    assert merged[1]["bytes"] == 40 and merged[1]["status"] == "failed"
    assert merged[2]["status"] == "agent_died"


@pytest.mark.parametrize("n", [1])
def test_agent_rejects_unknown_commands(tmp_path: Path, n: int) -> None:
    # A malformed control line is reported, not fatal.
    import subprocess
    import sys

    plan = {"host": "h1", "listen_ip": "127.0.0.1", "port": 5001,
            "records": str(tmp_path / "r.jsonl"), "flows": []}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    proc = subprocess.Popen([sys.executable, "-m", "dcnlab.benchmarks.engine.agent",
                             str(tmp_path / "plan.json")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(b"jump\nstart 0\nstop\n", timeout=20)
    events = [json.loads(line)["event"] for line in out.splitlines()]
    assert proc.returncode == 0, err
    assert events[0] == "ready" and "error" in events and events[-1] == "stopped"


def test_receivers_count_bytes_per_flow_every_interval(tmp_path: Path) -> None:
    # h2 receives a 20 Mbit/s UDP flow and a long TCP flow; h3 a sized TCP flow.
    flows = [Flow(0, "h1", "h2", 0, 0.0, stop=0.6, sport=30001),
             Flow(1, "h1", "h3", 300_000, 0.1, sport=20001),
             Flow(2, "h3", "h2", 0, 0.1, kind="udp", stop=0.5, rate_mbit=20.0, sport=20002)]
    result = replay(flows, _hosts(3), tmp_path, drain=10.0, rx_interval=0.05)
    assert result.errors == []
    h2 = [json.loads(line) for line in (tmp_path / "rx_h2.jsonl").read_text().splitlines()]
    h3 = [json.loads(line) for line in (tmp_path / "rx_h3.jsonl").read_text().splitlines()]
    assert (tmp_path / "rx_h1.jsonl").is_file()  # every agent samples, receiving or not
    times = [row["t"] for row in h2]
    assert times[0] >= 0 and times == sorted(times)
    # How many ticks fire depends on how busy the machine is, not on the agent: a tick
    # that comes late (the agent is busy with an unshaped loopback flow, or not
    # scheduled at all on a loaded machine) is skipped, never doubled.  So no count of
    # ticks is asserted beyond what holds however late they come: the tick at T0 fires
    # at the latest in the turn of h2's event loop in which it answers flow 0 (timers
    # run after the sockets' events), which it does only after flow 0's sender stopped
    # at T0 + 0.6 s; the runner sends "stop" -- where h2 writes its last line, the final
    # count -- only after that answer.  So at least that tick and the final line, the
    # final one at 0.6 s or later (1e-6: the file rounds t to microseconds).
    assert len(h2) >= 2 and times[-1] >= 0.6 - 1e-6
    # The grid ticks (all lines but the final one) never come twice in one 0.05 s period:
    # between two of them lies a point of the grid (within the file's rounding).
    ticks = times[:-1]
    for before, after in zip(ticks[:-1], ticks[1:], strict=True):
        grid_point = math.floor((after + 1e-6) / 0.05) * 0.05  # the last one <= after
        assert grid_point > before - 1e-6, (before, after)
    counts = [row["bytes"].get("0", 0) for row in h2]
    assert counts == sorted(counts) and counts[-1] == result.records[0]["bytes"]
    assert h2[-1]["bytes"]["2"] == result.records[2]["bytes"] > 0
    assert h3[-1]["bytes"]["1"] == 300_000  # kept after the flow ended
    assert "1" not in h2[-1]["bytes"] and "0" not in h3[-1]["bytes"]


def test_an_agent_that_cannot_join_its_cgroup_refuses_to_start(tmp_path: Path) -> None:
    hosts = _hosts(2)
    hosts["h1"].cgroup_procs = str(tmp_path / "no" / "such" / "cgroup.procs")
    flows = [Flow(0, "h1", "h2", 10_000, 0.0, sport=20000)]
    with pytest.raises(ReplayError, match="cannot join cgroup .*cgroup.procs"):
        replay(flows, hosts, tmp_path, drain=5.0)
    assert not (tmp_path / "records_h2.jsonl").read_text()  # nothing was sent


def test_an_agent_joins_the_cgroup_it_is_given(tmp_path: Path) -> None:
    # Any writable file stands in for cgroup.procs: the agent writes its PID there
    # before it opens a socket.
    procs = tmp_path / "cgroup.procs"
    procs.write_text("")
    hosts = _hosts(2)
    hosts["h1"].cgroup_procs = str(procs)
    result = replay([Flow(0, "h1", "h2", 10_000, 0.0, sport=20000)], hosts, tmp_path,
                    drain=5.0)
    assert result.records[0]["status"] == "ok"
    assert procs.read_text() == str(result.agents["h1"]["pid"])


class _FarFiles:
    """A host whose files are elsewhere (a lab server's): a directory of its own that
    only put/get reach, counting what travelled."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir()
        self.workdir = str(workdir)
        self.python = sys.executable
        self.moved: list[tuple[str, str]] = []

    def put(self, local: Path, remote: str) -> None:
        self.moved.append(("put", Path(remote).name))
        Path(remote).write_bytes(local.read_bytes())

    def get(self, remote: str, local: Path) -> None:
        self.moved.append(("get", Path(remote).name))
        local.write_bytes(Path(remote).read_bytes())


def test_a_host_without_the_run_directory_gets_its_plan_and_gives_its_records(
        tmp_path: Path) -> None:
    far = {name: _FarFiles(tmp_path / f"far_{name}") for name in ("h1", "h2")}
    hosts = {name: Endpoint(name, f"127.0.0.{i}", files=far[name])
             for i, name in enumerate(("h1", "h2"), start=1)}
    flows = [Flow(0, "h1", "h2", 50_000, 0.0, sport=22000),
             Flow(1, "h2", "h1", 20_000, 0.05, sport=22001)]
    run_dir = tmp_path / "run"
    result = replay(flows, hosts, run_dir, drain=10.0, sample_interval=0.05)
    assert result.errors == [] and {r["status"] for r in result.records.values()} == {"ok"}
    assert result.records[0]["bytes"] == 50_000
    for name, files in far.items():
        # the agent read its plan from its own directory and wrote its records there
        plan = json.loads((Path(files.workdir) / f"plan_{name}.json").read_text())
        assert plan["records"] == f"{files.workdir}/records_{name}.jsonl"
        assert files.moved == [("put", f"plan_{name}.json"), ("get", f"records_{name}.jsonl"),
                               ("get", f"samples_{name}.jsonl")]
        assert (run_dir / f"records_{name}.jsonl").read_text()  # fetched here


def test_a_record_that_cannot_be_fetched_is_an_agent_error(tmp_path: Path) -> None:
    files = _FarFiles(tmp_path / "far")

    def refuse(remote: str, local: Path) -> None:
        raise OSError("connection lost")

    files.get = refuse  # type: ignore[method-assign]
    hosts = {"h1": Endpoint("h1", "127.0.0.1", files=files), "h2": Endpoint("h2", "127.0.0.2")}
    result = replay([Flow(0, "h1", "h2", 1_000, 0.0, sport=22010)], hosts, tmp_path / "run",
                    drain=5.0)
    assert any("agent on h1: could not fetch" in e and "connection lost" in e
               for e in result.errors), result.errors
    assert result.records[0]["status"] == "missing"  # no sender record came back
