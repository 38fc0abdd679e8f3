"""Per-run path diagnosis of the elephants: did they collide, and did the scheme pick the
least loaded path?  On when the experiment file says ``diagnosis: {flow_paths: true}``
(the flow tap costs CPU, ``flowtap.py``); the same for every scheme and switch kind.

What is measured (``flowtap.py``): for every flow, the fabric (switch-to-switch) links
its packets crossed, per directed link its bytes, packets and first/last packet time
(SYN packets apart: TCP-Path's flooded exploration copies do not count); for every
fabric port its tx bytes every ``diagnosis.interval`` seconds (0.2 s by default).

Definitions (elephants are flows of class ``elephant``; *measured* ones start inside
the measurement window):

- A flow's **path**: the directed fabric links that carried at least ``USE_SHARE``
  (1 %) of the bytes of the flow's busiest fabric link, in its data direction (source
  to destination).  A flow re-routed mid-way (failure, re-exploration, spraying) has
  every link it used.  Host links are not fabric links: two flows to one host share its
  link whatever the routing does, so they are left out on purpose.
- A flow is **active on a link** from the first to the last non-SYN packet it sent
  over that link.
- ``eleph_shared_frac``: the fraction of the run's measured elephants with a path that
  were active on some link of their path at the same time as another elephant of the
  run (measured or not) was active on that link (the two intervals overlap by more than
  zero).  Under ECMP with n equal paths and k concurrent elephants this is what hash
  collisions give; a scheme that spreads elephants well drives it down.
- ``eleph_contention``: per measured elephant with a path, for each link of its path the
  number of other elephants of the run active on that link, averaged over its own
  activity there (the sum of their overlaps divided by its span); its **contention** is
  the largest over its links, the mean of those is the run's figure.  Where "shared"
  counts any overlap, this weighs how many for how long: an elephant alone on its
  bottleneck for its whole life has 0, one sharing it with one other throughout has 1
  (and about half the link).
- A **choice point** of a flow: a link of its path that leaves a switch with two or
  more up ports (ports towards switches farther from every host, ``pathdiag.up_ports``)
  through one of them; the alternatives are that switch's up ports.  The **first**
  choice point is the earliest one on the path (the source leaf's uplink on a
  spine-leaf; the rack switch's uplink on ``threelayer``, whose fabric switches are
  choice points too when a plane has two or more spines).
- The load of an alternative **at SYN time**: the bytes its port sent during the last
  complete sampling interval that ended at or before the flow's first packet on the
  fabric (SYN included).  Flows starting before the second sample have none.
- A choice is **contested** when its alternatives' loads differ by more than
  ``TIE_BYTES`` (two full frames); an uncontested choice (all idle, or all equally
  busy) has no least loaded alternative to find and is not counted.  The chosen port
  was the **least loaded** one when its load is at most the smallest load plus
  ``TIE_BYTES``.
- ``least_loaded_frac``: among the measured elephants whose first choice point was
  contested (``choices`` of them), the fraction whose chosen port was the least loaded.
  A scheme that ignores load picks it about 1/n of the time among n alternatives with
  one clear minimum (ECMP is the reference for chance on the same traffic).
- ``least_loaded_hops_frac``: the same over every contested choice point of every
  measured elephant (``hop_choices`` of them): equal to the above on a two-tier fabric.
- The **bottleneck load** of a path at SYN time: the largest load (as above) of its
  links.  A flow's **alternatives** are the shortest fabric paths from the first switch
  of its path to the last (every equal-cost path between its two edge switches; four on
  spineleaf:4,... and on ``threelayer``); its chosen path is the links it used.  The
  choice is contested when the alternatives' bottleneck loads differ by more than
  ``TIE_BYTES``, and the chosen path was the **least loaded path** when its bottleneck
  load is at most the smallest plus ``TIE_BYTES``.  This judges the whole path, down
  links included, where the choice points judge each hop's up ports alone: a first hop
  that was idle leads to a busy path when the spine's link down to the destination is
  busy.
- ``least_loaded_path_frac``: among the measured elephants with a contested path choice
  (``path_choices`` of them), the fraction that took the least loaded path.

Flows are matched to the tap's entries by (source address, destination address, source
port, the traffic agents' port): ``traced`` counts the measured elephants found, and a
flow sent by a scheme transport on ports of its own is not traced.

Per run: a row in ``flowdiag.csv`` (summarized per scheme and sweep value with 95%
intervals across seeds, summary section "elephant paths", followed by each fraction
pooled over the seeds' elephants with Wilson's 95% interval: runs hold few elephants)
and a row per measured elephant in ``flowpaths.csv`` (its links with bytes, its first
and last data packet on the fabric in seconds since the run's start as in flows.csv,
whether it shared, with which flows, its first choice and the alternatives' loads).
``tap_lost`` counts packets the tap could not record (its map was full); it should be 0.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import netstats
from .metrics import SummaryRow

FLOWDIAG_CSV = "flowdiag.csv"
FLOWPATHS_CSV = "flowpaths.csv"
USE_SHARE = 0.01
TIE_BYTES = 3000
TCP = 6
METRICS = ["eleph_shared_frac", "eleph_contention", "least_loaded_frac",
           "least_loaded_hops_frac", "least_loaded_path_frac", "elephants", "traced",
           "choices", "hop_choices", "path_choices", "tap_lost"]
COLUMNS = ["scheme", "load", "seed", *METRICS]
PATH_COLUMNS = ["scheme", "load", "seed", "flow_id", "src", "dst", "sport", "size",
                "status", "links", "link_bytes", "start", "end", "shared", "shared_with",
                "contention", "choice_switch", "chosen_port", "port_loads", "least_loaded",
                "path_loads", "least_loaded_path"]
LABELS = {"eleph_shared_frac": "elephants sharing a link",
          "eleph_contention": "other elephants, most crowded link", "least_loaded_frac":
          "least loaded 1st hop", "least_loaded_hops_frac": "least loaded, all hops",
          "elephants": "measured elephants", "traced": "  with a traced path",
          "least_loaded_path_frac": "least loaded path",
          "choices": "  with a contested 1st hop", "hop_choices": "contested choice points",
          "path_choices": "  with a contested path", "tap_lost": "tap packets lost"}


@dataclass(frozen=True)
class Link:
    """A directed fabric link: ``src`` sends on ``src_port``, ``dst`` receives on
    ``dst_port``."""

    src: str
    src_port: int
    dst: str
    dst_port: int

    @property
    def name(self) -> str:
        return f"{self.src}:{self.src_port}>{self.dst}:{self.dst_port}"


@dataclass(frozen=True)
class Hop:
    link: Link
    bytes: int
    first_ns: int
    last_ns: int


@dataclass
class FlowPath:
    """A flow's fabric path (data direction), hops in the order the flow reached them."""

    hops: list[Hop]
    seen_ns: int  # first packet on the fabric, SYN included

    @property
    def start_ns(self) -> int:
        return min(h.first_ns for h in self.hops)

    @property
    def end_ns(self) -> int:
        return max(h.last_ns for h in self.hops)


