"""The contract between a running controller app and whoever launched it.

Faucet-style, apps take their run-time configuration from environment variables so
that plain ``ryu-manager dcnlab.apps.ecmp`` keeps working:

``DCNLAB_TOPOLOGY``
    Path to a JSON topology (:meth:`~dcnlab.model.topology.TopologySpec.to_dict`).  When
    set, the app knows the fabric, the hosts and their addresses up front.  When unset (a
    real lab), the app discovers switches and links with LLDP and learns hosts from their
    ARP packets.
``DCNLAB_STATE_FILE``
    Path where the app keeps a JSON snapshot of its state (written atomically on
    change): connected datapaths, whether every expected switch has its entries
    (``ready``), counters and warnings.  The network lifecycle waits on ``ready``.
``DCNLAB_STATS_INTERVAL``
    Seconds between the app's port-statistics polls (default 1; 0 turns polling off).
``DCNLAB_SELECT_MODE``
    Selection mode the ``spray`` app asks of switches that can choose one
    (``random`` or ``rr``); defaults to ``random``.

This module is neutral ground: the launcher (:mod:`dcnlab.topo`) and the apps
(:mod:`dcnlab.controller`, :mod:`dcnlab.apps`) both import it, and it imports neither.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

ENV_TOPOLOGY = "DCNLAB_TOPOLOGY"
ENV_STATE_FILE = "DCNLAB_STATE_FILE"
ENV_STATS_INTERVAL = "DCNLAB_STATS_INTERVAL"
ENV_SELECT_MODE = "DCNLAB_SELECT_MODE"


# ---------------------------------------------------------------------------
# The state file


def write_state(path: str, state: dict[str, Any]) -> None:
    """Atomically replace ``path`` with ``state`` as JSON (readers never see halves)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".state-", dir=directory)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(state, fh, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_state(path: str) -> dict[str, Any] | None:
    """The last state an app wrote, or None when there is none yet."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
