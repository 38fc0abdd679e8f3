"""TFE, TCP-Path for elephant flows (seed 001): explore only the elephants' SYNs.

Everything else -- mice, rabbits, non-TCP -- takes the default routes (ECMP select
groups), so switches hold per-flow entries and the fabric carries exploration copies
for elephants only.  As the paper describes, an elephant is recognised by its sender's
mark on the SYN (the authors' published switch tests the server's port instead;
docs/diagnoses/p001.md):

``DCNLAB_TFE_PORTS``  TCP source port range ``LOW-HIGH`` (default ``30001-65535``, i.e.
                      above 30000), or ``off``
``DCNLAB_TFE_DSCP``   ``nonzero`` (default: any DSCP but 0), a list such as ``8,46``, or
                      ``off``

Each mark becomes SYN punt entries on the edge switches' host ports (a port range as
masked ``tcp_src`` prefixes, DSCP values one entry each since OpenFlow 1.3 cannot mask
``ip_dscp``).  The other TCP-Path settings (``DCNLAB_TCPPATH_*``) apply unchanged.
"""

from __future__ import annotations

import os

from dcnlab.apps.tcppath import TcpPath
from dcnlab.schemes.tcppath.rules import ElephantFilter

ENV_PORTS = "DCNLAB_TFE_PORTS"
ENV_DSCP = "DCNLAB_TFE_DSCP"


def parse_filter(ports: str, dscp: str) -> ElephantFilter:
    """The elephant mark from the two settings; ValueError says what is wrong."""
    port_range: tuple[int, int] | None = None
    if ports.strip().lower() != "off":
        lo, sep, hi = ports.partition("-")
        try:
            port_range = (int(lo), int(hi if sep else 65535))
        except ValueError:
            raise ValueError(f"{ENV_PORTS}={ports!r}: use LOW-HIGH or off") from None
        if not 0 <= port_range[0] <= port_range[1] <= 65535:
            raise ValueError(f"{ENV_PORTS}={ports!r}: need 0 <= LOW <= HIGH <= 65535")
    values: frozenset[int] | None = None
    text = dscp.strip().lower()
    if text == "nonzero":
        values = frozenset(range(1, 64))
    elif text != "off":
        try:
            values = frozenset(int(v) for v in text.split(",") if v.strip())
        except ValueError:
            raise ValueError(f"{ENV_DSCP}={dscp!r}: use nonzero, off or a list") from None
        if not values or not all(0 <= v <= 63 for v in values):
            raise ValueError(f"{ENV_DSCP}={dscp!r}: DSCP values are 0..63")
    if port_range is None and values is None:
        raise ValueError(f"{ENV_PORTS} and {ENV_DSCP} are both off: no flow is an elephant")
    return ElephantFilter(port_range, values)


class Tfe(TcpPath):
    ELEPHANTS_ONLY = True

    def elephant_filter(self) -> ElephantFilter:
        return parse_filter(os.environ.get(ENV_PORTS, "30001-65535"),
                            os.environ.get(ENV_DSCP, "nonzero"))
