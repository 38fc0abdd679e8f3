"""Many short TCP connections with chosen source ports, timing each connect().

Run inside Mininet hosts by ``dcnlab check`` (TCP-Path's congestion invariant), the
TCP-Path network tests and :mod:`dcnlab.benchmarks.tcppath_setup`::

    python -m dcnlab.benchmarks.tcp_connect serve --port 7000 [--timeout 15]
    python -m dcnlab.benchmarks.tcp_connect connect --host 10.0.1.1 --port 7000 \\
        --sport 45000 --count 20 --parallel 1 --bytes 1000

``connect`` prints one JSON object: per connection the source port, connect() latency
(s), whether the whole exchange (send ``--bytes``, read the echo of one byte, close)
completed, and the error if not.  Source ports are bound explicitly (TFE marks
elephants by source port), one per connection: ``sport``, ``sport + 1``, ...

``serve`` closes a connection that sends nothing for ``--timeout`` seconds (default
:data:`TIMEOUT`).  A client that stays quiet on purpose must stay quiet for clearly less
than that: at the boundary the outcome is decided by the kernel's timer slack (0.1 % of
the timeout at nice 0, 0.5 % when niced: up to 15 or 75 ms at 15 s), and a client whose
next segment arrives after the close is answered with a reset.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

TIMEOUT = 15.0  # s: default of serve --timeout (and the clients' socket timeout)


def _handle(conn: socket.socket, timeout: float = TIMEOUT) -> None:
    with conn:
        conn.settimeout(timeout)
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                if data.endswith(b"\n"):
                    conn.sendall(b"!")
        except OSError:
            pass


def serve(port: int, timeout: float = TIMEOUT) -> None:
    if not timeout > 0:
        raise ValueError(f"serve: --timeout must be positive seconds, not {timeout}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", port))
    sock.listen(512)
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=_handle, args=(conn, timeout), daemon=True).start()


def one(host: str, port: int, sport: int, size: int) -> dict[str, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.settimeout(TIMEOUT)
    row: dict[str, Any] = {"sport": sport, "connect_s": None, "ok": False}
    try:
        sock.bind(("0.0.0.0", sport))
        t0 = time.perf_counter()
        sock.connect((host, port))
        row["connect_s"] = round(time.perf_counter() - t0, 6)
        sock.sendall(b"x" * max(0, size - 1) + b"\n")
        row["ok"] = sock.recv(1) == b"!"
    except OSError as exc:
        row["error"] = f"{exc.__class__.__name__}: {exc}"
    finally:
        sock.close()
    return row


def connect(host: str, port: int, sport: int, count: int, parallel: int, size: int,
            interval: float) -> list[dict[str, Any]]:
    if parallel <= 1:
        rows = []
        for i in range(count):
            rows.append(one(host, port, sport + i, size))
            time.sleep(interval)
        return rows
    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(lambda i: one(host, port, sport + i, size), range(count)))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--timeout", type=float, default=TIMEOUT,
                   help="close a connection quiet for this many seconds (default %(default)s)")
    c = sub.add_parser("connect")
    c.add_argument("--host", required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--sport", type=int, required=True)
    c.add_argument("--count", type=int, default=1)
    c.add_argument("--parallel", type=int, default=1)
    c.add_argument("--bytes", type=int, default=1000)
    c.add_argument("--interval", type=float, default=0.0)
    args = ap.parse_args(argv)
    if args.cmd == "serve":
        if not args.timeout > 0:
            ap.error(f"serve --timeout must be positive seconds, not {args.timeout}")
        serve(args.port, args.timeout)
    else:
        rows = connect(args.host, args.port, args.sport, args.count, args.parallel,
                       args.bytes, args.interval)
        print(json.dumps({"connections": rows}), flush=True)


if __name__ == "__main__":
    main()
