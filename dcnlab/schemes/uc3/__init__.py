"""UC3 (seed 004): fair bandwidth allocation among flows with different RTTs.

This package is the scheme's home on the controller side: :mod:`.alloc` (fair shares,
reallocation, BDP windows), :mod:`.collect` (flows, paths, link loads), :mod:`.config`
(the app's environment), :mod:`.agents` (starting host agents in a network's hosts),
:mod:`.engine` (the host-parts session the engine and ``dcnlab check`` use) and
:mod:`.check` (the ``dcnlab check`` invariant: Jain's index of two flows with different
RTTs).  The Ryu app is ``apps/uc3.py``; the host agent, which runs on end hosts, is
``hosts/uc3_agent/`` (``dcnlab-agent``).
"""

from __future__ import annotations

from ..base import CheckContext, CheckOutcome, HostParts, HostSession, Scheme

REPORT_INTERVAL = 0.1  # s: the paper's per-flow throughput measurement interval


def _open(interval: float) -> HostSession:
    from .engine import Uc3Session

    return Uc3Session.open(interval)


def fairness(ctx: CheckContext) -> CheckOutcome:
    from .check import uc3_fairness
    from .engine import Uc3Session

    if not isinstance(ctx.hosts, Uc3Session):
        return {}, ["the uc3 check needs its host parts (uc3 agents)"]
    return uc3_fairness(ctx.net, ctx.spec, ctx.hosts.files)


HOST_PARTS = [
    HostParts(
        name="uc3",
        summary="dcnlab-agent in every TCP sender: reports flows (RTT, throughput) and "
                "clamps their cwnd with BPF; senders join its cgroup",
        open=_open,
        default_interval=REPORT_INTERVAL,
        lab=True,
        columns=("clamps_applied", "clamps_lifted", "clamp_errors", "clamp_updates",
                 "agent_reports"),
        summary_column=("clamps_applied", "clamps",
                        "cwnd clamps the UC3 agents' BPF programs applied to sockets during "
                        "the run (- : no agents)"),
    ),
]

SCHEMES = [
    Scheme(
        name="uc3",
        app="dcnlab.apps.uc3",
        summary="single_path routing plus UC3 allocation: fair shares per bottleneck, "
                "optional reallocation, BDP windows the host agents enforce",
        seed="004",
        host_parts="uc3",
        check=fairness,
        check_topology="dumbbell",
    ),
]
