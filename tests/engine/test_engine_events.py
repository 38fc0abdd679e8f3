"""Fabric events (events.py) in memory: parsing against the topology, the timeline a
flap expands into, the scheduler's timing on a controlled clock, links left down
restored, failures recorded, and the experiment file's ``events:``."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dcnlab.benchmarks.engine import events
from dcnlab.benchmarks.engine.schema import SpecFileError
from dcnlab.benchmarks.engine.spec import load_spec
from dcnlab.topo.spec import parse

FATTREE = parse("fattree:4")


def test_events_parse_and_links_are_checked_against_the_topology() -> None:
    got = events.parse_events([{"at": 5, "type": "cut", "link": "s17-s1"},
                               {"at": "2s", "type": "flap", "link": "s1-s17",
                                "period": "500ms", "until": 4}], FATTREE)
    assert got[0] == events.Event(5.0, "cut", "s17-s1")
    assert (got[1].period, got[1].until) == (0.5, 4.0)
    for bad, why in (
            ([{"at": 1, "type": "cut", "link": "s1-s99"}], "no link between s1 and s99; s1 "
             "links to s13, s17, s5, s9"),
            ([{"at": 1, "type": "cut", "link": "x9-s1"}], "is no node of fattree:4"),
            ([{"at": 1, "type": "melt", "link": "s1-s17"}], "melt"),
            ([{"at": 1, "type": "flap", "link": "s1-s17"}], "needs period and until"),
            ([{"at": 1, "type": "cut", "link": "s1-s17", "period": 1}], "are for flap"),
            ([{"at": 3, "type": "flap", "link": "s1-s17", "period": 1, "until": 2}],
             "must come after"),
            ([{"type": "cut", "link": "s1-s17"}], "required field is missing"),
            ({"at": 1}, "expected a list")):
        with pytest.raises(SpecFileError, match=why):
            events.parse_events(bad, FATTREE)
    assert events.parse_events(None, FATTREE) == []


def test_a_flap_ends_up_and_the_timeline_is_in_time_order() -> None:
    evs = [events.Event(6.0, "restore", "s1-s17"),
           events.Event(2.0, "flap", "s2-s17", period=1.0, until=4.5),
           events.Event(5.0, "cut", "s1-s17")]
    tl = events.timeline(evs)
    assert [(c.at, c.up, c.link, c.event) for c in tl] == [
        (2.0, False, "s2-s17", 1), (3.0, True, "s2-s17", 1), (4.0, False, "s2-s17", 1),
        (4.5, True, "s2-s17", 1), (5.0, False, "s1-s17", 2), (6.0, True, "s1-s17", 0)]
    even = events.timeline([events.Event(0.0, "flap", "a-b", period=1.0, until=2.0)])
    assert [(c.at, c.up) for c in even] == [(0.0, False), (1.0, True)]  # up at the end


class _Clock:
    """A monotonic clock the test moves; the scheduler looks at it after every wait."""

    def __init__(self) -> None:
        self.now = 100.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now


def test_changes_apply_at_their_times_and_the_run_ends_whole() -> None:
    applied: list[tuple[str, bool, float]] = []
    clock = _Clock()

    def apply(link: str, up: bool) -> None:
        applied.append((link, up, clock()))
        if link == "bad-link":
            raise OSError("no such device")

    tl = events.timeline([events.Event(0.05, "cut", "s1-s17"),
                          events.Event(0.1, "cut", "bad-link"),
                          events.Event(30.0, "restore", "s1-s17")])
    sched = events.Scheduler(tl, apply, clock=clock)
    sched.start(t0=clock())
    pause = threading.Event()  # never set: its wait is the poll interval
    for _ in range(1000):  # the clock moves 10 ms per real 10 ms at most
        if len(sched.done) >= 2:
            break
        assert not applied or applied[0][2] >= 100.05  # never before its time
        with clock.lock:
            clock.now += 0.01
        pause.wait(0.01)
    assert len(sched.done) == 2, sched.done
    sched.stop()  # before 30 s: the restore never ran, and stop() brings the link back
    assert applied[0][:2] == ("s1-s17", False) and applied[1][:2] == ("bad-link", False)
    assert applied[-1][:2] == ("s1-s17", True)
    rows = sched.rows("ecmp", 0.4, 2)
    assert [(r["type"], r["link"], r["planned"], r["ok"]) for r in rows] == [
        ("cut", "s1-s17", 0.05, True), ("cut", "bad-link", 0.1, False),
        ("restore", "s1-s17", 30.0, False)]
    assert 0.05 <= rows[0]["t"] <= rows[1]["t"] and rows[1]["t"] >= 0.1
    assert rows[1]["error"] == "OSError: no such device"
    assert rows[2]["t"] is None and rows[2]["error"] == "the run ended first"


def test_no_events_no_thread() -> None:
    sched = events.Scheduler([], lambda link, up: None)
    sched.start(0.0)
    sched.stop()
    assert sched.rows("s", 0.1, 1) == []


def test_experiment_files_take_events(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text("name: t\ntopology: fattree:4\nschemes: [{app: dcnlab.apps.ecmp}]\n"
                    "workload: {type: poisson}\nloads: [0.1]\nseeds: [1]\nduration: 1\n"
                    "events:\n  - {at: 0.5, type: cut, link: s1-s17}\n")
    assert load_spec(path).events == [events.Event(0.5, "cut", "s1-s17")]
    path.write_text(path.read_text().replace("s1-s17", "s1-s2"))
    with pytest.raises(SpecFileError, match=r"events\[0\].link: 's1-s2': no link"):
        load_spec(path)
