"""``dcnlab lab prepare lab.yaml``: put on every host what a run needs, and say per host
what is ready and what is missing, with the fix.  Idempotent: a host that has this
checkout's dcnlab already is left as it is.

What a host needs for the traffic agents: Python 3.11 or newer with ``venv`` (Debian:
python3-venv), and dcnlab itself in a virtual environment whose interpreter is the lab
file's ``python`` (``/opt/dcnlab/venv/bin/python`` by default).  The agent uses the
standard library only, so dcnlab is installed from a wheel built from this checkout
without its dependencies (no package index is needed on the hosts).

The scheme programs that are not Python (``dcnlab-mp``, CFS's transport, and
``dcnlab-uc3-agentd``, UC3's native agent loop) are copied from
this machine's build into the same environment's ``bin`` (where the engine runs them on a
lab host), each with a digest beside it so an unchanged build is not copied again; a
build missing here is reported with its fix, and only the schemes that need it lack it.

Checked, and reported with their fix: the kernel's cgroup v2 (UC3's host agents join
their flows to a cgroup) and BTF (``/sys/kernel/btf/vmlinux``: the BPF programs of UC3's
agents and of DCTCP), and MPTCP (``net.mptcp.enabled``: seed 003's kernel reference).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from .spec import LabSpec
from .ssh import HostError, SshHost, SshLoop, Target

ROOT = Path(__file__).resolve().parents[1]  # the checkout the wheel is built from
STAMP = "dcnlab-wheel.sha256"  # beside the venv: the wheel installed there


@dataclass(frozen=True)
class Program:
    """A host part's program built here, copied to ``<venv>/bin/<name>``."""

    name: str
    needed_by: str  # which schemes lack it when it is not there
    local: Callable[[], str]  # its build on this machine (raises when it is missing)
    build: str  # how to build it here


def _uc3_agentd() -> str:
    from dcnlab.hosts.uc3_agent.native import BINARY, binary

    found = binary()
    if found is None:
        raise FileNotFoundError(f"{BINARY} is missing")
    return str(found)


def programs() -> list[Program]:
    """Every registered scheme transport's program (the schemes registry declares them:
    a new transport is installed without a line here), then UC3's native agent loop."""
    from dcnlab.schemes import registry

    users: dict[str, list[str]] = {}
    out: list[Program] = []
    for scheme in (registry.get(name) for name in registry.names()):
        transport = scheme.transport
        if transport is None:
            continue
        if transport.program not in users:
            users[transport.program] = []
            out.append(Program(transport.program, "", transport.local_program,
                               "scripts/setup.sh"))
        users[transport.program].append(scheme.name)
    out = [replace(p, needed_by=f"{', '.join(users[p.name])} (its transport)") for p in out]
    # without it UC3's agents run their Python loop (the reference; more CPU per agent)
    out.append(Program("dcnlab-uc3-agentd", "UC3's native agent loop", _uc3_agentd,
                       "scripts/setup.sh, or cd hosts/uc3_agent/native && cargo build "
                       "--release --locked"))
    return out


@dataclass
class Prepared:
    name: str
    installed: bool = False  # dcnlab was (re)installed now
    ready: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # each with its fix: no run can start
    # kernel features some schemes need (UC3, DCTCP, the kernel MPTCP reference), with
    # the fix: a run of those schemes would fail, others are fine
    lacking: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing


BUILT = ("hosts/uc3_agent/clamp.bpf.o", "hosts/dctcp/dctcp.bpf.o",
         "benchmarks/engine/flowtap.bpf.o")  # package data scripts/setup.sh builds


