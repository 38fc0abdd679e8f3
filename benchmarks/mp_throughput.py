"""Is the multipath transport the bottleneck?  (A benchmark, never a test.)

On loopback, in one run, alternately: one plain TCP flow (``dcnlab-mp plain-send`` /
``plain-serve``: the same pattern payload, written and checked the same way) and one
``dcnlab-mp`` connection with one subflow (scheduler minRTT).  Per round the goodput of
each and their ratio (goal: >= 0.9); CPU seconds (sender + receiver, user + system, from
getrusage of the reaped children) per Gbit moved.  The median ratio over the rounds is
the result; rounds alternate so machine load hits both alike.

``--twopath SPEC`` (root) instead fills two emulated paths: on one ``twopath`` network,
per round, plain TCP on path 1 alone, on path 2 alone, on both at once (two flows), and
one dcnlab-mp connection over both (minRTT); the goal is the connection's goodput >= 0.9
x the sum of the single-path goodputs.  The concurrent pair shows what the machine
carries on both paths at once (both share the switches' CPU).  To find where a gap
comes from, each round also runs one dcnlab-mp subflow over path 1 alone (the
transport's own cost at the emulated rate: ratio_path1_only), the two-path connection
with further ``--lowat`` values, and reports per path what the connection carried, and
CPU seconds per Gbit moved of the transport (sender + receiver) and of the switch_ext
processes (the link emulation).  Run::

    python -m dcnlab.benchmarks.mp_throughput [--size 1GB] [--rounds 5]
    sudo python -m dcnlab.benchmarks.mp_throughput --twopath twopath:reorder=1 \\
        --size 512MB --rounds 2 --lowat 256KB

Use long transfers with --twopath: path 2 (RTT 200 +- 150 ms) needs ~2 s of handshake
and slow start to reach its rate, so a 64 MB connection (~1.2 s) cannot fill it while
path 2 alone moves 64 MB in ~5 s mostly at full rate.  Measured (512 MB, 2 rounds):
0.934 x the sum, CPU figures in hosts/mptransport/README.md ("Speed").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
from typing import Any

from dcnlab.hosts.mptransport import binary, parse_line


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _pair(serve: list[str], send: list[str]) -> dict[str, Any]:
    cpu0 = _children_cpu()
    srv = subprocess.Popen(serve, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert srv.stdout is not None
    addr = json.loads(srv.stdout.readline())["listening"]
    out = subprocess.run(send + ["--to", addr], capture_output=True, text=True, timeout=600)
    rest, err = srv.communicate(timeout=60)
    if out.returncode != 0 or srv.returncode != 0:
        raise SystemExit(f"failed: {out.stderr} {err}")
    res = parse_line(out.stdout)
    rx = parse_line(rest)
    if not rx.get("intact"):
        raise SystemExit(f"receiver reports a broken transfer: {rx}")
    res["cpu_total_s"] = _children_cpu() - cpu0
    return res


def _ticks(pids: list[int]) -> float:
    """CPU seconds (user + system) used so far by ``pids`` (0 for those gone)."""
    total = 0
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def _switch_pids(prefix: str) -> list[int]:
    """The switch processes of the network whose interfaces carry ``prefix``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "switch_ext" in cmd and prefix in cmd:
            pids.append(int(entry))
    return pids


