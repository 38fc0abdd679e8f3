"""docs/lab.md says what the lab loader does: every field of every section with its real
default, every example a value the loader takes, and the worked example a lab file that
loads (the table parser is docs/experiments.md's)."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_docs_experiments import Row, parse_doc

from dcnlab.benchmarks.engine import schema
from dcnlab.lab import spec as lab

DOC = Path(__file__).resolve().parents[2] / "docs" / "lab.md"
SECTIONS: dict[str, type] = {
    "lab": lab.LabSpec, "controller": lab.Controller, "ssh": lab.SshDefaults,
    "switches[]": lab.Switch, "fabric[]": lab.Link, "hosts[]": lab.Host,
    "hosts[].extra_interfaces[]": lab.ExtraInterface,
}
_CODE = re.compile(r"^`([^`]*)`")


@pytest.fixture(scope="module")
def doc() -> dict[str, list[Row]]:
    return parse_doc(DOC.read_text())


def _example() -> dict[str, Any]:
    (block,) = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    data = yaml.safe_load(block)
    assert isinstance(data, dict)
    return data


def test_the_worked_example_loads() -> None:
    spec = lab.parse(_example())
    assert [h.name for h in spec.hosts] == ["h1", "h2", "h3", "h4"]
    assert spec.switch_names() == {1: "spine1", 2: "spine2", 3: "leaf1", 4: "leaf2"}


def test_the_page_documents_every_field(doc: dict[str, list[Row]]) -> None:
    assert set(doc) == set(SECTIONS)
    for section, cls in SECTIONS.items():
        fields = [f.name for f in dataclasses.fields(cls) if f.init]
        assert sorted(r.name for r in doc[section]) == sorted(fields), section


def test_documented_defaults_are_the_loaders(doc: dict[str, list[Row]]) -> None:
    for section, cls in SECTIONS.items():
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for r in doc[section]:
            f, where = fields[r.name], f"{section}.{r.name}"
            required = (f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING)
            assert (r.default == "required") == required, where
            if required:
                continue
            match = _CODE.match(r.default)
            assert match is not None, f"{where}: the default is a YAML value in a code span"
            real = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            documented = yaml.safe_load(match.group(1))
            if dataclasses.is_dataclass(real):
                assert documented == {} and real == type(real)(), where
            else:
                assert documented == real, f"{where}: documented {documented!r}, is {real!r}"


def test_every_example_is_a_value_of_its_field(doc: dict[str, list[Row]]) -> None:
    for section, cls in SECTIONS.items():
        fields = {f.name: f for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        for r in doc[section]:
            match = _CODE.match(r.example)
            where = f"{section}.{r.name}"
            assert match is not None, f"{where}: the example is a code span"
            schema.convert(yaml.safe_load(match.group(1)), hints[r.name], where,
                           fields[r.name].metadata)
