"""Long-lived TCP flows measured at the receiver, and Jain's fairness index (seed 004).

::

    python -m dcnlab.benchmarks.longflows sink --port 5400 --out rx.jsonl [--period 0.1]
    python -m dcnlab.benchmarks.longflows send --host 10.1.0.1 --port 5400 --seconds 15 \\
        [--cc reno] [--cgroup-procs /sys/fs/cgroup/.../cgroup.procs]

The sink counts bytes per connection (keyed ``ip:port`` of the sender) and appends one
JSON line ``{"t": unix time, "bytes": {"ip:port": total}}`` every period: the paper's
receiver-side throughput "every 0.1 s".  The sender writes its PID to ``cgroup.procs``
*before* connecting (a UC3 agent's BPF program clamps sockets of its cgroup only) and
chooses the congestion control per socket (the paper uses NewReno: ``reno``).

:func:`rates` and :func:`jain` turn a sink file into per-flow rates and the index
``(sum x)^2 / (n * sum x^2)``; :func:`series` gives both per period.
"""

from __future__ import annotations

import argparse
import json
import selectors
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

CHUNK = 1 << 16


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index; 1.0 for no flows or all-zero rates (nothing to be unfair)."""
    total, squares = sum(values), sum(v * v for v in values)
    if not values or squares == 0:
        return 1.0
    return total * total / (len(values) * squares)


def load(path: Path) -> list[tuple[float, dict[str, int]]]:
    rows = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            rows.append((float(row["t"]), {k: int(v) for k, v in row["bytes"].items()}))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short when the sink was stopped
    return rows


def rates(rows: list[tuple[float, dict[str, int]]], start: float, end: float,
          flows: Sequence[str] | None = None) -> dict[str, float]:
    """Mean receive rate (bit/s) per flow between the samples nearest start and end."""
    inside = [r for r in rows if start <= r[0] <= end]
    if len(inside) < 2:
        return {}
    (t0, b0), (t1, b1) = inside[0], inside[-1]
    keys = flows if flows is not None else sorted(b1)
    return {k: (b1.get(k, 0) - b0.get(k, 0)) * 8 / (t1 - t0) for k in keys}


def series(rows: list[tuple[float, dict[str, int]]], flows: Sequence[str] | None = None,
           ) -> list[dict[str, float]]:
    """Per sample period: time, Jain's index over the flows, total throughput (bit/s)."""
    out = []
    for (t0, b0), (t1, b1) in zip(rows, rows[1:], strict=False):
        if t1 <= t0:
            continue
        keys = flows if flows is not None else sorted(set(b0) | set(b1))
        xs = [(b1.get(k, 0) - b0.get(k, 0)) * 8 / (t1 - t0) for k in keys]
        out.append({"t": t1, "jain": jain(xs), "total_bps": sum(xs)})
    return out


# -- processes -------------------------------------------------------------------------


def sink(port: int, out: Path, period: float) -> None:
    stop = False

    def _stop(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(256)
    srv.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ)
    counts: dict[str, int] = {}
    names: dict[socket.socket, str] = {}
    print("listening", flush=True)
    next_write = time.time()
    with out.open("a") as fh:
        while not stop:
            for key, _ in sel.select(timeout=max(0.0, next_write - time.time())):
                sock = key.fileobj
                if sock is srv:
                    conn, peer = srv.accept()
                    conn.setblocking(False)
                    names[conn] = f"{peer[0]}:{peer[1]}"
                    counts.setdefault(names[conn], 0)
                    sel.register(conn, selectors.EVENT_READ)
                    continue
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    counts[names[sock]] += len(data)
                else:
                    sel.unregister(sock)
                    sock.close()
            now = time.time()
            if now >= next_write:
                fh.write(json.dumps({"t": now, "bytes": counts}) + "\n")
                fh.flush()
                next_write += period
                if next_write < now:  # fell behind: skip, never write bursts
                    next_write = now + period


def send(host: str, port: int, seconds: float, cc: str | None, cgroup_procs: str | None,
         wait_go: bool = False) -> None:
    if cgroup_procs:
        Path(cgroup_procs).write_text(str(__import__("os").getpid()))
    sock = socket.socket()
    if cc:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    sock.connect((host, port))
    print(sock.getsockname()[1], flush=True)
    if wait_go:  # connected; the data starts when the caller says so (a line on stdin)
        sys.stdin.readline()
    buf = b"x" * CHUNK
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sock.sendall(buf)
    sock.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="longflows", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sink")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--period", type=float, default=0.1)
    c = sub.add_parser("send")
    c.add_argument("--host", required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--seconds", type=float, required=True)
    c.add_argument("--cc", default=None, help="congestion control (e.g. reno)")
    c.add_argument("--cgroup-procs", default=None)
    c.add_argument("--wait-go", action="store_true",
                   help="after connecting, send only once a line arrives on stdin (so many "
                        "senders started one by one begin together)")
    args = parser.parse_args(argv)
    if args.cmd == "sink":
        sink(args.port, args.out, args.period)
    else:
        send(args.host, args.port, args.seconds, args.cc, args.cgroup_procs, args.wait_go)
    return 0


if __name__ == "__main__":
    sys.exit(main())
