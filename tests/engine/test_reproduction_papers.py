"""Paper files are checked before anything runs: each bad field gives an error naming
the file, the claim (index and id) and the field, and every reference (experiment file,
scenario, scheme, baseline, sweep value, table, metric, class) is checked against the
experiment files themselves."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from reproduction_results import EXPERIMENTS, PAPERS

from dcnlab.benchmarks.engine import metrics, netstats, paired
from dcnlab.benchmarks.engine.reproduction import papers, registry, tables
from dcnlab.benchmarks.engine.reproduction.errors import PaperError

CLAIM: dict[str, Any] = {
    "id": "fast-queue", "says": "fast halves the queue", "source": "Fig. 1",
    "experiment": "tiny.yaml", "table": "network", "metric": "qout_mean",
    "scheme": "fast", "paper_value": 0.5, "direction": "lower"}
BASE: dict[str, Any] = {
    "paper": "p901", "title": "T",
    "setting": {"platform": "ns-3", "rates": "1 Gbit/s", "run_length": "1 s"},
    "experiments": [{"file": "tiny.yaml"}, {"file": "tiny_sizes.yaml",
                                             "scenarios": ["short"]}],
    "claims": [CLAIM]}


def _load(tmp_path: Path, data: Any, name: str = "p901") -> papers.Paper:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return papers.load_file(path, EXPERIMENTS)


DROP = object()  # a field left out (None: written as null)


def _claim(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    claim = {**CLAIM, **changes}
    data["claims"] = [CLAIM | {"id": "first"}, {k: v for k, v in claim.items()
                                                if v is not DROP}]
    return data


def _error(tmp_path: Path, data: Any) -> str:
    with pytest.raises(PaperError) as info:
        _load(tmp_path, data)
    return str(info.value)


def test_a_valid_paper_is_loaded_with_its_defaults_filled_in(tmp_path: Path) -> None:
    paper = _load(tmp_path, BASE)
    (claim,) = paper.claims
    assert claim.baseline == "base"  # the experiment's baseline
    assert claim.condition == {"senders": [2.0, 3.0]}  # every sweep value
    assert (claim.sweep, claim.values) == ("senders", [2.0, 3.0])
    assert (claim.cls, claim.compare, claim.per) == ("all", "ratio", "seed")
    assert paper.setting.repetitions == "not stated" and paper.deviations == []
    assert paper.unmeasured == []
    # a paper that states the direction only: paper_value null
    only = _load(tmp_path, _claim(id="queue-shorter", paper_value=None))
    assert only.claims[1].paper_value is None
    # the specs of everything the paper runs, in order; only the listed scenarios
    assert list(paper.specs) == [("tiny.yaml", None), ("tiny_sizes.yaml", "short")]
    assert paper.scenarios("tiny_sizes.yaml") == ["short"]


def test_the_fixture_paper_loads(tmp_path: Path) -> None:
    paper = papers.load_file(PAPERS / "p900.yaml", EXPERIMENTS)
    assert [c.id for c in paper.claims][:2] == ["fast-queue", "fast-queue-tail"]
    by_id = {c.id: c for c in paper.claims}
    assert by_id["fast-more-drops"].condition == {"senders": [2.0]}  # `load` works too
    assert by_id["fast-mouse-fct"].cls == "mouse"
    assert by_id["long-elephants"].values == [8388608.0]


def test_the_registry_lists_paper_files_only(tmp_path: Path) -> None:
    for name in ("p003.yaml", "p001.yaml", "notes.yaml", "p01.yaml", "p002.txt"):
        (tmp_path / name).write_text("")
    assert registry.paper_ids(tmp_path) == ["p001", "p003"]
    assert registry.paper_ids(tmp_path / "absent") == []
    with pytest.raises(PaperError, match=r"no paper 'p009' \(papers: p001, p003\)"):
        papers.paper_path("p009", tmp_path)


@pytest.mark.parametrize("data, expected", [
    ({**BASE, "titel": "x"}, r"p901\.yaml: titel: unknown field \(did you mean 'title'\?\)"),
    ({**BASE, "paper": "p902"}, r"p901\.yaml: paper: 'p902' is not the file's name"),
    ({k: v for k, v in BASE.items() if k != "title"}, r"title: required field is missing"),
    ({**BASE, "setting": {"platform": "x"}}, r"setting\.rates: required field is missing"),
    ({**BASE, "claims": []}, r"p901\.yaml: claims: needs a list of at least one claim"),
    ({**BASE, "experiments": []}, r"experiments: needs a list of at least one"),
    ({**BASE, "experiments": [{"file": "nothere.yaml"}]},
     r"experiments\[0\]\.file: no experiment file 'nothere\.yaml' in .*tiny\.yaml"),
    ({**BASE, "experiments": [{"file": "tiny.yaml"}, {"file": "tiny.yaml"}]},
     r"experiments\[1\]\.file: tiny\.yaml is listed twice"),
    ({**BASE, "experiments": [{"file": "tiny.yaml", "scenarios": ["a"]}]},
     r"experiments\[0\]\.scenarios: tiny\.yaml has no scenarios"),
    ({**BASE, "experiments": [{"file": "tiny.yaml", "seeds": [1, 2, 1]}]},
     r"experiments\[0\]\.seeds: needs at least one seed, each once"),
    ({**BASE, "experiments": [{"file": "tiny.yaml", "seeds": []}]},
     r"experiments\[0\]\.seeds: needs at least one seed, each once"),
    ({**BASE, "experiments": [{"file": "tiny_sizes.yaml", "scenarios": ["shrt"]}]},
     r"experiments\[0\]\.scenarios\[0\]: tiny_sizes\.yaml has no scenario 'shrt' \(it "
     r"has: short, long, again\)"),
    ({**BASE, "unmeasured": [{"id": "fast-queue", "says": "s", "source": "t", "why": "w"}]},
     r"unmeasured\[0\]\.id: 'fast-queue' is used twice \(claims and unmeasured claims "
     r"share their ids\)"),
    ({**BASE, "unmeasured": [{"id": "Trend", "says": "s", "source": "t", "why": "w"}]},
     r"unmeasured\[0\]\.id: 'Trend': lower-case letters"),
    ({**BASE, "unmeasured": [{"id": "trend", "says": "s", "source": "t"}]},
     r"unmeasured\[0\]\.why: required field is missing"),
    ({**BASE, "deviations": [{"what": "a", "paper": "b", "here": "c"}]},
     r"deviations\[0\]\.reason: required field is missing"),
    ({**BASE, "deviations": [{"what": "a", "paper": "b", "here": "c", "reason": "d",
                              "status": "measured"}]},
     r"deviations\[0\]\.measured: status measured needs what was measured"),
    ({**BASE, "deviations": [{"what": "a", "paper": "b", "here": "c", "reason": "d",
                              "status": "fixd"}]},
     r"deviations\[0\]\.status: 'fixd' is not one of listed, fixed, measured"),
])
def test_bad_paper_fields(tmp_path: Path, data: dict[str, Any], expected: str) -> None:
    message = _error(tmp_path, data)
    assert re.search(expected, message), message
    assert message.startswith(str(tmp_path / "p901.yaml") + ": "), message


@pytest.mark.parametrize("changes, field, expected", [
    ({"id": "Fast_queue"}, "id", r"lower-case letters, digits"),
    ({"id": "first"}, "id", r"'first' is used twice"),
    ({"table": "netwrk"}, "table", r"'netwrk' is not one of flows, network, .*\(did you "
                                   r"mean 'network'\?\)"),
    ({"metric": "qout_meen"}, "metric", r"table network has no metric 'qout_meen' \(did "
                                        r"you mean 'qout_mean'\?\); it has: qout_mean, "),
    ({"class": "mouse"}, "class", r"network qout_mean has class all, not 'mouse' "
                                  r"\(network\.csv has one row per run"),
    ({"class": "mice"}, "class", r"'mice' is not one of all, mouse, rabbit, elephant"),
    ({"cls": "mouse"}, "cls", r"unknown field \(did you mean 'class'\?\)"),
    ({"table": "flows", "metric": "tput_mbps", "class": "mouse"}, "class",
     r"flows tput_mbps has class elephant, not 'mouse'"),
    ({"table": "flows", "metric": "fct_mean"}, "class",
     r"flows fct_mean has class mouse or rabbit or elephant, not 'all'"),
    ({"scheme": "fats"}, "scheme", r"'fats' is not a scheme of tiny\.yaml \(base, fast, "
                                   r"slow\)"),
    ({"baseline": "fast"}, "baseline", r"'fast' is the scheme itself"),
    ({"baseline": "nobody"}, "baseline", r"'nobody' is not a scheme of tiny\.yaml"),
    ({"experiment": "seed002.yaml"}, "experiment",
     r"'seed002\.yaml' is not among the paper's experiments \(tiny\.yaml, tiny_sizes"),
    ({"experiment": "tiny_sizes.yaml", "metric": "fct_mean_ms", "table": "sizes"},
     "scenario", r"tiny_sizes\.yaml has scenarios: name one \(short\)"),
    ({"experiment": "tiny_sizes.yaml", "scenario": "long"}, "scenario",
     r"'long' is not a scenario the paper runs of tiny_sizes\.yaml \(short\)"),
    ({"scenario": "short"}, "scenario", r"'short' is not a scenario the paper runs of "
                                        r"tiny\.yaml \(it has none\)"),
    ({"table": "sizes", "metric": "fct_mean_ms"}, "table",
     r"the sizes table exists for size sweeps only; this experiment sweeps senders"),
    ({"condition": {"load": 5}}, "condition.load", r"5 is not a sweep value of tiny\.yaml "
                                                   r"\(2, 3\)"),
    ({"condition": {"senders": [2, 2]}}, "condition.senders[1]", r"2 appears twice"),
    ({"condition": {"size": 2}}, "condition.size", r"tiny\.yaml sweeps senders, not size"),
    ({"condition": {"senders": 2, "load": 3}}, "condition", r"one key, the sweep"),
    ({"condition": {"senders": []}}, "condition.senders", r"needs at least one value"),
    ({"paper_value": 1.5}, "paper_value", r"1\.5 is not below 1 \(no change for a ratio\), "
                                          r"as direction lower says"),
    ({"paper_value": -0.5}, "paper_value", r"a ratio is positive, got -0\.5"),
    ({"compare": "difference", "paper_value": 3}, "paper_value",
     r"3 is not below 0 \(no change for a difference\)"),
    ({"direction": "down"}, "direction", r"'down' is not one of lower, higher"),
    ({"per": "flow"}, "per", r"table paired goes with per: flow, and per: flow with table "
                             r"paired"),
    ({"table": "paired", "metric": "fct"}, "per", r"table paired goes with per: flow"),
    ({"table": "paired", "metric": "fct", "per": "flow", "compare": "difference",
      "paper_value": -1}, "compare", r"the paired table holds per-flow ratios"),
    ({"table": "paired", "metric": "tput_mbps", "per": "flow", "class": "mouse"}, "class",
     r"paired tput_mbps has class all or elephant, not 'mouse'"),
    ({"says": "the paper's queue claim, reproduced"}, "says",
     r"'reproduced': a claim says what the paper says; verdicts are computed"),
    ({"paper_value": "half"}, "paper_value", r"expected a number, got 'half'"),
    ({"source": DROP}, "source", r"required field is missing"),
    ({"paper_value": DROP}, "paper_value", r"required field is missing"),  # null: say so
])
def test_bad_claim_fields(tmp_path: Path, changes: dict[str, Any], field: str,
                          expected: str) -> None:
    message = _error(tmp_path, _claim(**changes))
    claim_id = changes.get("id") or CLAIM["id"]
    prefix = f"{tmp_path / 'p901.yaml'}: claims[1] ({claim_id}).{field}: "
    assert message.startswith(prefix), message
    assert re.search(expected, message), message


def _across(**changes: Any) -> dict[str, Any]:
    """A paper comparing tiny_sizes' short scenario with its `again` scenario."""
    data = copy.deepcopy(BASE)
    data["experiments"][1]["scenarios"] = ["short", "long", "again"]
    claim = {**CLAIM, "id": "across", "experiment": "tiny_sizes.yaml", "scenario": "short",
             "table": "sizes", "metric": "fct_mean_ms", "baseline": "base",
             "baseline_scenario": "again", **changes}
    data["claims"] = [CLAIM, {k: v for k, v in claim.items() if v is not DROP}]
    return data