FlowKey = tuple[str, str, int, int]  # src ip, dst ip, sport, dport


def flow_paths(entries: Iterable[Mapping[str, Any]], links: Mapping[str, Link],
               share: float = USE_SHARE) -> dict[FlowKey, FlowPath]:
    """Every TCP flow's path from the tap's entries (``flowtap.TapEntry`` dicts) and the
    directed link behind each tapped interface."""
    by_flow: dict[FlowKey, list[Mapping[str, Any]]] = defaultdict(list)
    for e in entries:
        if int(e["proto"]) == TCP and e["iface"] in links:
            by_flow[(str(e["src"]), str(e["dst"]), int(e["sport"]), int(e["dport"]))].append(e)
    out = {}
    for key, members in by_flow.items():
        data = [e for e in members if int(e["pkts"]) > 0 and int(e["first_ns"]) > 0]
        top = max((int(e["bytes"]) for e in data), default=0)
        hops = sorted((Hop(links[str(e["iface"])], int(e["bytes"]), int(e["first_ns"]),
                           int(e["last_ns"]))
                       for e in data if int(e["bytes"]) >= share * top),
                      key=lambda h: (h.first_ns, h.link.name))
        if hops:
            out[key] = FlowPath(hops, min(int(e["seen_ns"]) for e in members))
    return out


def _on_links(paths: Mapping[Any, FlowPath], flows: Iterable[Any]
              ) -> dict[Link, list[tuple[Any, int, int]]]:
    """Per link: the ``flows`` (those with a path) active on it, with their interval."""
    active: dict[Link, list[tuple[Any, int, int]]] = defaultdict(list)
    for fid in flows:
        if fid in paths:
            for h in paths[fid].hops:
                active[h.link].append((fid, h.first_ns, h.last_ns))
    return active


def _overlaps(fid: Any, hop: Hop, active: Mapping[Link, list[tuple[Any, int, int]]]
              ) -> Iterable[tuple[Any, int]]:
    """The other flows on ``hop``'s link, each with how long (ns) it was active there
    while ``fid`` was (zero or less: not at the same time)."""
    for other, first, last in active.get(hop.link, []):
        if other != fid:
            yield other, min(last, hop.last_ns) - max(first, hop.first_ns)


