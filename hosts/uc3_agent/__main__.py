"""``python -m dcnlab.hosts.uc3_agent`` (console script ``dcnlab-agent``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from . import native
from .agent import DEFAULT_LISTEN, DEFAULT_PORT, Agent, AgentConfig
from .bpf import BpfError
from .protocol import ProtocolError, check_secret


def _secret(args: argparse.Namespace) -> bytes:
    if args.secret_file:
        return Path(args.secret_file).read_bytes().strip()
    env = os.environ.get("DCNLAB_AGENT_SECRET")
    if env:
        return env.encode()
    raise SystemExit("dcnlab-agent: give --secret-file or DCNLAB_AGENT_SECRET")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dcnlab-agent",
        description="UC3 host agent: reports TCP flows, enforces cwnd clamps (BPF sock_ops)")
    parser.add_argument("--listen", default=DEFAULT_LISTEN,
                        help="address to listen on (default %(default)s; give the host's "
                        "management address for a controller elsewhere)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--secret-file", help="shared secret (>= 16 bytes); "
                        "else $DCNLAB_AGENT_SECRET")
    parser.add_argument("--interval", type=float, default=0.2, help="report period, s")
    parser.add_argument("--timeout", type=float, default=2.0,
                        help="controller silence (s) after which all clamps are removed")
    parser.add_argument("--tag", default="", help="names cgroup dcnlab-TAG (default agent-PID)")
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--state-file", type=Path, help="write status JSON here")
    parser.add_argument("--name", default="")
    parser.add_argument("--engine", choices=native.ENGINES,
                        help="who runs the steady state: native (dcnlab-uc3-agentd, the "
                        "default when built) or python (the reference loop)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cfg = AgentConfig(secret=_secret(args), listen=args.listen, port=args.port,
                      interval_s=args.interval, timeout_s=args.timeout, tag=args.tag,
                      work_dir=args.work_dir, state_file=args.state_file, name=args.name)

    engine = args.engine or native.default_engine()
    if args.engine is None and engine == "python":
        print(f"dcnlab-agent: warning: {native.BINARY} is not built (scripts/setup.sh): "
              "running the Python loop", file=sys.stderr)
    if engine == "native":
        try:
            check_secret(cfg.secret)
            return native.NativeAgent(cfg).run()
        except (BpfError, ProtocolError, OSError) as exc:
            print(f"dcnlab-agent: {exc}", file=sys.stderr)
            return 1

    async def _run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await Agent(cfg).run(stop)

    try:
        asyncio.run(_run())
    except (BpfError, ProtocolError, OSError) as exc:
        print(f"dcnlab-agent: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
