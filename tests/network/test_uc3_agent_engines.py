"""Both UC3 agent engines on a real BPF program and a live loopback flow (root, no
Mininet): the flow of the agent's cgroup is reported with the program's figures, an
allocation from the controller client clamps its window (map entry, then the kernel's
cwnd), and when the controller falls silent the agent lifts the clamp (fail open) and the
window grows back.  The Python engine is the reference; the native engine
(``dcnlab-uc3-agentd``) must behave the same through the same client.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from uc3_agent_harness import ENGINES, SECRET, RunningAgent, native_skip_reason

from dcnlab.hosts.uc3_agent import protocol as proto
from dcnlab.hosts.uc3_agent.bpf import Tuple4
from dcnlab.hosts.uc3_agent.client import AgentClient

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (cgroups, BPF)")]

WINDOW = 4  # segments: below a loopback flow's initial window of 10


class LoopbackFlow:
    """A bulk TCP flow on loopback whose sending socket belongs to the agent's cgroup."""

    def __init__(self, ra: RunningAgent) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(1)
        self.port = self.server.getsockname()[1]
        with ra.program.member():
            self.sender = socket.create_connection(("127.0.0.1", self.port))
        self.receiver, _ = self.server.accept()
        self.flow = Tuple4("127.0.0.1", self.sender.getsockname()[1], "127.0.0.1", self.port)
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=f, daemon=True)
                        for f in (self._send, self._drain)]
        for t in self.threads:
            t.start()

    def _send(self) -> None:
        buf = b"x" * (1 << 20)
        while not self.stopped.is_set():
            try:
                self.sender.sendall(buf)
            except OSError:
                return

    def _drain(self) -> None:
        while not self.stopped.is_set():
            try:
                if not self.receiver.recv(1 << 20):
                    return
            except OSError:
                return

    def close(self) -> None:
        self.stopped.set()
        for s in (self.sender, self.receiver, self.server):
            s.close()
        for t in self.threads:
            t.join(timeout=5)


@pytest.fixture(params=ENGINES)
def agent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningAgent]:
    if request.param == "native" and (reason := native_skip_reason()):
        pytest.skip(reason)
    ra = RunningAgent(request.param, tmp_path, real=True, interval_s=0.1,
                      timeout_s=1.0).start()
    try:
        yield ra
    finally:
        ra.close()


def _until(what: str, check: Callable[[], bool], timeout: float = 10.0,
           detail: Callable[[], str] = str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}\n{detail()}"
        time.sleep(0.05)


def _agent_detail(agent: RunningAgent, client: AgentClient) -> str:
    """What a failed wait on the agent needs to be understood: the map, the agent's
    state file and log, and whether the controller client really went silent."""
    try:
        state = agent.state_file.read_text()
    except OSError as exc:
        state = f"({exc})"
    alive = client._thread is not None and client._thread.is_alive()
    return (f"map: {agent.windows()}\nclient thread alive: {alive}\n"
            f"state file: {state}\nagent log:\n{agent.log_text()[-4000:]}")


def test_reports_clamps_and_fail_open_on_a_live_flow(agent: RunningAgent) -> None:
    reports: list[proto.AgentMessage] = []
    flow = LoopbackFlow(agent)
    client = AgentClient("127.0.0.1", agent.port, SECRET, refresh_s=0.1,
                         on_report=lambda _name, msg: reports.append(msg)).start()
    try:
        assert client.wait_connected(10), client.last_error

        def latest() -> proto.FlowStats | None:
            if not reports:
                return None
            # Only the cgroup's flows: not the receiving end, not the controller's.
            assert [s.flow for s in reports[-1].flows] in ([], [flow.flow])
            return reports[-1].flows[0] if reports[-1].flows else None

        _until("a report with the flow moving",
               lambda: (s := latest()) is not None and s.throughput_bps > 0)
        stats = latest()
        assert stats is not None
        (sample,) = agent.program.flow_samples()  # what the map holds, read here
        assert stats.mss == sample.mss > 0 and stats.rtt_us > 0 and stats.cwnd > 0
        assert stats.bytes_acked > 0 and stats.delivery_bps >= 0 and stats.clamp == 0
        assert sample.bytes_acked >= stats.bytes_acked  # read later, never less

        client.set_clamps({flow.flow: WINDOW})
        _until("the clamp in the map", lambda: agent.windows() == {flow.flow: WINDOW})
        n = len(reports)
        _until("three reports of the clamped window",
               lambda: len(reports) >= n + 3 and all(
                   s.clamp == WINDOW and s.cwnd <= WINDOW
                   for r in reports[-3:] for s in r.flows) and len(reports[-1].flows) == 1)
        assert agent.program.stats()["applied"] >= 1

        client.stop()  # the controller falls silent: after 1 s the agent lifts the clamp
        detail = lambda: _agent_detail(agent, client)  # noqa: E731
        _until("the map emptied (fail open)", lambda: agent.windows() == {}, detail=detail)
        _until("the program lifted the clamp", lambda: agent.program.stats()["lifted"] >= 1,
               detail=detail)
        _until("the window grown back",
               lambda: any(s.cwnd > WINDOW for s in agent.program.flow_samples()))
        if agent.engine == "native":
            assert "(fail open)" in agent.log_text()
    finally:
        client.stop()
        flow.close()
