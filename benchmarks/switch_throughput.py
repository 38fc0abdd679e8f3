"""Benchmark: forwarding speed of ``ext`` (dcnlab-switch) vs userspace Open vSwitch.

    sudo .venv/bin/python -m dcnlab.benchmarks.switch_throughput [--seconds 10]
        [--udp-seconds 5] [--chains 1,3] [--kinds ext,ovs] [--udp-len 64] [--json FILE]

For each chain length N (default 1 and 3 switches in a line, h1 on the first, h2 on the
last) and each switch kind, one Network with ``ryu.app.simple_switch_13`` and no link
shaping; the kinds run one after the other for the same N, so they see the same machine.
Offloads are the same everywhere: TX checksum, TSO and GSO off on both veth ends (the
lifecycle does the hosts, the ext kind its own ports, this script the OVS ports).

- TCP: one iperf3 flow h1 -> h2 for ``--seconds``; receiver goodput and retransmits.
- UDP: iperf3 ``-u -l 64 -b 0`` (64-byte payload, 106-byte frames, no rate limit) for
  ``--udp-seconds`` after a 1 s ramp; the packet rates come from the interface counters
  (/proc/net/dev in each host): ``tx`` = frames the sender got onto its veth, ``rx`` =
  frames the last switch delivered to the receiver's veth.  rx is the switch's forwarding
  rate; rx well below tx means the switch (not the sender) is the bottleneck.  The
  ``direct`` row (h1 and h2 on one veth pair, no switch) shows what the sender and the
  receiver manage by themselves on this machine.
- CPU: cores used by the switch processes (ext: every dcnlab-switch; OVS: ovs-vswitchd)
  during the measurement, from /proc/PID/stat.

Kinds ``ext/NAME`` (``ext/hash``, ``ext/letflow``, any of switch_ext's load balancers with
options: ``ext/letflow/timeout=1ms``) measure the per-packet cost of a select group's
bucket choice: ``spineleaf:2,2,1`` without link rates (h1 -> leaf -> one of two spines ->
leaf -> h2, three switches; both leaves choose a bucket, the first for the data, the
second for the ACKs)
with dcnlab's ECMP app (CONGA's own app for ``conga``, which gives the leaves their ids)
and every switch started with that balancer.  A one-switch path
has no choice to make, so these run once, whatever ``--chains`` says; each gets a
``NAME/hash`` row, its rates over ``ext/hash``'s in the same run (goal >= 0.9).

Kind ``ext+abq`` is ``ext`` with the ABQ ingress discipline on every port, in window
mode (it parses every frame to track window scales: its most expensive path; without a
rate no queue forms, so it never holds): ``--kinds ext,ext+abq`` adds an ``abq on/off``
row, the ratio of the two in the same run (goal >= 0.95).

2 cores run sender, receiver and switch(es) together, so absolute numbers are machine-
bound; the ratio ext/OVS is the point.  Needs root.  Never runs ``mn``; every network is
stopped in ``finally`` and only what this script created is removed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from mininet.link import Link

from dcnlab.model.balancers import check_balancer
from dcnlab.topo.mininet_topos import DcnHost
from dcnlab.topo.network import HOST_OFFLOADS, Network
from dcnlab.topo.spec import (
    HostSpec,
    Interface,
    LinkParams,
    LinkSpec,
    SwitchSpec,
    TopologySpec,
    host_ip,
    host_mac,
    parse,
)

APP = "ryu.app.simple_switch_13"
BALANCER_PREFIX = "ext/"
BALANCER_TOPOLOGY = "spineleaf:2,2,1"
BALANCER_APP = "dcnlab.apps.ecmp"
# Balancers whose switches need more than the switch option: CONGA's leaves get their ids
# from its app (the labels are then pushed and popped on every packet, as in a real run).
BALANCER_APPS = {"conga": "dcnlab.apps.conga"}
BALANCER_BASE = "ext/hash"
ABQ_KIND = "ext+abq"
ABQ_SPEC = "abq/k=20p/mode=window"
TCP_PORT, UDP_PORT = 5201, 5202
RAMP_SECONDS = 1.0  # UDP: let the sender reach its rate before the counters are read


def unshaped(spec: TopologySpec) -> TopologySpec:
    """``spec`` with no link rate anywhere: the switches forward as fast as they can, as
    on the lines (a topology family's default rate would measure the shaping)."""
    links = [replace(lk, params=replace(lk.params, rate_mbit=None)) for lk in spec.links]
    return replace(spec, spec=f"{spec.spec} unshaped", links=links,
                   default_params=replace(spec.default_params, rate_mbit=None))


def line_spec(n: int, params: LinkParams | None = None) -> TopologySpec:
    """``n`` switches in a line, h1 on s1 and h2 on sN (port 1 towards h1, 2 towards h2).

    spec.py has no ``line`` family; this builds the same model from its public pieces.
    """
    if n < 1:
        raise ValueError("a line needs at least one switch")
    params = params or LinkParams()
    switches = [SwitchSpec(f"s{i}", i, "line", 0, i - 1) for i in range(1, n + 1)]
    links = [LinkSpec(f"s{i}", 2, f"s{i + 1}", 1, params) for i in range(1, n)]
    hosts = []
    for name, switch, port, ip in (("h1", "s1", 1, host_ip(0, 0, 1)),
                                   ("h2", f"s{n}", 2, host_ip(0, 1, 1))):
        hosts.append(HostSpec(name, (Interface(ip, host_mac(ip), switch, port),)))
        links.append(LinkSpec(name, 0, switch, port, params))
    return TopologySpec(f"line:{n}", "line", switches, hosts, links, params)


# ---------------------------------------------------------------------------
# Measurements


@dataclass
class Result:
    kind: str
    switches: int
    tcp_mbit: float = 0.0
    tcp_retransmits: int = 0
    tcp_switch_cpu: float | None = None  # cores
    udp_tx_pps: float = 0.0
    udp_rx_pps: float = 0.0
    udp_app_pps: float | None = None  # what the iperf3 server read (its socket may drop)
    udp_switch_cpu: float | None = None
    udp_sender_cpu: float | None = None  # percent of one core, iperf3's own report
    notes: list[str] = field(default_factory=list)


def _cpu_seconds(pids: Sequence[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _json_from(out: str) -> dict[str, Any]:
    start = out.find("{")
    if start < 0:
        raise RuntimeError(f"iperf3 printed no JSON:\n{out}")
    return json.loads(out[start:])


def measure_tcp(src: Any, dst: Any, seconds: float, cpu_pids: Sequence[int],
                result: Result) -> None:
    dst.cmd(f"iperf3 -s -1 -p {TCP_PORT} >/dev/null 2>&1 &")
    time.sleep(0.3)
    cpu0, t0 = _cpu_seconds(cpu_pids), time.monotonic()
    out = src.cmd(f"timeout {seconds + 30:g} iperf3 -c {dst.IP()} -p {TCP_PORT} "
                  f"-t {seconds:g} -J")
    cpu1, t1 = _cpu_seconds(cpu_pids), time.monotonic()
    data = _json_from(out)
    if "error" in data:
        raise RuntimeError(f"iperf3 TCP: {data['error']}")
    result.tcp_mbit = data["end"]["sum_received"]["bits_per_second"] / 1e6
    result.tcp_retransmits = int(data["end"]["sum_sent"].get("retransmits", 0))
    if cpu_pids:
        result.tcp_switch_cpu = (cpu1 - cpu0) / (t1 - t0)


def measure_udp(src: Any, dst: Any, seconds: float, length: int, cpu_pids: Sequence[int],
                result: Result) -> None:
    src_if, dst_if = src.intfNames()[0], dst.intfNames()[0]
    dst.cmd(f"iperf3 -s -1 -p {UDP_PORT} >/dev/null 2>&1 &")
    time.sleep(0.3)
    total = seconds + 2 * RAMP_SECONDS
    src.sendCmd(f"timeout {total + 30:g} iperf3 -c {dst.IP()} -p {UDP_PORT} -u -b 0 "
                f"-l {length} -t {total:g} -J")
    try:
        time.sleep(RAMP_SECONDS)
        # src's shell is busy running the sender: read counters through /proc/PID/net.
        tx0 = _proc_net_dev(src.pid, src_if)[1]
        rx0 = _proc_net_dev(dst.pid, dst_if)[0]
        cpu0, t0 = _cpu_seconds(cpu_pids), time.monotonic()
        time.sleep(seconds)
        tx1 = _proc_net_dev(src.pid, src_if)[1]
        rx1 = _proc_net_dev(dst.pid, dst_if)[0]
        cpu1, t1 = _cpu_seconds(cpu_pids), time.monotonic()
    finally:
        out = src.waitOutput()
    elapsed = t1 - t0
    result.udp_tx_pps = (tx1 - tx0) / elapsed
    result.udp_rx_pps = (rx1 - rx0) / elapsed
    if cpu_pids:
        result.udp_switch_cpu = (cpu1 - cpu0) / elapsed
    with contextlib.suppress(RuntimeError, KeyError, ValueError, TypeError):
        data = _json_from(out)
        summary = data["end"]["sum"]
        if summary.get("seconds"):
            delivered = summary["packets"] - summary["lost_packets"]
            result.udp_app_pps = delivered / summary["seconds"]
        result.udp_sender_cpu = data["end"]["cpu_utilization_percent"]["host_total"]


def _proc_net_dev(pid: int, intf: str) -> tuple[int, int]:
    """(rx_packets, tx_packets) of ``intf`` in the network namespace of ``pid``
    (/proc/PID/net is that process's view of the network)."""
    with open(f"/proc/{pid}/net/dev") as fh:
        for line in fh:
            name, _, rest = line.partition(":")
            if name.strip() == intf:
                cols = rest.split()
                return int(cols[1]), int(cols[9])
    raise RuntimeError(f"{intf} not found in /proc/{pid}/net/dev")


def _warm_up(src: Any, dst: Any) -> None:
    """Both directions learned (simple_switch_13 installs flows on the first packets)."""
    for _ in range(5):
        out = src.cmd(f"ping -c3 -i0.2 -W1 {dst.IP()}")
        if " 0% packet loss" in out:
            return
    raise RuntimeError(f"{src.name} cannot reach {dst.name}:\n{out}")


def _switch_ports_offloads_off(net: Network) -> None:
    """OVS ports get the offload settings the ext kind applies to its own ports."""
    for sw in net.switches:
        names = [i.name for i in sw.intfList() if i.name != "lo"]
        out = sw.cmd("; ".join(f"ethtool -K {n} {' '.join(HOST_OFFLOADS)} 2>&1" for n in names))
        if "Cannot" in out:
            raise RuntimeError(f"ethtool on {sw.name}: {out.strip()}")


def switch_pids(net: Any, kind: str) -> list[int]:
    """The processes that forward the network's packets (whose CPU is the switches'):
    every switch_ext process, or the private Open vSwitch's ovs-vswitchd."""
    if kind == "ext":
        return [pid for sw in net.switches
                if (pid := getattr(sw, "switch_pid", None)) is not None]
    return [net.ovs.pids["ovs-vswitchd"]] if net.ovs is not None else []


def run_network(kind: str, n: int, args: argparse.Namespace) -> Result:
    result = Result(kind, n)
    spec: TopologySpec | str = line_spec(n)
    app, options, env = APP, None, None
    if kind == ABQ_KIND:
        spec = line_spec(n, LinkParams(ingress_host=ABQ_SPEC, ingress_fabric=ABQ_SPEC))
        kind = "ext"
    elif kind.startswith(BALANCER_PREFIX):
        balancer = kind.removeprefix(BALANCER_PREFIX)
        spec = unshaped(parse(BALANCER_TOPOLOGY))
        app = BALANCER_APPS.get(balancer.split("/")[0], BALANCER_APP)
        options, env = {"select_mode": balancer}, {"DCNLAB_SELECT_MODE": balancer}
        kind = "ext"
    with Network(spec, app=app, switch=kind, switch_options=options, app_env=env) as net:
        if kind != "ext":
            _switch_ports_offloads_off(net)
        first, last = net.spec.hosts[0].name, net.spec.hosts[-1].name
        h1, h2 = net.host(first), net.host(last)
        _warm_up(h1, h2)
        pids = switch_pids(net, kind)
        if not pids:
            result.notes.append(f"no CPU figure for kind {kind}")
        measure_tcp(h1, h2, args.seconds, pids, result)
        measure_udp(h1, h2, args.udp_seconds, args.udp_len, pids, result)
    return result


@contextlib.contextmanager
def _direct_pair() -> Iterator[tuple[Any, Any]]:
    """h1 and h2 on one veth pair, no switch: the sender/receiver baseline."""
    tag = f"b{os.getpid() % 100000}"
    hosts: list[Any] = []
    try:
        for i in (1, 2):
            hosts.append(DcnHost(f"{tag}h{i}"))
        Link(hosts[0], hosts[1])
        for i, host in enumerate(hosts, start=1):
            intf = host.intfNames()[0]
            host.setIP(f"10.99.0.{i}/24", intf=intf)
            host.cmd(f"ethtool -K {intf} {' '.join(HOST_OFFLOADS)}")
        yield hosts[0], hosts[1]
    finally:
        for host in hosts:  # the namespaces, and the veth with them, go with the shells
            host.terminate()


def run_direct(args: argparse.Namespace) -> Result:
    result = Result("direct", 0)
    with _direct_pair() as (h1, h2):
        _warm_up(h1, h2)
        measure_tcp(h1, h2, args.seconds, [], result)
        measure_udp(h1, h2, args.udp_seconds, args.udp_len, [], result)
    return result


# ---------------------------------------------------------------------------
# Report


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"{a / b:.2f}"


def udp_limit(r: Result) -> str:
    """Who capped the UDP rate: the switch drops (rx clearly below tx) or the sender."""
    if r.kind == "direct" or not r.udp_tx_pps:
        return "-"
    return "switch" if r.udp_rx_pps < 0.95 * r.udp_tx_pps else "sender"


def table(results: Sequence[Result], kinds: Sequence[str]) -> str:
    head = (f"{'switches':>8}  {'kind':<14} {'TCP Mbit/s':>10} {'retr':>6} {'sw CPU':>6}  "
            f"{'UDP tx pps':>10} {'UDP rx pps':>10} {'app pps':>9} {'sw CPU':>6} "
            f"{'snd CPU%':>8} {'UDP limit':>9}")
    rows = [head, "-" * len(head)]
    for r in results:
        rows.append(f"{r.switches if r.kind != 'direct' else '-':>8}  {r.kind:<14} "
                    f"{r.tcp_mbit:>10.0f} {r.tcp_retransmits:>6d} "
                    f"{_fmt(r.tcp_switch_cpu, '.2f'):>6}  {r.udp_tx_pps:>10.0f} "
                    f"{r.udp_rx_pps:>10.0f} {_fmt(r.udp_app_pps, '.0f'):>9} "
                    f"{_fmt(r.udp_switch_cpu, '.2f'):>6} {_fmt(r.udp_sender_cpu, '.0f'):>8} "
                    f"{udp_limit(r):>9}")
        if len(kinds) == 2 and r.kind == kinds[1]:
            base = next((x for x in results if x.kind == kinds[0] and
                         x.switches == r.switches), None)
            if base is not None:
                rows.append(f"{r.switches:>8}  {kinds[0] + '/' + kinds[1]:<14} "
                            f"{_ratio(base.tcp_mbit, r.tcp_mbit):>10} {'':>6} {'':>6}  "
                            f"{'':>10} {_ratio(base.udp_rx_pps, r.udp_rx_pps):>10}")
        if r.kind.startswith(BALANCER_PREFIX) and r.kind != BALANCER_BASE:
            base = next((x for x in results if x.kind == BALANCER_BASE), None)
            if base is not None:
                name = r.kind.removeprefix(BALANCER_PREFIX).split("/")[0]
                rows.append(f"{r.switches:>8}  {name + '/hash':<14} "
                            f"{_ratio(r.tcp_mbit, base.tcp_mbit):>10} {'':>6} {'':>6}  "
                            f"{'':>10} {_ratio(r.udp_rx_pps, base.udp_rx_pps):>10}")
        if r.kind == ABQ_KIND:
            off = next((x for x in results if x.kind == "ext" and x.switches == r.switches),
                       None)
            if off is not None:
                rows.append(f"{r.switches:>8}  {'abq on/off':<14} "
                            f"{_ratio(r.tcp_mbit, off.tcp_mbit):>10} {'':>6} {'':>6}  "
                            f"{'':>10} {_ratio(r.udp_rx_pps, off.udp_rx_pps):>10}")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="TCP flow length (10)")
    ap.add_argument("--udp-seconds", type=float, default=5.0,
                    help="UDP measurement window, after a 1 s ramp (5)")
    ap.add_argument("--udp-len", type=int, default=64, help="UDP payload bytes (64)")
    ap.add_argument("--chains", default="1,3", help="switches in the line, comma list (1,3)")
    ap.add_argument("--kinds", default="ext,ovs",
                    help="switch kinds, comma list (ext,ovs); ext+abq; ext/BALANCER[/K=V] "
                    "(select groups on spineleaf:2,2,1, against ext/hash)")
    ap.add_argument("--no-direct", action="store_true", help="skip the no-switch baseline")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("switch_throughput: needs root (namespaces, veths)", file=sys.stderr)
        return 2
    try:
        chains = [int(x) for x in args.chains.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--chains {args.chains!r}: expected numbers like 1,3")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    for kind in kinds:
        if kind.startswith(BALANCER_PREFIX):
            try:
                check_balancer(kind.removeprefix(BALANCER_PREFIX))
            except ValueError as exc:
                ap.error(f"--kinds {kind}: {exc}")
    balancers = [k for k in kinds if k.startswith(BALANCER_PREFIX)]
    if balancers and BALANCER_BASE not in balancers:
        balancers.insert(0, BALANCER_BASE)  # the ratios' reference, in the same run
    kinds = [k for k in kinds if not k.startswith(BALANCER_PREFIX)]
    results: list[Result] = []
    if not args.no_direct:
        print("direct veth (no switch) ...", file=sys.stderr, flush=True)
        results.append(run_direct(args))
    for n in chains:
        for kind in kinds:
            print(f"{kind}, {n} switch(es) ...", file=sys.stderr, flush=True)
            results.append(run_network(kind, n, args))
    for kind in balancers:
        print(f"{kind}, {BALANCER_TOPOLOGY} ...", file=sys.stderr, flush=True)
        results.append(run_network(kind, 3, args))
    print(f"TCP: 1 iperf3 flow, {args.seconds:g} s.  UDP: iperf3 -u -b 0 -l {args.udp_len} "
          f"({args.udp_len + 42}-byte frames), {args.udp_seconds:g} s window; tx/rx pps from "
          "the hosts' interface counters, app pps = what iperf3's server read.  CPU in cores "
          "(sw = switch processes), snd CPU% = iperf3 sender; UDP limit = switch when rx "
          "< 95% of tx (the switch dropped offered load), else sender.")
    print(table(results, kinds))
    for r in results:
        for note in r.notes:
            print(f"note ({r.kind}, {r.switches}): {note}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([asdict(r) for r in results], fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
