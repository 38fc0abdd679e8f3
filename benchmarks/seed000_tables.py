"""Seed 000's result tables from the summaries of seed000.yaml and seed000_sweep.yaml.

    python -m dcnlab.benchmarks.seed000_tables results/seed000 [results/seed000_sweep]

Reads each scenario's ``summary.csv`` (written by ``dcnlab run``/``dcnlab report``) and
prints, for seed000.yaml, per scenario and sweep value the spray scheme's ratios to ECMP
and to single path (short-flow FCT, long-flow throughput) with their 95% intervals and its
out-of-order share, and per run the long flows' throughput as a share of the host-link
bound (what they would get if only the hosts' links limited them; from workload.csv and
flows.csv); for the sweep, per setting the long-flow throughput of every scheme,
spray's ratios, and the diagnosis (retransmissions, spurious ones, cwnd reductions and how
many were undone, drops, bottleneck queue), and plots the long-flow throughput per
setting and scheme (``sweep_throughput.png`` in the sweep's directory). These are the
tables of docs/diagnoses/p000.md.
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

SPRAY, ECMP, SINGLE = "spray", "ecmp", "single"
LINK_MBPS = 50.0  # seed000.yaml's link rate
Key = tuple[str, float, str, str, str]  # scheme, load, metric, class, baseline


def read_summary(path: Path) -> dict[Key, dict[str, float]]:
    """summary.csv as {(scheme, load, metric, class, baseline): {mean, ci95, ratio, low,
    high}}; empty cells are nan."""
    if not path.is_file():
        raise SystemExit(f"{path} does not exist: run the experiment (or dcnlab report) first")
    out: dict[Key, dict[str, float]] = {}
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            key = (r["scheme"], float(r["load"]), r["metric"], r["class"], r["baseline"])
            out[key] = {k: _num(r[c]) for k, c in (("mean", "mean"), ("ci", "ci95"),
                                                  ("ratio", "ratio"),
                                                  ("low", "ratio_low95"),
                                                  ("high", "ratio_high95"))}
    return out


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def ratio(s: Mapping[Key, Mapping[str, float]], scheme: str, load: float, metric: str,
          cls: str, baseline: str) -> str:
    """``x0.88 [0.70-1.12]`` or ``-``."""
    row = s.get((scheme, load, metric, cls, baseline))
    if row is None or not math.isfinite(row["ratio"]):
        return "-"
    text = f"x{row['ratio']:.2f}"
    if math.isfinite(row["low"]):
        text += f" [{row['low']:.2f}-{row['high']:.2f}]"
    return text


def mean(s: Mapping[Key, Mapping[str, float]], scheme: str, load: float, metric: str,
         cls: str, digits: int = 1) -> str:
    for baseline in (ECMP, ""):
        row = s.get((scheme, load, metric, cls, baseline))
        if row is not None and math.isfinite(row["mean"]):
            return f"{row['mean']:.{digits}f}"
    return "-"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    return "\n".join(lines)


def main_table(s: Mapping[Key, Mapping[str, float]]) -> str:
    """Spray against ECMP, single path and any further baseline in the summary (e.g.
    first_path), per sweep value."""
    loads = sorted({k[1] for k in s if k[0] == SPRAY})
    present = {k[4] for k in s if k[0] == SPRAY}
    bases = [b for b in (ECMP, SINGLE) if b in present]
    bases += sorted(present - {ECMP, SINGLE, "", SPRAY})
    rows = []
    for load in loads:
        rows.append([
            f"{load:g}",
            *(ratio(s, SPRAY, load, "fct_mean", "rabbit", b) for b in bases),
            *(ratio(s, SPRAY, load, "tput_mbps", "elephant", b) for b in bases),
            mean(s, SPRAY, load, "ooo_pct", "rabbit"),
            mean(s, SPRAY, load, "ooo_pct", "elephant"),
        ])
    return _table(["long", *(f"short FCT /{b}" for b in bases),
                   *(f"long tput /{b}" for b in bases), "short ooo%", "long ooo%"], rows)


def sweep_table(settings: Mapping[str, Mapping[Key, Mapping[str, float]]]) -> str:
    """Per setting (scenario): long-flow throughput, spray's ratios and the diagnosis."""
    rows = []
    for name, s in settings.items():
        loads = sorted({k[1] for k in s if k[0] == SPRAY})
        for load in loads:
            tag = name if len(loads) == 1 else f"{name} {load:g}"
            rows.append([
                tag,
                *(mean(s, x, load, "tput_mbps", "elephant") for x in (SINGLE, ECMP, SPRAY)),
                ratio(s, SPRAY, load, "tput_mbps", "elephant", ECMP),
                ratio(s, SPRAY, load, "tput_mbps", "elephant", SINGLE),
                ratio(s, SPRAY, load, "fct_mean", "rabbit", ECMP),
                mean(s, SPRAY, load, "ooo_pct", "elephant", 0),
                mean(s, SPRAY, load, "reord_seen", "elephant", 0),
                mean(s, SPRAY, load, "retrans", "elephant", 0) + "/"
                + mean(s, SPRAY, load, "dsack_dups", "elephant", 0),
                mean(s, SPRAY, load, "recoveries", "path", 0) + "/"
                + mean(s, SPRAY, load, "undos", "path", 0),
                mean(s, ECMP, load, "recoveries", "path", 0) + "/"
                + mean(s, ECMP, load, "undos", "path", 0),
                mean(s, SPRAY, load, "drops", "net", 0) + "/" + mean(s, ECMP, load, "drops",
                                                                     "net", 0),
                mean(s, SPRAY, load, "qout_mean", "net", 0) + "/"
                + mean(s, ECMP, load, "qout_mean", "net", 0),
            ])
    return _table(["setting", "tput single", "ecmp", "spray", "spray/ecmp", "spray/single",
                   "short FCT spray/ecmp", "ooo%", "reord/flow", "rtx/spur",
                   "cwnd cuts/undone spray", "ecmp", "drops spray/ecmp",
                   "Qout spray/ecmp"], rows)


