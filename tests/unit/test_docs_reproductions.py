"""No hand edit survives in a reproduction document, and docs/reproductions.md says what
the code does.

- Every committed docs/reproductions/p00N.md has its summary p00N.json (and figure) and
  is, byte for byte, what the generator renders from that summary and the paper file; the
  same for the committed fixture (tests/fixtures/reproduction/), so the generator is
  exercised even before any real document is committed.
- docs/reproductions.md lists every field of a paper file with its real default and an
  example that loads (as docs/experiments.md does for experiment files: its table parser
  is reused), names exactly the tables tables.py knows, and quotes the rule verbatim.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import shutil
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_docs_experiments import Row, parse_doc

from dcnlab.benchmarks.engine import schema
from dcnlab.benchmarks.engine.reproduction import papers, publish, registry, tables
from dcnlab.benchmarks.engine.reproduction import verdict as rule

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reproductions.md"
DOCS = ROOT / "docs" / "reproductions"
FIXTURE = ROOT / "tests" / "fixtures" / "reproduction"

SECTIONS: dict[str, type] = {
    "paper": papers.Paper, "setting": papers.Setting, "experiments[]": papers.ExperimentRef,
    "claims[]": papers.Claim, "unmeasured[]": papers.Unmeasured,
    "deviations[]": papers.Deviation,
}
# Defaults the loader derives from the experiment file: documented in words.
DERIVED = {("claims[]", "baseline"), ("claims[]", "condition")}
_CODE = re.compile(r"^`([^`]*)`")


def _code(cell: str) -> str | None:
    match = _CODE.match(cell)
    return match.group(1) if match else None


def _check_committed(docs: Path, papers_dir: Path | None = None,
                     experiments: Path | None = None) -> list[str]:
    """Render every committed document of ``docs`` again; the ids checked."""
    summaries, documents = publish.committed(docs)
    assert summaries == documents, (f"{docs}: every p00N.md needs its p00N.json and every "
                                    f"summary its document: {summaries} vs {documents}")
    for paper_id in documents:
        paper = papers.load(paper_id, papers_dir, experiments)
        json_name, md_name, png_name = publish.names(paper_id)
        assert (docs / png_name).is_file(), f"{docs / png_name} is missing"
        expected = publish.render(paper, publish.summary_of(paper_id, docs))
        assert (docs / md_name).read_text() == expected, (
            f"{docs / md_name} is not what its summary and paper file give: render it again "
            f"(python -m dcnlab.benchmarks.engine.reproduction.publish {paper_id}), never "
            "by hand")
    return documents


def test_committed_documents_are_regenerated_byte_for_byte() -> None:
    _check_committed(DOCS)
    # nothing else lives there: a hand-written page would escape the check
    for path in (DOCS.iterdir() if DOCS.is_dir() else []):
        stem = path.name.removesuffix("_claims.png").removesuffix(".json").removesuffix(".md")
        assert papers.PAPER_ID.fullmatch(stem) and path.name in publish.names(stem), path


def test_the_fixture_document_is_regenerated_byte_for_byte() -> None:
    assert _check_committed(FIXTURE, FIXTURE / "papers", FIXTURE / "experiments") == ["p900"]


def test_a_hand_edit_or_a_changed_paper_file_is_caught(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(FIXTURE, docs)
    md = docs / "p900.md"
    md.write_text(md.read_text().replace("**opposite**", "**reproduced**"))
    with pytest.raises(AssertionError, match="render it again"):
        _check_committed(docs, docs / "papers", FIXTURE / "experiments")
    shutil.copy(FIXTURE / "p900.md", md)
    _check_committed(docs, docs / "papers", FIXTURE / "experiments")
    paper = docs / "papers" / "p900.yaml"
    paper.write_text(paper.read_text().replace("paper_value: 0.4\n", "paper_value: 0.45\n"))
    with pytest.raises(AssertionError, match="render it again"):
        _check_committed(docs, docs / "papers", FIXTURE / "experiments")
    (docs / "p900.json").unlink()
    with pytest.raises(AssertionError, match="every p00N.md needs its p00N.json"):
        _check_committed(docs, docs / "papers", FIXTURE / "experiments")


def test_publish_writes_what_the_check_expects(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "PAPERS_DIR", FIXTURE / "papers")
    monkeypatch.setattr(registry, "EXPERIMENTS_DIR", FIXTURE / "experiments")
    shutil.copy(FIXTURE / "p900.json", tmp_path / "p900.json")
    assert publish.main(["--all", "--docs", str(tmp_path)]) == 0
    assert (tmp_path / "p900.md").read_bytes() == (FIXTURE / "p900.md").read_bytes()
    assert (tmp_path / "p900_claims.png").stat().st_size > 0
    # from a reproduction's output directory: its reproduction.json becomes the summary
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(FIXTURE / "p900.json", run / "reproduction.json")
    docs = tmp_path / "docs"
    assert publish.main(["p900", "--from", str(run), "--docs", str(docs)]) == 0
    assert (docs / "p900.json").read_text() == (FIXTURE / "p900.json").read_text()
    assert (docs / "p900.md").read_text() == (FIXTURE / "p900.md").read_text()
    assert publish.main(["p900", "--from", str(tmp_path / "none"), "--docs", str(docs)]) == 2


# ---------------------------------------------------------------------------- the page


@pytest.fixture(scope="module")
def doc() -> dict[str, list[Row]]:
    return parse_doc(DOC.read_text())


def _example() -> dict[str, Any]:
    text = DOC.read_text()
    block = text[text.index("```yaml\n") + len("```yaml\n"):]
    return yaml.safe_load(block[:block.index("```")])


def _load(data: dict[str, Any]) -> papers.Paper:
    return papers.parse(data, Path(f"{data.get('paper')}.yaml"), registry.EXPERIMENTS_DIR)


def test_the_page_documents_every_field(doc: dict[str, list[Row]]) -> None:
    assert set(doc) == set(SECTIONS)
    for section, cls in SECTIONS.items():
        documented = [r.name for r in doc[section]]
        assert sorted(documented) == sorted(papers.field_names(cls)), section


def test_documented_defaults_are_the_loaders(doc: dict[str, list[Row]]) -> None:
    for section, cls in SECTIONS.items():
        fields = {papers.YAML_NAMES.get(f.name, f.name): f for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        for r in doc[section]:
            f = fields[r.name]
            where = f"{section}.{r.name}"
            assert r.default and r.meaning and _code(r.example) is not None, where
            if f.default is not dataclasses.MISSING:
                real: Any = f.default
            elif f.default_factory is not dataclasses.MISSING:
                real = f.default_factory()
            else:
                real = dataclasses.MISSING
            if (section, r.name) in DERIVED:
                assert real is None, f"{where} is not derived"
                continue
            if r.default == "required":
                assert real is dataclasses.MISSING, f"{where} has a default: {real!r}"
                continue
            text = _code(r.default)
            assert text is not None and real is not dataclasses.MISSING, where
            value = yaml.safe_load(text)
            if value is not None:
                value = schema.convert(value, hints[f.name], where, f.metadata)
            assert value == real, f"{where}: documented {text}, the loader says {real!r}"


def test_documented_examples_are_valid(doc: dict[str, list[Row]]) -> None:
    base = _example()
    for section, cls in SECTIONS.items():
        if section == "paper":
            continue
        fields = {papers.YAML_NAMES.get(f.name, f.name): f for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        for r in doc[section]:
            f = fields[r.name]
            schema.convert(yaml.safe_load(_code(r.example) or ""), hints[f.name],
                           f"{section}.{r.name}", f.metadata)  # SpecFileError if not
    # top-level examples: each in place of the example file's own, and the file loads
    for r in doc["paper"]:
        _load({**copy.deepcopy(base), r.name: yaml.safe_load(_code(r.example) or "")})


def test_the_page_example_loads_and_optional_fields_default(
        doc: dict[str, list[Row]]) -> None:
    base = _example()
    paper = _load(base)
    assert [c.id for c in paper.claims] == ["qout-vs-ecn", "goodput-vs-ecn", "fct-per-flow"]
    for r in doc["paper"]:
        if r.default == "required":
            with pytest.raises(papers.PaperError, match=rf": {r.name}: required field"):
                _load({k: v for k, v in base.items() if k != r.name})
        else:
            explicit = {**base, r.name: yaml.safe_load(_code(r.default) or "")}
            without = {k: v for k, v in base.items() if k != r.name}
            assert _load(explicit) == _load(without), r.name


def test_the_page_names_every_table_and_quotes_the_rule() -> None:
    text = DOC.read_text()
    block = text[text.index("<!-- tables -->"):]
    rows = [line for line in block.splitlines()[2:] if line.startswith("| `")]
    names = [re.match(r"\| `([a-z]+)` \|", line).group(1) for line in rows]  # type: ignore[union-attr]
    assert names == list(tables.TABLES)
    rule_text = text[text.index("<!-- rule:begin -->\n") + len("<!-- rule:begin -->\n"):
                     text.index("<!-- rule:end -->")]
    assert rule_text == rule.RULE
