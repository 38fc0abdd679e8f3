"""The unit of work on a cluster, and the plan of an experiment's tasks.

A task is one network's worth of runs, the same network a local run would build:

- ``network: per_scheme``: one task per (scheme, seed): every sweep value of that seed
  runs on one network of that scheme, one after another with the experiment's settle
  pause, exactly as locally.  A task per scheme (all its seeds on one network, the local
  run's grouping) would cap the parallelism at the number of schemes (four machines for
  a TCP-Path reproduction, however many there are); a task per run would start a
  network per run and change what ``per_scheme`` means.  Seeds are the experiment's
  independent repetitions, so they are where it splits.  What differs from a local run
  is that a scheme's seeds do not share one network: each starts on a fresh one (a
  local per_scheme run carries learned state, such as ARP-Path's tables, from one seed
  to the next after the settle pause); a host part of the scheme runs on the hosts that
  send TCP in that seed's runs (locally: in any run).
- ``network: per_run``: one task per run, as locally.

Tasks are listed scheme by scheme, seed by seed (the local order), so with as many
machines as tasks the results arrive in about the order a local run writes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..spec import ExperimentSpec
from ..table import fmt

Run = tuple[str, int, float]  # (scheme, seed, sweep value), as runner.runs_todo lists them


@dataclass(frozen=True)
class Task:
    scenario: int  # index into the experiment's specs (its scenarios, or the one spec)
    scheme: str
    seed: int
    runs: tuple[Run, ...]  # in the order they run on the task's network
    label: str  # unique in the experiment: "[scenario/]scheme/seedN[_loadV]"

    @property
    def values(self) -> tuple[float, ...]:
        return tuple(value for _, _, value in self.runs)


def plan(specs: list[ExperimentSpec], todo: list[set[Run]]) -> list[Task]:
    """The tasks that run ``todo[i]`` of ``specs[i]``, in the local run's order."""
    tasks: list[Task] = []
    for index, (spec, runs) in enumerate(zip(specs, todo, strict=True)):
        where = f"{spec.scenario}/" if spec.scenario else ""
        for scheme in spec.schemes:
            for seed in spec.seeds:
                mine = [(scheme.name, seed, float(v)) for v in spec.loads
                        if (scheme.name, seed, float(v)) in runs]
                if not mine:
                    continue
                if spec.network == "per_scheme":
                    tasks.append(Task(index, scheme.name, seed, tuple(mine),
                                      f"{where}{scheme.name}/seed{seed}"))
                else:
                    tasks += [Task(index, scheme.name, seed, (run,),
                                   f"{where}{scheme.name}/seed{seed}_{spec.sweep}"
                                   f"{fmt(run[2])}") for run in mine]
    return tasks


def runs_of(tasks: Iterable[Task]) -> set[tuple[int, Run]]:
    """Every (scenario, run) the tasks hold."""
    return {(t.scenario, run) for t in tasks for run in t.runs}
