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
carries on both paths at once (both share the switches' CPU).  Run::

    python -m dcnlab.benchmarks.mp_throughput [--size 1GB] [--rounds 5]
    sudo python -m dcnlab.benchmarks.mp_throughput --twopath twopath --size 64MB --rounds 3
"""

from __future__ import annotations

import argparse
import json
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


def _twopath(spec_text: str, size: str, rounds: int) -> int:
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
        plain = subprocess.Popen(sp + [exe, "plain-serve", "--listen", f"{sip}:5520"],
                                 stdout=subprocess.PIPE, text=True)
        assert plain.stdout is not None
        plain.stdout.readline()
        srv = Server(f"{sip}:5521", prefix=sp).start()

        def single(src: str) -> subprocess.Popen[str]:
            return subprocess.Popen(cp + [exe, "plain-send", "--to", f"{sip}:5520", "--via",
                                          src, "--size", size],
                                    stdout=subprocess.PIPE, text=True)

        try:
            for i in range(rounds):
                alone = [parse_line(single(v).communicate(timeout=900)[0])["goodput_mbps"]
                         for v in via]
                pair = [single(v) for v in via]
                both = [parse_line(p.communicate(timeout=900)[0])["goodput_mbps"]
                        for p in pair]
                res = mp_send([f"{sip}:5521"], size, "minrtt", via=via, prefix=cp,
                              timeout=900)
                if not res["intact"]:
                    raise SystemExit(f"dcnlab-mp transfer not intact: {res}")
                row = {"round": i + 1, "path1_mbps": alone[0], "path2_mbps": alone[1],
                       "concurrent_pair_mbps": sum(both), "mp_mbps": res["goodput_mbps"],
                       "ratio_to_sum": res["goodput_mbps"] / sum(alone),
                       "ratio_to_pair": res["goodput_mbps"] / sum(both)}
                rows.append(row)
                print(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                                  for k, v in row.items()}), flush=True)
        finally:
            srv.stop()
            plain.terminate()
            plain.wait(timeout=10)
    print(json.dumps({
        "topology": spec_text, "size": size, "rounds": rounds,
        "median_ratio_to_sum": round(statistics.median(r["ratio_to_sum"] for r in rows), 3),
        "median_ratio_to_pair": round(statistics.median(r["ratio_to_pair"] for r in rows),
                                      3)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1GB")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--twopath", metavar="SPEC", default=None,
                    help="fill two emulated paths of this twopath spec instead (root)")
    args = ap.parse_args(argv)
    if args.twopath:
        return _twopath(args.twopath, args.size, args.rounds)
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
