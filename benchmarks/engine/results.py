"""The results directory: what is written where, and reading it back.

::

    OUT/
      spec.yaml         the spec as given (report() and reruns start from it)
      meta.json         versions, parameters, machine, per-run timings, errors, status
      workload.csv      every generated flow (seed, sweep value, flow) -- identical for
                        every scheme by construction
      flows.csv         one row per flow, scheme and seed (FLOW_COLUMNS, then the
                        columns of the schemes' transports); appended after each run, so
                        an interrupted experiment keeps what it measured
      paths.csv         per run: parallel up ports' byte split and queue difference, the
                        hosts' TcpExt reordering/undo counters (pathdiag.py)
      queue_series.csv  per run: the bottleneck port's queue every switch stats line
                        (switch_ext only; queueseries.py)
      imbalance.csv     per run: max/mean utilization of each switch's up ports every
                        busy stats interval (switch_ext only; imbalance.py)
      throughput.csv    per run: Mbit/s delivered to hosts per 0.1 s (switch_ext only;
                        throughput.py)
      samples.csv       RTT/cwnd samples, if agent.sample_interval > 0
      controller.csv    per run: the app's counter deltas and per-flow table size
                        (controller_stats.py)
      fairness.csv      per run, with agent.rx_interval > 0: Jain's index among the TCP
                        flows and throughput over the receivers' periods, the host
                        parts' counters (fairness.py); fairness_series.csv: the same per period
      summary.csv       per scheme, sweep value, metric and class: mean, CI, ratio, ratio CI
      summary.txt       the same as a readable table
      plots/*.png
      runs/<scheme>/seed<S>_<sweep><V>/   agent plans, raw records, receiver counts
                        (rx_<host>.jsonl) and logs
      runs/<scheme>/network/<agents>/     host agents' logs and last status (schemes with
                                          host parts)
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

FLOW_COLUMNS = [
    "scheme", "load", "seed", "flow_id", "src", "dst", "size", "class", "kind", "tag",
    "sport", "dscp", "sched", "start", "end", "fct", "bytes", "retransmits", "ooo",
    "segs_in", "reord_seen", "dsack_dups", "reordering", "status", "measured", "late",
    "error",
]
WORKLOAD_COLUMNS = ["seed", "load", "flow_id", "src", "dst", "size", "start", "kind", "stop",
                    "rate_mbit", "sport", "dscp", "tag"]
SAMPLE_COLUMNS = ["scheme", "load", "seed", "flow_id", "t", "bytes_acked", "rtt_us", "cwnd",
                  "retrans"]
SUMMARY_COLUMNS = ["scheme", "load", "metric", "class", "seeds", "mean", "ci95", "ratio",
                   "ratio_low95", "ratio_high95", "baseline"]  # what the ratio refers to

_INT_COLUMNS = {"seed", "flow_id", "size", "sport", "dscp", "bytes", "retransmits", "ooo",
                "segs_in", "reord_seen", "dsack_dups", "reordering"}
_FLOAT_COLUMNS = {"load", "sched", "start", "end", "fct", "late"}

FLOWS_CSV = "flows.csv"
META_JSON = "meta.json"
SPEC_COPY = "spec.yaml"


class ResultsError(RuntimeError):
    """A results directory that report() cannot read."""


class CsvAppender:
    """A CSV file written row by row and flushed, with the header written once.

    Appending to a file whose header differs (an experiment resumed with a newer dcnlab
    that added a column) first rewrites it under the union of both headers, the given
    columns first: every row it held keeps every cell, and new rows fill the new
    columns.  Appending blindly wrote rows with more cells than the header named."""

    def __init__(self, path: Path, columns: list[str]) -> None:
        self.path = path
        fresh = not path.exists() or path.stat().st_size == 0
        if not fresh:
            columns = _upgrade_header(path, columns)
        self.columns = columns
        self._fh = open(path, "a", newline="")  # noqa: SIM115 - closed by close()
        self._writer = csv.DictWriter(self._fh, fieldnames=columns, extrasaction="ignore")
        if fresh:
            self._writer.writeheader()

    def write(self, rows: Iterable[Mapping[str, Any]]) -> int:
        n = 0
        for row in rows:
            self._writer.writerow({k: _cell(row.get(k)) for k in self.columns})
            n += 1
        self._fh.flush()
        return n

    def close(self) -> None:
        self._fh.close()


def _upgrade_header(path: Path, columns: list[str]) -> list[str]:
    """The columns to append to ``path`` with: ``columns``, then any of the file's own
    it lacks; the file is rewritten (atomically) when its header is not that already."""
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        rows = list(reader)
    union = columns + [c for c in header if c not in columns]
    if header == union:
        return union
    tmp = path.with_name(path.name + ".upgrading")
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=union)
        writer.writeheader()
        for n, row in enumerate(rows, start=2):
            if len(row) > len(header):
                tmp.unlink()
                raise ResultsError(f"{path}, line {n}: {len(row)} cells under a header of "
                                   f"{len(header)}; not appending to it (nothing changed)")
            writer.writerow(dict(zip(header, row, strict=False)))
    tmp.replace(path)
    return union


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(round(value, 9))
    return value


def read_flows(path: Path) -> list[dict[str, Any]]:
    """flows.csv rows with numbers typed; empty cells become None."""
    if not path.is_file():
        raise ResultsError(f"{path} does not exist: not a results directory, or the "
                           "experiment stopped before its first run finished")
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in ("scheme", "load", "seed", "class", "status", "fct")
                   if c not in (reader.fieldnames or [])]
        if missing:
            raise ResultsError(f"{path}: missing column(s) {', '.join(missing)}")
        return [_typed(row) for row in reader]


def _typed(row: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, text in row.items():
        if text == "" or text is None:
            out[key] = None
        elif key in _INT_COLUMNS:
            out[key] = int(float(text))
        elif key in _FLOAT_COLUMNS:
            out[key] = float(text)
        elif key == "measured":
            out[key] = text not in ("0", "False", "false")
        elif key not in FLOW_COLUMNS:  # a scheme transport's column: a number if it is one
            out[key] = _number(text)
        else:
            out[key] = text
    return out


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def extra_columns(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The columns of flows.csv rows beyond FLOW_COLUMNS (the schemes' transports')."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(k for k in row if k not in FLOW_COLUMNS))
    return list(seen)


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False, default=str) + "\n")
    tmp.replace(path)  # never a half-written meta.json


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(f"{path} does not exist") from None
    except ValueError as exc:
        raise ResultsError(f"{path}: not valid JSON ({exc})") from None


def write_csv(path: Path, columns: list[str], rows: Iterable[Mapping[str, Any]]) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(row.get(k)) for k in columns})


META_TIME = "%Y-%m-%dT%H:%M:%S%z"  # meta.json's time stamps (started, resumed, finished)


def meta_time(text: Any) -> datetime | None:
    """A meta.json time stamp; None when missing or malformed."""
    try:
        return datetime.strptime(str(text), META_TIME)
    except ValueError:
        return None


def span_seconds(meta: Mapping[str, Any]) -> float:
    """Seconds from a meta.json's "started" to its "finished" (0 when either is missing)."""
    start, end = meta_time(meta.get("started")), meta_time(meta.get("finished"))
    if start is None or end is None:
        return 0.0
    return max(0.0, (end - start).total_seconds())
