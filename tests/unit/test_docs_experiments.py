"""docs/experiments.md documents every field of an experiment file, with its real default
and an example that parses; a field added to the schema without docs (or documented but
gone from the schema) fails here.

The doc's tables follow ``<!-- fields: SECTION -->`` markers; each row is
``| `field` | default | example | meaning |``.  A default is ``required``, a YAML value in
a code span first (checked against the schema), or, for the fields the parser derives
from other fields (DERIVED), words.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from dcnlab.benchmarks.engine import events, figures, schema, spec
from dcnlab.benchmarks.engine.marking import Marking
from dcnlab.benchmarks.engine.schema import SpecFileError
from dcnlab.benchmarks.engine.workloads import WORKLOAD_TYPES

DOC = Path(__file__).resolve().parents[2] / "docs" / "experiments.md"

# Sections backed by a dataclass whose fields are the section's fields.
DATACLASS_SECTIONS: dict[str, type] = {
    "link": spec.LinkOptions,
    "schemes[]": spec.Scheme,
    "classes": spec.Classes,
    "marking": Marking,
    "agent": spec.AgentOptions,
    "diagnosis": spec.Diagnosis,
    "plots[]": figures.Plot,
    "plots[].panels[]": figures.Panel,
    "tables[]": figures.RankTable,
    "events[]": events.Event,
    **{f"workload:{name}": cls for name, cls in WORKLOAD_TYPES.items()},
}
# Defaults the parser computes from other fields: documented in words, never checked as a
# value.  Each must be None (or required) in its dataclass, else it is not derived.
DERIVED = {
    ("top", "name"), ("top", "baseline"), ("top", "duration"), ("top", "scenarios"),
    ("schemes[]", "name"), ("schemes[]", "switch"), ("schemes[]", "agents"),
    ("schemes[]", "agents_interval"), ("schemes[]", "congestion"),
    ("agent", "rx_interval"),
}
# The smallest valid experiment (with every required field) the top-level checks vary.
BASE: dict[str, Any] = {
    "topology": "fattree:4,rate=10M",
    "schemes": ["ecmp", {"name": "single", "app": "single_path"}],
    "workload": {"type": "poisson"},
    "loads": [0.2],
    "seeds": [1],
    "duration": 10,
}
_MARKER = re.compile(r"<!--\s*fields:\s*(\S+)\s*-->")
_CODE = re.compile(r"^`([^`]*)`")


@dataclass(frozen=True)
class Row:
    section: str
    name: str
    default: str
    example: str
    meaning: str


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _code(cell: str) -> str | None:
    """The YAML text of a cell that starts with a code span, else None."""
    match = _CODE.match(cell)
    return match.group(1) if match else None


def parse_doc(text: str) -> dict[str, list[Row]]:
    """Section -> its rows, from each marker's table."""
    lines = text.splitlines()
    sections: dict[str, list[Row]] = {}
    for i, line in enumerate(lines):
        marker = _MARKER.search(line)
        if marker is None:
            continue
        section = marker.group(1)
        assert section not in sections, f"section {section} is documented twice"
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        table = []
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            table.append(lines[j])
            j += 1
        assert len(table) >= 3, f"section {section}: no table after its marker"
        assert _cells(table[0]) == ["field", "default", "example", "meaning"], section
        rows = []
        for raw in table[2:]:
            cells = _cells(raw)
            assert len(cells) == 4, f"section {section}: {raw!r} has {len(cells)} cells"
            name = _code(cells[0])
            assert name is not None and name == cells[0].strip("`"), raw
            rows.append(Row(section, name, *cells[1:]))
        sections[section] = rows
    return sections


def schema_fields() -> dict[str, list[dataclasses.Field[Any]] | list[str]]:
    """Section -> its fields, from the schema itself."""
    out: dict[str, Any] = {"top": list(spec._TOP), "workload": ["type"]}
    for section, cls in DATACLASS_SECTIONS.items():
        out[section] = [f for f in dataclasses.fields(cls) if f.init]
    return out


def _names(fields: list[Any]) -> list[str]:
    return [f if isinstance(f, str) else f.name for f in fields]


@pytest.fixture(scope="module")
def doc() -> dict[str, list[Row]]:
    return parse_doc(DOC.read_text())


def _parse(data: dict[str, Any]) -> list[spec.ExperimentSpec]:
    # raw (the mapping as read) differs by construction; everything parsed must not
    return [dataclasses.replace(s, raw={}) for s in spec.parse_specs(data, check_apps=False)]


