"""A task's runs, in a process of their own on the worker:
``python -m dcnlab.benchmarks.engine.cluster.child TASK_DIR EVENT_FD``.

Why a process: the runner turns SIGTERM into a clean stop (every network it started is
stopped and removed, the runs so far are kept), which needs a main thread; a Dask worker
runs tasks in threads, which no signal reaches.  So the worker starts this child, and
stopping a task is a SIGTERM to it (:func:`.worker.stop_tasks`).

The child reads ``TASK_DIR/task.pkl`` (the spec, the task's flow lists and runs, sent by
the client), runs them with the local runner into ``TASK_DIR/out`` without rendering
(the client renders the merged experiment once), and writes its progress to the file
descriptor ``EVENT_FD``, one JSON object a line.  Its stdin is a pipe from the worker
that is never written: end of file means the worker died (killed, out of memory), and
the child then stops as on SIGTERM and removes ``TASK_DIR`` (no one will collect it).

Exit status: 0 every run ran, 1 a run or network failed (the part's meta.json says
why), 130 stopped by SIGTERM.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import IO, Any

from ..progress import Progress

TASK_FILE = "task.pkl"
OUT = "out"
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


class EventProgress(Progress):
    """The runner's progress, as JSON lines for the worker to forward (nothing drawn)."""

    def __init__(self, stream: IO[str], total: int, runs: int) -> None:
        super().__init__(total, enabled=False, runs=runs)
        self._events = stream
        self._lock = threading.Lock()

    def _send(self, **event: Any) -> None:
        with self._lock:
            try:
                self._events.write(json.dumps(event) + "\n")
                self._events.flush()
            except (OSError, ValueError):  # the worker stopped reading: the runs go on
                pass

    def set_phase(self, phase: str) -> None:
        super().set_phase(phase)
        self._send(kind="phase", text=phase)

    def advance(self, n: int = 1) -> None:
        super().advance(n)
        self._send(kind="done", value=self.done)

    def run_done(self) -> None:
        super().run_done()
        self._send(kind="run_done")

    def message(self, text: str) -> None:
        self._send(kind="message", text=text)


def _stop_when_orphaned(orphaned: threading.Event) -> None:
    """Block on stdin; at end of file (the worker is gone) stop this process as SIGTERM
    does.  The worker never writes, so nothing but its death ends the read.  The file
    descriptor, not sys.stdin: a daemon thread blocked in sys.stdin's buffer holds its
    lock, and the interpreter aborts at exit when it cannot take it."""
    while os.read(0, 4096):
        pass
    orphaned.set()
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str]) -> int:
    from ..fabric import Mininet
    from ..runner import _run_spec, runs_todo

    task_dir, events_fd = Path(argv[0]), int(argv[1])

    def interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one clean stop; SIGKILL still ends it
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is the client's
    orphaned = threading.Event()
    threading.Thread(target=_stop_when_orphaned, args=(orphaned,), daemon=True).start()
    # not inherited: Mininet starts its shells with close_fds=False, and a shell holding
    # the pipe would keep the worker reading after this process ended
    os.set_inheritable(events_fd, False)
    events = os.fdopen(events_fd, "w")
    try:
        with open(task_dir / TASK_FILE, "rb") as fh:
            spec, workloads, runs = pickle.load(fh)
        done = runs_todo(spec, None) - set(runs)  # the experiment's other runs
        bar = EventProgress(events, sum(len(f) for f in workloads.values()), len(runs))
        result = _run_spec(spec, task_dir / OUT, workloads, bar, done, Mininet(),
                           render=False)
        return EXIT_FAILED if result.errors else 0
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        events.close()
        if orphaned.is_set():
            shutil.rmtree(task_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
