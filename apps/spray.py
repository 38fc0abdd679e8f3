"""Random packet spraying (seed 000): the ECMP groups, selecting a bucket per packet.

OpenFlow 1.3 cannot say how a select group chooses its bucket.  On ``switch_ext``
(which describes itself as mfr "dcnlab", hw "switch_ext") this app asks for per-packet
selection with switch_ext's experimenter message: ``random`` (RPS, the default) or
``rr`` (weighted round-robin, ofsoftswitch13's behaviour), from ``DCNLAB_SELECT_MODE``.
Any other switch (Open vSwitch hashes per flow) gets a clear warning, once, and the
fabric behaves as ECMP there.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from ryu.ofproto import ofproto_v1_3 as ofp

from dcnlab.controller.compiler import SELECT_GROUPS
from dcnlab.controller.fabric_app import FabricApp
from dcnlab.model.balancers import check_balancer
from dcnlab.model.runtime import ENV_SELECT_MODE

SWITCH_EXT_EXPERIMENTER = 0x00DC0001
EXP_SET_SELECT_MODE = 1
EXP_SET_GROUP_BALANCER = 5
SELECT_MODES = {"hash": 1, "rr": 2, "random": 3}
MAX_BALANCER_SPEC = 255


def select_mode_message(dp: Any, mode: str, group_id: int = ofp.OFPG_ALL) -> Any:
    """switch_ext's "set group select mode" (OFPG_ALL = the switch-wide default)."""
    body = struct.pack("!IB3x", group_id, SELECT_MODES[mode])
    return dp.ofproto_parser.OFPExperimenter(dp, SWITCH_EXT_EXPERIMENTER, EXP_SET_SELECT_MODE,
                                             body)


def group_balancer_body(spec: str, group_id: int = ofp.OFPG_ALL) -> bytes:
    """switch_ext's SET_GROUP_BALANCER body: ``uint32 group_id; uint16 spec_len; uint8
    pad[2]; char spec[spec_len]``, zero-padded to a multiple of 8 bytes.  ``spec`` is a
    load balancer ``NAME[/KEY=VALUE]...`` (checked against dcnlab/model/balancers.py);
    "" gives the group back the switch default (for OFPG_ALL: the one it started with)."""
    if spec:
        check_balancer(spec)
    if not 0 <= group_id <= 0xFFFFFFFF:
        raise ValueError(f"group {group_id}: not a 32-bit OpenFlow group id")
    data = spec.encode("ascii")
    if len(data) > MAX_BALANCER_SPEC:
        raise ValueError(f"balancer spec of {len(data)} bytes: at most {MAX_BALANCER_SPEC}")
    body = struct.pack("!IH2x", group_id, len(data)) + data
    return body + bytes(-len(body) % 8)


def group_balancer_message(dp: Any, spec: str, group_id: int = ofp.OFPG_ALL) -> Any:
    """switch_ext's "set group load balancer" (OFPG_ALL = the switch-wide default)."""
    return dp.ofproto_parser.OFPExperimenter(dp, SWITCH_EXT_EXPERIMENTER, EXP_SET_GROUP_BALANCER,
                                             group_balancer_body(spec, group_id))


class Spray(FabricApp):
    POLICY = SELECT_GROUPS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.select_mode = os.environ.get(ENV_SELECT_MODE, "random")
        if self.select_mode not in ("random", "rr"):
            raise ValueError(f"{ENV_SELECT_MODE}={self.select_mode!r}: use 'random' or 'rr'")
        self.per_packet: set[int] = set()
        self._warned_hashing = False

    def switch_described(self, dp: Any, mfr: str, hw: str, sw: str) -> None:
        if mfr == "dcnlab" and hw == "switch_ext":
            dp.send_msg(select_mode_message(dp, self.select_mode))
            self.per_packet.add(dp.id)
            self.counters["per_packet_switches"] = len(self.per_packet)
            return
        self.counters["hashing_switches"] += 1
        if not self._warned_hashing:
            self._warned_hashing = True
            self.warn(
                f"switch {dp.id:#x} ({mfr} {hw}) can only hash select groups per flow: "
                "spray behaves as ECMP on such switches; per-packet spraying needs "
                "--switch ext"
            )
