"""Build the TCP-Path authors' switch as dcnlab switch kinds (paper 001's reference).

The paper's authors published their switch: gistnetserv-uah/TCP-PATH, an ofsoftswitch13
fork whose datapath forwards by itself on a table miss, with ARP-Path, TCP-Path or TFE
chosen at compile time (``#define TCP_PATH`` in ``udatapath/pipeline.c``: 0, 1, 2). It
parses packets with NetBee (for example joestringer/Netbee).  Neither is a dependency of
dcnlab: this script builds both from source directories you give it, into a directory
of yours, one build per mode, each a switch kind (``authors-arppath``,
``authors-tcppath``, ``authors-tfe``; :func:`dcnlab.topo.switches.load_ofss_builds`)::

    python -m dcnlab.benchmarks.authors_switch build --tcppath SRC --netbee SRC \\
        --into ~/authors-switch
    DCNLAB_OFSS_BUILDS=~/authors-switch dcnlab run \\
        benchmarks/experiments/seed001_authors.yaml --out results/seed001_authors

Under the scheme ``switch_forwarding`` (the controller installs nothing) the switch's own
forwarding carries every packet; flow lists, traffic and measurements stay dcnlab's.

A source is a work tree or a bare git repository (its HEAD is exported).  Nothing is
installed outside ``--into``: NetBee's libraries and headers go to ``INTO/netbee``,
each mode to ``INTO/authors-MODE`` (``bin/``, ``share/``, ``kind.json``), the sources and
build trees to ``INTO/src``, every step's output to ``INTO/logs``.  The build packages
(Debian: cmake, flex, bison, autotools, libpcap, libxerces-c, libpcre3, libboost) are
installed with apt-get when missing, as scripts/setup.sh installs dcnlab's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Say = Callable[[str], None]

# The compile-time mode of the authors' pipeline (udatapath/pipeline.c, TCP_PATH).
MODES = {"arppath": 0, "tcppath": 1, "tfe": 2}
MODE_NAMES = {"arppath": "ARP-Path", "tcppath": "TCP-Path", "tfe": "TFE (TCP-Path for "
              "elephants: the server's port above 30000, or any nonzero DSCP)"}
KIND_PREFIX = "authors-"
MODE_LINE = "#define TCP_PATH 0"  # as published; the build replaces the 0
PIPELINE = Path("udatapath/pipeline.c")
SWITCH_SUBDIR = "mininet"  # the ofsoftswitch13 tree inside gistnetserv-uah/TCP-PATH
APT_PACKAGES = ("cmake", "g++", "make", "flex", "bison", "autoconf", "automake",
                "libtool", "pkg-config", "libpcap-dev", "libxerces-c-dev",
                "libpcre3-dev", "libboost-dev", "libssl-dev")


class BuildError(RuntimeError):
    """A step failed; the message names it and its log."""


@dataclass(frozen=True)
class Source:
    path: Path
    commit: str | None  # the exported or checked-out commit, when it is a git repository


def _is_bare(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def _commit(path: Path) -> str | None:
    git_dir = path if _is_bare(path) else path / ".git"
    if not git_dir.exists():
        return None
    out = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or None


def export_source(src: Path, into: Path, subdir: str | None = None) -> Source:
    """A fresh copy of ``src`` (of its ``subdir``) at ``into``: a bare repository's HEAD,
    or a work tree without its version-control directories."""
    if not src.exists():
        raise BuildError(f"{src}: no such directory")
    if into.exists():
        shutil.rmtree(into)
    commit = _commit(src)
    if _is_bare(src):
        into.mkdir(parents=True)
        with tempfile.TemporaryFile() as archive:
            subprocess.run(["git", "--git-dir", str(src), "archive", "--format=tar", "HEAD",
                            *([subdir] if subdir else [])], stdout=archive, check=True)
            archive.seek(0)
            with tarfile.open(fileobj=archive) as tar:
                tar.extractall(into, filter="tar")
        if subdir:
            inner = into / subdir
            for child in inner.iterdir():
                child.rename(into / child.name)
            inner.rmdir()
    else:
        base = src / subdir if subdir else src
        if not base.is_dir():
            raise BuildError(f"{base}: no such directory (is {src} the right source?)")
        shutil.copytree(base, into, ignore=shutil.ignore_patterns(".git", ".svn"))
    return Source(into, commit)


def set_mode(tree: Path, mode: int) -> None:
    """Choose the authors' pipeline mode in an exported switch tree."""
    path = tree / PIPELINE
    text = path.read_text(errors="replace")
    if text.count(MODE_LINE) != 1:
        raise BuildError(f"{path}: expected one line {MODE_LINE!r} (the authors' mode "
                         "switch); this source is not the one the script knows")
    path.write_text(text.replace(MODE_LINE, f"#define TCP_PATH {mode}"))


def missing_packages(packages: tuple[str, ...] = APT_PACKAGES) -> list[str]:
    missing = []
    for package in packages:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package],
                             capture_output=True, text=True, check=False)
        if "install ok installed" not in out.stdout:
            missing.append(package)
    return missing


