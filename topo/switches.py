"""Switch kinds a network can be built with: ``ovs``, ``ofss``, (plug-in) ``ext``, and
ofsoftswitch13 builds in their own directories (:mod:`.ofss_builds`, ``DCNLAB_OFSS_BUILDS``).

A kind is a name plus a factory.  The factory receives the run's :class:`SwitchContext`
and returns what Mininet's ``switch=`` argument takes: a Switch class, or any callable
``(name, **params) -> Switch``.  The topology passes ``dpid`` (16 hex digits) per switch.

Every switch process must run in the run's network namespace (``SwitchContext.netns_pid``):
the switch-side veth ends live there, and so does the controller's 127.0.0.1.  Classes get
that by inheriting :class:`InRunNamespace` first (see :func:`bind`), which starts the
Mininet shell with ``mnexec -a PID``.

``ext`` (our Rust switch) registers itself: ``dcnlab.topo.ext_switch`` is imported the first
time someone asks for ``ext`` and is expected to call, at import time::

    register_switch_kind("ext", factory, emulates_links=True, description="...")

``emulates_links=True`` tells the lifecycle that the switch applies rate, delay, jitter,
buffer and ECN itself (from ``ctx.spec``), so Mininet's htb shaping is not added on top.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from mininet.node import OVSSwitch, Switch, UserSwitch
from mininet.util import errRun

if TYPE_CHECKING:
    from .ovs import OvsInstance
    from .spec import TopologySpec

EXT_MODULE = "dcnlab.topo.ext_switch"


class SwitchKindError(RuntimeError):
    """Unknown switch kind, or a kind that cannot be used on this machine."""


@dataclass(frozen=True)
class SwitchContext:
    """What a switch factory may need to know about the run."""

    run_dir: Path
    prefix: str  # prepended to every node name of the run
    spec: TopologySpec
    netns_pid: int | None = None  # process holding the run's network namespace
    ovs: OvsInstance | None = None  # the run's private Open vSwitch, for kinds that need it
    extra: dict[str, Any] = field(default_factory=dict)  # free-form options (e.g. select mode)

    @property
    def mnexec_opts(self) -> str:
        """Options for Mininet's ``Node.startShell`` that start a shell in the run namespace."""
        return "-cd" if self.netns_pid is None else f"-cda{self.netns_pid}"

    def logical(self, name: str) -> str:
        """The spec's name ("s1") for a prefixed Mininet node name."""
        return name.removeprefix(self.prefix)


SwitchFactory = Callable[[SwitchContext], Callable[..., Switch]]


@dataclass(frozen=True)
class SwitchKind:
    name: str
    factory: SwitchFactory
    needs_ovs: bool = False  # the lifecycle starts a private OvsInstance first
    emulates_links: bool = False  # the switch applies LinkParams itself (no htb)
    description: str = ""
    requires: tuple[str, ...] = ()  # programs that must be on PATH (checked before start)
    install_hint: str = ""  # how to get them
    # (topology spec, switch options) -> None; raises on a configuration the switch would
    # refuse, before anything is built (a namespace, an interface)
    validate: Callable[[Any, Mapping[str, Any]], None] | None = None
    # forwards by itself what no entry matches (built-in forwarding, as the TCP-Path
    # authors' switch): a scheme that installs nothing runs on it
    forwards: bool = False
    # where ``requires`` are looked for instead of PATH (an ofss build's bin/)
    program_dir: Path | None = None
    # reads its ports' frames from the veths with AF_PACKET sockets, so the flow tap's
    # ingress hook (benchmarks/engine/flowtap.py) sees every frame it gets
    veth_tap: bool = False
    # tier -> first datapath id: a switch whose code reads its role from its dpid (the
    # TCP-Path authors' switch: < 100 a rack switch, 100-999 aggregation, >= 1000 core)
    # gets dpids numbered from its tier's base instead of 1, 2, ... (:func:`renumbered`)
    dpids: Mapping[str, int] | None = None

    def missing_programs(self) -> list[str]:
        if self.program_dir is not None:
            return [p for p in self.requires
                    if not os.access(self.program_dir / p, os.X_OK)]
        return [program for program in self.requires if shutil.which(program) is None]

    def check_programs(self) -> None:
        """Raise SwitchKindError naming the missing programs and how to get them."""
        missing = self.missing_programs()
        if missing:
            where = f"in {self.program_dir}" if self.program_dir is not None else "on PATH"
            raise SwitchKindError(f"switch kind {self.name!r} needs {', '.join(missing)} "
                                  f"{where}. {self.install_hint}".rstrip())


_registry: dict[str, SwitchKind] = {}