def shared_with(paths: Mapping[Any, FlowPath], who: Iterable[Any], others: Iterable[Any]
                ) -> dict[Any, list[Any]]:
    """For each flow in ``who``: the flows of ``others`` (itself excluded) that were active
    on a common link at the same time (intervals overlapping by more than zero)."""
    active = _on_links(paths, others)
    out: dict[Any, list[Any]] = {}
    for fid in who:
        if fid in paths:
            hits = {other for h in paths[fid].hops
                    for other, overlap in _overlaps(fid, h, active) if overlap > 0}
            out[fid] = sorted(hits, key=str)
    return out


def contention(paths: Mapping[Any, FlowPath], who: Iterable[Any], others: Iterable[Any]
               ) -> dict[Any, float]:
    """For each flow in ``who``: the largest, over the links of its path, of the number
    of flows of ``others`` (itself excluded) active on the link, averaged over its own
    activity there."""
    active = _on_links(paths, others)
    out: dict[Any, float] = {}
    for fid in who:
        if fid in paths:
            out[fid] = max((sum(max(0, overlap) for _, overlap in _overlaps(fid, h, active))
                            / (h.last_ns - h.first_ns)
                            for h in paths[fid].hops if h.last_ns > h.first_ns), default=0.0)
    return out


@dataclass
class Timeline:
    """Cumulative tx bytes per (switch, port), sampled at ``t_ns`` (CLOCK_MONOTONIC)."""

    t_ns: list[int]
    tx: dict[tuple[str, int], list[int]] = field(default_factory=dict)

    @classmethod
    def from_samples(cls, samples: Sequence[Mapping[str, Any]],
                     ports: Mapping[str, tuple[str, int]]) -> Timeline:
        """From flowtap's links.json.gz samples; ``ports``: tx interface -> (switch, port)."""
        rows = sorted(samples, key=lambda s: int(s["t_ns"]))
        line = cls([int(s["t_ns"]) for s in rows])
        for iface, port in ports.items():
            line.tx[port] = [int(s["tx"].get(iface, 0)) for s in rows]
        return line

    def load_before(self, t_ns: int) -> dict[tuple[str, int], int] | None:
        """Bytes per port in the last complete interval ending at or before ``t_ns``."""
        k = -1
        for i, t in enumerate(self.t_ns):
            if t <= t_ns:
                k = i
            else:
                break
        if k < 1:
            return None
        return {port: values[k] - values[k - 1] for port, values in self.tx.items()}


@dataclass(frozen=True)
class Choice:
    switch: str
    chosen: int
    loads: dict[int, int]  # alternative port -> bytes in the interval before the SYN

    @property
    def contested(self) -> bool:
        return max(self.loads.values()) - min(self.loads.values()) > TIE_BYTES

    @property
    def least_loaded(self) -> bool:
        return self.loads[self.chosen] <= min(self.loads.values()) + TIE_BYTES


def choices(path: FlowPath, ups: Mapping[str, Sequence[int]], timeline: Timeline
            ) -> list[Choice]:
    """The flow's choice points in path order, with the loads at its SYN time (none when
    the timeline has no complete interval before it)."""
    loads = timeline.load_before(path.seen_ns)
    if loads is None:
        return []
    out = []
    seen: set[str] = set()
    for h in path.hops:
        sw, port = h.link.src, h.link.src_port
        alternatives = ups.get(sw, ())
        if port in alternatives and sw not in seen and all(
                (sw, p) in loads for p in alternatives):
            seen.add(sw)
            out.append(Choice(sw, port, {p: loads[(sw, p)] for p in alternatives}))
    return out


def shortest_paths(fabric: Iterable[Link], src: str, dst: str) -> list[tuple[Link, ...]]:
    """Every shortest directed path from switch ``src`` to switch ``dst`` over
    ``fabric``'s links (none when ``dst`` is unreachable or is ``src``)."""
    out_links: dict[str, list[Link]] = defaultdict(list)
    for link in fabric:
        out_links[link.src].append(link)
    dist = {src: 0}
    frontier = [src]
    while frontier and dst not in dist:
        nxt = []
        for sw in frontier:
            for link in out_links[sw]:
                if link.dst not in dist:
                    dist[link.dst] = dist[sw] + 1
                    nxt.append(link.dst)
        frontier = nxt
    if src == dst or dst not in dist:
        return []

    def walk(sw: str) -> list[tuple[Link, ...]]:
        if sw == dst:
            return [()]
        return [(link, *rest) for link in out_links[sw]
                if dist.get(link.dst) == dist[sw] + 1 and (
                    link.dst == dst or dist[link.dst] < dist[dst])
                for rest in walk(link.dst)]
    return walk(src)


