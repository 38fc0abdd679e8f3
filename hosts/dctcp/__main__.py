"""``python -m dcnlab.hosts.dctcp hold``: keep DCTCP usable on this host while it runs.

A lab host's kernel is its own: the engine starts one holder per host (over SSH) for a
run that names ``dctcp``. It makes the name usable as :func:`dcnlab.hosts.dctcp.provided`
does here (the kernel's own dctcp, else the BPF one registered, counted as a user), prints
one JSON line ``{"congestion": NAME}`` (the name a socket must ask for on this host) or
``{"error": WHY}``, and holds until its stdin ends or it gets SIGTERM; then it drops its
use (unregistering the BPF DCTCP when it registered it and nobody else uses it).
"""

from __future__ import annotations

import json
import signal
import sys

from . import NAME, DctcpError, provided, resolve


def hold() -> int:
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        with provided([NAME]):
            print(json.dumps({"congestion": resolve(NAME)}), flush=True)
            sys.stdin.read()  # until the engine closes it (or SIGTERM)
    except DctcpError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["hold"]:
        print("usage: python -m dcnlab.hosts.dctcp hold", file=sys.stderr)
        sys.exit(2)
    sys.exit(hold())
