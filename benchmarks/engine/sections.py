"""Result sections: one family of per-run results each, behind one protocol, so the runner
and the report loop over a registry instead of wiring every family by hand.

A section may record rows during the experiment (``csv`` and ``columns``: the runner
opens ``OUT/<csv>`` when the section is ``wanted`` by the experiment and appends
``run_rows`` after every run) and contributes to the report from the saved data alone:
``summary`` rows (into summary.csv, with the baseline), a ``text`` block (into
summary.txt) and ``plots``. A section that only reads flows.csv records nothing (``csv``
None). Sections are reported in registration order, after the families still wired by
hand in runner.py and reporting.py (they move here one by one).

A new family plugs in with :func:`register` from its own module, named in ``BUILTIN``
(imported on the registry's first use: the package itself loads lazily, for the traffic
agents' sake) or imported by whoever adds it; nothing in the runner or the report changes.
"""

from __future__ import annotations

import csv
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dcnlab.model.topology import TopologySpec

from .metrics import SummaryRow


@dataclass(frozen=True)
class RunContext:
    """What a section sees of a finished run."""

    scheme: str
    load: float  # the sweep value
    seed: int
    topology: TopologySpec  # the network's
    t0: float  # the replay's T0 (wall clock): flows.csv's start times count from it
    flows: Sequence[Mapping[str, Any]]  # the run's flows.csv rows
    # each switch's stats lines written during the run (switch_ext; {} on other kinds)
    stats_lines: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    # the fabric events' link changes of the run (events.py), as events.csv rows
    events: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class ReportContext:
    """What a section sees of a results directory when the report is rendered."""

    out: Path
    spec: Mapping[str, Any]  # meta.json's "spec"
    flows: Sequence[Mapping[str, Any]]  # flows.csv
    baseline: str | None
    sweep: str
    schemes: Sequence[str]  # in the experiment's order
    topology: TopologySpec | None  # the experiment's; None if unknown or unparsable
    plots_dir: Path

    def rows(self, name: str) -> list[dict[str, str]]:
        """A CSV of the results directory, [] if it is not there."""
        path = self.out / name
        if not path.is_file():
            return []
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))


class Section(Protocol):
    name: str
    csv: str | None  # the file it records into during runs; None: report only
    columns: Sequence[str]

    def wanted(self, spec: Any) -> bool:
        """Whether the experiment (an ExperimentSpec) records this section's CSV."""
        ...

    def run_rows(self, ctx: RunContext) -> list[dict[str, Any]]: ...

    def summary(self, ctx: ReportContext) -> list[SummaryRow]: ...

    def text(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> str: ...

    def plots(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> list[Path]: ...


# the engine's own sections, in report order: each module registers the section of its
# own name
BUILTIN = ("slowdown", "imbalance", "throughput", "events")
_REGISTRY: dict[str, Section] = {}
_loaded = False


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN:
            importlib.import_module(f"{__package__}.{module}")


def register(section: Section) -> Section:
    if section.name in _REGISTRY and _REGISTRY[section.name] is not section:
        raise ValueError(f"result section {section.name!r} is registered twice")
    _REGISTRY[section.name] = section
    return section


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def registered() -> list[Section]:
    """The engine's own sections in BUILTIN order (whatever imported them first), then
    the others in the order they registered."""
    _load_builtin()
    own = [_REGISTRY[n] for n in BUILTIN if n in _REGISTRY]
    return own + [s for n, s in _REGISTRY.items() if n not in BUILTIN]


def names() -> list[str]:
    return [s.name for s in registered()]


def recording(spec: Any) -> list[Section]:
    """The sections whose CSV the experiment ``spec`` records."""
    return [s for s in registered() if s.csv is not None and s.wanted(spec)]