def _source_copy(dest: Path) -> Path:
    """The checkout's tracked files (as they are now) and its built BPF objects, copied:
    the wheel is built from that, so no stale build/ directory of the checkout can slip
    old files into it, and the checkout gets none."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True)
    if listed.returncode != 0:
        return ROOT  # not a checkout (an installed copy): build from it as it is
    names = [n for n in listed.stdout.decode().split("\0") if n] + list(BUILT)
    for name in names:
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def build_wheel(out: Path) -> Path:
    """dcnlab's wheel from this checkout, without its dependencies."""
    # pip's isolated build environment gets setuptools < 67 (Ryu's pin) as the venv's did
    env = {**os.environ, "PIP_CONSTRAINT": str(ROOT / "constraints.txt")}
    src = _source_copy(out / "src")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                           "--disable-pip-version-check", "-w", str(out), str(src)],
                          capture_output=True, text=True, env=env)
    wheels = sorted(out.glob("dcnlab-*.whl"))
    if done.returncode != 0 or not wheels:
        raise HostError(f"building dcnlab's wheel failed: {(done.stderr or done.stdout)[-800:]}")
    return wheels[-1]


def wheel_digest(wheel: Path) -> str:
    """The wheel's files and contents, not its zip timestamps (a rebuild of the same
    checkout gives the same digest: prepare installs again only what changed)."""
    h = hashlib.sha256()
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if name.endswith(".dist-info/RECORD"):
                continue  # lists the others' hashes and sizes: nothing new
            h.update(name.encode() + b"\0" + z.read(name) + b"\0")
    return h.hexdigest()


def venv_of(python: str) -> str:
    """The virtual environment a ``.../bin/python`` belongs to."""
    path = PurePosixPath(python)
    if path.parent.name != "bin":
        raise HostError(f"python {python}: expected VENV/bin/python")
    return str(path.parent.parent)


def prepare_host(lab: LabSpec, ssh: SshHost, wheel: Path, digest: str) -> Prepared:
    report = Prepared(ssh.name)
    try:
        ssh.connect()
    except HostError as exc:
        report.missing.append(str(exc))
        return report
    venv = venv_of(lab.python)
    stamp = f"{venv}/{STAMP}"
    if ssh.run(f"test \"$(cat {shlex.quote(stamp)} 2>/dev/null)\" = {digest}").returncode == 0:
        report.ready.append(f"dcnlab at {lab.python} (this checkout's)")
    else:
        version = ssh.run("python3 -c 'import sys; print(sys.version_info >= (3, 11))'")
        if version.stdout.strip() != "True":
            report.missing.append("Python 3.11 or newer as python3 (Debian 12: apt-get "
                                  "install python3 python3-venv)")
            return report
        made = ssh.run(f"test -x {shlex.quote(lab.python)} || python3 -m venv "
                       f"{shlex.quote(venv)}", timeout=120.0)
        if made.returncode != 0:
            report.missing.append(f"a virtual environment at {venv}: python3 -m venv failed "
                                  f"({made.stderr.strip()[-200:]}; Debian: apt-get install "
                                  "python3-venv)")
            return report
        remote = f"/tmp/{wheel.name}"
        ssh.put(wheel, remote)
        pip = ssh.run([lab.python, "-m", "pip", "install", "--quiet", "--no-deps",
                       "--force-reinstall", "--disable-pip-version-check", remote],
                      timeout=300.0)
        ssh.run(["rm", "-f", remote])
        if pip.returncode != 0:
            report.missing.append(f"dcnlab at {lab.python}: pip failed: "
                                  f"{pip.stderr.strip()[-300:]}")
            return report
        ssh.run(f"echo {digest} > {shlex.quote(stamp)}", check=True)
        report.installed = True
        report.ready.append(f"dcnlab at {lab.python} (installed now)")
    agent = ssh.run([lab.python, "-c", "import dcnlab.benchmarks.engine.agent"])
    if agent.returncode != 0:
        report.missing.append(f"{lab.python} cannot import the traffic agent: "
                              f"{agent.stderr.strip()[-300:]}")
    for program in programs():
        _install_program(ssh, program, venv, report)
    _kernel(ssh, report)
    return report