@dataclass(frozen=True)
class PathChoice:
    """A flow's path against its alternatives, by bottleneck load at SYN time."""

    chosen: int  # the chosen path's bottleneck load
    alternatives: tuple[int, ...]  # each shortest path's bottleneck load

    @property
    def contested(self) -> bool:
        return max(self.alternatives) - min(self.alternatives) > TIE_BYTES

    @property
    def least_loaded(self) -> bool:
        return self.chosen <= min(self.alternatives) + TIE_BYTES


def path_choice(path: FlowPath, fabric: Sequence[Link], timeline: Timeline
                ) -> PathChoice | None:
    """The flow's path choice (None: no load sample before its SYN, no unique edge
    switches at its ends, or fewer than two alternatives)."""
    loads = timeline.load_before(path.seen_ns)
    if loads is None:
        return None
    used = [h.link for h in path.hops]
    starts = {lk.src for lk in used} - {lk.dst for lk in used}
    ends = {lk.dst for lk in used} - {lk.src for lk in used}
    if len(starts) != 1 or len(ends) != 1:
        return None
    candidates = shortest_paths(fabric, starts.pop(), ends.pop())
    if len(candidates) < 2:
        return None

    def bottleneck(links: Iterable[Link]) -> int | None:
        values = [loads.get((lk.src, lk.src_port)) for lk in links]
        return None if None in values else max(v for v in values if v is not None)
    chosen = bottleneck(used)
    alternatives = [bottleneck(c) for c in candidates]
    if chosen is None or None in alternatives:
        return None
    return PathChoice(chosen, tuple(a for a in alternatives if a is not None))


def _frac(hits: int, n: int) -> float:
    return hits / n if n else math.nan


