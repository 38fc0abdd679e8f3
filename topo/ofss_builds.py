"""ofsoftswitch13 builds as switch kinds: forks built into directories of their own.

Every directory ``NAME/`` under ``$DCNLAB_OFSS_BUILDS`` that holds ``kind.json`` and
``bin/`` (ofdatapath, ofprotocol, dpctl) is the switch kind ``NAME``, registered the first
time a kind is looked up (:func:`dcnlab.topo.switches.get_switch_kind`). kind.json says
what it is: ``description``; ``lib``, the directories of shared libraries its programs
need (relative to NAME); ``forwards``, whether the datapath forwards by itself what no
entry matches (the scheme ``switch_forwarding`` runs only on such kinds); and
``dpid_by_tier``, the first datapath id of each topology tier, for a datapath that reads
its role from its dpid (:func:`dcnlab.topo.switches.renumbered`).  Their ports are veths
read with AF_PACKET, as ofsoftswitch13's are, so the flow tap works on them (tried on the
TCP-Path authors' builds).
``python -m dcnlab.benchmarks.authors_switch build`` writes three (the TCP-Path authors'
switch in its three modes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from mininet.node import Switch, UserSwitch

from .switches import (
    ENV_OFSS_BUILDS,
    OFSS_BINARIES,
    SwitchContext,
    SwitchKindError,
    bind,
    get_switch_kind,
    is_registered,
    ofss_dpid,
    register_switch_kind,
    unregister_switch_kind,
)


class OfssBuildSwitch(UserSwitch):
    """An ofsoftswitch13 build off PATH: its programs are found through the PATH its
    shell exports (:func:`bind`'s env).  Mininet's UserSwitch checks the programs on the
    interpreter's own PATH at construction and exits the interpreter when they are not
    there, so this constructor does what UserSwitch's does without that check (the kind
    checked the build's directory before anything started)."""

    def __init__(self, name: str, dpid: str | None = None, dpopts: str = "--no-slicing",
                 **params: Any) -> None:
        Switch.__init__(self, name, dpid=ofss_dpid(dpid), **params)
        if self.listenPort:
            self.opts += f" --listen=ptcp:{self.listenPort} "
        else:
            self.opts += f" --listen=punix:/tmp/{self.name}.listen"
        self.dpopts = dpopts

    log_dir: ClassVar[Path | None] = None  # the run directory (set by bind)

    def start(self, controllers: list[Any]) -> None:
        """UserSwitch's start with the two programs' logs in the run directory (Mininet
        writes them to /tmp and leaves them there)."""
        if self.log_dir is None:
            super().start(controllers)
            return
        remotes = ",".join(f"tcp:{c.IP()}:{c.port}" for c in controllers)
        ofd = self.log_dir / f"{self.name}-ofd.log"
        ofp = self.log_dir / f"{self.name}-ofp.log"
        intfs = ",".join(str(i) for i in self.intfList() if not i.IP())
        self.cmd(f"ofdatapath -i {intfs} punix:/tmp/{self.name} -d {self.dpid} "
                 f"{self.dpopts} 1> {ofd} 2> {ofd} &")
        self.cmd(f"ofprotocol unix:/tmp/{self.name} {remotes} --fail=closed {self.opts} "
                 f"1> {ofp} 2> {ofp} &")

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's name
        """UserSwitch's stop, then the two programs' sockets (run-prefixed names),
        which a datapath killed in the middle of its work leaves in /tmp."""
        super().stop(deleteIntfs)
        for sock in (Path(f"/tmp/{self.name}"), Path(f"/tmp/{self.name}.listen")):
            if sock.is_socket():
                sock.unlink(missing_ok=True)


OFSS_BUILD_FILE = "kind.json"  # in each build's directory: what the kind is
_loaded_builds: dict[Path, list[str]] = {}  # builds directory -> the kinds it gave


def load_ofss_builds(root: str | os.PathLike[str] | None = None) -> list[str]:
    """Register every build under ``root`` (default: the directory
    ``DCNLAB_OFSS_BUILDS`` names) as a switch kind named after its directory (the module
    doc); returns the names registered now."""
    if root is None:
        root = os.environ.get(ENV_OFSS_BUILDS) or None
        if root is None:
            return []
    base = Path(root).resolve()
    if base in _loaded_builds:
        return []
    if not base.is_dir():
        raise SwitchKindError(f"{ENV_OFSS_BUILDS}={root}: no such directory")
    names = _loaded_builds[base] = []
    for manifest in sorted(base.glob(f"*/{OFSS_BUILD_FILE}")):
        build = manifest.parent
        try:
            about = json.loads(manifest.read_text())
        except ValueError as exc:
            raise SwitchKindError(f"{manifest}: not JSON ({exc})") from None
        if is_registered(build.name):
            raise SwitchKindError(f"{manifest}: switch kind {build.name!r} is already "
                                  "registered; rename the build's directory")
        libs = [str((build / lib).resolve()) for lib in about.get("lib") or []]
        register_switch_kind(
            build.name, _ofss_build_factory(build.name, build / "bin", libs),
            requires=OFSS_BINARIES, program_dir=build / "bin",
            install_hint=f"{build} is not a complete build: build it again",
            forwards=bool(about.get("forwards")), veth_tap=True,
            dpids=_dpid_bases(manifest, about.get("dpid_by_tier")),
            description=str(about.get("description") or f"ofsoftswitch13 build in {build}"))
        names.append(build.name)
    return names


def _dpid_bases(manifest: Path, value: Any) -> dict[str, int] | None:
    if value is None:
        return None
    if not (isinstance(value, dict) and value and all(
            isinstance(k, str) and isinstance(v, int) and 0 < v < 1 << 48
            for k, v in value.items())):
        raise SwitchKindError(f"{manifest}: dpid_by_tier must map tier names to first "
                              f"datapath ids (1 to 2^48 - 1), not {value!r}")
    return dict(value)


def unload_ofss_builds(root: str | os.PathLike[str]) -> None:
    """Forget the kinds :func:`load_ofss_builds` registered from ``root`` (a test's
    builds directory, say), so that reading it again registers them anew."""
    for name in _loaded_builds.pop(Path(root).resolve(), []):
        unregister_switch_kind(name)


def _ofss_build_factory(name: str, bin_dir: Path, libs: list[str]
                        ) -> Callable[[SwitchContext], Callable[..., Switch]]:
    def factory(ctx: SwitchContext) -> Callable[..., Switch]:
        get_switch_kind(name).check_programs()
        env = {"PATH": f"{bin_dir.resolve()}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        if libs:
            env["LD_LIBRARY_PATH"] = ":".join(libs)
        return bind(OfssBuildSwitch, ctx, env=env, log_dir=ctx.run_dir)

    return factory