def test_every_spec_section_with_its_own_fields_is_documented() -> None:
    hints = typing.get_type_hints(spec.ExperimentSpec)
    for name, hint in hints.items():
        inner = typing.get_args(hint)[0] if typing.get_origin(hint) is list else hint
        if dataclasses.is_dataclass(inner):  # a section of fields, e.g. classes
            assert inner in DATACLASS_SECTIONS.values(), f"{name}: {inner} is not documented"


def test_doc_and_schema_have_the_same_fields(doc: dict[str, list[Row]]) -> None:
    fields = schema_fields()
    assert set(doc) == set(fields), "sections: documented vs in the schema"
    for section, rows in doc.items():
        documented = [r.name for r in rows]
        assert len(documented) == len(set(documented)), f"{section}: a field twice"
        real = _names(fields[section])
        assert set(documented) == set(real), (
            f"{section}: undocumented {sorted(set(real) - set(documented))}, "
            f"not in the schema {sorted(set(documented) - set(real))}")


def test_every_row_has_a_default_an_example_and_a_meaning(doc: dict[str, list[Row]]) -> None:
    for rows in doc.values():
        for r in rows:
            assert r.default and r.meaning, r
            assert _code(r.example) is not None and r.example.count("`") == 2, r
            if (r.section, r.name) not in DERIVED and r.default != "required":
                assert _code(r.default) is not None, f"{r}: a default is a value in `code`"


def test_dataclass_defaults_are_the_documented_ones(doc: dict[str, list[Row]]) -> None:
    for section, cls in DATACLASS_SECTIONS.items():
        hints = typing.get_type_hints(cls)
        by_name = {f.name: f for f in dataclasses.fields(cls)}
        for r in doc[section]:
            f = by_name[r.name]
            if f.default is not dataclasses.MISSING:
                real: Any = f.default
            elif f.default_factory is not dataclasses.MISSING:
                real = f.default_factory()
            else:
                real = dataclasses.MISSING
            where = f"{section}.{r.name}"
            if (section, r.name) in DERIVED:
                assert real in (None, dataclasses.MISSING), f"{where} is not derived"
                continue
            if r.default == "required":
                assert real is dataclasses.MISSING, f"{where} has a default: {real!r}"
                continue
            text = _code(r.default)
            assert text is not None and real is not dataclasses.MISSING, where
            value = schema.convert(yaml.safe_load(text), hints[r.name], where, f.metadata) \
                if yaml.safe_load(text) is not None else None
            assert value == real, f"{where}: documented {text}, the schema says {real!r}"


def test_dataclass_examples_are_valid_values(doc: dict[str, list[Row]]) -> None:
    for section, cls in DATACLASS_SECTIONS.items():
        hints = typing.get_type_hints(cls)
        by_name = {f.name: f for f in dataclasses.fields(cls)}
        for r in doc[section]:
            where = f"{section}.{r.name}"
            schema.convert(yaml.safe_load(_code(r.example) or ""), hints[r.name], where,
                           by_name[r.name].metadata)  # raises SpecFileError if not


def test_top_level_defaults_change_nothing_when_written_out(
        doc: dict[str, list[Row]]) -> None:
    base = _parse(BASE)
    for r in doc["top"]:
        if (r.section, r.name) in DERIVED:
            continue
        if r.default == "required":
            assert r.name in BASE, f"{r.name}: BASE must hold every required field"
            with pytest.raises(SpecFileError) as info:
                _parse({k: v for k, v in BASE.items() if k != r.name})
            assert info.value.field == r.name, f"{r.name} is documented as required"
            continue
        assert r.name not in BASE, f"{r.name}: BASE must leave it to its default"
        explicit = {**BASE, r.name: yaml.safe_load(_code(r.default) or "")}
        assert _parse(explicit) == base, f"{r.name}: {r.default} is not the default"


def test_workload_type_defaults_to_the_documented_one(doc: dict[str, list[Row]]) -> None:
    (row,) = doc["workload"]
    default = yaml.safe_load(_code(row.default) or "")
    without = {**BASE, "workload": {k: v for k, v in BASE["workload"].items() if k != "type"}}
    assert BASE["workload"]["type"] == default
    assert _parse(without) == _parse(BASE)
    assert yaml.safe_load(_code(row.example) or "") in WORKLOAD_TYPES


def test_top_level_examples_parse(doc: dict[str, list[Row]]) -> None:
    for r in doc["top"]:
        example = yaml.safe_load(_code(r.example) or "")
        if r.name == "workload":  # with loads valid for it
            assert example["type"] == BASE["workload"]["type"]
        _parse({**BASE, r.name: example})  # raises SpecFileError naming the field if not

