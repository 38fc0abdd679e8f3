"""Where a cluster run's workers come from: ``--cluster TARGET``.

One registry (:data:`KINDS`) drives parsing, the CLI's help and the errors:

- ``local:N``: a Dask ``LocalCluster`` of N worker processes on this machine (tests, and
  machines with many cores: N emulations side by side);
- ``tcp://HOST:PORT``: an existing Dask scheduler; its workers were started with
  ``dcnlab worker tcp://HOST:PORT`` (or ``dask worker ... --nthreads 1 --resources
  machine=1``) on each machine, as root;
- ``ssh:HOST1,HOST2,...``: Dask's ``SSHCluster``, one worker per host (the scheduler on
  the first), each started with this checkout's interpreter path (the same path on every
  host; ``DCNLAB_CLUSTER_PYTHON`` names another);
- ``slurm[:KEY=VALUE,...]``: dask-jobqueue's ``SLURMCluster``, one exclusive-node job per
  worker; keys ``jobs`` (default 2), ``queue``, ``account``, ``walltime``, ``memory``
  (default 4GB), ``cores`` (default 2), ``python``.

Every worker declares ``machine=1`` and runs one task at a time (one thread); every
task asks for ``machine``, so a machine carries one emulation at a time.  Clusters this
module starts get ``distributed.scheduler.allowed-failures`` = 1: a task whose worker
dies is given to another worker once, and recorded ``not_run`` if that one dies too.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .facts import RESOURCE

ALLOWED_FAILURES = 1  # a dead worker's task is retried once (docs/cluster.md)
# a worker as `dcnlab worker` starts one (ssh: starts them through Dask's SSHCluster)
WORKER_OPTIONS: dict[str, Any] = {"nthreads": 1, "resources": {RESOURCE: 1}, "memory_limit": 0}


class ClusterTargetError(ValueError):
    """A --cluster value that names no cluster, or names one badly."""


@dataclass(frozen=True)
class ClusterKind:
    prefix: str  # "local:", "tcp://", "ssh:", "slurm"
    usage: str
    summary: str
    # the text after the prefix -> a started cluster's client, closed on exit
    open: Callable[[str], Any]
    check: Callable[[str], object]  # raises ClusterTargetError; nothing is started
    workers: Callable[[str], int]  # how many workers to wait for before checking them
    wait_s: float  # how long to wait for them (a Slurm queue can take a while)


def _python() -> str:
    return os.environ.get("DCNLAB_CLUSTER_PYTHON", sys.executable)


def _dask_config() -> Any:
    import dask

    return dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES})


def _check_local(arg: str) -> None:
    if not arg.isdigit() or int(arg) < 1:
        raise ClusterTargetError(f"local:{arg}: give a number of workers, local:2")


@contextmanager
def _open_local(arg: str) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with _dask_config(), LocalCluster(
            n_workers=int(arg), threads_per_worker=1, processes=True,
            resources={RESOURCE: 1}, dashboard_address=None, memory_limit=0,
            silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        yield client


def _check_tcp(arg: str) -> None:
    host, _, port = arg.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterTargetError(f"tcp://{arg}: give the scheduler as tcp://HOST:PORT")


@contextmanager
def _open_tcp(arg: str) -> Iterator[Any]:
    from distributed import Client

    with Client(f"tcp://{arg}", timeout="30s") as client:
        yield client


def _ssh_hosts(arg: str) -> list[str]:
    hosts = [h.strip() for h in arg.split(",") if h.strip()]
    if not hosts:
        raise ClusterTargetError("ssh: give the machines, ssh:HOST1,HOST2,...")
    return hosts


@contextmanager
def _open_ssh(arg: str) -> Iterator[Any]:
    from distributed import Client, SSHCluster

    hosts = _ssh_hosts(arg)
    # SSHCluster's first host runs the scheduler, the others a worker each
    with _dask_config(), SSHCluster(
            [hosts[0], *hosts], remote_python=_python(),
            worker_options=WORKER_OPTIONS,
            scheduler_options={"port": 0, "dashboard_address": None}) as cluster, \
            Client(cluster) as client:
        yield client


SLURM_KEYS = ("jobs", "queue", "account", "walltime", "memory", "cores", "python")


def slurm_options(arg: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for item in filter(None, arg.split(",")):
        key, eq, value = item.partition("=")
        if not eq or key not in SLURM_KEYS:
            raise ClusterTargetError(f"slurm:{arg}: {item!r} is not KEY=VALUE with KEY one "
                                     f"of {', '.join(SLURM_KEYS)}")
        options[key] = value
    if not options.get("jobs", "2").isdigit() or int(options.get("jobs", "2")) < 1:
        raise ClusterTargetError(f"slurm:{arg}: jobs must be a number of workers")
    return options


@contextmanager
def _open_slurm(arg: str) -> Iterator[Any]:
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    options = slurm_options(arg)
    jobs = int(options.pop("jobs", "2"))
    with _dask_config(), SLURMCluster(
            cores=int(options.pop("cores", "2")), memory=options.pop("memory", "4GB"),
            processes=1, python=options.pop("python", _python()),
            job_extra_directives=["--exclusive"],  # the node is the emulation's alone
            worker_extra_args=["--nthreads", "1", "--resources", f"{RESOURCE}=1"],
            **options) as cluster, Client(cluster) as client:
        cluster.scale(jobs=jobs)
        yield client


KINDS: tuple[ClusterKind, ...] = (
    ClusterKind("local:", "local:N", "N worker processes on this machine", _open_local,
                _check_local, int, 120.0),
    ClusterKind("tcp://", "tcp://HOST:PORT", "an existing Dask scheduler", _open_tcp,
                _check_tcp, lambda arg: 1, 60.0),
    ClusterKind("ssh:", "ssh:HOST1,HOST2,...", "one worker per machine over SSH", _open_ssh,
                _ssh_hosts, lambda arg: len(_ssh_hosts(arg)), 300.0),
    ClusterKind("slurm", "slurm[:KEY=VALUE,...]", "one exclusive Slurm job per worker",
                _open_slurm, slurm_options, lambda arg: 1, 3600.0),
)


def parse_target(text: str) -> tuple[ClusterKind, str]:
    """The kind of cluster ``text`` names and the rest of it; ClusterTargetError if none
    or badly."""
    for kind in KINDS:
        if text.startswith(kind.prefix):
            arg = text[len(kind.prefix):]
            if kind.prefix == "slurm":
                if arg and not arg.startswith(":"):
                    continue
                arg = arg[1:]
            kind.check(arg)
            return kind, arg
    raise ClusterTargetError(f"--cluster {text!r}: give one of "
                             + ", ".join(k.usage for k in KINDS))


def usage() -> str:
    return "; ".join(f"{k.usage}: {k.summary}" for k in KINDS)
