"""A task's results folded into the experiment's directory, so a cluster run's directory
holds the same files and columns as a local run's.

Every CSV the task's part wrote (flows, network, paths, controller, switch, fairness,
diagnosis files) is appended to the experiment's file of that name, except the part's
``not_run`` flow rows: the client writes those once at the end, for every run no task
finished, with its reason.  The part's per-run directories go under ``runs/`` as
locally; its meta.json runs and networks join the experiment's, each with the worker
that ran it (``worker``: ``host/name``) and its ``run_dir`` moved to where it is now.
The child's log is kept as ``cluster/<task>.log``.
"""

from __future__ import annotations

import csv
import io
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results import FLOWS_CSV, META_JSON, CsvAppender, read_json
from ..runner import NOT_RUN
from . import child
from .tasks import Run
from .worker import LOG, Outcome

LOGS = "cluster"  # the experiment's subdirectory for the tasks' logs
NOT_MERGED = {"workload.csv"}  # the client's own, generated once


@dataclass
class Part:
    """What a task's part said about itself."""

    status: str  # its meta.json status ("complete", "failed", "interrupted"; "missing")
    runs: set[Run] = field(default_factory=set)  # the runs it finished
    errors: list[str] = field(default_factory=list)
    rows: int = 0  # flow rows merged
    not_ok: int = 0  # of which not "ok"


def merge(out: Path, meta: dict[str, Any], outcome: Outcome) -> Part:
    """Fold ``outcome`` into ``out`` and ``meta`` (the experiment's, written by the
    caller); return what the part ran."""
    with tempfile.TemporaryDirectory(prefix="dcnlab-merge-") as tmp:
        where = Path(tmp)
        with tarfile.open(fileobj=io.BytesIO(outcome.archive), mode="r:gz") as tar:
            # the "data" filter (no absolute paths, links out, devices) where this
            # Python has it (3.11.4 on; older Debian 12 builds may not)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(where, filter="data")
            else:
                tar.extractall(where)  # written by our own worker
        logs = out / LOGS
        logs.mkdir(exist_ok=True)
        if (where / LOG).exists():
            shutil.copyfile(where / LOG, logs / (outcome.label.replace("/", "_") + ".log"))
        part_dir = where / child.OUT
        if not (part_dir / META_JSON).exists():
            return Part("missing", errors=[_no_results(outcome, where / LOG)])
        part_meta = read_json(part_dir / META_JSON)
        part = Part(str(part_meta.get("status")), errors=list(part_meta.get("errors", [])))
        for path in sorted(part_dir.glob("*.csv")):
            if path.name not in NOT_MERGED:
                _append(path, out / path.name, part)
        if (part_dir / "runs").is_dir():
            shutil.copytree(part_dir / "runs", out / "runs", dirs_exist_ok=True)
    for key in ("runs", "networks"):
        for entry in part_meta.get(key, []):
            if entry.get("run_dir"):
                entry["run_dir"] = str(out.joinpath(*Path(entry["run_dir"]).parts[-3:]))
            meta.setdefault(key, []).append({**entry, "worker": outcome.worker})
    part.runs = {(r["scheme"], int(r["seed"]), float(r["load"]))
                 for r in part_meta.get("runs", [])}
    return part


def _append(source: Path, target: Path, part: Part) -> None:
    flows = source.name == FLOWS_CSV
    with open(source, newline="") as fh:
        reader = csv.DictReader(fh)
        rows = [r for r in reader if not (flows and r.get("status") == NOT_RUN)]
        columns = list(reader.fieldnames or [])
    if not columns:
        return
    appender = CsvAppender(target, columns)
    try:
        written = appender.write(rows)
    finally:
        appender.close()
    if flows:
        part.rows += written
        part.not_ok += sum(1 for r in rows if r.get("status") != "ok")


def _no_results(outcome: Outcome, log: Path) -> str:
    tail = log.read_text(errors="replace").strip().splitlines()[-5:] if log.exists() else []
    return (f"task {outcome.label} on {outcome.worker} wrote no results (exit status "
            f"{outcome.returncode})" + (": " + " | ".join(tail) if tail else ""))
