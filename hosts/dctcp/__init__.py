"""DCTCP on the hosts, for a kernel without the ``dctcp`` module.

``dctcp.bpf.c`` is DCTCP as a BPF struct_ops TCP congestion control, registered in the
kernel under the name ``dcnlab_dctcp`` (congestion-control names are kernel-global, so
the name says who registered it). dcnlab provides the name ``dctcp`` on top of it:

- :func:`available` is the kernel's list plus ``dctcp`` when the kernel has no dctcp of
  its own and the BPF object is built (``scripts/setup.sh`` builds it);
- :func:`resolve` maps a name to what a socket must ask for (``dctcp`` ->
  ``dcnlab_dctcp`` on such a kernel; anything else unchanged);
- :func:`provided` registers the BPF DCTCP for the duration of a ``with`` block when one
  of the names needs it, and unregisters it at the end only if this process registered
  it and no other live dcnlab process still uses it (users are pid files under
  ``/run/dcnlab/dctcp``, under a lock). It is chosen per socket before connect
  (``TCP_CONGESTION``; the engine's traffic agent and iperf3 ``-C`` do that), never as
  a namespace default: the kernel marks a BPF congestion control restricted, and making
  a restricted one the default leaks a reference. ``flag_unrestricted`` exists for the
  caller who needs a default and knows that.

:func:`host_commands` are the per-host settings DCTCP and the paper's setup need: ECN
on (``net.ipv4.tcp_ecn=1``; DCTCP also asks for ECN on its own connections) and an RTO
floor on every route (``ip route change ... rto_min 10ms``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

NAME = "dctcp"
KERNEL_NAME = "dcnlab_dctcp"  # .name in dctcp.bpf.c, and its struct_ops map name
HERE = Path(__file__).resolve().parent
OBJECT = HERE / "dctcp.bpf.o"
AVAILABLE_FILE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
ALLOWED_FILE = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
USERS_DIR = Path("/run/dcnlab/dctcp")


class DctcpError(RuntimeError):
    """The BPF DCTCP could not be registered; the message says why."""


def _kernel_available() -> set[str]:
    try:
        return set(AVAILABLE_FILE.read_text().split())
    except OSError:
        return set()


def needs_bpf() -> bool:
    """Whether ``dctcp`` must come from the BPF object (the kernel has none)."""
    return NAME not in _kernel_available()


def provides(kernel_names: set[str]) -> set[str]:
    """What dcnlab adds to the kernel's congestion controls ``kernel_names``."""
    return {NAME} if NAME not in kernel_names and OBJECT.exists() else set()


def available() -> set[str]:
    """Congestion controls a dcnlab experiment can name on this machine."""
    names = _kernel_available()
    return names | provides(names)


def resolve(name: str | None) -> str | None:
    """The name a socket must ask for."""
    if name == NAME and needs_bpf():
        return KERNEL_NAME
    return name


def _bpftool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bpftool", *args], capture_output=True, text=True, timeout=60)


def _live(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    USERS_DIR.mkdir(parents=True, exist_ok=True)
    with open(USERS_DIR / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _users() -> list[int]:
    out = []
    for p in USERS_DIR.glob("*.pid"):
        try:
            pid = int(p.stem)
        except ValueError:
            continue
        if _live(pid):
            out.append(pid)
        else:
            p.unlink(missing_ok=True)
    return out


def register() -> bool:
    """Registers the BPF DCTCP unless the kernel already lists it; returns whether this
    call registered it. Records this process as a user either way."""
    with _locked():
        (USERS_DIR / f"{os.getpid()}.pid").write_text("")
        if KERNEL_NAME in _kernel_available():
            return False
        if not OBJECT.exists():
            raise DctcpError(f"{OBJECT} is not built: run scripts/setup.sh "
                             f"(or sh {HERE / 'build_bpf.sh'})")
        r = _bpftool("struct_ops", "register", str(OBJECT))
        if r.returncode != 0 or KERNEL_NAME not in _kernel_available():
            (USERS_DIR / f"{os.getpid()}.pid").unlink(missing_ok=True)
            raise DctcpError(f"bpftool struct_ops register {OBJECT} failed: "
                             f"{(r.stderr or r.stdout).strip()[-500:]}")
        (USERS_DIR / "registered-by").write_text(str(os.getpid()))
        return True


def unregister(registered: bool) -> None:
    """Drops this process as a user; unregisters the BPF DCTCP if ``registered`` (this
    process registered it) and no other live dcnlab process uses it."""
    with _locked():
        (USERS_DIR / f"{os.getpid()}.pid").unlink(missing_ok=True)
        owner = USERS_DIR / "registered-by"
        owned = registered or (owner.exists() and not _live(_int(owner.read_text())))
        if not owned or _users():
            return
        if KERNEL_NAME in _kernel_available():
            r = _bpftool("struct_ops", "unregister", "name", KERNEL_NAME)
            if r.returncode != 0:
                raise DctcpError(f"bpftool struct_ops unregister name {KERNEL_NAME} failed: "
                                 f"{(r.stderr or r.stdout).strip()[-300:]}")
        owner.unlink(missing_ok=True)


def _int(s: str) -> int:
    try:
        return int(s.strip())
    except ValueError:
        return 0


@contextlib.contextmanager
def provided(names: Iterable[str | None]) -> Iterator[None]:
    """Makes every name in ``names`` usable by sockets inside the block."""
    if NAME not in set(names) or not needs_bpf():
        yield
        return
    registered = register()
    try:
        yield
    finally:
        unregister(registered)


def flag_unrestricted() -> None:
    """Adds the BPF DCTCP to ``tcp_allowed_congestion_control`` (needed before making it
    a namespace default; see the module docstring for why dcnlab does not)."""
    allowed = ALLOWED_FILE.read_text().split()
    if KERNEL_NAME not in allowed:
        ALLOWED_FILE.write_text(" ".join([*allowed, KERNEL_NAME]) + "\n")


RTO_MIN_RE = re.compile(r"^[0-9]+(ms|us|s)$")


def host_commands(ecn: bool = True, rto_min: str | None = "10ms") -> str:
    """A shell command for one host: ECN on, ``rto_min`` on each of its IPv4 routes.
    Fails (non-zero) if a route refuses the change."""
    if rto_min is not None and not RTO_MIN_RE.match(rto_min):
        raise ValueError(f"rto_min {rto_min!r}: expected e.g. 10ms")
    cmds = []
    if ecn:
        cmds.append("sysctl -qw net.ipv4.tcp_ecn=1")
    if rto_min is not None:
        # Output-only words of `ip route show` are not accepted back by `ip route change`.
        cmds.append("ip -4 route show | sed -e 's/ linkdown//' "
                    "-e 's/ rto_min \\(lock \\)\\?[^ ]*//' | "
                    "while read -r r; do ip route change $r rto_min " + rto_min +
                    " || exit 1; done")
    return " && ".join(cmds) if cmds else "true"
