"""Mininet topologies built from dcnlab topology specs.

:class:`SpecTopo` turns a :class:`~dcnlab.topo.spec.TopologySpec` into a Mininet ``Topo``:
switch and host names from the spec (optionally behind a run prefix), the spec's port
numbers (host ends use the interface index: ``h1-eth0`` is interface 0), datapath ids as
16 hex digits, every host interface with the spec's address and MAC, and the link rate as
``bw=`` (used when the link class is ``TCLink``; htb).  Delay, jitter, buffer and ECN are
never passed to Mininet: they need netem (absent on the lab machines) or ``--switch ext``.

On a machine with Mininet installed, the module works with the ``mn`` command too::

    mn --custom topo/mininet_topos.py --topo fattree,4 --link tc \\
       --switch ovs,protocols=OpenFlow13 --controller remote,port=6653
    mn --custom topo/mininet_topos.py --topo spineleaf,2,2,2,rate=10M

(``mn`` runs a machine-wide cleanup on errors; the lifecycle in topo/network.py does not.)
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from typing import Any

from mininet.link import TCIntf, TCLink
from mininet.node import Host
from mininet.topo import Topo

try:
    from dcnlab.topo.spec import LinkParams, TopologySpec, families, parse
except ImportError:  # exec'd by `mn --custom` without dcnlab installed: load the sibling file
    def _load_sibling_spec() -> Any:
        # `mn` execs this file without __file__; the code object still knows its path.
        here = os.path.dirname(os.path.abspath(inspect.stack()[0].filename))
        loader = importlib.util.spec_from_file_location(
            "_dcnlab_spec", os.path.join(here, "spec.py"))
        assert loader is not None and loader.loader is not None
        module = importlib.util.module_from_spec(loader)
        sys.modules["_dcnlab_spec"] = module  # dataclasses look their module up
        loader.loader.exec_module(module)
        return module

    _spec_module = _load_sibling_spec()
    LinkParams = _spec_module.LinkParams
    TopologySpec = _spec_module.TopologySpec
    families = _spec_module.families
    parse = _spec_module.parse

IFNAMSIZ = 15  # longest Linux interface name


class TopoNameError(ValueError):
    """A node or interface name would not fit Linux's 15-character limit."""


class DcnHost(Host):
    """A host with IPv6 off from birth, so router solicitations and MLD reports do not
    reach the controller as noise.  The sysctls are per namespace and run before any
    interface exists, so every interface inherits them."""

    def startShell(self, mnopts: str | None = None) -> None:
        super().startShell(mnopts)
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
                 "net.ipv6.conf.default.disable_ipv6=1")


class DcnTCIntf(TCIntf):
    """TCIntf whose htb class has an explicit quantum.

    htb derives the quantum from rate/r2q and warns ("quantum of class 50001 is big"),
    which Mininet prints as an error for every interface above ~16 Mbit/s.  The link has a
    single class, so the quantum (a fairness knob between classes) changes nothing.
    """

    def bwCmds(self, *args: Any, **kwargs: Any) -> tuple[list[str], str]:
        cmds, parent = super().bwCmds(*args, **kwargs)
        return [c + " quantum 1514" if " class add " in c and " htb " in c else c
                for c in cmds], parent


class DcnTCLink(TCLink):
    """TCLink with :class:`DcnTCIntf` on both ends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("cls1", DcnTCIntf)
        kwargs.setdefault("cls2", DcnTCIntf)
        super().__init__(*args, **kwargs)


def link_options(params: LinkParams, shape: bool = True) -> dict[str, Any]:
    """Mininet link options for one spec link: rate only, and checksum offloads off.

    txo/rxo are TCIntf options (ignored by plain Links): its default turns TX checksum
    offload *on*, and a userspace switch then relays TCP segments with bad checksums.
    """
    opts: dict[str, Any] = {"txo": False, "rxo": False}
    if shape and params.rate_mbit is not None:
        opts["bw"] = params.rate_mbit
    return opts


def longest_interface_name(spec: TopologySpec, prefix: str = "") -> str:
    names = [f"{prefix}{lk.a}-eth{lk.a_port}" for lk in spec.links]
    names += [f"{prefix}{lk.b}-eth{lk.b_port}" for lk in spec.links]
    return max(names, key=len) if names else prefix


class SpecTopo(Topo):
    """A Mininet Topo for a TopologySpec (or a spec string such as "fattree:4").

    prefix: prepended to every node name (the lifecycle uses it to keep concurrent runs
        apart); interface names become ``<prefix><node>-eth<port>`` and must fit 15 chars.
    shape: pass the link rate as ``bw=`` (False when the switch emulates links itself).
    """

    def build(self, spec: TopologySpec | str, prefix: str = "",  # type: ignore[override]
              shape: bool = True) -> None:
        self.spec = parse(spec) if isinstance(spec, str) else spec
        self.prefix = prefix
        longest = longest_interface_name(self.spec, prefix)
        if len(longest) > IFNAMSIZ:
            raise TopoNameError(
                f"interface name {longest!r} is longer than {IFNAMSIZ} characters; "
                f"topology {self.spec.spec} is too large for run prefix {prefix!r}"
            )
        for sw in self.spec.switches:
            self.addSwitch(prefix + sw.name, dpid=f"{sw.dpid:016x}", protocols="OpenFlow13")
        for host in self.spec.hosts:
            first = host.interfaces[0]
            self.addHost(prefix + host.name, ip=f"{first.ip}/{first.prefixlen}", mac=first.mac)
        for lk in self.spec.links:
            self._add_link(lk, shape)

    def _add_link(self, lk: Any, shape: bool) -> None:
        opts = link_options(lk.params, shape)
        a, b = self.prefix + lk.a, self.prefix + lk.b
        if self.spec.is_switch(lk.a) and self.spec.is_switch(lk.b):
            self.addLink(a, b, port1=lk.a_port, port2=lk.b_port, **opts)
            return
        # Host first, so the veth is created in the host and its peer sent to the switch.
        if self.spec.is_switch(lk.a):
            a, b = b, a
            host_end, sw_port, host_port = lk.b, lk.a_port, lk.b_port
        else:
            host_end, sw_port, host_port = lk.a, lk.b_port, lk.a_port
        iface = self.spec.host(host_end).interfaces[host_port]
        self.addLink(a, b, port1=host_port, port2=sw_port, addr1=iface.mac,
                     params1={"ip": f"{iface.ip}/{iface.prefixlen}"}, **opts)


def _factory(family: str) -> Any:
    def make(*args: Any, **options: Any) -> SpecTopo:
        items = [str(a) for a in args] + [f"{key}={value}" for key, value in options.items()]
        return SpecTopo(f"{family}:{','.join(items)}" if items else family)

    make.__doc__ = f"{family} topology from dcnlab's spec parser"
    return make


# For `mn --custom topo/mininet_topos.py --topo NAME,ARGS` (and `--host dcn --link dcn`).
topos = {family: _factory(family) for family in families()}
hosts = {"dcn": DcnHost}
links = {"dcn": DcnTCLink}