def register_switch_kind(name: str, factory: SwitchFactory, *, needs_ovs: bool = False,
                         emulates_links: bool = False, description: str = "",
                         requires: tuple[str, ...] = (), install_hint: str = "",
                         validate: Callable[[Any, Mapping[str, Any]], None] | None = None,
                         forwards: bool = False, program_dir: Path | None = None,
                         veth_tap: bool = False, dpids: Mapping[str, int] | None = None,
                         replace: bool = False) -> SwitchKind:
    """Make ``name`` usable as ``Network(switch=name)``; returns the registered kind."""
    if name in _registry and not replace:
        raise SwitchKindError(f"switch kind {name!r} is already registered")
    kind = SwitchKind(name, factory, needs_ovs, emulates_links, description, tuple(requires),
                      install_hint, validate, forwards, program_dir, veth_tap, dpids)
    _registry[name] = kind
    return kind


def is_registered(name: str) -> bool:
    """Whether ``name`` is a kind now (without importing or loading any)."""
    return name in _registry


def unregister_switch_kind(name: str) -> None:
    _registry.pop(name, None)


def switch_kinds() -> list[str]:
    """Names usable today (``ext`` appears once its module is importable, ofss builds
    once ``DCNLAB_OFSS_BUILDS`` names their directory)."""
    try:
        get_switch_kind("ext")
    except SwitchKindError:
        pass
    _load_builds()
    return sorted(_registry)


def get_switch_kind(name: str) -> SwitchKind:
    if name not in _registry and name == "ext":
        _import_ext()
    if name not in _registry:
        _load_builds()
    try:
        return _registry[name]
    except KeyError:
        known = sorted({*_registry, "ext"})
        builds = ("" if os.environ.get(ENV_OFSS_BUILDS) else
                  f" (ofsoftswitch13 builds become kinds with {ENV_OFSS_BUILDS}=DIR)")
        raise SwitchKindError(
            f"unknown switch kind {name!r}; known kinds: {', '.join(known)}{builds}"
        ) from None


ENV_OFSS_BUILDS = "DCNLAB_OFSS_BUILDS"  # a directory of ofsoftswitch13 builds (ofss_builds)


def _load_builds() -> None:
    """The ofsoftswitch13 builds ``DCNLAB_OFSS_BUILDS`` names, as kinds (imported here:
    :mod:`.ofss_builds` registers through this module)."""
    if os.environ.get(ENV_OFSS_BUILDS):
        from .ofss_builds import load_ofss_builds

        load_ofss_builds()


