"""Select groups whose bucket choice is switch_ext's: the apps of the load-balancing
schemes that run in the switches (spray, LetFlow, flowcells, DRILL, CONGA).

OpenFlow 1.3 cannot say how a select group chooses its bucket.  switch_ext (which
describes itself as mfr "dcnlab", hw "switch_ext") takes a load balancer by name with
its experimenter message SET_GROUP_BALANCER (switch_ext/README.md, "Experimenter
messages"); the encoders live here, with their bytes checked against the switch's
decoder (switch_ext/tests/vectors.rs).  An app sets :attr:`SwitchBalancerApp.BALANCER`,
the balancer spec it asks every switch_ext for (``NAME[/KEY=VALUE]...``, from
dcnlab/model/balancers.py), and :attr:`SwitchBalancerApp.FAMILY`, the balancer names
``DCNLAB_SELECT_MODE`` may choose instead (options included: ``letflow/timeout=50ms``).
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
EXP_SET_GROUP_BALANCER = 5
MAX_BALANCER_SPEC = 255


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


def balancer_from_env(default: str, family: tuple[str, ...], env: Any = os.environ) -> str:
    """The balancer spec an app asks for: ``DCNLAB_SELECT_MODE`` if set, else
    ``default``; ValueError unless it is a valid spec of one of ``family``'s names."""
    spec = env.get(ENV_SELECT_MODE, default)
    try:
        check_balancer(spec)
    except ValueError as exc:
        raise ValueError(f"{ENV_SELECT_MODE}={spec!r}: {exc}") from None
    if spec.split("/")[0] not in family:
        raise ValueError(f"{ENV_SELECT_MODE}={spec!r}: this app runs "
                         f"{' or '.join(family)}")
    return spec


class SwitchBalancerApp(FabricApp):
    """Select groups over the equal-cost next hops, the bucket chosen by switch_ext's
    balancer :attr:`BALANCER` (or ``DCNLAB_SELECT_MODE``'s, one of :attr:`FAMILY`)."""

    POLICY = SELECT_GROUPS
    BALANCER = "random"
    FAMILY: tuple[str, ...] = ("random",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.balancer = balancer_from_env(self.BALANCER, self.FAMILY)
        self.balanced: set[int] = set()
        self._warned_hashing = False

    def balancer_for(self, dpid: int) -> str:
        """The spec switch ``dpid`` is sent (the same for every switch by default)."""
        return self.balancer

    def switch_described(self, dp: Any, mfr: str, hw: str, sw: str) -> None:
        if mfr == "dcnlab" and hw == "switch_ext":
            dp.send_msg(group_balancer_message(dp, self.balancer_for(dp.id)))
            self.balanced.add(dp.id)
            self.counters["balanced_switches"] = len(self.balanced)
            return
        self.counters["hashing_switches"] += 1
        if not self._warned_hashing:
            self._warned_hashing = True
            self.warn(
                f"switch {dp.id:#x} ({mfr} {hw}) can only hash select groups per flow: "
                f"{self.balancer} behaves as ECMP on such switches; it needs --switch ext"
            )
