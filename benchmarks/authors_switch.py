"""Build the TCP-Path authors' switch as dcnlab switch kinds (paper 001's reference).

The paper's authors published their switch: gistnetserv-uah/TCP-PATH, an ofsoftswitch13
fork whose datapath forwards by itself on a table miss, with ARP-Path, TCP-Path or TFE
chosen at compile time (``#define TCP_PATH`` in ``udatapath/pipeline.c``: 0, 1, 2). It
parses packets with NetBee (for example joestringer/Netbee).  Neither is a dependency of
dcnlab: this script builds both from source directories you give it, into a directory
of yours, one build per mode, each a switch kind (``authors-arppath``,
``authors-tcppath``, ``authors-tfe``; :mod:`dcnlab.topo.ofss_builds`)::

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
# The datapath takes its role from its dpid (udatapath/packet.c, dp_ports.c): below 100 a
# rack switch (floods a host's broadcast everywhere, a fabric copy to its hosts only),
# 100-999 aggregation (from a rack everywhere, from a core to racks only), 1000 and up a
# core (everywhere). Spines of a leaf-spine fabric are its cores.
DPID_BY_TIER = {"edge": 1, "leaf": 1, "agg": 100, "core": 1000, "spine": 1000}
MODE_LINE = "#define TCP_PATH 0"  # as published; the build replaces the 0
PIPELINE = Path("udatapath/pipeline.c")
SWITCH_SUBDIR = "mininet"  # the ofsoftswitch13 tree inside gistnetserv-uah/TCP-PATH
# Both code bases date from 2013-2016; today's GCC (12 on Debian 12) refuses them in its
# default dialects. C++ as C++11: Xerces-C 3.2's headers need C++11, and C++17 (GCC 12's
# default) asserts that std::map comparators are const-callable, which NetBee's are not.
# C with -fcommon: globals defined in headers, which GCC 10 stopped merging.
OLD_CXX = "-std=gnu++11 -fcommon -w"
OLD_C = "-fcommon -w"
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


def missing_blobs(git_dir: Path, subdir: str | None = None) -> list[str]:
    """Paths under HEAD (in ``subdir``) whose contents the repository lacks: a mirror
    may hold a tree without its largest files."""
    tree = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "HEAD", "--",
                           *([subdir] if subdir else [])],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    blobs = [(meta.split()[2], path) for meta, _, path in (line.partition("\t")
                                                            for line in tree)
             if meta.split()[1] == "blob"]
    if not blobs:
        return []
    check = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "--batch-check"],
                           input="".join(f"{sha}\n" for sha, _ in blobs),
                           capture_output=True, text=True, check=True).stdout.splitlines()
    return [path for (_, path), line in zip(blobs, check, strict=True)
            if line.endswith(" missing")]


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
        absent = missing_blobs(src, subdir)
        if absent:  # a partial mirror: what the build needs fails it later, by name
            print(f"  {src}: {len(absent)} file(s) absent from the repository, left out: "
                  + ", ".join(absent[:5]) + (" ..." if len(absent) > 5 else ""))
        with tempfile.TemporaryFile() as archive:
            # (git still names the absent files on stderr while it leaves them out)
            done = subprocess.run(["git", "--git-dir", str(src), "archive", "--format=tar",
                                   "HEAD", "--", subdir or ".", ":(exclude,glob)**/.svn/**",
                                   *(f":(exclude){p}" for p in absent)],
                                  stdout=archive, stderr=subprocess.PIPE, text=False,
                                  check=False)
            if done.returncode != 0:
                raise BuildError(f"git archive of {src} failed: "
                                 f"{done.stderr.decode(errors='replace')[-500:]}")
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


@dataclass(frozen=True)
class SourceFix:
    """A textual fix of a 2013 source for today's compilers, applied to every file
    matching ``pattern`` under the exported tree; the build fails if it matches nothing
    (the source is not the one the fix was written for)."""

    pattern: str  # a glob relative to the tree (``**`` for any depth)
    old: str
    new: str
    why: str


NETBEE_FIXES = (
    SourceFix("src/**/*.[ch]*", "make_pair<", "pair<",
              "under C++11 make_pair's parameters are forwarding references: with its "
              "types given they are rvalue references, which an lvalue no longer binds; "
              "the pair's constructor builds the same pair"),
    SourceFix("src/nbpflcompiler/dump.h", "m_Stream!=NULL", "!m_Stream.fail()",
              "C++11 streams convert to bool explicitly, not to void*; what the test "
              "asked is whether the stream failed"),
    SourceFix("src/nbpflcompiler/gramm.y", "&pfl_lloc", "&yylloc",
              "Bison 3 no longer renames a pure parser's yylloc with the name prefix"),
)


def apply_fixes(tree: Path, fixes: tuple[SourceFix, ...]) -> list[str]:
    """Apply ``fixes`` under ``tree``; one line per fix saying how often it applied."""
    done = []
    for fix in fixes:
        count = 0
        for path in sorted(tree.glob(fix.pattern)):
            if not path.is_file():
                continue
            text = path.read_text(errors="surrogateescape")
            n = text.count(fix.old)
            if n:
                path.write_text(text.replace(fix.old, fix.new), errors="surrogateescape")
                count += n
        if not count:
            raise BuildError(f"{tree}: the fix {fix.old!r} -> {fix.new!r} ({fix.pattern}) "
                             "matches nothing; this source is not the one the script knows")
        done.append(f"{fix.old!r} -> {fix.new!r} x{count} ({fix.why})")
    return done


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
        for line in apply_fixes(tree.path, NETBEE_FIXES):
            self.say(f"  fixed: {line}")
        self.step("netbee-cmake", ["cmake", f"-DCMAKE_CXX_FLAGS={OLD_CXX}",
                                   f"-DCMAKE_C_FLAGS={OLD_C}", "."], tree.path / "src")
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
                 "LD_LIBRARY_PATH": str(netbee / "lib"), "CFLAGS": f"-g -O2 {OLD_C}",
                 "CXXFLAGS": f"-g -O2 {OLD_CXX}"}
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
        "dpid_by_tier": DPID_BY_TIER,
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
