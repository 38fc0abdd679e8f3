"""A synchronized incast for the ``abq`` check, run inside the hosts.

``serve --port P --senders N --size S --rounds R [--congestion C]``: accepts N
connections (congestion control C on the listener, so on them too); on each,
R times: reads S bytes, answers one byte. Prints ``{"completed": k}`` (k of N x R).
``send --to IP --port P --size S --rounds R --start T --interval I [--congestion C]``:
one connection (congestion control C chosen before connect); round r starts at wall
time T + r x I (all hosts share the clock), sends S bytes and waits for the answer.
Prints ``{"rounds": k, "fct": [...]}``; exit status 0 when every round completed.
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import sys
import time


def serve(port: int, senders: int, size: int, rounds: int, timeout: float,
          congestion: str | None) -> int:
    lsock = socket.socket()
    if congestion:  # accepted sockets inherit it (DCTCP needs both ends: RFC 8257)
        lsock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, congestion.encode())
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("0.0.0.0", port))
    lsock.listen(max(senders, 16))
    lsock.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ, None)
    got: dict[socket.socket, int] = {}
    completed = 0
    deadline = time.monotonic() + timeout
    print("ready", flush=True)
    while completed < senders * rounds and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.2):
            if key.data is None:
                conn, _ = lsock.accept()
                conn.setblocking(False)
                got[conn] = 0
                sel.register(conn, selectors.EVENT_READ, "conn")
                continue
            conn = key.fileobj
            assert isinstance(conn, socket.socket)
            try:
                data = conn.recv(1 << 16)
            except (BlockingIOError, ConnectionError):
                continue
            if not data:
                sel.unregister(conn)
                conn.close()
                continue
            got[conn] += len(data)
            while got[conn] >= size:
                got[conn] -= size
                completed += 1
                conn.setblocking(True)
                conn.sendall(b"!")
                conn.setblocking(False)
    print(json.dumps({"completed": completed}), flush=True)
    return 0 if completed == senders * rounds else 1


def send(to: str, port: int, size: int, rounds: int, start: float, interval: float,
         congestion: str | None, timeout: float) -> int:
    sock = socket.socket()
    if congestion:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, congestion.encode())
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(timeout)
    sock.connect((to, port))
    payload = bytes(size)
    fct = []
    for r in range(rounds):
        delay = start + r * interval - time.time()
        if delay > 0:
            time.sleep(delay)
        t0 = time.monotonic()
        try:
            sock.sendall(payload)
            if sock.recv(1) != b"!":
                break
        except OSError:
            break
        fct.append(round(time.monotonic() - t0, 6))
    used = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0")
    print(json.dumps({"rounds": len(fct), "fct": fct, "congestion": used.decode()}), flush=True)
    sock.close()
    return 0 if len(fct) == rounds else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dcnlab.schemes.abq.incast")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--senders", type=int, required=True)
    s.add_argument("--size", type=int, required=True)
    s.add_argument("--rounds", type=int, default=1)
    s.add_argument("--timeout", type=float, default=60.0)
    s.add_argument("--congestion")
    c = sub.add_parser("send")
    c.add_argument("--to", required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--size", type=int, required=True)
    c.add_argument("--rounds", type=int, default=1)
    c.add_argument("--start", type=float, required=True)
    c.add_argument("--interval", type=float, default=0.2)
    c.add_argument("--congestion")
    c.add_argument("--timeout", type=float, default=30.0)
    a = p.parse_args(argv)
    if a.cmd == "serve":
        return serve(a.port, a.senders, a.size, a.rounds, a.timeout, a.congestion)
    return send(a.to, a.port, a.size, a.rounds, a.start, a.interval, a.congestion, a.timeout)


if __name__ == "__main__":
    sys.exit(main())
