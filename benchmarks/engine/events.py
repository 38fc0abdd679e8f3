"""Fabric events: links cut, restored and flapping at set times of every run, the same
for every scheme (the experiment file's ``events:``), and ``events.csv``, when each
actually happened.

Each event names a link by its two ends (``s1-s17``, spec node names, either order) and a
time ``at`` in seconds after the run's T0 (flows.csv's start clock):

- ``cut``: the link goes down (both ends, as a pulled cable: the switches see the port
  go down and the controller is told);
- ``restore``: it comes back up;
- ``flap``: down at ``at``, up ``period`` s later, down again after another ``period``,
  ... ; the last change before ``until`` is followed by a restore at ``until``, so the
  link ends up.

The events of a run are expanded into one timeline of link changes (:func:`timeline`)
applied by a thread that starts with the replay (:class:`Scheduler`) and waits on a
monotonic clock, never on a sleep that could drift; a change comes late by the time the
link takes to change (tens of ms) and is recorded with its actual time. A link cut at
the end of a run is restored before the next run (:meth:`Scheduler.stop`), so every run
starts on the whole fabric. Both switch kinds: the link's veth ends go down and up
(``Network.set_link``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dcnlab.model.topology import TopologySpec, neighbours

from . import schema
from .metrics import SummaryRow
from .schema import SpecFileError, from_mapping, join
from .sections import ReportContext, RunContext, register

EVENT_TYPES = ("cut", "restore", "flap")
SLICE_S = 0.05  # the scheduler's longest wait before it looks at the clock again
EVENTS_CSV = "events.csv"
COLUMNS = ["scheme", "load", "seed", "event", "type", "link", "planned", "t", "ok",
           "error"]


@dataclass(frozen=True)
class Event:
    """One entry of ``events:``."""

    at: float = schema.field(unit="seconds", min=0.0)
    type: str = schema.field(choices=EVENT_TYPES)
    link: str = schema.field()
    period: float | None = schema.field(None, unit="seconds", min=0.01)
    until: float | None = schema.field(None, unit="seconds", min=0.0)

    def __post_init__(self) -> None:
        flapping = self.type == "flap"
        if flapping and (self.period is None or self.until is None):
            raise ValueError("a flap needs period and until (seconds)")
        if not flapping and (self.period is not None or self.until is not None):
            raise ValueError(f"period and until are for flap, not {self.type}")
        if flapping and self.until is not None and self.until <= self.at:
            raise ValueError(f"until ({self.until:g} s) must come after at ({self.at:g} s)")

    def ends(self) -> tuple[str, str]:
        a, _, b = self.link.partition("-")
        return a, b


@dataclass(frozen=True)
class Change:
    """One link change of a run's timeline."""

    at: float
    up: bool
    link: str
    event: int  # index into ``events:``
    type: str  # the event's type

    @property
    def kind(self) -> str:
        """What events.csv calls it: a flap's changes are its cuts and restores."""
        if self.type != "flap":
            return self.type
        return "restore" if self.up else "cut"