def test_a_baseline_from_another_scenario(tmp_path: Path) -> None:
    claim = _load(tmp_path, _across()).claims[1]
    assert (claim.baseline_where, claim.values) == ("again", [65536.0, 262144.0])
    # the scheme against itself in the other workload
    same = _load(tmp_path, _across(scheme="fast", baseline="fast")).claims[1]
    assert (same.scheme, same.baseline, same.baseline_where) == ("fast", "fast", "again")
    assert _load(tmp_path, _across(baseline=DROP)).claims[1].baseline == "base"
    prefix = f"{tmp_path / 'p901.yaml'}: claims[1] (across)."
    for changes, field, expected in [
        ({"baseline_scenario": "short"}, "baseline_scenario",
         "'short' is the claim's own scenario: leave baseline_scenario out"),
        ({"baseline_scenario": "medium"}, "baseline_scenario",
         "'medium' is not a scenario the paper runs of tiny_sizes.yaml (short, long, again)"),
        ({"baseline_scenario": "long"}, "baseline_scenario",
         "long does not run size = 65536, 262144: the baseline is compared at the claim's"),
        ({"table": "paired", "metric": "fct", "per": "flow", "class": "mouse"}, "per",
         "a baseline from another scenario is compared per seed"),
        ({"baseline": "nobody"}, "baseline",
         "'nobody' is not a scheme of tiny_sizes.yaml scenario again (base, fast)"),
    ]:
        message = _error(tmp_path, _across(**changes))
        assert message.startswith(prefix + field + ": " + expected), message