def _import_ext() -> None:
    try:
        importlib.import_module(EXT_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != EXT_MODULE:
            raise  # the module exists but one of its own imports is missing
        raise SwitchKindError(
            "switch kind 'ext' (dcnlab's switch_ext) is not available: "
            f"{EXT_MODULE} does not exist yet; use --switch ovs"
        ) from None
    if "ext" not in _registry:
        raise SwitchKindError(f"{EXT_MODULE} was imported but did not register kind 'ext'")


# ---------------------------------------------------------------------------
# Running switch shells in the run namespace


class InRunNamespace:
    """Mixin (put it first) that starts a Mininet node's shell in the run namespace.

    ``run_netns_pid`` and ``run_env`` are class attributes set by :func:`bind`; the
    exported variables keep the shell pointed at this run's tools whatever ``os.environ``
    says later (two networks in one process each keep their own).
    """

    run_netns_pid: ClassVar[int | None] = None
    run_env: ClassVar[dict[str, str]] = {}

    def startShell(self, mnopts: str | None = None) -> None:
        if mnopts is None and self.run_netns_pid is not None:
            mnopts = f"-cda{self.run_netns_pid}"
        super().startShell(mnopts)  # type: ignore[misc]
        if self.run_env:
            exports = " ".join(f"{key}={value}" for key, value in self.run_env.items())
            self.cmd(f"export {exports}")  # type: ignore[attr-defined]


def bind(base: type[Switch], ctx: SwitchContext, env: dict[str, str] | None = None,
         **attrs: Any) -> type[Switch]:
    """A subclass of ``base`` whose shells run in ctx's namespace (one class per run)."""
    namespace = {"run_netns_pid": ctx.netns_pid, "run_env": dict(env or {}),
                 "isSetup": False, **attrs}
    name = f"{base.__name__}_{ctx.prefix.strip('-_') or 'run'}"
    return type(name, (InRunNamespace, base), namespace)


def _env_runner(run: Callable[..., Any], env: dict[str, str]) -> Callable[..., Any]:
    """Wrap Mininet's errRun so the commands it runs see ``env`` (used for ovs-vsctl)."""
    prefix = ["env", *(f"{key}={value}" for key, value in env.items())]

    def runner(cmd: str | list[str], **kwargs: Any) -> Any:
        if isinstance(cmd, str):
            return run(" ".join(prefix) + " " + cmd, **kwargs)
        return run([*prefix, *cmd], **kwargs)

    return runner


# ---------------------------------------------------------------------------
# ovs: Open vSwitch, userspace datapath, on the run's private instance


class DcnOVSSwitch(OVSSwitch):
    """OVSSwitch defaults for dcnlab and hooks for a private instance (see _ovs_factory)."""

    ovs: ClassVar[OvsInstance | None] = None

    def __init__(self, name: str, **params: Any) -> None:
        params.setdefault("datapath", "user")  # no kernel module here
        params.setdefault("protocols", "OpenFlow13")
        params.setdefault("failMode", "secure")  # no standalone L2 learning on loopy fabrics
        super().__init__(name, **params)

    @classmethod
    def setup(cls) -> None:
        # Mininet's version exits the interpreter when `ovs-vsctl show` fails; raise instead.
        if cls.ovs is None:
            raise SwitchKindError("ovs switches need a running private OvsInstance")
        cls.ovs.vsctl("show", timeout=2)
        cls.OVSVersion = cls.ovs.version

    @classmethod
    def batchStartup(cls, switches: Any, run: Callable[..., Any] = errRun) -> Any:
        assert cls.ovs is not None
        return super().batchStartup(switches, run=_env_runner(run, cls.ovs.env))

    @classmethod
    def batchShutdown(cls, switches: Any, run: Callable[..., Any] = errRun) -> Any:
        assert cls.ovs is not None
        return super().batchShutdown(switches, run=_env_runner(run, cls.ovs.env))


def _ovs_factory(ctx: SwitchContext) -> Callable[..., Switch]:
    if ctx.ovs is None:
        raise SwitchKindError("switch kind 'ovs' needs the run's private OvsInstance")
    return bind(DcnOVSSwitch, ctx, env=ctx.ovs.env, ovs=ctx.ovs, OVSVersion=ctx.ovs.version)


# ---------------------------------------------------------------------------
# ofss: ofsoftswitch13 through Mininet's UserSwitch


OFSS_BINARIES = ("ofdatapath", "ofprotocol", "dpctl")
OFSS_HINT = ("ofsoftswitch13 is in no package registry: build it from "
             "https://github.com/CPqD/ofsoftswitch13, or use --switch ovs / --switch ext")


def ofss_dpid(dpid: str | None) -> str | None:
    """Our 16-digit dpid as ofdatapath's 12 digits (it keeps 48 bits)."""
    if dpid is None:
        return None
    value = int(dpid, 16)
    if value >= 1 << 48:
        raise SwitchKindError(f"ofss datapath ids have 48 bits; {dpid} is too large")
    return f"{value:012x}"


class DcnUserSwitch(UserSwitch):
    """UserSwitch with OpenFlow 1.3 defaults; takes our 16-digit dpid (it keeps 12)."""

    def __init__(self, name: str, dpid: str | None = None, **params: Any) -> None:
        super().__init__(name, dpid=ofss_dpid(dpid), **params)


def _ofss_factory(ctx: SwitchContext) -> Callable[..., Switch]:
    get_switch_kind("ofss").check_programs()
    return bind(DcnUserSwitch, ctx)


def renumbered(spec: TopologySpec, bases: Mapping[str, int] | None) -> TopologySpec:
    """``spec`` with each switch's dpid counted from its tier's base in ``bases`` (in the
    spec's order within a tier); names, ports and links stay.  ``bases`` None: ``spec``."""
    if bases is None:
        return spec
    missing = sorted({s.tier for s in spec.switches} - set(bases))
    if missing:
        raise SwitchKindError(f"this switch kind numbers its switches by tier and knows no "
                              f"tier {', '.join(missing)} (it knows {', '.join(bases)}); "
                              f"topology {spec.spec} cannot run on it")
    seen: dict[str, int] = {}
    switches = []
    for sw in spec.switches:
        n = seen[sw.tier] = seen.get(sw.tier, -1) + 1
        switches.append(dataclasses.replace(sw, dpid=bases[sw.tier] + n))
    dpids = [sw.dpid for sw in switches]
    if len(set(dpids)) != len(dpids):
        raise SwitchKindError(f"the tier bases {dict(bases)} give two switches of "
                              f"{spec.spec} the same dpid")
    return dataclasses.replace(spec, switches=switches)



register_switch_kind("ovs", _ovs_factory, needs_ovs=True, veth_tap=True,
                     description="Open vSwitch, userspace datapath, private instance per run")
# veth_tap stays off for a plain ofsoftswitch13: the flow tap was tried on ovs, ext and the
# ofss builds (topo/ofss_builds.py) only
register_switch_kind("ofss", _ofss_factory, requires=OFSS_BINARIES, install_hint=OFSS_HINT,
                     description="ofsoftswitch13 (Mininet UserSwitch), when installed")