def _twopath(spec_text: str, size: str, rounds: int, lowats: list[str]) -> int:
    from dcnlab.hosts.mptransport import Server
    from dcnlab.hosts.mptransport import send as mp_send
    from dcnlab.schemes.cfs.check import endpoints
    from dcnlab.schemes.cfs.paths import source_routing
    from dcnlab.topo.network import Network
    from dcnlab.topo.spec import parse

    exe = binary()
    spec = parse(spec_text)
    rows = []
    with Network(spec, app="dcnlab.apps.cfs", switch="ext") as net:
        client, server = endpoints(spec)
        via = source_routing(net, client)
        sp = ["mnexec", "-a", str(net.host(server).pid)]
        cp = ["mnexec", "-a", str(net.host(client).pid)]
        sip = net.host(server).IP()
        switches = _switch_pids(net.prefix)
        if not switches:
            raise SystemExit(f"no switch_ext process found for prefix {net.prefix!r}")
        plain = subprocess.Popen(sp + [exe, "plain-serve", "--listen", f"{sip}:5520"],
                                 stdout=subprocess.PIPE, text=True)
        assert plain.stdout is not None
        plain.stdout.readline()
        srv = Server(f"{sip}:5521", prefix=sp).start()
        assert srv.proc is not None
        receivers = [plain.pid, srv.proc.pid]

        def single(src: str) -> subprocess.Popen[str]:
            return subprocess.Popen(cp + [exe, "plain-send", "--to", f"{sip}:5520", "--via",
                                          src, "--size", size],
                                    stdout=subprocess.PIPE, text=True)

        def measured(run: Any) -> tuple[Any, float, float]:
            """run()'s result, the receivers' and the switches' CPU seconds meanwhile."""
            rx0, sw0 = _ticks(receivers), _ticks(switches)
            out = run()
            return out, _ticks(receivers) - rx0, _ticks(switches) - sw0

        def plain_runs(srcs: list[str]) -> tuple[list[dict[str, Any]], float, float]:
            def go() -> list[dict[str, Any]]:
                procs = [single(v) for v in srcs]
                return [parse_line(p.communicate(timeout=1800)[0]) for p in procs]
            return measured(go)

        def mp_run(paths: list[str], lowat: str | None) -> tuple[dict[str, Any], float, float]:
            opts = {"lowat": lowat} if lowat else {}
            res, rx, sw = measured(lambda: mp_send([f"{sip}:5521"], size, "minrtt",
                                                   via=paths, prefix=cp, timeout=1800,
                                                   **opts))
            if not res["intact"]:
                raise SystemExit(f"dcnlab-mp transfer not intact: {res}")
            return res, rx, sw

        def cpu_per_gbit(results: list[dict[str, Any]], rx: float, sw: float
                         ) -> tuple[float, float]:
            gbit = sum(r["size"] for r in results) * 8 / 1e9
            return (sum(r["cpu_s"] for r in results) + rx) / gbit, sw / gbit

        try:
            for i in range(rounds):
                alone = [plain_runs([v]) for v in via]
                pair, pair_rx, pair_sw = plain_runs(via)
                one, one_rx, one_sw = mp_run(via[:1], None)
                row: dict[str, Any] = {
                    "round": i + 1,
                    "path1_mbps": alone[0][0][0]["goodput_mbps"],
                    "path2_mbps": alone[1][0][0]["goodput_mbps"],
                    "concurrent_pair_mbps": sum(r["goodput_mbps"] for r in pair),
                    "mp_path1_only_mbps": one["goodput_mbps"]}
                row["ratio_path1_only"] = row["mp_path1_only_mbps"] / row["path1_mbps"]
                base = row["path1_mbps"] + row["path2_mbps"]
                for lowat in [None, *lowats]:
                    res, rx, sw = mp_run(via, lowat)
                    tag = f"_lowat{lowat}" if lowat else ""
                    secs = res["fct_ms"] / 1e3
                    row[f"mp{tag}_mbps"] = res["goodput_mbps"]
                    row[f"ratio_to_sum{tag}"] = res["goodput_mbps"] / base
                    row[f"ratio_to_pair{tag}"] = res["goodput_mbps"] / row[
                        "concurrent_pair_mbps"]
                    row[f"mp{tag}_per_path_mbps"] = [round(s["bytes"] * 8 / secs / 1e6, 1)
                                                      for s in res["subflows"]]
                    row[f"mp{tag}_cpu_s_per_gbit"], row[f"mp{tag}_switch_cpu_s_per_gbit"] = \
                        cpu_per_gbit([res], rx, sw)
                plain_cpu = [cpu_per_gbit(r, rx, sw) for r, rx, sw in alone]
                row["tcp_path1_cpu_s_per_gbit"], row["tcp_path1_switch_cpu_s_per_gbit"] = \
                    plain_cpu[0]
                row["tcp_path2_switch_cpu_s_per_gbit"] = plain_cpu[1][1]
                row["pair_switch_cpu_s_per_gbit"] = cpu_per_gbit(pair, pair_rx, pair_sw)[1]
                row["mp_path1_only_switch_cpu_s_per_gbit"] = cpu_per_gbit([one], one_rx,
                                                                          one_sw)[1]
                rows.append(row)
                print(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                                  for k, v in row.items()}), flush=True)
        finally:
            srv.stop()
            plain.terminate()
            plain.wait(timeout=10)
    summary: dict[str, Any] = {"topology": spec_text, "size": size, "rounds": rounds}
    for key in rows[0]:
        if key != "round" and isinstance(rows[0][key], float):
            summary[f"median_{key}"] = round(statistics.median(r[key] for r in rows), 3)
    print(json.dumps(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GB")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--twopath", metavar="SPEC", default=None,
                    help="fill two emulated paths of this twopath spec instead (root)")
    ap.add_argument("--lowat", default="",
                    help="with --twopath: further TCP_NOTSENT_LOWAT values to run the "
                         "two-path connection with, comma-separated (256KB,1MB)")
    args = ap.parse_args(argv)
    if args.twopath:
        return _twopath(args.twopath, args.size, args.rounds,
                        [v for v in args.lowat.split(",") if v])
    exe = binary()
    rows = []
    for i in range(args.rounds):
        plain = _pair([exe, "plain-serve", "--listen", "127.0.0.1:0", "--count", "1"],
                      [exe, "plain-send", "--size", args.size])
        mp = _pair([exe, "serve", "--listen", "127.0.0.1:0", "--count", "1"],
                   [exe, "send", "--size", args.size, "--scheduler", "minrtt"])
        if not mp.get("intact"):
            raise SystemExit(f"dcnlab-mp transfer not intact: {mp}")
        row = {
            "round": i + 1,
            "plain_mbps": plain["goodput_mbps"],
            "mp_mbps": mp["goodput_mbps"],
            "ratio": mp["goodput_mbps"] / plain["goodput_mbps"],
            "plain_cpu_s_per_gbit": plain["cpu_total_s"] / (plain["size"] * 8 / 1e9),
            "mp_cpu_s_per_gbit": mp["cpu_total_s"] / (mp["size"] * 8 / 1e9),
        }
        rows.append(row)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                          for k, v in row.items()}), flush=True)
    summary = {
        "size": args.size,
        "rounds": args.rounds,
        "median_ratio": round(statistics.median(r["ratio"] for r in rows), 3),
        "median_plain_mbps": round(statistics.median(r["plain_mbps"] for r in rows), 1),
        "median_mp_mbps": round(statistics.median(r["mp_mbps"] for r in rows), 1),
        "median_plain_cpu_s_per_gbit": round(
            statistics.median(r["plain_cpu_s_per_gbit"] for r in rows), 3),
        "median_mp_cpu_s_per_gbit": round(
            statistics.median(r["mp_cpu_s_per_gbit"] for r in rows), 3),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
