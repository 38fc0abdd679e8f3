"""The throughput of a host's TCP flows between two samples.

The agent reads its cgroup's flows from its BPF program's map
(:meth:`~.bpf.ClampProgram.flow_samples`).  Throughput is
computed from bytes_acked between two samples (the kernel's delivery_rate is a per-ACK
estimate, reported too).
"""

from __future__ import annotations

import time

from .bpf import FlowSample, Tuple4
from .protocol import FlowStats


class FlowSampler:
    """Turns successive samples into FlowStats with throughput since the last sample."""

    def __init__(self) -> None:
        self._last: dict[Tuple4, tuple[int, float]] = {}

    def sample(self, flows: list[FlowSample], clamps: dict[Tuple4, int],
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