def analyze(rows: Sequence[Mapping[str, Any]], keys: Mapping[Any, FlowKey],
            paths: Mapping[FlowKey, FlowPath], ups: Mapping[str, Sequence[int]],
            timeline: Timeline, offset_ns: int = 0, lost: int | None = None,
            fabric: Sequence[Link] = ()) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's diagnosis figures and flowpaths rows.  ``rows``: the run's flows.csv
    rows; ``keys``: flow_id -> its data-direction 4-tuple; ``offset_ns``: added to the
    tap's CLOCK_MONOTONIC stamps to give flows.csv's time base (ns since the run's T0);
    ``fabric``: every directed fabric link (the path choices' alternatives)."""
    by_id = {r["flow_id"]: r for r in rows}
    elephants = [r["flow_id"] for r in rows if r.get("class") == "elephant"]
    measured = [f for f in elephants if by_id[f].get("measured") in (True, 1, "1", "True", "true")]
    fpaths = {f: paths[keys[f]] for f in elephants if f in keys and keys[f] in paths}
    shared = shared_with(fpaths, measured, elephants)
    crowd = contention(fpaths, measured, elephants)
    first_hits = first_n = hop_hits = hop_n = path_hits = path_n = 0
    out_rows = []
    for f in measured:
        r = by_id[f]
        path = fpaths.get(f)
        picks = choices(path, ups, timeline) if path is not None else []
        whole = path_choice(path, fabric, timeline) if path is not None else None
        if whole is not None and whole.contested:
            path_n += 1
            path_hits += whole.least_loaded
        contested = [c for c in picks if c.contested]
        hop_n += len(contested)
        hop_hits += sum(c.least_loaded for c in contested)
        first = picks[0] if picks else None
        if first is not None and first.contested:
            first_n += 1
            first_hits += first.least_loaded
        out_rows.append({
            "flow_id": f, "src": r.get("src"), "dst": r.get("dst"), "sport": r.get("sport"),
            "size": r.get("size"), "status": r.get("status"),
            "links": " ".join(h.link.name for h in path.hops) if path else "",
            "link_bytes": " ".join(str(h.bytes) for h in path.hops) if path else "",
            "start": round((path.start_ns + offset_ns) / 1e9, 6) if path else None,
            "end": round((path.end_ns + offset_ns) / 1e9, 6) if path else None,
            "shared": bool(shared.get(f)) if path else None,
            "shared_with": " ".join(map(str, shared.get(f, []))),
            "contention": round(crowd[f], 3) if f in crowd else None,
            "choice_switch": first.switch if first else "",
            "chosen_port": first.chosen if first else None,
            "port_loads": " ".join(f"{p}:{b}" for p, b in sorted(first.loads.items()))
            if first else "",
            "least_loaded": (first.least_loaded if first.contested else None)
            if first else None,
            # the chosen path's bottleneck load, then each alternative's, smallest first
            "path_loads": f"{whole.chosen} of " + " ".join(map(str, sorted(
                whole.alternatives))) if whole else "",
            "least_loaded_path": (whole.least_loaded if whole.contested else None)
            if whole else None})
    traced = sum(1 for f in measured if f in fpaths)
    figures = {"elephants": len(measured), "traced": traced,
               "eleph_shared_frac": _frac(sum(1 for f in measured if shared.get(f)), traced),
               "eleph_contention": sum(crowd.values()) / len(crowd) if crowd else math.nan,
               "choices": first_n, "least_loaded_frac": _frac(first_hits, first_n),
               "hop_choices": hop_n, "least_loaded_hops_frac": _frac(hop_hits, hop_n),
               "path_choices": path_n, "least_loaded_path_frac": _frac(path_hits, path_n),
               "tap_lost": lost}
    return figures, out_rows


def flow_keys(rows: Iterable[Mapping[str, Any]], ips: Mapping[str, str], dport: int
              ) -> dict[Any, FlowKey]:
    """flow_id -> (src ip, dst ip, sport, dport) of the TCP flows that ran."""
    out = {}
    for r in rows:
        if r.get("kind", "tcp") == "tcp" and r.get("sport") not in (None, "") \
                and r.get("src") in ips and r.get("dst") in ips:
            out[r["flow_id"]] = (ips[r["src"]], ips[r["dst"]], int(r["sport"]), dport)
    return out


# ---------------------------------------------------------------------------- summary


def summarize(rows: Iterable[Mapping[str, Any]], baseline: str | None) -> list[SummaryRow]:
    """Per (scheme, sweep value, metric): mean ± 95% CI across seeds (class "flowdiag")."""
    return netstats.summarize(rows, baseline, METRICS, "flowdiag")


# fraction column -> the run column counting its denominator
POOLED = {"eleph_shared_frac": "traced", "least_loaded_frac": "choices",
          "least_loaded_hops_frac": "hop_choices", "least_loaded_path_frac": "path_choices"}


def wilson(hits: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """Wilson's 95% interval of a proportion ``hits``/``n``."""
    if n <= 0:
        return math.nan, math.nan
    p = hits / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def pooled(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, float, str],
                                                      tuple[int, int]]:
    """Per (scheme, sweep value, fraction): (hits, n) summed over the seeds' runs -- the
    elephants themselves, where the mean of per-run fractions weighs a run of 2
    elephants like one of 20."""
    out: dict[tuple[str, float, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        for frac, count in POOLED.items():
            try:
                f, n = float(r.get(frac)), float(r.get(count))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
            if math.isfinite(f) and n > 0:
                cell = out[(str(r["scheme"]), float(r["load"]), frac)]
                cell[0] += f * n
                cell[1] += n
    return {k: (round(h), round(n)) for k, (h, n) in out.items()}


def render(summary: list[SummaryRow], schemes: list[str], baseline: str | None,
           sweep: str, rows: Iterable[Mapping[str, Any]] = ()) -> str:
    """The section: mean ± CI across seeds per metric, then (given the runs' ``rows``)
    each fraction pooled over the seeds' elephants with Wilson's 95% interval."""
    text = netstats.render(summary, schemes, baseline, sweep, METRICS, LABELS,
                           "elephant paths (flow tap on the fabric links; definitions in "
                           f"flowdiag.py; ratio to {baseline or '-'} in brackets)")
    counts = pooled(rows)
    if not text or not counts:
        return text
    lines = ["  pooled over the seeds' elephants: hits/n fraction [Wilson 95%]"]
    for load in sorted({k[1] for k in counts}):
        present = [s for s in schemes if any((s, load, f) in counts for f in POOLED)]
        lines.append(f"  {sweep} {load:g}")
        lines.append("    " + " " * 26 + "".join(f"{s:>26}" for s in present))
        for frac in POOLED:
            cells = []
            for scheme in present:
                cell = "-"
                if (scheme, load, frac) in counts:
                    hits, n = counts[(scheme, load, frac)]
                    low, high = wilson(hits, n)
                    cell = f"{hits}/{n} {hits / n:.2f} [{low:.2f}-{high:.2f}]"
                cells.append(f"{cell:>26}")
            lines.append(f"    {LABELS[frac]:26}" + "".join(cells))
    return text + "\n".join(lines) + "\n"
