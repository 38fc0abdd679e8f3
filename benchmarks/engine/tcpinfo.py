"""Decode ``struct tcp_info`` (getsockopt TCP_INFO) with ctypes.

Python's socket module has TCP_INFO but no decoder.  The layout below is Linux's
``include/uapi/linux/tcp.h`` up to ``tcpi_snd_wnd`` (kernel 5.4+); offsets were checked
against the C header with ``offsetof`` (see tests/engine/test_tcpinfo.py, which pins them).
The struct only ever grows at the end, and the kernel copies ``min(len, sizeof)`` bytes,
so we ask for more than we know and read what came back: fields beyond the returned
length are reported as None (an older kernel).
"""

from __future__ import annotations

import ctypes
import socket
from dataclasses import dataclass

TCP_INFO = getattr(socket, "TCP_INFO", 11)
REQUEST_LEN = 512  # more than any kernel's struct tcp_info; the kernel returns its size


class TcpInfoStruct(ctypes.Structure):
    _fields_ = [
        ("tcpi_state", ctypes.c_uint8),
        ("tcpi_ca_state", ctypes.c_uint8),
        ("tcpi_retransmits", ctypes.c_uint8),
        ("tcpi_probes", ctypes.c_uint8),
        ("tcpi_backoff", ctypes.c_uint8),
        ("tcpi_options", ctypes.c_uint8),
        ("tcpi_wscale", ctypes.c_uint8),  # snd_wscale:4, rcv_wscale:4
        ("tcpi_flags", ctypes.c_uint8),  # delivery_rate_app_limited:1, fastopen_fail:2
        ("tcpi_rto", ctypes.c_uint32),
        ("tcpi_ato", ctypes.c_uint32),
        ("tcpi_snd_mss", ctypes.c_uint32),
        ("tcpi_rcv_mss", ctypes.c_uint32),
        ("tcpi_unacked", ctypes.c_uint32),
        ("tcpi_sacked", ctypes.c_uint32),
        ("tcpi_lost", ctypes.c_uint32),
        ("tcpi_retrans", ctypes.c_uint32),
        ("tcpi_fackets", ctypes.c_uint32),
        ("tcpi_last_data_sent", ctypes.c_uint32),
        ("tcpi_last_ack_sent", ctypes.c_uint32),
        ("tcpi_last_data_recv", ctypes.c_uint32),
        ("tcpi_last_ack_recv", ctypes.c_uint32),
        ("tcpi_pmtu", ctypes.c_uint32),
        ("tcpi_rcv_ssthresh", ctypes.c_uint32),
        ("tcpi_rtt", ctypes.c_uint32),
        ("tcpi_rttvar", ctypes.c_uint32),
        ("tcpi_snd_ssthresh", ctypes.c_uint32),
        ("tcpi_snd_cwnd", ctypes.c_uint32),
        ("tcpi_advmss", ctypes.c_uint32),
        ("tcpi_reordering", ctypes.c_uint32),
        ("tcpi_rcv_rtt", ctypes.c_uint32),
        ("tcpi_rcv_space", ctypes.c_uint32),
        ("tcpi_total_retrans", ctypes.c_uint32),
        ("tcpi_pacing_rate", ctypes.c_uint64),
        ("tcpi_max_pacing_rate", ctypes.c_uint64),
        ("tcpi_bytes_acked", ctypes.c_uint64),
        ("tcpi_bytes_received", ctypes.c_uint64),
        ("tcpi_segs_out", ctypes.c_uint32),
        ("tcpi_segs_in", ctypes.c_uint32),
        ("tcpi_notsent_bytes", ctypes.c_uint32),
        ("tcpi_min_rtt", ctypes.c_uint32),
        ("tcpi_data_segs_in", ctypes.c_uint32),
        ("tcpi_data_segs_out", ctypes.c_uint32),
        ("tcpi_delivery_rate", ctypes.c_uint64),
        ("tcpi_busy_time", ctypes.c_uint64),
        ("tcpi_rwnd_limited", ctypes.c_uint64),
        ("tcpi_sndbuf_limited", ctypes.c_uint64),
        ("tcpi_delivered", ctypes.c_uint32),
        ("tcpi_delivered_ce", ctypes.c_uint32),
        ("tcpi_bytes_sent", ctypes.c_uint64),
        ("tcpi_bytes_retrans", ctypes.c_uint64),
        ("tcpi_dsack_dups", ctypes.c_uint32),
        ("tcpi_reord_seen", ctypes.c_uint32),
        ("tcpi_rcv_ooopack", ctypes.c_uint32),
        ("tcpi_snd_wnd", ctypes.c_uint32),
    ]


# The fields the engine reads; each must lie inside what the kernel returned.
@dataclass(frozen=True)
class TcpInfo:
    state: int
    rtt_us: int
    rttvar_us: int
    min_rtt_us: int | None
    snd_cwnd: int
    snd_mss: int
    total_retrans: int
    reordering: int  # the sender's current reordering threshold (segments; sysctl
    # tcp_reordering at start, raised by detected reordering up to tcp_max_reordering)
    bytes_acked: int | None
    bytes_received: int | None
    data_segs_in: int | None
    data_segs_out: int | None
    bytes_retrans: int | None
    reord_seen: int | None  # reordering events the sender detected (4.19+)
    dsack_dups: int | None  # DSACKed segments: retransmissions that were spurious (4.19+)
    rcv_ooopack: int | None  # out-of-order segments queued by the receiver (5.4+)


def _end(name: str) -> int:
    member = getattr(TcpInfoStruct, name)
    return int(member.offset + member.size)


def decode(raw: bytes) -> TcpInfo:
    """TcpInfo from getsockopt bytes; fields the kernel did not fill are None."""
    buf = raw.ljust(ctypes.sizeof(TcpInfoStruct), b"\0")[: ctypes.sizeof(TcpInfoStruct)]
    st = TcpInfoStruct.from_buffer_copy(buf)
    n = len(raw)

    def opt(name: str) -> int | None:
        return int(getattr(st, name)) if _end(name) <= n else None

    if n < _end("tcpi_total_retrans"):
        raise ValueError(f"tcp_info of {n} bytes is too short (kernel older than 2.6.x?)")
    return TcpInfo(
        state=st.tcpi_state,
        rtt_us=st.tcpi_rtt,
        rttvar_us=st.tcpi_rttvar,
        min_rtt_us=opt("tcpi_min_rtt"),
        snd_cwnd=st.tcpi_snd_cwnd,
        snd_mss=st.tcpi_snd_mss,
        total_retrans=st.tcpi_total_retrans,
        reordering=st.tcpi_reordering,
        bytes_acked=opt("tcpi_bytes_acked"),
        bytes_received=opt("tcpi_bytes_received"),
        data_segs_in=opt("tcpi_data_segs_in"),
        data_segs_out=opt("tcpi_data_segs_out"),
        bytes_retrans=opt("tcpi_bytes_retrans"),
        reord_seen=opt("tcpi_reord_seen"),
        dsack_dups=opt("tcpi_dsack_dups"),
        rcv_ooopack=opt("tcpi_rcv_ooopack"),
    )


def tcp_info(sock: socket.socket) -> TcpInfo:
    return decode(sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, REQUEST_LEN))