def test_a_claim_without_an_id_is_named_by_its_index(tmp_path: Path) -> None:
    data = _claim()
    del data["claims"][1]["id"]
    assert f"{tmp_path / 'p901.yaml'}: claims[1].id: required field is missing" == \
        _error(tmp_path, data)


def test_a_bad_experiment_file_is_reported_as_the_paper_lists_it(tmp_path: Path) -> None:
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    (experiments / "broken.yaml").write_text("name: broken\ntopology: fattree:4\n")
    path = tmp_path / "p901.yaml"
    path.write_text(yaml.safe_dump({**BASE, "experiments": [{"file": "broken.yaml"}]}))
    with pytest.raises(PaperError, match=r"experiments\[0\]\.file: broken\.yaml: schemes: "):
        papers.load_file(path, experiments)


def test_bad_yaml_is_a_paper_error(tmp_path: Path) -> None:
    path = tmp_path / "p901.yaml"
    path.write_text("claims: [\n")
    with pytest.raises(PaperError, match=r"p901\.yaml: not valid YAML at line"):
        papers.load_file(path, EXPERIMENTS)
    path.write_text("- a list\n")
    with pytest.raises(PaperError, match=r"a paper file is a YAML mapping"):
        papers.load_file(path, EXPERIMENTS)


def test_the_metrics_of_each_table_are_the_engines_own() -> None:
    """What a claim may name is what the engine writes: network.csv's metric columns,
    run_metrics' (metric, class) pairs, paired.py's figures."""
    spec = papers.load_file(PAPERS / "p900.yaml", EXPERIMENTS).specs[("tiny.yaml", None)]
    assert list(tables.metrics("network", spec)) == list(netstats.METRICS)
    flows = tables.metrics("flows", spec)
    assert {(m, c) for m, classes in flows.items() for c in classes} == \
        set(metrics.run_metrics([]))
    # class "all" of the paired table pools every flow into one class paired.py has
    # both figures for
    assert {("fct", tables.POOLED_CLASS), ("tput_mbps", tables.POOLED_CLASS)} <= \
        {(figure, cls) for figure, cls, _better, _label in paired.FIGURES}
    assert tables.check("flows", "subflow_bytes_2", "all", spec) is not None  # no transport
    assert set(tables.TABLES) == {"flows", "network", "switch", "controller", "paths",
                                  "flowdiag", "fairness", "sizes", "paired"}


def test_every_shipped_paper_file_loads_and_ships() -> None:
    """benchmarks/papers/*.yaml: each loads against the shipped experiment files, and
    setup.py's package data carries them (dcnlab reproduce on an installed dcnlab)."""
    import ast
    import fnmatch

    for paper_id in registry.paper_ids():
        paper = papers.load(paper_id)
        assert paper.paper == paper_id and paper.claims
    setup = ast.parse((registry.BENCHMARKS.parent / "setup.py").read_text())
    package_data = next(ast.literal_eval(k.value) for node in ast.walk(setup)
                        if isinstance(node, ast.Call) for k in node.keywords
                        if k.arg == "package_data")
    patterns = package_data["dcnlab.benchmarks"]
    assert any(fnmatch.fnmatch("papers/p002.yaml", p) for p in patterns), patterns
