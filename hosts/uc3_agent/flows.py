"""This host's TCP flows from ``ss -tinH`` (iproute2's sock_diag client).

Parsing ss keeps the agent free of netlink code; the fields used (rtt, mss, cwnd,
bytes_acked, delivery_rate) have been stable in ss's output for years.  Throughput is
computed from bytes_acked between two samples (the kernel's delivery_rate is a per-ACK
estimate, reported too).
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass

from .bpf import Tuple4
from .protocol import FlowStats

_RATE_UNITS = {"bps": 1.0, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12}
_RATE_RE = re.compile(r"\bdelivery_rate (\d+(?:\.\d+)?)([KMGT]?bps)\b")
_KV_RE = re.compile(r"\b(rtt|mss|cwnd|bytes_acked):([\d.]+)")


@dataclass(frozen=True)
class SsFlow:
    flow: Tuple4
    rtt_us: float
    mss: int
    cwnd: int
    delivery_bps: float
    bytes_acked: int


def _endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    host = host.strip("[]").split("%", 1)[0]
    return host, int(port)


def parse_ss(text: str) -> list[SsFlow]:
    """Parse ``ss -tinH state established`` (two lines per socket)."""
    flows: list[SsFlow] = []
    current: Tuple4 | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            fields = line.split()
            current = None
            if len(fields) >= 4:
                try:
                    (lip, lport), (rip, rport) = _endpoint(fields[2]), _endpoint(fields[3])
                    current = Tuple4(lip, lport, rip, rport)
                except ValueError:
                    current = None
            continue
        if current is None:
            continue
        values = dict(_KV_RE.findall(line))
        rate = _RATE_RE.search(line)
        try:
            rtt_ms = float(values.get("rtt", "0").split("/")[0])
            flows.append(SsFlow(
                flow=current, rtt_us=rtt_ms * 1000.0, mss=int(float(values.get("mss", "0"))),
                cwnd=int(float(values.get("cwnd", "0"))),
                delivery_bps=float(rate.group(1)) * _RATE_UNITS[rate.group(2)] if rate else 0.0,
                bytes_acked=int(float(values.get("bytes_acked", "0")))))
        except (ValueError, KeyError):
            pass  # a line we do not understand: skip the socket, keep the others
        current = None
    return flows


def read_ss() -> list[SsFlow]:
    proc = subprocess.run(["ss", "-tinH", "state", "established"], capture_output=True,
                          text=True, check=False, timeout=5)
    return parse_ss(proc.stdout)


class FlowSampler:
    """Turns successive ss samples into FlowStats with throughput since the last sample."""

    def __init__(self) -> None:
        self._last: dict[Tuple4, tuple[int, float]] = {}

    def sample(self, flows: list[SsFlow], clamps: dict[Tuple4, int],
               now: float | None = None) -> list[FlowStats]:
        now = time.monotonic() if now is None else now
        out = []
        seen: dict[Tuple4, tuple[int, float]] = {}
        for f in flows:
            prev = self._last.get(f.flow)
            tput = 0.0
            if prev is not None and now > prev[1] and f.bytes_acked >= prev[0]:
                tput = (f.bytes_acked - prev[0]) * 8.0 / (now - prev[1])
            seen[f.flow] = (f.bytes_acked, now)
            out.append(FlowStats(flow=f.flow, rtt_us=f.rtt_us, mss=max(f.mss, 1),
                                 cwnd=f.cwnd, delivery_bps=f.delivery_bps,
                                 throughput_bps=tput, bytes_acked=f.bytes_acked,
                                 clamp=clamps.get(f.flow, 0)))
        self._last = seen
        return out