def install_packages(say: Say = print) -> None:
    missing = missing_packages()
    if not missing:
        return
    if os.geteuid() != 0:
        raise BuildError(f"the build needs these Debian packages: {' '.join(missing)} "
                         "(run as root, or install them first)")
    say(f"installing apt packages: {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]):
        if subprocess.run(cmd, env=env, check=False).returncode != 0:
            raise BuildError(f"{' '.join(cmd)} failed")


class Builder:
    """Runs the build's steps, each logged to ``logs/<step>.log``."""

    def __init__(self, into: Path, jobs: int, say: Say = print) -> None:
        self.into = into
        self.jobs = jobs
        self.say = say
        self.logs = into / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def step(self, name: str, cmd: list[str], cwd: Path, env: dict[str, str] | None = None
             ) -> None:
        log = self.logs / f"{name}.log"
        began = time.monotonic()
        self.say(f"  {name}: {' '.join(cmd)}")
        with open(log, "w") as fh:
            done = subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT,
                                  env={**os.environ, **(env or {})}, check=False)
        if done.returncode != 0:
            tail = log.read_text(errors="replace").splitlines()[-15:]
            raise BuildError(f"step {name} failed (exit {done.returncode}); its log: {log}\n"
                             + "\n".join(tail))
        self.say(f"  {name}: done in {time.monotonic() - began:.0f} s")

    def netbee(self, src: Path) -> Source:
        """NetBee's libraries into INTO/netbee/lib, its headers into INTO/netbee/include."""
        tree = export_source(src, self.into / "src" / "netbee")
        self.say(f"NetBee ({tree.commit or 'no git commit'})")
        self.step("netbee-cmake", ["cmake", "."], tree.path / "src")
        self.step("netbee-make", ["make", f"-j{self.jobs}"], tree.path / "src")
        out = self.into / "netbee"
        if out.exists():
            shutil.rmtree(out)
        (out / "lib").mkdir(parents=True)
        libs = sorted((tree.path / "bin").glob("libn*.so*"))
        if not libs:
            raise BuildError(f"NetBee built no libn*.so in {tree.path / 'bin'}")
        for lib in libs:
            shutil.copy2(lib, out / "lib" / lib.name)
        shutil.copytree(tree.path / "include", out / "include")
        return tree

    def switch(self, src: Path, mode: str, netbee: Path) -> Source:
        """The authors' switch in ``mode`` into INTO/authors-MODE."""
        kind = KIND_PREFIX + mode
        tree = export_source(src, self.into / "src" / kind, SWITCH_SUBDIR)
        set_mode(tree.path, MODES[mode])
        self.say(f"{kind}: {MODE_NAMES[mode]} (TCP_PATH={MODES[mode]}; "
                 f"{tree.commit or 'no git commit'})")
        prefix = self.into / kind
        if prefix.exists():
            shutil.rmtree(prefix)
        flags = {"CPPFLAGS": f"-I{netbee / 'include'}", "LDFLAGS": f"-L{netbee / 'lib'}",
                 "LD_LIBRARY_PATH": str(netbee / "lib")}
        self.step(f"{kind}-boot", ["./boot.sh"], tree.path)
        self.step(f"{kind}-configure", ["./configure", f"--prefix={prefix}"], tree.path,
                  flags)
        self.step(f"{kind}-make", ["make", f"-j{self.jobs}"], tree.path, flags)
        self.step(f"{kind}-install", ["make", "install"], tree.path, flags)
        return tree


def write_kind(into: Path, mode: str, switch: Source, netbee: Source) -> Path:
    """The build's kind.json: what dcnlab registers it as."""
    kind = KIND_PREFIX + mode
    about = {
        "description": (f"the TCP-Path authors' switch (gistnetserv-uah/TCP-PATH "
                        f"{(switch.commit or 'unknown commit')[:12]}), mode "
                        f"{MODE_NAMES[mode]}; forwards by itself (scheme "
                        "switch_forwarding)"),
        "forwards": True,
        "lib": ["../netbee/lib"],
        "mode": MODES[mode],
        "sources": {"tcppath": switch.commit, "netbee": netbee.commit},
        "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    path = into / kind / "kind.json"
    path.write_text(json.dumps(about, indent=1) + "\n")
    return path


def build(tcppath: Path, netbee: Path, into: Path, modes: list[str], jobs: int,
          say: Say = print) -> list[Path]:
    """Build NetBee once and the switch once per mode; returns the kind.json files."""
    install_packages(say)
    into.mkdir(parents=True, exist_ok=True)
    builder = Builder(into, jobs, say)
    nb = builder.netbee(netbee)
    written = []
    for mode in modes:
        tree = builder.switch(tcppath, mode, into / "netbee")
        for program in ("ofdatapath", "ofprotocol", "dpctl"):
            if not (into / (KIND_PREFIX + mode) / "bin" / program).exists():
                raise BuildError(f"{KIND_PREFIX + mode}: make install left no {program} "
                                 "in bin/")
        written.append(write_kind(into, mode, tree, nb))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dcnlab.benchmarks.authors_switch",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build NetBee and the switch, one build per mode")
    b.add_argument("--tcppath", type=Path, required=True,
                   help="gistnetserv-uah/TCP-PATH: a work tree or a bare git repository")
    b.add_argument("--netbee", type=Path, required=True,
                   help="NetBee (e.g. joestringer/Netbee): a work tree or a bare repository")
    b.add_argument("--into", type=Path, required=True,
                   help="the directory the builds go to (DCNLAB_OFSS_BUILDS for dcnlab)")
    b.add_argument("--modes", default=",".join(MODES),
                   help=f"comma-separated, of {', '.join(MODES)} (default: all)")
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        parser.error(f"--modes: unknown {', '.join(unknown) or '(none given)'}; "
                     f"valid: {', '.join(MODES)}")
    began = time.monotonic()
    try:
        kinds = build(args.tcppath.resolve(), args.netbee.resolve(), args.into.resolve(),
                      modes, args.jobs)
    except BuildError as exc:
        print(f"authors_switch: {exc}", file=sys.stderr)
        return 1
    print(f"built {len(kinds)} switch kind(s) in {time.monotonic() - began:.0f} s: "
          + ", ".join(p.parent.name for p in kinds)
          + f"\nuse them with DCNLAB_OFSS_BUILDS={args.into.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