def sweep_plot(settings: Mapping[str, Mapping[Key, Mapping[str, float]]], path: Path,
               schemes: tuple[str, ...] = (SINGLE, ECMP, SPRAY)) -> Path:
    """Long-flow throughput per setting, a bar per scheme with its 95% CI across seeds
    (the largest sweep value of each setting), drawn as the engine draws its bars
    (plots.interval): throughput is no FCT, so the arithmetic mean with its interval cut
    at zero below (an interval below zero says "few seeds", not a negative throughput)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dcnlab.benchmarks.engine.metrics import SummaryRow
    from dcnlab.benchmarks.engine.plots import interval, is_fct

    metric, cls = "tput_mbps", "elephant"
    names = list(settings)
    fig, ax = plt.subplots(figsize=(1.1 * len(names) + 2, 4.2))
    width = 0.8 / len(schemes)
    for i, scheme in enumerate(schemes):
        cells = []
        for name in names:
            s = settings[name]
            loads = sorted({k[1] for k in s if k[0] == scheme})
            row = s.get((scheme, loads[-1], metric, cls, ECMP)) if loads else None
            # summary.csv's row as the engine's SummaryRow (its seed count is not read:
            # interval does not use it)
            cells.append(interval(None if row is None else SummaryRow(
                scheme, loads[-1], metric, cls, 0, row["mean"], row["ci"], row["ratio"],
                row["low"], row["high"]), is_fct(metric)))
        ax.bar([j + (i - (len(schemes) - 1) / 2) * width for j in range(len(names))],
               [c[0] for c in cells], width, yerr=[[c[1] for c in cells],
                                                   [c[2] for c in cells]],
               capsize=2, label=scheme)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_xlabel("setting (scenario of the sweep, at its largest sweep value)")
    ax.set_ylabel("long-flow throughput (Mbit/s)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def host_link_bound(flows: Sequence[tuple[str, str, float]], rate_mbps: float
                    ) -> list[float]:
    """Each flow's throughput (Mbit/s) in a fabric that never blocks: flows (src, dst,
    size in bytes) all start at once, share only their hosts' links (each host sends
    and receives ``rate_mbps``) max-min fairly, and speed up as others finish (a fluid
    model). What no load balancing can beat; short flows left out."""
    left = {i: size * 8 / 1e6 for i, (_s, _d, size) in enumerate(flows)}  # Mbit
    done: dict[int, float] = {}
    now = 0.0
    while left:
        rates = _max_min({i: (f"up:{flows[i][0]}", f"down:{flows[i][1]}") for i in left},
                         rate_mbps)
        step = min(left[i] / rates[i] for i in left)
        now += step
        for i in list(left):
            left[i] -= rates[i] * step
            if left[i] <= 1e-9 * (1 + flows[i][2]):
                done[i] = now
                del left[i]
    return [flows[i][2] * 8 / 1e6 / done[i] for i in range(len(flows))]


def _max_min(uses: Mapping[int, tuple[str, ...]], capacity: float) -> dict[int, float]:
    """Max-min fair rates of flows over links of one capacity (progressive filling)."""
    free = {link: capacity for links in uses.values() for link in links}
    rates: dict[int, float] = {}
    active = set(uses)
    while active:
        share, link = min((free[ln] / sum(1 for i in active if ln in uses[i]), ln)
                          for ln in free if any(ln in uses[i] for i in active))
        for i in [i for i in active if link in uses[i]]:
            rates[i] = share
            active.discard(i)
            for ln in uses[i]:
                free[ln] -= share
    return rates


def bound_table(out: Path, rate_mbps: float) -> str:
    """Per sweep value and seed: the host-link bound of the long flows' mean throughput
    (workload.csv) and each scheme's measured mean as a share of it (flows.csv)."""
    with open(out / "workload.csv", newline="") as fh:
        work = [r for r in csv.DictReader(fh) if r.get("tag") == "long"]
    with open(out / "flows.csv", newline="") as fh:
        flows = [r for r in csv.DictReader(fh) if r.get("tag") == "long"
                 and r["status"] == "ok"]
    schemes = list(dict.fromkeys(r["scheme"] for r in flows))
    rows = []
    for load, seed in sorted({(float(r["load"]), int(r["seed"])) for r in work}):
        mine = [(r["src"], r["dst"], float(r["size"])) for r in work
                if float(r["load"]) == load and int(r["seed"]) == seed]
        bound = sum(host_link_bound(mine, rate_mbps)) / len(mine)
        cells = []
        for scheme in schemes:
            got = [float(r["bytes"]) * 8 / float(r["fct"]) / 1e6 for r in flows
                   if r["scheme"] == scheme and float(r["load"]) == load
                   and int(r["seed"]) == seed]
            cells.append(f"{sum(got) / len(got) / bound:.2f}" if got else "-")
        rows.append([f"{load:g}", str(seed), f"{bound:.1f}", *cells])
    return _table(["long", "seed", "bound Mbit/s", *schemes], rows)


def scenarios(out: Path) -> dict[str, dict[Key, dict[str, float]]]:
    dirs = [out] if (out / "summary.csv").is_file() else sorted(
        p.parent for p in out.glob("*/summary.csv"))
    if not dirs:
        raise SystemExit(f"{out} holds no summary.csv")
    return {d.name: read_summary(d / "summary.csv") for d in dirs}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    for name, s in scenarios(Path(args[0])).items():
        print(f"{name}: spray's ratios (mean of per-seed ratios [95% CI])")
        print(main_table(s))
        print()
        where = Path(args[0]) / name if name != Path(args[0]).name else Path(args[0])
        if (where / "workload.csv").is_file() and (where / "flows.csv").is_file():
            print(f"{name}: long flows' mean throughput as a share of the host-link bound "
                  f"({LINK_MBPS:g} Mbit/s host links, a fabric that never blocks)")
            print(bound_table(where, LINK_MBPS))
            print()
    if len(args) == 2:
        settings = scenarios(Path(args[1]))
        print("sweep (random scenario): long-flow throughput (Mbit/s) and diagnosis")
        print(sweep_table(settings))
        print(f"plot: {sweep_plot(settings, Path(args[1]) / 'sweep_throughput.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
