"""What a worker is, and whether it can run an experiment's tasks.

Before the first task, the client asks every worker for its :func:`worker_facts` (Dask's
``client.run``) and compares them with its own (:func:`refusals`): the same dcnlab
commit and local changes (a worker running other code would measure something else and
could not read the client's task), root (networks need it), and the switch kinds, flow
tap and host parts the experiment uses.  A task checks its worker once more when it
starts (a worker that joined later, or restarted after a crash).  Any mismatch is an
error naming the worker, before anything runs there.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from .. import environment
from ..spec import NO_AGENTS, ExperimentSpec

RESOURCE = "machine"  # every worker declares machine=1; every task asks for it


@dataclass(frozen=True)
class Needs:
    """What the experiment's tasks need of a worker."""

    switch_kinds: tuple[str, ...]
    host_parts: tuple[str, ...]
    flow_tap: bool

    @classmethod
    def of(cls, specs: list[ExperimentSpec]) -> Needs:
        kinds = [s.switch or spec.switch for spec in specs for s in spec.schemes]
        parts = [str(s.agents) for spec in specs for s in spec.schemes
                 if s.agents not in (None, NO_AGENTS)]
        return cls(tuple(dict.fromkeys(kinds)), tuple(dict.fromkeys(parts)),
                   any(spec.diagnosis.flow_paths for spec in specs))


def code_identity() -> dict[str, Any]:
    """This process's dcnlab: version, commit, and a digest of its uncommitted changes
    (two checkouts at one commit with different edits run different code)."""
    versions = environment.versions()
    diff = subprocess.run(["git", "diff", "HEAD"], cwd=environment.REPO,
                          capture_output=True, check=False).stdout
    return {"dcnlab": versions.get("dcnlab"), "commit": versions.get("git_commit"),
            "changes": hashlib.sha256(diff).hexdigest()[:16] if diff else None,
            "python": ".".join(sys.version.split(".")[:2])}


def worker_facts(needs: Needs) -> dict[str, Any]:
    """Run on a worker (``client.run``): its code, user and what it can build."""
    from dcnlab.schemes import registry
    from dcnlab.topo.errors import NetworkError
    from dcnlab.topo.network import preflight
    from dcnlab.topo.switches import SwitchKindError, get_switch_kind

    from .. import flowtap

    problems: list[str] = []
    for name in needs.switch_kinds:
        try:
            preflight(get_switch_kind(name))
        except (NetworkError, SwitchKindError) as exc:
            problems.append(f"cannot build networks with switch {name!r}: {exc}")
    for name in needs.host_parts:
        try:
            registry.host_parts(name)
        except registry.UnknownSchemeError as exc:
            problems.append(f"host parts {name!r}: {exc}")
    if needs.flow_tap:
        try:
            flowtap.check_available()
        except flowtap.TapError as exc:
            problems.append(f"diagnosis.flow_paths: {exc}")
    return {**code_identity(), "host": socket.gethostname(), "uid": os.geteuid(),
            "problems": problems}


def refusals(label: str, facts: dict[str, Any], mine: dict[str, Any]) -> list[str]:
    """Why the worker ``label`` cannot take this client's tasks (empty: it can)."""
    why = []
    if facts.get("commit") != mine.get("commit"):
        why.append(f"worker {label} runs dcnlab commit {facts.get('commit')}, this client "
                   f"{mine.get('commit')}: check out the same commit on every machine "
                   "(and run scripts/setup.sh there)")
    elif facts.get("changes") != mine.get("changes"):
        why.append(f"worker {label} has other uncommitted changes than this client (diff "
                   f"digest {facts.get('changes')} vs {mine.get('changes')}): commit them "
                   "and check out the commit on every machine")
    for key in ("dcnlab", "python"):
        if facts.get(key) != mine.get(key):
            why.append(f"worker {label} has {key} {facts.get(key)}, this client "
                       f"{mine.get(key)}")
    if facts.get("uid") != 0:
        why.append(f"worker {label} runs as uid {facts.get('uid')}: networks need root; "
                   "start the worker as root")
    why += [f"worker {label}: {p}" for p in facts.get("problems", [])]
    return why
