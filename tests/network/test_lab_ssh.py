"""Lab hosts over SSH (dcnlab.lab.ssh) against real OpenSSH servers in namespaces this
test creates (tests/emulated_lab.py): commands, processes the engine reads and writes
like a Popen's, files both ways, stopping by process group, and clear errors for a wrong
key and a host that does not answer."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from emulated_lab import EmulatedHosts, available
from waiting import wait_for

from dcnlab.lab.ssh import HostError, SshHost, SshLoop, Target

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(available() is not None, reason=str(available()))]


@pytest.fixture(scope="module")
def lab() -> Iterator[EmulatedHosts]:
    hosts = EmulatedHosts(2)
    try:
        yield hosts
    finally:
        hosts.close()


@pytest.fixture(scope="module")
def loop() -> Iterator[SshLoop]:
    ssh_loop = SshLoop()
    try:
        yield ssh_loop
    finally:
        ssh_loop.close()


@pytest.fixture()
def host(lab: EmulatedHosts, loop: SshLoop) -> Iterator[SshHost]:
    h = lab.hosts[0]
    remote = SshHost(Target(h.name, h.ssh_address, key=str(lab.key)), loop)
    try:
        yield remote
    finally:
        remote.stop_all()
        remote.close()


def test_commands_run_in_the_host(host: SshHost, lab: EmulatedHosts) -> None:
    done = host.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    # the host's own network namespace: its management address is there
    assert lab.hosts[0].ssh_address in host.cmd("ip -4 -o addr")
    with pytest.raises(HostError, match=r"host h1: 'false' exited with 1"):
        host.run("false", check=True)
    with pytest.raises(HostError, match=r"host h1: 'sleep 5' still running after 0.5 s"):
        host.run("sleep 5", timeout=0.5)


def test_a_process_reads_and_writes_like_a_popen(host: SshHost, tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    with open(log, "wb") as err:
        proc = host.popen(["sh", "-c", "echo started >&2; cat"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=err)
    assert proc.pid > 0 and proc.poll() is None
    assert proc.stdin is not None and proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    got = b""
    for line in (b"one\n", b"two\n"):
        proc.stdin.write(line)
        proc.stdin.flush()

    def echoed() -> bool:
        nonlocal got
        if sel.select(0.2):
            got += os.read(proc.stdout.fileno(), 65536)  # type: ignore[union-attr]
        return got == b"one\ntwo\n"

    wait_for(echoed, 10.0)
    proc.stdin.close()  # EOF: cat ends
    assert proc.wait(timeout=10) == 0
    assert os.read(proc.stdout.fileno(), 100) == b""  # end of file after the exit
    assert log.read_bytes() == b"started\n"
    assert proc.pid not in [int(p) for p in host.cmd("pgrep cat || true").split()]


def test_kill_ends_the_process_group(host: SshHost) -> None:
    proc = host.popen(["sh", "-c", "sleep 300 & sleep 301"])
    group = lambda: host.cmd(f"ps -o pid= -g {proc.pid} || true").split()  # noqa: E731
    assert len(group()) >= 2  # the shell's two sleeps (and the shell) share its group
    proc.kill()
    assert proc.poll() == -signal.SIGKILL
    wait_for(lambda: not group(), 10.0)


def test_stop_all_ends_what_is_still_running(host: SshHost) -> None:
    done = host.popen(["true"])
    done.wait(timeout=10)
    running = host.popen(["sh", "-c", "sleep 302 & sleep 303"])
    assert host.stop_all() == ["sh -c 'sleep 302 & sleep 303'"]
    wait_for(lambda: running.poll() is not None, 10.0)
    assert host.cmd(f"ps -o pid= -g {running.pid} || true").split() == []
    assert host.stop_all() == []


def test_files_both_ways(host: SshHost, tmp_path: Path) -> None:
    src = tmp_path / "plan.json"
    src.write_bytes(os.urandom(200_000))
    remote = f"/tmp/{tmp_path.name}-remote.json"
    try:
        host.put(src, remote)
        back = tmp_path / "back.json"
        host.get(remote, back)
        assert back.read_bytes() == src.read_bytes()
        with pytest.raises(HostError, match=r"host h1: copy /nonexistent/x to"):
            host.get("/nonexistent/x", tmp_path / "x")
    finally:
        host.run(["rm", "-f", remote])


def test_a_wrong_key_and_an_unanswering_host_are_named(lab: EmulatedHosts, loop: SshLoop,
                                                       tmp_path: Path) -> None:
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                   check=True)
    h = lab.hosts[1]
    with pytest.raises(HostError, match=rf"host h2 \(root@{h.ssh_address}:22\): "
                                        r"authentication failed \(is the key .*other_key"):
        SshHost(Target("h2", h.ssh_address, key=str(other)), loop).connect()
    lab.stop_sshd(h)
    with pytest.raises(HostError, match=r"host h2 \(.*\): cannot connect"):
        SshHost(Target("h2", h.ssh_address, key=str(lab.key), connect_timeout=2.0),
                loop).connect()


def test_what_a_lost_session_left_is_stopped_by_the_next(lab: EmulatedHosts, loop: SshLoop,
                                                         tmp_path: Path) -> None:
    h = lab.hosts[0]
    ledger = tmp_path / "started.json"
    first = SshHost(Target(h.name, h.ssh_address, key=str(lab.key)), loop, ledger)
    left = first.popen(["sh", "-c", "sleep 304 & sleep 305"])
    first.close()  # the session ends without stop_all: the host was lost to it
    assert "sleep 304" in ledger.read_text()
    # a process of the same command started without the ledger is not the ledger's
    other = SshHost(Target(h.name, h.ssh_address, key=str(lab.key)), loop)
    bystander = other.popen(["sh", "-c", "sleep 304 & sleep 305"])
    second = SshHost(Target(h.name, h.ssh_address, key=str(lab.key)), loop, ledger)
    try:
        assert second.stop_leftovers() == ["sh -c 'sleep 304 & sleep 305'"]
        assert second.cmd(f"ps -o pid= -g {left.pid} || true").split() == []
        assert bystander.poll() is None and not ledger.exists()
        assert len(second.cmd(f"ps -o pid= -g {bystander.pid}").split()) >= 2
    finally:
        other.stop_all()
        other.close()
        second.close()
