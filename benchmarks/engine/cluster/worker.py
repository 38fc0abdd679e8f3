"""What a task does on its worker (:func:`run_task`), and stopping tasks
(:func:`stop_tasks`, sent to every worker by the client on Ctrl-C).

``run_task`` checks the worker (:mod:`.facts`), writes the task into a directory of its
own (``dcnlab-task-<token>-*`` in the system's temporary directory), runs it in a child
process (:mod:`.child`), forwards the child's progress as Dask events on the topic
:func:`topic` (the client subscribes), and returns the child's results as a tar archive
(:class:`Outcome`); the directory is removed either way.  If the worker dies, the child
sees its stdin close and stops its networks itself; Dask gives the task to another
worker (``distributed.scheduler.allowed-failures``: the client sets 1, one retry).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..spec import ExperimentSpec
from ..workloads import Flow
from . import child, facts
from .tasks import Task

LOG = "child.log"  # the child's stdout and stderr, in the returned archive
_lock = threading.Lock()
_children: dict[str, list[subprocess.Popen[bytes]]] = {}  # token -> running children


class WorkerRefused(RuntimeError):
    """This worker cannot run the client's tasks (facts.refusals says why)."""


class TaskStopped(RuntimeError):
    """The client stopped the experiment before this task's runs began."""


@dataclass(frozen=True)
class Payload:
    token: str  # the experiment's, unique per `dcnlab run --cluster`
    task: Task
    spec: ExperimentSpec
    workloads: dict[tuple[int, float], list[Flow]]  # the task's runs' flow lists
    needs: facts.Needs
    client: dict[str, Any]  # the client's facts.code_identity()


@dataclass(frozen=True)
class Outcome:
    label: str  # the task's
    worker: str  # "host/name" of the worker that ran it
    returncode: int  # the child's (child.EXIT_*)
    archive: bytes  # tar of the child's out directory and its log


def topic(token: str) -> str:
    return f"dcnlab-progress-{token}"


def worker_label() -> str:
    """``host/name`` of this Dask worker (its name is what `dask worker --name` set)."""
    from distributed import get_worker

    return f"{socket.gethostname()}/{get_worker().name}"


def run_task(payload: Payload) -> Outcome:
    from distributed import get_worker

    label = worker_label()
    why = facts.refusals(label, facts.worker_facts(payload.needs), payload.client)
    if why:
        raise WorkerRefused("; ".join(why))
    worker = get_worker()
    task_dir = Path(tempfile.mkdtemp(prefix=f"dcnlab-task-{payload.token}-"))
    try:
        with open(task_dir / child.TASK_FILE, "wb") as fh:
            pickle.dump((payload.spec, payload.workloads, payload.task.runs), fh)
        read_fd, write_fd = os.pipe()
        with _lock:
            # the client sets the flag before it signals the children (stop_everywhere):
            # a task past this check is registered before stop_tasks takes the lock
            if _stop_event(payload.token).is_set():
                os.close(read_fd)
                os.close(write_fd)
                raise TaskStopped(f"{payload.task.label}: the experiment was stopped")
            with open(task_dir / LOG, "wb") as log:
                # its own session: a Ctrl-C at a terminal running a local cluster goes to
                # the client, which stops the tasks; the child must not die half-way
                proc = subprocess.Popen(
                    [sys.executable, "-m", "dcnlab.benchmarks.engine.cluster.child",
                     str(task_dir), str(write_fd)], stdin=subprocess.PIPE, stdout=log,
                    stderr=subprocess.STDOUT, pass_fds=(write_fd,), start_new_session=True)
            _children.setdefault(payload.token, []).append(proc)
        os.close(write_fd)
        attempt = f"{label}:{proc.pid}"
        try:
            with os.fdopen(read_fd) as events:
                for line in events:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    worker.log_event(topic(payload.token), {
                        **event, "task": payload.task.label, "worker": label,
                        "attempt": attempt})
            returncode = proc.wait()
        finally:
            if proc.poll() is None:  # this thread failed while the child runs: stop it
                proc.send_signal(signal.SIGTERM)
                proc.wait()
            with _lock:
                _children.get(payload.token, []).remove(proc)
            if proc.stdin is not None:
                proc.stdin.close()
        return Outcome(payload.task.label, label, returncode, _archive(task_dir))
    finally:
        shutil.rmtree(task_dir, ignore_errors=True)


def _archive(task_dir: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        if (task_dir / child.OUT).exists():
            tar.add(task_dir / child.OUT, arcname=child.OUT)
        tar.add(task_dir / LOG, arcname=LOG)
    return buffer.getvalue()


def _stop_event(token: str, client: Any = None) -> Any:
    """The experiment's stop flag on the scheduler, which every worker sees, one that
    joined (or restarted) after the client stopped included."""
    from distributed import Event

    return Event(f"dcnlab-stop-{token}", client=client)


def stop_everywhere(client: Any, token: str, running: bool) -> None:
    """The client's stop: no task of ``token`` starts any more, and with ``running``
    every running one gets SIGTERM on its worker (:func:`stop_tasks`)."""
    _stop_event(token, client).set()
    if running:
        client.run(stop_tasks, token)


def stop_tasks(token: str) -> list[int]:
    """Run on every worker (``client.run``): SIGTERM to each running child of ``token``
    (it stops its networks and keeps the runs it finished).  Returns the PIDs signalled."""
    with _lock:
        children = [p for p in _children.get(token, []) if p.poll() is None]
        for proc in children:
            proc.send_signal(signal.SIGTERM)
    return [proc.pid for proc in children]
