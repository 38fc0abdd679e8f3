"""ABQ (seed 002): single-path routing, with switch_ext's ABQ ingress discipline driven
at run time through switch_ext's experimenter message.

The switch ports get ABQ from the topology spec (the ``abq`` scheme adds
``ingress@host=abq/k=...``); this app routes like ``single_path`` (``STRIPED``: one
deterministic shortest path per host pair, so a flow's ACKs come back through the port
its data leaves by, which ABQ relies on) and, when any ``DCNLAB_ABQ_*`` variable is
set, sends every switch_ext switch a SET_PORT_ABQ message for all its ABQ ports
(``OFPP_ALL``) as soon as the switch describes itself:

``DCNLAB_ABQ_ENABLE``  ``1`` (default) or ``0`` (the ports pass every frame)
``DCNLAB_ABQ_K``       threshold on the port's egress queue: ``20p`` or ``30000b``
``DCNLAB_ABQ_MODE``    ``ece`` or ``window``

Bad values stop the app at start with a message naming the variable. Any other switch
gets a warning once: ABQ needs ``--switch ext``.

The message (switch_ext/README.md, "Experimenter messages"): experimenter 0x00DC0001,
exp_type 4, body ``!IBBBxI``: port_no, enable (0/1), mode (0 keep, 1 ece, 2 window),
k_unit (0 keep, 1 packets, 2 bytes), pad, k.
"""

from __future__ import annotations

import os
import re
import struct
from typing import Any

from dcnlab.controller.compiler import STRIPED
from dcnlab.controller.fabric_app import FabricApp

SWITCH_EXT_EXPERIMENTER = 0x00DC0001
EXP_SET_PORT_ABQ = 4
OFPP_ALL = 0xFFFFFFFC
ABQ_MODES = {None: 0, "ece": 1, "window": 2}

ENV_ENABLE = "DCNLAB_ABQ_ENABLE"
ENV_K = "DCNLAB_ABQ_K"
ENV_MODE = "DCNLAB_ABQ_MODE"
ENV_VARS = (ENV_ENABLE, ENV_K, ENV_MODE)


def parse_k(k: str) -> tuple[int, int]:
    """``20p`` -> (1, 20), ``30000b`` -> (2, 30000): (k_unit, k) of the message."""
    m = re.fullmatch(r"([1-9][0-9]*)([pb])", k)
    if not m or int(m.group(1)) > 0xFFFFFFFF:
        raise ValueError(f"K {k!r}: expected packets like 20p or bytes like 30000b")
    return (1 if m.group(2) == "p" else 2), int(m.group(1))


def set_port_abq_body(port_no: int = OFPP_ALL, enable: bool = True, mode: str | None = None,
                      k: str | None = None) -> bytes:
    """The SET_PORT_ABQ body: ``mode``/``k`` None keep the port's current value."""
    if mode not in ABQ_MODES:
        raise ValueError(f"mode {mode!r}: expected ece or window")
    if not 0 <= port_no <= 0xFFFFFFFF:
        raise ValueError(f"port {port_no}: not a 32-bit OpenFlow port number")
    unit, value = parse_k(k) if k is not None else (0, 0)
    return struct.pack("!IBBBxI", port_no, int(bool(enable)), ABQ_MODES[mode], unit, value)


def set_port_abq_message(dp: Any, **kw: Any) -> Any:
    return dp.ofproto_parser.OFPExperimenter(dp, SWITCH_EXT_EXPERIMENTER, EXP_SET_PORT_ABQ,
                                             set_port_abq_body(**kw))


def settings_from_env(env: Any = os.environ) -> dict[str, Any] | None:
    """The message's settings from ``DCNLAB_ABQ_*``; None when none is set."""
    if not any(env.get(v) for v in ENV_VARS):
        return None
    enable = env.get(ENV_ENABLE, "1")
    if enable not in ("0", "1"):
        raise ValueError(f"{ENV_ENABLE}={enable!r}: use 1 or 0")
    mode = env.get(ENV_MODE) or None
    if mode not in ABQ_MODES:
        raise ValueError(f"{ENV_MODE}={mode!r}: use ece or window")
    k = env.get(ENV_K) or None
    if k is not None:
        try:
            parse_k(k)
        except ValueError as e:
            raise ValueError(f"{ENV_K}={k!r}: {e}") from None
    return {"enable": enable == "1", "mode": mode, "k": k}


class Abq(FabricApp):
    POLICY = STRIPED

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.abq_settings = settings_from_env()
        self._warned = False

    def switch_described(self, dp: Any, mfr: str, hw: str, sw: str) -> None:
        if mfr == "dcnlab" and hw == "switch_ext":
            if self.abq_settings is not None:
                dp.send_msg(set_port_abq_message(dp, **self.abq_settings))
                self.counters["abq_configured_switches"] += 1
            return
        if not self._warned:
            self._warned = True
            self.warn(f"switch {dp.id:#x} ({mfr} {hw}) has no ABQ input queues: "
                      "the abq scheme needs --switch ext")
