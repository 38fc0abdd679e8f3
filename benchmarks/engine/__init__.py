"""Comparative experiments: workloads, traffic agents, runs, metrics, reports.

Public API::

    from dcnlab.benchmarks.engine import run_experiment, report, load_spec

    result = run_experiment("benchmarks/experiments/ecmp_vs_single.yaml", "results/x")
    print(result.table)
    print(report("results/x").table)      # re-render from saved data, no rerun

Modules, one concern each: ``cdf`` (size distributions), ``workloads`` (flow lists and
the load formula), ``marking`` (elephant ports/DSCP), ``tcpinfo`` (struct tcp_info),
``agent`` (the per-host traffic process), ``replay`` (running agents for one flow list),
``spec`` + ``schema`` (YAML experiment specs), ``runner`` (run_experiment), ``metrics``
(classes, percentiles, CIs, ratios), ``controller_stats`` (what the app did per run),
``fairness`` (Jain's index and throughput per period from receiver counts), ``flowtap``
(which fabric links each flow crossed: a tc classifier, and port loads over time),
``flowdiag`` (elephants sharing links, least-loaded choices), ``sections`` (the
result-section seam: a family's CSV, summary rows, text and plots behind one protocol and
a registry), ``slowdown`` (FCT over the ideal FCT, by flow size), ``imbalance`` (up-port
utilization max/mean per sample), ``throughput`` (delivered Mbit/s over time),
``results`` (files),
``table``/``plots``/``reporting`` (rendering), ``progress`` (the bar), ``environment``
(versions and machine).
"""

from __future__ import annotations

import importlib
from typing import Any

# Exports are resolved lazily: the traffic agent (``python -m ...engine.agent``) imports
# this package first, and sixteen agents must not each load numpy, scipy and matplotlib.
_EXPORTS = {
    "ExperimentError": "runner",
    "RunResult": "runner",
    "run_experiment": "runner",
    "ReportResult": "reporting",
    "report": "reporting",
    "ResultsError": "results",
    "SpecFileError": "schema",
    "ExperimentSpec": "spec",
    "load_spec": "spec",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
