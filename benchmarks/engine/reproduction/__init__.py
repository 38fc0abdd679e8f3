"""Reproductions as code: a paper's claims as data, its experiments run by the engine,
each claim's verdict computed by one rule, and the document generated from a summary.

Modules, one concern each:

- ``papers``: paper files (benchmarks/papers/p00N.yaml): schema, validation against the
  experiment files, the registry of paper ids;
- ``tables``: where a claim's metric lives -- which metrics each results table produces,
  and reading one value per run back from a results directory;
- ``verdict``: THE rule (the measured comparison, the four verdicts, seeds needed);
- ``extract``: results directories -> the summary (reproduction.json);
- ``evaluate``: paper + summary -> per claim and sweep value, the comparison and verdict;
- ``document`` / ``figure``: REPRODUCTION.md and claims.png from them;
- ``runner``: ``dcnlab reproduce`` and ``dcnlab report --reproduction``;
- ``publish``: docs/reproductions/ (the committed documents and their summaries).

Nothing here is imported by the engine itself; the CLI imports it when asked.
"""