def parse_events(value: Any, topology: TopologySpec) -> list[Event]:
    """``events:`` as given, each link checked against the topology."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecFileError("events", "expected a list of events, e.g. "
                            "[{at: 5, type: cut, link: s1-s17}]")
    links = {frozenset((lk.a, lk.b)) for lk in topology.links}
    out = []
    for i, item in enumerate(value):
        where = f"events[{i}]"
        event = from_mapping(Event, item, where)
        a, b = event.ends()
        if not a or not b or frozenset((a, b)) not in links:
            near = neighbours(topology.links, a)
            hint = (f"; {a} links to {', '.join(near)}" if near
                    else f"; {a or event.link!r} is no node of {topology.spec}")
            raise SpecFileError(join(where, "link"),
                                f"{event.link!r}: no link between {a} and {b}{hint}")
        out.append(event)
    return out


def timeline(events: Sequence[Event]) -> list[Change]:
    """Every link change of a run, in time order (ties: the order given)."""
    changes: list[Change] = []
    for i, ev in enumerate(events):
        if ev.type in ("cut", "restore"):
            changes.append(Change(ev.at, ev.type == "restore", ev.link, i, ev.type))
            continue
        assert ev.period is not None and ev.until is not None  # __post_init__
        t, up = ev.at, False
        while t < ev.until - 1e-9:
            changes.append(Change(round(t, 9), up, ev.link, i, ev.type))
            t, up = t + ev.period, not up
        if up:  # the last change took it down: restore at until
            changes.append(Change(ev.until, True, ev.link, i, ev.type))
    return sorted(changes, key=lambda c: c.at)  # stable: ties keep their order


class Scheduler:
    """Applies a run's timeline from T0 in its own thread; ``stop()`` ends it and brings
    back up every link it left down. ``apply(link, up)`` changes a link (raises on
    failure, which is recorded, never fatal to the run)."""

    def __init__(self, changes: Sequence[Change], apply: Callable[[str, bool], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.changes = list(changes)
        self.apply = apply
        self.clock = clock
        self.done: list[tuple[Change, float, str]] = []  # (change, t since T0, error)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._down: set[str] = set()
        self._t0 = 0.0

    def start(self, t0: float) -> None:
        """Begin at monotonic time ``t0`` (the replay's T0)."""
        self._t0 = t0
        if self.changes:
            self._thread = threading.Thread(target=self._run, name="fabric-events",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        for change in self.changes:
            due = self._t0 + change.at
            # waits on the stop flag in slices, the clock checked after each: stop()
            # ends it at once, and a wait that returns early cannot apply a change early
            while (left := due - self.clock()) > 0:
                if self._stop.wait(min(left, SLICE_S)):
                    return
            self._change(change)

    def _change(self, change: Change) -> None:
        error = ""
        try:
            self.apply(change.link, change.up)
            (self._down.discard if change.up else self._down.add)(change.link)
        except Exception as exc:  # noqa: BLE001 - recorded in events.csv
            error = f"{type(exc).__name__}: {exc}"
        self.done.append((change, round(self.clock() - self._t0, 4), error))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for link in sorted(self._down):
            try:
                self.apply(link, True)
            except Exception:  # noqa: BLE001 - the next run's network check says so
                pass
        self._down.clear()

    def rows(self, scheme: str, load: float, seed: int) -> list[dict[str, Any]]:
        """events.csv's rows: every change applied, and every one the run ended before."""
        def row(c: Change, t: float | None, error: str) -> dict[str, Any]:
            return {"scheme": scheme, "load": load, "seed": seed, "event": c.event,
                    "type": c.kind, "link": c.link, "planned": c.at, "t": t,
                    "ok": t is not None and not error, "error": error}
        applied = {id(c) for c, _t, _e in self.done}
        return ([row(c, t, err) for c, t, err in self.done]
                + [row(c, None, "the run ended first")
                   for c in self.changes if id(c) not in applied])


def applied(row: Mapping[str, Any]) -> bool:
    """Whether an events.csv row (as read back: booleans are written 1/0) took effect."""
    return str(row.get("ok")) in ("1", "True", "true")


class EventsSection:
    """events.csv: every link change of every run, planned and actual time."""

    name = "events"
    csv = EVENTS_CSV
    columns = COLUMNS

    def wanted(self, spec: Any) -> bool:
        return bool(getattr(spec, "events", None))

    def run_rows(self, ctx: RunContext) -> list[dict[str, Any]]:
        return [dict(r) for r in ctx.events]

    def summary(self, ctx: ReportContext) -> list[SummaryRow]:
        return []

    def text(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> str:
        rows = ctx.rows(EVENTS_CSV)
        if not rows:
            return ""
        late = [float(r["t"]) - float(r["planned"]) for r in rows if applied(r)]
        failed = [r for r in rows if not applied(r)]
        text = (f"Fabric events: {len(rows)} link changes in all runs, "
                f"{len(rows) - len(failed)} applied")
        if late:
            text += f", at most {max(late) * 1e3:.0f} ms after their planned time"
        for r in failed[:5]:
            text += (f"\n  not applied: {r['scheme']} seed {r['seed']} {r['type']} "
                     f"{r['link']} at {r['planned']} s: {r['error']}")
        return text + "\n"

    def plots(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> list[Path]:
        return []


register(EventsSection())
