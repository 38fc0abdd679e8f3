"""Traffic agent: one process per host, sender and receiver in one event loop.

Run inside a Mininet host as ``python -m dcnlab.benchmarks.engine.agent PLAN.json``.
The plan (written by replay.py) lists the flows this host sends; the agent also accepts
every flow sent to it.  Control is line-based:

stdin  ``start T0``  flows start at T0 + flow.start (T0 on CLOCK_MONOTONIC, which every
                     network namespace of the machine shares)
       ``halt``      abort the flows this host sends (recorded as unfinished); keep
                     receiving.  The runner halts every agent before it stops any, so
                     no sender sees its peer's receiver close under it (a reset that
                     would read as a failed flow).
       ``stop``      halt if not yet halted, end the receivers, write the receiver-side
                     UDP records, exit 0.  EOF on stdin does the same.
stdout one JSON event per line: ``ready``, ``done`` (per flow, for progress),
       ``idle`` (every flow of the plan has ended), ``halted``, ``stopped``, ``error``.

Records go to the plan's records file, one JSON line per flow and role, flushed per line
so a killed agent leaves everything it had finished.

Receiver throughput (plan ``rx`` and ``rx_interval`` > 0): every rx_interval s from T0
(on that grid; a late tick is skipped, never doubled) one JSON line
``{"t": s since T0, "bytes": {"<flow id>": payload bytes received so far}}`` over every
flow this host has received, TCP (as the kernel received it, see Agent.rx_counts) and
UDP -- the format of benchmarks/longflows.py's sink, read back by fairness.py.

Host-parts cgroup (plan ``cgroup_procs``): the agent writes its PID there before it opens
any socket, so a scheme's host agent with a BPF program attached to that cgroup (one
that clamps congestion windows, say) governs the flows it sends.

TCP flow protocol: the sender connects from (its ip, flow.sport) with flow.dscp as TOS,
sends a 24-byte header (magic, version, flow id, size; size 2**64-1 = until EOF) and the
payload.  When the receiver has the whole payload (or EOF for long-lived flows) it reads
its TCP_INFO and answers 24 bytes (magic, status, bytes received, out-of-order packets
seen, data segments received), then closes.  FCT = from connect() to the answer, so it
includes the handshake and half an RTT for the answer.  The sender reads its own
TCP_INFO (retransmissions, RTT) before closing.

UDP flows: datagrams of UDP_PAYLOAD bytes carry (magic, flow id, sequence); the sender
paces them at the flow's rate from a 1 ms timer; the receiver counts bytes, packets and
sequence inversions per flow.

Dependencies: the standard library only (sixteen of these start per run).
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import json
import os
import selectors
import socket
import struct
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO

from dcnlab.benchmarks.engine.tcpinfo import TcpInfo, tcp_info

MAGIC = b"DCNL"
VERSION = 1
HEADER = struct.Struct("!4sIQQ")  # magic, version, flow id, size
ANSWER = struct.Struct("!4sIQII")  # magic, status, bytes, ooo packets, data segments in
UDP_HEADER = struct.Struct("!4sQQ")  # magic, flow id, sequence
UNTIL_EOF = 2**64 - 1
UDP_PAYLOAD = 1400  # + 8 UDP + 20 IP bytes: fits a 1500-byte MTU unfragmented
UDP_TICK = 0.001
UDP_MAX_BURST = 64  # datagrams per tick when catching up after a stall
CHUNK = 1 << 20  # bytes offered to send() at once
RECV_CHUNK = 1 << 18
RCV_LOWAT = 64 << 10  # receiver wake-up threshold, at most (see TcpReceiver.set_lowat)
LOWAT_BUFFER_SHARE = 16  # ... and at most this fraction of the socket's receive buffer
PORT_RETRIES = 64  # next ports tried when a flow's source port is still in use
ACCEPT_BACKLOG = 4096

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE


def _now() -> float:
    return time.monotonic()


def reorder_fields(info: TcpInfo) -> dict[str, int | None]:
    """The sender's reordering diagnosis at the flow's end: reordering events it detected
    (tcpi_reord_seen), retransmissions the receiver reported as duplicates (DSACK:
    spurious ones, tcpi_dsack_dups) and its reordering threshold (tcpi_reordering)."""
    return {"reord_seen": info.reord_seen, "dsack_dups": info.dsack_dups,
            "reordering": info.reordering}


def lowat_for(rcvbuf: int, remaining: int | None) -> int:
    """The receiver's SO_RCVLOWAT: RCV_LOWAT at most, a 1/LOWAT_BUFFER_SHARE share of the
    receive buffer at most (see TcpReceiver.set_lowat), the flow's rest at most, >= 1."""
    want = min(RCV_LOWAT, rcvbuf // LOWAT_BUFFER_SHARE)
    if remaining is not None:
        want = min(want, remaining)
    return max(1, want)


class Recorder:
    """Records and events; both flushed line by line."""

    def __init__(self, records: TextIO, events: TextIO, samples: TextIO | None,
                 rx: TextIO | None = None) -> None:
        self.records = records
        self.events = events
        self.samples = samples
        self.rx = rx

    def record(self, row: dict[str, Any]) -> None:
        self.records.write(json.dumps(row, separators=(",", ":")) + "\n")
        self.records.flush()

    def event(self, name: str, **fields: Any) -> None:
        try:
            self.events.write(json.dumps({"event": name, **fields}) + "\n")
            self.events.flush()
        except BrokenPipeError:
            pass  # the runner is gone; records still land in the file

    def sample(self, row: dict[str, Any]) -> None:
        if self.samples is not None:
            self.samples.write(json.dumps(row, separators=(",", ":")) + "\n")

    def rx_sample(self, t: float, counts: dict[int, int]) -> None:
        if self.rx is not None:
            self.rx.write(json.dumps({"t": round(t, 6), "bytes": counts},
                                     separators=(",", ":")) + "\n")
            self.rx.flush()


# ---------------------------------------------------------------------------
# Sender side


class TcpSender:
    __slots__ = ("agent", "flow", "sock", "state", "header", "left", "t_start", "late",
                 "answer", "sport", "stop_at")

    def __init__(self, agent: Agent, flow: dict[str, Any]) -> None:
        self.agent = agent
        self.flow = flow
        self.sock: socket.socket | None = None
        self.state = "new"
        size = int(flow["size"])
        self.header = memoryview(HEADER.pack(MAGIC, VERSION, int(flow["id"]),
                                             size if size else UNTIL_EOF))
        self.left = size if size else -1  # payload bytes still to send; -1: until stop
        self.t_start = 0.0
        self.late = 0.0
        self.answer = b""
        self.sport = 0
        self.stop_at = (agent.t0 + float(flow["stop"])) if not size else None

    def begin(self) -> None:
        self.t_start = _now()
        self.late = self.t_start - (self.agent.t0 + float(self.flow["start"]))
        try:
            self.sock = self.agent.client_socket(self.flow, socket.SOCK_STREAM)
            self.sport = self.sock.getsockname()[1]
            code = self.sock.connect_ex((self.flow["dst_ip"], int(self.flow["dst_port"])))
        except OSError as exc:
            self.fail(f"socket: {exc.strerror or exc}")
            return
        if code not in (0, errno.EINPROGRESS):
            self.fail(f"connect: {os.strerror(code)}")
            return
        self.state = "connecting"
        self.agent.sel.register(self.sock, _WRITE, self.on_event)
        if self.stop_at is not None:
            self.agent.at(self.stop_at, self.on_stop_time)

    def on_event(self, mask: int) -> None:
        if self.sock is None:  # closed by an earlier event of the same select() batch
            return
        if self.state == "connecting":
            code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                self.fail(f"connect: {os.strerror(code)}")
                return
            self.state = "sending"
        if self.state == "sending" and mask & _WRITE:
            self.push()
        elif self.state == "waiting" and mask & _READ:
            self.read_answer()

    def push(self) -> None:
        assert self.sock is not None
        try:
            while self.header:
                sent = self.sock.send(self.header)
                self.header = self.header[sent:]
            while self.left:
                sent = self.sock.send(self.agent.zeros[: CHUNK if self.left < 0
                                                       else min(self.left, CHUNK)])
                if self.left > 0:
                    self.left -= sent
        except BlockingIOError:
            return
        except OSError as exc:
            self.fail(f"send: {exc.strerror or exc}")
            return
        self.state = "waiting"
        self.agent.sel.modify(self.sock, _READ, self.on_event)

    def on_stop_time(self) -> None:
        """A long-lived flow's stop time: finish the stream, then wait for the answer."""
        if self.state in ("done", "failed", "waiting") or self.sock is None:
            return
        self.left = 0
        if self.state == "connecting":
            self.fail("connection not established by the flow's stop time")
            return
        try:
            while self.header:  # an unsent header would leave the receiver waiting
                sent = self.sock.send(self.header)
                self.header = self.header[sent:]
            self.sock.shutdown(socket.SHUT_WR)
        except BlockingIOError:
            self.fail("send buffer full at the flow's stop time")
            return
        except OSError as exc:
            self.fail(f"shutdown: {exc.strerror or exc}")
            return
        self.state = "waiting"
        self.agent.sel.modify(self.sock, _READ, self.on_event)

    def read_answer(self) -> None:
        assert self.sock is not None
        try:
            data = self.sock.recv(ANSWER.size - len(self.answer))
        except BlockingIOError:
            return
        except OSError as exc:
            self.fail(f"recv: {exc.strerror or exc}")
            return
        if not data:
            self.fail("receiver closed without an answer")
            return
        self.answer += data
        if len(self.answer) < ANSWER.size:
            return
        end = _now()
        magic, status, nbytes, ooo, segs = ANSWER.unpack(self.answer)
        if magic != MAGIC:
            self.fail(f"bad answer from receiver: {self.answer!r}")
            return
        self.finish("ok" if status == 0 else f"receiver status {status}", end, {
            "bytes": nbytes, "ooo": ooo, "segs_in": segs})

    def info(self) -> TcpInfo | None:
        try:
            return tcp_info(self.sock) if self.sock is not None else None
        except (OSError, ValueError):
            return None

    def finish(self, status: str, end: float, rx: dict[str, Any], error: str = "") -> None:
        info = self.info()
        t0 = self.agent.t0
        row: dict[str, Any] = {
            "role": "tx", "id": self.flow["id"], "kind": "tcp", "sport": self.sport,
            "start": round(self.t_start - t0, 6), "end": round(end - t0, 6),
            "fct": round(end - self.t_start, 6), "late": round(self.late, 6),
            "status": status, "error": error, **rx,
        }
        if info is not None:
            row.update(retrans=info.total_retrans, rtt_us=info.rtt_us,
                       min_rtt_us=info.min_rtt_us, bytes_acked=info.bytes_acked,
                       bytes_retrans=info.bytes_retrans, cwnd=info.snd_cwnd,
                       **reorder_fields(info))
            if "bytes" not in rx and info.bytes_acked is not None:
                # Without an answer, what the receiver acknowledged is what it got
                # (minus our header).
                row["bytes"] = max(0, info.bytes_acked - HEADER.size)
        self.state = "done" if status == "ok" else "failed"
        self.close()
        self.agent.flow_ended(self.flow, row)

    def fail(self, error: str) -> None:
        if self.state in ("done", "failed"):
            return
        self.finish("failed", _now(), {}, error)

    def abort(self) -> None:
        if self.state not in ("done", "failed"):
            self.finish("unfinished", _now(), {}, "still running when the run was stopped")

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.agent.sel.unregister(self.sock)
            except (KeyError, ValueError):
                pass
            self.sock.close()
            self.sock = None

    def sample(self, now: float) -> None:
        info = self.info()
        if info is not None:
            self.agent.recorder.sample({
                "t": round(now - self.agent.t0, 6), "id": self.flow["id"],
                "bytes_acked": info.bytes_acked, "rtt_us": info.rtt_us,
                "cwnd": info.snd_cwnd, "retrans": info.total_retrans})


class ProcessSender:
    """A TCP flow sent by the scheme's transport: the plan flow's ``argv`` runs as a
    process at the flow's start; its stdout's last JSON line is the result (``fct_ms``,
    ``intact``, ``delivered``).  FCT is the transport's own (from its first connect to
    the last byte acknowledged), the process start-up excluded."""

    __slots__ = ("agent", "flow", "proc", "out", "t_start", "late", "done")

    def __init__(self, agent: Agent, flow: dict[str, Any]) -> None:
        self.agent = agent
        self.flow = flow
        self.proc: subprocess.Popen[bytes] | None = None
        self.out = bytearray()
        self.t_start = 0.0
        self.late = 0.0
        self.done = False

    def begin(self) -> None:
        self.t_start = _now()
        self.late = self.t_start - (self.agent.t0 + float(self.flow["start"]))
        try:
            self.proc = subprocess.Popen(self.flow["argv"], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as exc:
            self.finish("failed", {}, f"transport: {exc.strerror or exc}")
            return
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.agent.sel.register(self.proc.stdout, _READ, self.on_event)

    def on_event(self, mask: int) -> None:
        if self.proc is None or self.proc.stdout is None:
            return
        try:
            data = os.read(self.proc.stdout.fileno(), 65536)
        except BlockingIOError:
            return
        if data:
            self.out += data
            return
        code = self.proc.wait()
        result: dict[str, Any] | None = None
        for line in reversed(bytes(self.out).decode(errors="replace").splitlines()):
            if line.startswith("{"):
                try:
                    result = json.loads(line)
                    break
                except ValueError:
                    continue
        tail = bytes(self.out[-300:]).decode(errors="replace").strip()
        if result is None or "fct_ms" not in result:
            self.finish("failed", {}, f"transport exit {code}: {tail}")
            return
        status = "ok" if result.get("intact") else "failed"
        self.finish(status, result, "" if status == "ok" else f"not intact: {tail}")

    def finish(self, status: str, result: dict[str, Any], error: str = "") -> None:
        if self.done:
            return
        self.done = True
        end = _now()
        t0 = self.agent.t0
        fct = result.get("fct_ms")
        row: dict[str, Any] = {
            "role": "tx", "id": self.flow["id"], "kind": "tcp", "sport": 0,
            "start": round(self.t_start - t0, 6), "end": round(end - t0, 6),
            "fct": round(fct / 1000, 6) if fct is not None else round(end - self.t_start, 6),
            "late": round(self.late, 6), "status": status, "error": error,
            "bytes": result.get("delivered"),
            "result": result or None,  # the transport's columns come from it (runner.py)
        }
        self.close()
        self.agent.flow_ended(self.flow, row)

    def abort(self) -> None:
        if not self.done:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.finish("unfinished", {}, "still running when the run was stopped")

    def close(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.agent.sel.unregister(self.proc.stdout)
            self.proc.stdout.close()

    def sample(self, now: float) -> None:
        pass


class UdpSender:
    __slots__ = ("agent", "flow", "sock", "t_start", "late", "sent", "bytes", "dropped",
                 "pps", "stop_at", "done", "error")

    def __init__(self, agent: Agent, flow: dict[str, Any]) -> None:
        self.agent = agent
        self.flow = flow
        self.sock: socket.socket | None = None
        self.sent = self.bytes = self.dropped = 0
        datagram_bits = (UDP_PAYLOAD + UDP_HEADER.size) * 8
        self.pps = float(flow["rate_mbit"]) * 1e6 / datagram_bits
        self.stop_at = agent.t0 + float(flow["stop"])
        self.t_start = self.late = 0.0
        self.done = False
        self.error = ""

    def begin(self) -> None:
        self.t_start = _now()
        self.late = self.t_start - (self.agent.t0 + float(self.flow["start"]))
        try:
            self.sock = self.agent.client_socket(self.flow, socket.SOCK_DGRAM)
            self.sock.connect((self.flow["dst_ip"], int(self.flow["dst_port"])))
        except OSError as exc:
            self.error = f"socket: {exc.strerror or exc}"
            self.end(_now())
            return
        self.tick()

    def tick(self) -> None:
        if self.done or self.sock is None:
            return
        now = _now()
        until = min(now, self.stop_at)
        owed = int((until - self.t_start) * self.pps) - self.sent - self.dropped
        payload = self.agent.zeros[: UDP_PAYLOAD]
        fid = int(self.flow["id"])
        for _ in range(min(owed, UDP_MAX_BURST)):
            try:
                self.sock.send(UDP_HEADER.pack(MAGIC, fid, self.sent + self.dropped)
                               + payload)
                self.sent += 1
                self.bytes += UDP_PAYLOAD
            except (BlockingIOError, ConnectionRefusedError):
                # Full socket buffer, or an ICMP error from an earlier datagram: the
                # datagram is lost, as on a real host; keep the pace.
                self.dropped += 1
            except OSError as exc:
                self.error = f"send: {exc.strerror or exc}"
                self.end(now)
                return
        if now >= self.stop_at:
            self.end(now)
        else:
            self.agent.at(now + UDP_TICK, self.tick)

    def end(self, now: float, status: str = "") -> None:
        if self.done:
            return
        self.done = True
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        t0 = self.agent.t0
        status = status or ("failed" if self.error else "ok")
        self.agent.flow_ended(self.flow, {
            "role": "tx", "id": self.flow["id"], "kind": "udp", "sport": self.flow["sport"],
            "start": round(self.t_start - t0, 6), "end": round(now - t0, 6),
            "fct": round(now - self.t_start, 6), "late": round(self.late, 6),
            "status": status, "error": self.error, "pkts_sent": self.sent,
            "bytes_sent": self.bytes, "send_drops": self.dropped})

    def abort(self) -> None:
        if not self.done:
            self.error = self.error or "still running when the run was stopped"
            self.end(_now(), "unfinished")

    def sample(self, now: float) -> None:
        return


# ---------------------------------------------------------------------------
# Receiver side


class TcpReceiver:
    __slots__ = ("agent", "sock", "header", "flow_id", "size", "got", "done", "lowat")

    def __init__(self, agent: Agent, sock: socket.socket) -> None:
        self.agent = agent
        self.sock = sock
        self.header = b""
        self.flow_id = -1
        self.size = 0
        self.got = 0
        self.done = False
        self.lowat = 1
        agent.sel.register(sock, _READ, self.on_event)

    def on_event(self, mask: int) -> None:
        if self.done:  # ended by an earlier event of the same select() batch
            return
        buf = self.agent.rbuf
        while True:
            try:
                n = self.sock.recv_into(buf, RECV_CHUNK)
            except BlockingIOError:
                return
            except OSError as exc:
                self.end(f"recv: {exc.strerror or exc}")
                return
            if n == 0:
                if self.size == UNTIL_EOF and self.flow_id >= 0:
                    self.answer()
                else:
                    self.end("sender closed early")
                return
            data = buf[:n]
            if len(self.header) < HEADER.size:
                need = HEADER.size - len(self.header)
                self.header += bytes(data[:need])
                data = data[need:]
                if len(self.header) < HEADER.size:
                    continue
                magic, _version, self.flow_id, self.size = HEADER.unpack(self.header)
                if magic != MAGIC:
                    self.end(f"bad header {self.header!r}")
                    return
            self.got += len(data)
            if self.size != UNTIL_EOF and self.got >= self.size:
                self.answer()
                return
            self.set_lowat()

    def set_lowat(self) -> None:
        """Wake up for a batch of bytes (or the rest of the flow), not for every segment.

        On a slow emulated link segments trickle in one by one; a wake-up per segment
        costs this Python loop ~20x what it costs a C receiver.  EOF still wakes us.

        The batch stays a small share of the receive buffer (:func:`lowat_for`): a reader
        that wakes only when about a window is queued starves the kernel's receive
        autotuning, which counts bytes still queued as not yet read, so the buffer stays
        at its 128 KB default and every flow is held to ~64 KB in flight (measured on a
        22 ms path: 21 Mbit/s instead of 95).
        """
        if self.flow_id < 0:
            return
        try:
            rcvbuf = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        except OSError:
            return
        want = lowat_for(rcvbuf, None if self.size == UNTIL_EOF else self.size - self.got)
        if want != self.lowat:
            self.lowat = want
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
            except OSError:
                pass  # an old kernel: per-segment wake-ups, still correct

    def answer(self) -> None:
        info = self._info()
        ooo = (info.rcv_ooopack or 0) if info else 0
        segs = (info.data_segs_in or 0) if info else 0
        status = 0 if self.size == UNTIL_EOF or self.got == self.size else 1
        try:
            self.sock.send(ANSWER.pack(MAGIC, status, self.got, ooo, segs))
        except OSError as exc:
            self.end(f"answer: {exc.strerror or exc}", info)
            return
        self.end("", info)

    def _info(self) -> TcpInfo | None:
        try:
            return tcp_info(self.sock)
        except (OSError, ValueError):
            return None

    def end(self, error: str, info: TcpInfo | None = None) -> None:
        if self.done:
            return
        self.done = True
        if info is None:
            info = self._info()
        if self.flow_id >= 0:
            self.agent.recorder.record({
                "role": "rx", "id": self.flow_id, "kind": "tcp", "bytes": self.got,
                "ooo": info.rcv_ooopack if info else None,
                "segs_in": info.data_segs_in if info else None,
                "end": round(_now() - self.agent.t0, 6),
                "status": "failed" if error else "ok", "error": error})
        if self.flow_id >= 0:
            self.agent.rx_done[self.flow_id] = self.got  # rx samples keep counting it
        self.agent.receivers.discard(self)
        try:
            self.agent.sel.unregister(self.sock)
        except (KeyError, ValueError):
            pass
        # We close first (TIME_WAIT lands here), so the sender's port is free at once.
        self.sock.close()


class UdpReceiver:
    def __init__(self, agent: Agent, sock: socket.socket) -> None:
        self.agent = agent
        self.sock = sock
        # flow id -> [bytes, packets, inversions, highest seq, first, last]
        self.flows: dict[int, list[float]] = {}
        agent.sel.register(sock, _READ, self.on_event)

    def on_event(self, mask: int) -> None:
        now = _now() - self.agent.t0
        for _ in range(256):
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                return  # e.g. ICMP errors queued on the socket: nothing to count
            if len(data) < UDP_HEADER.size:
                continue
            magic, fid, seq = UDP_HEADER.unpack_from(data)
            if magic != MAGIC:
                continue
            st = self.flows.get(fid)
            if st is None:
                st = self.flows[fid] = [0, 0, 0, -1, now, now]
            st[0] += len(data) - UDP_HEADER.size
            st[1] += 1
            if seq < st[3]:
                st[2] += 1
            else:
                st[3] = seq
            st[5] = now

    def flush(self) -> None:
        for fid, (nbytes, pkts, ooo, _hi, first, last) in sorted(self.flows.items()):
            self.agent.recorder.record({
                "role": "rx", "id": fid, "kind": "udp", "bytes": int(nbytes),
                "pkts": int(pkts), "ooo": int(ooo), "first": round(first, 6),
                "last": round(last, 6), "status": "ok", "error": ""})
        self.flows.clear()


# ---------------------------------------------------------------------------


class Agent:
    def __init__(self, plan: dict[str, Any], recorder: Recorder) -> None:
        self.plan = plan
        self.recorder = recorder
        self.sel = selectors.DefaultSelector()
        self.timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.t0 = 0.0
        self.zeros = memoryview(bytes(CHUNK))
        self.rbuf = bytearray(RECV_CHUNK)
        self.pending = {int(f["id"]) for f in plan["flows"]}
        self.active: dict[int, TcpSender | UdpSender | ProcessSender] = {}
        self.receivers: set[TcpReceiver] = set()
        self.rx_done: dict[int, int] = {}  # flow id -> bytes, TCP flows received in full
        self.congestion: str | None = plan.get("congestion") or None
        self.running = True
        self.halted = False  # senders aborted; receivers still running
        self.started = False
        self.idle_sent = False
        self.lateness: list[float] = []
        self._listen()
        self.server: subprocess.Popen[bytes] | None = None
        if plan.get("serve"):
            self._serve(plan["serve"])

    # -- sockets ------------------------------------------------------------

    def _listen(self) -> None:
        ip, port = self.plan.get("listen_ip", "0.0.0.0"), int(self.plan["port"])
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._set_congestion(tcp)
        tcp.bind((ip, port))
        tcp.listen(ACCEPT_BACKLOG)
        tcp.setblocking(False)
        self.sel.register(tcp, _READ, self._accept)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        udp.bind((ip, port))
        udp.setblocking(False)
        self.udp_rx = UdpReceiver(self, udp)
        self.listeners = [tcp, udp]

    def _serve(self, argv: list[str]) -> None:
        """The scheme transport's receiver, up (its first output line) before "ready"."""
        try:
            self.server = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError as exc:  # not there: a lab host gets it from `dcnlab lab prepare`
            raise RuntimeError(f"transport receiver {argv[0]}: {exc.strerror} (on a lab "
                               "host, dcnlab lab prepare installs it)") from None
        assert self.server.stdout is not None
        first = self.server.stdout.readline()
        if not first:
            code = self.server.wait()
            raise RuntimeError(f"transport receiver {argv[0]} exited ({code}) before "
                               "listening")
        # keep draining its output (one line per connection) so it never blocks
        os.set_blocking(self.server.stdout.fileno(), False)
        self.sel.register(self.server.stdout, _READ, self._drain_server)

    def _drain_server(self, mask: int) -> None:
        assert self.server is not None and self.server.stdout is not None
        try:
            data = os.read(self.server.stdout.fileno(), 65536)
        except BlockingIOError:
            return
        if not data:
            self.sel.unregister(self.server.stdout)

    def _set_congestion(self, sock: socket.socket) -> None:
        if self.congestion:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION,
                            self.congestion.encode())

    def _accept(self, mask: int) -> None:
        tcp = self.listeners[0]
        while True:
            try:
                conn, _addr = tcp.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self.recorder.event("error", message=f"accept: {exc}")
                return
            conn.setblocking(False)
            self.receivers.add(TcpReceiver(self, conn))

    def client_socket(self, flow: dict[str, Any], kind: int) -> socket.socket:
        """A socket bound to (our ip, flow.sport), or the next free port in its range."""
        sock = socket.socket(socket.AF_INET, kind)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if kind == socket.SOCK_STREAM:
                self._set_congestion(sock)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if flow.get("dscp"):
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, int(flow["dscp"]) << 2)
            sock.setblocking(False)
            low, high = flow.get("port_range") or (flow["sport"], flow["sport"])
            port = int(flow["sport"])
            for attempt in range(PORT_RETRIES):
                try:
                    sock.bind((flow.get("src_ip", ""), port))
                    return sock
                except OSError as exc:
                    if exc.errno != errno.EADDRINUSE or attempt == PORT_RETRIES - 1:
                        raise
                    port = low + (port + 1 - low) % (high - low + 1)
        except BaseException:
            sock.close()
            raise
        raise AssertionError("unreachable")

    # -- timers and flows ----------------------------------------------------

    def at(self, when: float, callback: Callable[[], None]) -> None:
        heapq.heappush(self.timers, (when, next(self._seq), callback))

    def start(self, t0: float) -> None:
        if self.started:
            return
        self.started = True
        self.t0 = t0
        for flow in self.plan["flows"]:
            self.at(t0 + float(flow["start"]), lambda f=flow: self._begin(f))
        interval = float(self.plan.get("sample_interval") or 0)
        if interval > 0:
            self.at(t0, lambda: self._sample(interval))
        rx_interval = float(self.plan.get("rx_interval") or 0)
        if rx_interval > 0 and self.recorder.rx is not None:
            self.at(t0, lambda: self._rx_sample(rx_interval, 0))
        self._check_idle()

    def _begin(self, flow: dict[str, Any]) -> None:
        if not self.running or self.halted:
            return
        sender: TcpSender | UdpSender | ProcessSender
        if flow.get("kind") == "udp":
            sender = UdpSender(self, flow)
        elif flow.get("argv"):
            sender = ProcessSender(self, flow)
        else:
            sender = TcpSender(self, flow)
        self.active[int(flow["id"])] = sender
        sender.begin()
        self.lateness.append(sender.late)

    def flow_ended(self, flow: dict[str, Any], row: dict[str, Any]) -> None:
        fid = int(flow["id"])
        self.active.pop(fid, None)
        self.pending.discard(fid)
        self.recorder.record(row)
        self.recorder.event("done", id=fid, status=row["status"])
        self._check_idle()

    def _check_idle(self) -> None:
        if self.started and not self.pending and not self.idle_sent:
            self.idle_sent = True
            self.recorder.event("idle")

    def _sample(self, interval: float) -> None:
        now = _now()
        for sender in list(self.active.values()):
            sender.sample(now)
        if self.recorder.samples is not None:
            self.recorder.samples.flush()
        if self.running:
            self.at(now + interval, lambda: self._sample(interval))

    def rx_counts(self) -> dict[int, int]:
        """Payload bytes received so far per flow id (TCP and UDP).

        For a live TCP flow, what the kernel has received in order (tcpi_bytes_received
        minus our header), not what this process has read yet: the receiver wakes up per
        batch (up to RCV_LOWAT bytes), so a slow flow's reads come in steps that would make
        its rate per 0.1 s period jump between 0 and several times its real rate."""
        counts = dict(self.rx_done)
        for receiver in self.receivers:
            if receiver.flow_id >= 0:
                info = receiver._info()
                arrived = (info.bytes_received or 0) - HEADER.size if info else 0
                counts[receiver.flow_id] = max(receiver.got, arrived)
        for fid, st in self.udp_rx.flows.items():
            counts[fid] = int(st[0])
        return counts

    def _rx_sample(self, interval: float, tick: int) -> None:
        """Receiver counts on the grid T0 + k * interval (a late tick is skipped)."""
        if not self.running:
            return
        now = _now()
        self.recorder.rx_sample(now - self.t0, self.rx_counts())
        tick = max(tick + 1, int((now - self.t0) / interval) + 1)
        self.at(self.t0 + tick * interval, lambda: self._rx_sample(interval, tick))

    # -- control -------------------------------------------------------------

    def on_control(self, line: str) -> None:
        parts = line.split()
        if not parts:
            return
        if parts[0] == "start" and len(parts) == 2:
            self.start(float(parts[1]))
        elif parts[0] == "halt":
            self.halt()
        elif parts[0] == "stop":
            self.stop()
        else:
            self.recorder.event("error", message=f"unknown command {line.strip()!r}")

    def halt(self) -> None:
        """Abort this host's senders (unfinished); receivers go on until ``stop``."""
        if self.halted or not self.running:
            return
        self.halted = True
        for sender in list(self.active.values()):
            sender.abort()
        for fid in sorted(self.pending):  # scheduled but never begun
            self.recorder.record({"role": "tx", "id": fid, "status": "unfinished",
                                  "error": "not started before the run was stopped"})
        self.pending.clear()
        self.recorder.event("halted")

    def stop(self) -> None:
        if not self.running:
            return
        if self.started and float(self.plan.get("rx_interval") or 0) > 0:
            self.recorder.rx_sample(_now() - self.t0, self.rx_counts())
        self.halt()
        self.running = False
        for receiver in list(self.receivers):
            receiver.end("still receiving when the run was stopped")
        self.udp_rx.flush()
        if self.server is not None:
            self.server.terminate()
            try:
                self.server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        late = sorted(self.lateness)
        self.recorder.event("stopped", flows=len(late),
                            late_max=round(late[-1], 6) if late else 0.0,
                            late_p99=round(late[int(0.99 * (len(late) - 1))], 6)
                            if late else 0.0)

    def run(self, control: Any) -> None:
        """The event loop; ``control`` is a readable binary file (stdin)."""
        os.set_blocking(control.fileno(), False)
        pending_line = b""

        def on_stdin(mask: int) -> None:
            nonlocal pending_line
            try:
                chunk = os.read(control.fileno(), 4096)
            except BlockingIOError:
                return
            if not chunk:  # the runner closed our stdin (or died): stop
                self.sel.unregister(control)
                self.stop()
                return
            pending_line += chunk
            while b"\n" in pending_line:
                line, pending_line = pending_line.split(b"\n", 1)
                self.on_control(line.decode(errors="replace"))

        self.sel.register(control, _READ, on_stdin)
        self.recorder.event("ready", host=self.plan.get("host"), pid=os.getpid(),
                            flows=len(self.plan["flows"]))
        while self.running:
            timeout = None
            if self.timers:
                timeout = max(0.0, self.timers[0][0] - _now())
            for key, mask in self.sel.select(timeout):
                if not self.running:
                    break  # stopped by an earlier event: the rest refer to closed sockets
                key.data(mask)
            now = _now()
            while self.timers and self.timers[0][0] <= now and self.running:
                _when, _seq, callback = heapq.heappop(self.timers)
                callback()


def join_cgroup(procs: str) -> None:
    """Move this process into the cgroup whose ``cgroup.procs`` file is ``procs``.

    Sockets belong to the cgroup of the process that creates them, so this must happen
    before the first socket (listeners included)."""
    with open(procs, "w") as fh:
        fh.write(str(os.getpid()))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dcnlab.benchmarks.engine.agent PLAN.json", file=sys.stderr)
        return 2
    with open(args[0]) as fh:
        plan = json.load(fh)
    samples_path = plan.get("samples")
    rx_path = plan.get("rx") if float(plan.get("rx_interval") or 0) > 0 else None
    with open(plan["records"], "a", buffering=1 << 16) as records, \
            (open(samples_path, "a") if samples_path else contextlib.nullcontext()) as samples, \
            (open(rx_path, "a") if rx_path else contextlib.nullcontext()) as rx:
        recorder = Recorder(records, sys.stdout, samples, rx)
        if plan.get("cgroup_procs"):
            try:
                join_cgroup(plan["cgroup_procs"])
            except OSError as exc:
                recorder.event("error", message=f"cannot join cgroup {plan['cgroup_procs']}: "
                               f"{exc.strerror or exc}")
                return 3
        try:
            agent = Agent(plan, recorder)
        except OSError as exc:
            recorder.event("error", message=f"cannot listen: {exc}")
            return 3
        try:
            agent.run(sys.stdin.buffer)
        except Exception:
            recorder.event("error", message=traceback.format_exc(limit=5))
            raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
