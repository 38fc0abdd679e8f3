"""docs/reproductions/: the committed documents, generated, never edited by hand.

Per paper, ``p00N.json`` (the summary of a real run: reproduction.json as ``dcnlab
reproduce`` wrote it), ``p00N.md`` (the document) and ``p00N_claims.png`` (its figure),
the last two rendered from the first and the paper file.  A test
(tests/unit/test_docs_reproductions.py) renders every committed document again and fails
if a byte differs, so a hand edit, a changed paper file or a changed generator shows up
until the documents are rendered again::

    # commit a run's summary and render its document
    python -m dcnlab.benchmarks.engine.reproduction.publish p002 --from results/p002
    # render every committed document again from its committed summary
    python -m dcnlab.benchmarks.engine.reproduction.publish --all
    # fold the experiments a results directory holds into the committed summary (a
    # paper that gained an experiment, a scenario run again): the rest stays as it was
    python -m dcnlab.benchmarks.engine.reproduction.publish p002 --update DIR
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..results import ResultsError, read_json
from . import document, papers
from .errors import ReproductionError
from .extract import SUMMARY_JSON, extract
from .runner import write

DOCS_DIR = papers.BENCHMARKS.parent / "docs" / "reproductions"


def names(paper_id: str) -> tuple[str, str, str]:
    """(summary, document, figure) file names of a paper's committed reproduction."""
    return f"{paper_id}.json", f"{paper_id}.md", f"{paper_id}_claims.png"


def committed(docs: Path = DOCS_DIR) -> tuple[list[str], list[str]]:
    """The paper ids with a committed summary, and those with a committed document."""
    def ids(suffix: str) -> list[str]:
        return sorted(p.stem for p in docs.glob(f"*{suffix}")
                      if papers.PAPER_ID.fullmatch(p.stem)) if docs.is_dir() else []
    return ids(".json"), ids(".md")


def summary_of(paper_id: str, docs: Path = DOCS_DIR) -> dict[str, Any]:
    try:
        return read_json(docs / names(paper_id)[0])
    except ResultsError as exc:
        raise ReproductionError(str(exc)) from None


def render(paper: papers.Paper, summary: dict[str, Any]) -> str:
    """The committed document's text (what the test compares byte for byte)."""
    summary_name, _doc, figure_name = names(paper.paper)
    return document.render(paper, summary, figure_name, summary_name)


def publish(paper_id: str, source: Path | None = None, docs: Path = DOCS_DIR,
            papers_dir: Path | None = None, experiments: Path | None = None,
            update: Path | None = None) -> list[Path]:
    """Render ``paper_id``'s committed document and figure, from the summary in the
    results directory ``source`` (copied in), from the committed summary updated with
    the experiments the results directory ``update`` holds (extract.extract's update),
    or, without either, from the committed summary."""
    paper = papers.load(paper_id, papers_dir, experiments)
    if update is not None:
        if not update.is_dir():
            raise ReproductionError(f"--update {update}: no such directory")
        summary = extract(paper, update, previous=summary_of(paper_id, docs))
    elif source is not None:
        try:
            summary = read_json(source / SUMMARY_JSON)
        except ResultsError as exc:
            raise ReproductionError(f"{exc} (run dcnlab report {source} --reproduction "
                                    f"{paper_id} first)") from None
    else:
        summary = summary_of(paper_id, docs)
    docs.mkdir(parents=True, exist_ok=True)
    return write(paper, summary, docs, names(paper_id))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dcnlab.benchmarks.engine.reproduction.publish",
        description="Render docs/reproductions/ from committed summaries, or commit a "
        "run's summary first (--from).")
    parser.add_argument("papers", nargs="*", metavar="PAPER", help="paper ids (p002)")
    parser.add_argument("--from", dest="source", type=Path, metavar="DIR", default=None,
                        help="a dcnlab reproduce output directory whose reproduction.json "
                        "becomes the committed summary (one PAPER)")
    parser.add_argument("--update", type=Path, metavar="DIR", default=None,
                        help="a results directory laid out as dcnlab reproduce lays it out "
                        "(DIR/<experiment>/<scenario>) holding some of the paper's "
                        "experiments: their values replace or join the committed "
                        "summary's, the rest stay (one PAPER)")
    parser.add_argument("--all", action="store_true",
                        help="every paper with a committed summary")
    parser.add_argument("--docs", type=Path, default=DOCS_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    wanted = list(args.papers) + (committed(args.docs)[0] if args.all else [])
    if args.source is not None and args.update is not None:
        parser.error("give --from or --update, not both")
    one = args.source is not None or args.update is not None
    if not wanted or (one and len(wanted) != 1):
        parser.error("give one PAPER with --from or --update, or PAPER... / --all")
    try:
        for paper_id in dict.fromkeys(wanted):
            for path in publish(paper_id, args.source, args.docs, update=args.update):
                print(path)
    except ReproductionError as exc:
        print(f"publish: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
