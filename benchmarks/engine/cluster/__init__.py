"""``dcnlab run EXPERIMENT.yaml --cluster TARGET``: an experiment's runs spread over
machines with Dask distributed, and brought back as one results directory identical in
form to a local run's (docs/cluster.md).

The parts, one concern each:

- :mod:`.tasks`: the unit of work (which runs share a network on a worker) and the plan;
- :mod:`.targets`: the kinds of cluster (``local:N``, ``tcp://``, ``ssh:``, ``slurm``), a
  registry the CLI validates against;
- :mod:`.facts`: what each worker is (commit, root, switch kinds, host parts), compared
  with the client before anything runs;
- :mod:`.worker`: what a task does on its worker: the runs in a child process, progress
  forwarded as Dask events, the child stopped on request or when the worker dies;
- :mod:`.child`: that child process (the local runner on a part of the experiment);
- :mod:`.merge`: a task's results folded into the experiment's directory;
- :mod:`.driver`: the client: check workers, submit, follow progress, merge, report.

Nothing is imported here: the CLI reads :mod:`.targets` for its help without loading
Dask or the engine.
"""
