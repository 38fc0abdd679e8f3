"""Which papers there are: the ``p<NNN>.yaml`` files of ``benchmarks/papers/``.

Kept apart from papers.py (which loads experiment specs, numpy and the engine's tables)
because the dcnlab command lists the paper ids in its help and argument choices every
time it starts, and must stay quick to start.
"""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2]
PAPERS_DIR = BENCHMARKS / "papers"
EXPERIMENTS_DIR = BENCHMARKS / "experiments"
PAPER_ID = re.compile(r"p[0-9]{3}")


def paper_ids(directory: Path | None = None) -> list[str]:
    """The papers there are files for (``p000``...), sorted."""
    base = PAPERS_DIR if directory is None else directory
    if not base.is_dir():
        return []
    return sorted(p.stem for p in base.glob("*.yaml") if PAPER_ID.fullmatch(p.stem))
