"""Seed 003's comparison outside the engine: FCT per flow size and scheduler on twopath.

``dcnlab run benchmarks/experiments/seed003.yaml`` runs this comparison through the
engine, references included (see its header).  This script runs the seed's
synthetic-flow experiment directly instead: one network (``twopath`` at
the seed's rates and RTTs, app cfs, switch ext), a ``dcnlab-mp serve`` in the server,
and from the client one transfer at a time, for every repetition, size and scheduler in
turn (interleaved, so slow drifts of the machine's load hit every scheduler alike), plus
single-path TCP on each path (``dcnlab-mp plain-send``) and the kernel's MPTCP with its
default scheduler (``plain-send --mptcp 1``, one extra subflow from the second interface)
as references.  Every transfer is
checked byte for byte by the receiver; a broken one aborts the run.

Output (``--out DIR``): ``fct.csv`` (one row per transfer) and ``summary.txt``/
``summary.json``: per size and scheduler the mean FCT with a 95% interval (t
distribution), the change against minRTT in % (the seed's Tables 2-4 and 6), mean
duplicate bytes and mean receiver reorder-buffer peak.  Run (root)::

    python -m dcnlab.benchmarks.seed003_fct --reps 30            # the seed's 30
    python -m dcnlab.benchmarks.seed003_fct --reps 5 --sizes 64KB,1MB --topo twopath:reorder=1
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import subprocess
from pathlib import Path
from typing import Any

from scipy import stats

from dcnlab.hosts import mptransport as mp

SIZES = ("64KB", "128KB", "256KB", "512KB", "1MB", "4MB", "8MB", "16MB", "32MB")
WEB = ("76KB", "220KB", "742KB", "1146KB")  # the seed's Table 5 objects
SCHEDULERS = ("minrtt", "ecf", "blest", "redundant", "cfs")
PORT = 5510
PLAIN_PORT = 5511
MPTCP_PORT = 5512


def ci95(values: list[float]) -> float:
    """Half-width of the 95% Student-t interval of the mean: t(0.975, n - 1) * sd /
    sqrt(n), the quantile from scipy for every n (a table to 30 degrees of freedom with
    the normal's 1.96 beyond it was 4% narrow at 31); nan below two values."""
    if len(values) < 2:
        return float("nan")
    t = float(stats.t.ppf(0.975, len(values) - 1))
    return t * statistics.stdev(values) / math.sqrt(len(values))


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    scheds = list(dict.fromkeys(r["scheduler"] for r in rows))
    for size in sizes:
        base = [r["fct_ms"] for r in rows if r["size"] == size and r["scheduler"] == "minrtt"]
        base_mean = statistics.mean(base) if base else float("nan")
        for sched in scheds:
            sel = [r for r in rows if r["size"] == size and r["scheduler"] == sched]
            if not sel:
                continue
            fct = [r["fct_ms"] for r in sel]
            mean = statistics.mean(fct)
            out.append({
                "size": size, "scheduler": sched, "n": len(fct),
                "fct_ms": round(mean, 1), "ci95_ms": round(ci95(fct), 1),
                "vs_minrtt_pct": round(100 * (base_mean - mean) / base_mean, 1)
                if base else None,
                "dup_bytes": round(statistics.mean(r.get("dup_bytes", 0) for r in sel)),
                "reorder_peak_bytes": round(statistics.mean(
                    r.get("peak_reorder_bytes", 0) for r in sel)),
            })
    return out


def table(summary: list[dict[str, Any]]) -> str:
    head = (f"{'size':>7} {'scheduler':>12} {'n':>3} {'FCT ms':>9} {'+-95%':>7} "
            f"{'less than minRTT':>16} {'dup bytes':>10} {'reorder peak':>12}")
    lines = [head, "-" * len(head)]
    for s in summary:
        pct = "" if s["vs_minrtt_pct"] is None else f"{s['vs_minrtt_pct']:+.1f}%"
        lines.append(f"{s['size']:>7} {s['scheduler']:>12} {s['n']:>3} {s['fct_ms']:>9.1f} "
                     f"{s['ci95_ms']:>7.1f} {pct:>16} {s['dup_bytes']:>10} "
                     f"{s['reorder_peak_bytes']:>12}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topo", default="twopath")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--sizes", default=",".join(SIZES + WEB))
    ap.add_argument("--schedulers", default=",".join(SCHEDULERS))
    ap.add_argument("--no-single-path", action="store_true",
                    help="skip the single-path TCP references")
    ap.add_argument("--no-kernel-mptcp", action="store_true",
                    help="skip the kernel's MPTCP (default scheduler) reference")
    ap.add_argument("--out", default="results/seed003_fct")
    args = ap.parse_args(argv)
    from dcnlab.schemes.cfs.check import endpoints
    from dcnlab.schemes.cfs.paths import kernel_mptcp, source_routing
    from dcnlab.topo.network import Network
    from dcnlab.topo.spec import parse

    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    scheds = [mp.check_scheduler(s.strip()) for s in args.schedulers.split(",") if s.strip()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = parse(args.topo)
    rows: list[dict[str, Any]] = []
    with Network(spec, app="dcnlab.apps.cfs", switch="ext") as net:
        client, server = endpoints(spec)
        via = source_routing(net, client)
        sp = ["mnexec", "-a", str(net.host(server).pid)]
        cp = ["mnexec", "-a", str(net.host(client).pid)]
        sip = net.host(server).IP()
        srv = mp.Server(f"{sip}:{PORT}", prefix=sp).start()
        plain = subprocess.Popen(sp + [mp.binary(), "plain-serve", "--listen",
                                       f"{sip}:{PLAIN_PORT}"],
                                 stdout=subprocess.PIPE, text=True)
        assert plain.stdout is not None
        plain.stdout.readline()
        kplain = None
        if not args.no_kernel_mptcp:
            kernel_mptcp(net, client, server)
            kplain = subprocess.Popen(sp + [mp.binary(), "plain-serve", "--mptcp", "1",
                                            "--listen", f"{sip}:{MPTCP_PORT}"],
                                      stdout=subprocess.PIPE, text=True)
            assert kplain.stdout is not None
            kplain.stdout.readline()
        try:
            for rep in range(args.reps):
                for size in sizes:
                    for sched in scheds:
                        res = mp.send([f"{sip}:{PORT}"], size, sched, via=via, prefix=cp,
                                      timeout=300)
                        if not res["intact"]:
                            raise SystemExit(f"{sched} {size}: not intact: {res}")
                        rows.append({"rep": rep, "size": size, "scheduler": sched,
                                     **{k: res[k] for k in ("fct_ms", "dup_bytes",
                                                            "peak_reorder_bytes",
                                                            "reinjected_bytes")},
                                     "bytes_path1": res["subflows"][0]["bytes"],
                                     "bytes_path2": res["subflows"][1]["bytes"]})
                    if not args.no_single_path:
                        for i, src in enumerate(via):
                            p = subprocess.run(cp + [mp.binary(), "plain-send", "--to",
                                                     f"{sip}:{PLAIN_PORT}", "--via", src,
                                                     "--size", size],
                                               capture_output=True, text=True, timeout=600)
                            if p.returncode != 0:
                                raise SystemExit(f"single-path TCP {src}: {p.stderr}")
                            res = mp.parse_line(p.stdout)
                            rows.append({"rep": rep, "size": size,
                                         "scheduler": f"tcp-path{i + 1}",
                                         "fct_ms": res["fct_ms"]})
                    if kplain is not None:
                        p = subprocess.run(cp + [mp.binary(), "plain-send", "--mptcp", "1",
                                                 "--to", f"{sip}:{MPTCP_PORT}", "--via",
                                                 via[0], "--size", size],
                                           capture_output=True, text=True, timeout=600)
                        if p.returncode != 0:
                            raise SystemExit(f"kernel MPTCP: {p.stderr}")
                        rows.append({"rep": rep, "size": size, "scheduler": "kernel-mptcp",
                                     "fct_ms": mp.parse_line(p.stdout)["fct_ms"]})
                print(f"repetition {rep + 1}/{args.reps} done", flush=True)
        finally:
            srv.stop()
            for proc in (plain, kplain):
                if proc is not None:
                    proc.terminate()
                    proc.wait(timeout=10)
    keys = sorted({k for r in rows for k in r})
    with (out / "fct.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    summary = summarize(rows)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    text = f"{args.topo}, {args.reps} repetitions\n" + table(summary)
    (out / "summary.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