def _install_program(ssh: SshHost, program: Program, venv: str, report: Prepared) -> None:
    """``program``'s build copied to ``<venv>/bin`` unless the same build is there, then
    run once there (``--help``): a host whose C library cannot run it says so."""
    try:
        local = Path(program.local())
    except (OSError, RuntimeError) as exc:  # its finder's own error says why
        report.lacking.append(f"{program.name} for {program.needed_by}: not built here "
                              f"({exc}); build it ({program.build}) and prepare again")
        return
    digest = hashlib.sha256(local.read_bytes()).hexdigest()
    remote = f"{venv}/bin/{program.name}"
    stamp = f"{venv}/{program.name}.sha256"
    if ssh.run(f"test -x {shlex.quote(remote)} && test \"$(cat {shlex.quote(stamp)} "
               f"2>/dev/null)\" = {digest}").returncode != 0:
        partial = f"{remote}.part"
        ssh.put(local, partial)
        ssh.run(f"chmod 755 {shlex.quote(partial)} && mv -f {shlex.quote(partial)} "
                f"{shlex.quote(remote)} && echo {digest} > {shlex.quote(stamp)}", check=True)
        what = "installed now"
    else:
        what = "this build's"
    ran = ssh.run([remote, "--help"], timeout=30.0)
    if ran.returncode != 0:
        report.lacking.append(f"{program.name} for {program.needed_by}: {remote} does not "
                              f"run there ({(ran.stderr or ran.stdout).strip()[-200:]}): "
                              "the host needs this machine's architecture and a C library "
                              "as new as its (Debian 12's)")
        return
    report.ready.append(f"{program.name} at {remote} ({what})")


def _kernel(ssh: SshHost, report: Prepared) -> None:
    checks = [
        ("test \"$(stat -fc %T /sys/fs/cgroup)\" = cgroup2fs", "cgroup v2",
         "cgroup v2 at /sys/fs/cgroup (UC3's host agents; boot with systemd's unified "
         "hierarchy)"),
        ("test -r /sys/kernel/btf/vmlinux", "kernel BTF",
         "kernel BTF at /sys/kernel/btf/vmlinux (the BPF programs of UC3 and DCTCP; a "
         "kernel built with CONFIG_DEBUG_INFO_BTF)"),
        ("test \"$(sysctl -n net.mptcp.enabled 2>/dev/null)\" = 1", "MPTCP",
         "MPTCP (seed 003's kernel reference: sysctl -w net.mptcp.enabled=1)"),
        # the kernel's own dctcp (loaded on demand), else bpftool for dcnlab's BPF one
        ("grep -qw dctcp /proc/sys/net/ipv4/tcp_available_congestion_control || "
         "modprobe -q tcp_dctcp 2>/dev/null || command -v bpftool >/dev/null", "DCTCP",
         "DCTCP: the kernel's tcp_dctcp module, or bpftool (Debian: bpftool) for "
         "dcnlab's BPF DCTCP"),
    ]
    for command, name, fix in checks:
        if ssh.run(command, timeout=15.0).returncode == 0:
            report.ready.append(name)
        else:
            report.lacking.append(fix)


def prepare(lab: LabSpec, loop: SshLoop | None = None) -> list[Prepared]:
    own = loop is None
    loop = loop or SshLoop()
    try:
        with tempfile.TemporaryDirectory(prefix="dcnlab-wheel-") as tmp:
            wheel = build_wheel(Path(tmp))
            digest = wheel_digest(wheel)
            out = []
            for host in lab.hosts:
                address, port, user, key = lab.ssh_target(host)
                ssh = SshHost(Target(host.name, address, port, user, key,
                                     lab.ssh.connect_timeout, lab.ssh.known_hosts), loop)
                try:
                    out.append(prepare_host(lab, ssh, wheel, digest))
                except HostError as exc:
                    out.append(Prepared(host.name, missing=[str(exc)]))
                finally:
                    ssh.close()
            return out
    finally:
        if own:
            loop.close()


def render(reports: list[Prepared]) -> str:
    lines = []
    for r in reports:
        lines.append(f"{r.name}: {'ready' if r.ok else 'not ready'}")
        lines += [f"  ok: {x}" for x in r.ready]
        lines += [f"  missing: {x}" for x in r.missing]
        lines += [f"  lacking (some schemes need it): {x}" for x in r.lacking]
    return "\n".join(lines)
