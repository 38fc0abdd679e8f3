"""Bad input in topology specs and experiment files gets the project's own error.

Hand-picked cases first (each failed before its fix: nan/inf rates and delays, negative
buffers and thresholds, a million hosts, names that escape the output directory), then
property-based tests: any string or mapping either parses or raises SpecError /
SpecFileError, never anything else.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcnlab.benchmarks.engine.schema import SpecFileError
from dcnlab.benchmarks.engine.spec import parse_spec, parse_specs
from dcnlab.topo.errors import NetworkError
from dcnlab.topo.preflight import ENV_MAX_NODES, check_size
from dcnlab.topo.spec import SpecError, parse


@pytest.mark.parametrize("option, words", [
    ("rate=nan", "finite"), ("rate=inf", "finite"), ("rate=-3M", "positive"),
    ("delay=inf", "finite"), ("delay=1e30s", "between 0 and 10 s"),
    ("jitter=-1ms", "between 0 and 10 s"), ("buffer=-5", "whole number from 1"),
    ("buffer=nanKB", "finite"), ("buffer=0", "whole number from 1"),
    ("ecn=-1", "whole number from 1"), ("ecn=2.5", "whole number from 1"),
])
def test_bad_link_values_are_spec_errors_that_list_the_forms(option: str, words: str) -> None:
    with pytest.raises(SpecError, match=words) as info:
        parse(f"fattree:4,{option}")
    assert "valid forms:" in str(info.value)


def test_good_link_values_still_parse() -> None:
    p = parse("fattree:4,rate=1G,delay=25us,jitter=1ms,buffer=64KB,ecn=20p").default_params
    assert (p.rate_mbit, p.delay_us, p.jitter_us, p.buffer_bytes, p.ecn_threshold_pkts) == \
        (1000.0, 25, 1000, 65536, 20)
    assert parse("twopath:buffer=100p").default_params.buffer_pkts == 100


def test_a_million_hosts_is_refused_while_parsing() -> None:
    with pytest.raises(SpecError, match="at most 100000 nodes"):
        parse("threelayer:100,100,100,100")
    assert len(parse("fattree:48").hosts) == 27648  # the compile benchmark's model


def test_networks_larger_than_the_machine_builds_are_refused_with_the_way_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MAX_NODES, raising=False)
    check_size(parse("fattree:8"))  # 208 nodes: fine
    with pytest.raises(NetworkError, match=f"set {ENV_MAX_NODES}=1344 to build it anyway"):
        check_size(parse("fattree:16"))
    # seed 002's at-scale topology: the shipped size builds, the paper's does not
    check_size(parse("torcore:4,4"))
    with pytest.raises(NetworkError, match=f"set {ENV_MAX_NODES}=1041 to build it anyway"):
        check_size(parse("torcore:40,25"))
    monkeypatch.setenv(ENV_MAX_NODES, "2000")
    check_size(parse("fattree:16"))
    monkeypatch.setenv(ENV_MAX_NODES, "lots")
    with pytest.raises(NetworkError, match="expected a whole number"):
        check_size(parse("fattree:4"))


def _experiment(**changes: Any) -> dict[str, Any]:
    return {"topology": "fattree:4", "schemes": ["ecmp"],
            "workload": {"type": "poisson", "cdf": "websearch"}, "loads": [0.1],
            "seeds": [1], "duration": 5, **changes}


@pytest.mark.parametrize("changes, where", [
    ({"name": "../../x"}, "name"),
    ({"name": "/etc"}, "name"),
    ({"name": ".hidden"}, "name"),
    ({"schemes": [{"name": "../up", "app": "ecmp"}]}, "schemes[0].name"),
    ({"schemes": [{"name": "a/b", "app": "ecmp"}]}, "schemes[0].name"),
])
def test_names_that_would_escape_the_output_directory_are_refused(
        changes: dict[str, Any], where: str) -> None:
    with pytest.raises(SpecFileError, match="become directory names") as info:
        parse_spec(_experiment(**changes))
    assert info.value.field == where


def test_scenario_names_follow_the_same_rule() -> None:
    with pytest.raises(SpecFileError, match="become directory names"):
        parse_specs({**_experiment(), "scenarios": {"..": {"loads": [0.2]}}})
    ok = parse_specs({**_experiment(name="exp.v2"), "scenarios": {"a-1": {"loads": [0.2]}}})
    assert ok[0].name == "exp.v2" and ok[0].scenario == "a-1"


# ---------------------------------------------------------------------------- properties

_FAMILIES = ["fattree", "spineleaf", "threelayer", "incast", "dumbbell", "twopath", "mesh"]
_OPTION_KEYS = ["rate", "delay", "jitter", "buffer", "ecn", "bw", "egress", "ingress@host",
                "ingress@x", "speed"]
_VALUES = st.one_of(
    st.integers(-10**12, 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["10M", "1G", "25us", "1ms", "64KB", "100p", "nan", "inf", "-inf", "1e309",
                     "droptail/buffer=20p", "abq/k=20p", "", "M", "0x10", "1_000"]),
    st.text(max_size=8),
)
_SPECS = st.builds(
    lambda fam, args, opts: fam + (":" if args or opts else "") + ",".join(
        [str(a) for a in args] + [f"{k}={v}" for k, v in opts]),
    st.sampled_from(_FAMILIES),
    st.lists(st.integers(-5, 300), max_size=5),
    st.lists(st.tuples(st.sampled_from(_OPTION_KEYS), _VALUES), max_size=4),
)
_FAST = settings(max_examples=300, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])


@_FAST
@given(st.one_of(_SPECS, st.text(max_size=40)))
def test_any_topology_spec_parses_or_is_a_spec_error(text: str) -> None:
    try:
        parsed = parse(text)
    except SpecError:
        return
    assert parse(parsed.spec).spec == parsed.spec  # the canonical form parses again


_YAML_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                          st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=10))
_YAML = st.recursive(_YAML_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8)
_FIELDS = ["name", "topology", "switch", "link", "schemes", "baseline", "workload", "loads",
           "seeds", "duration", "warmup", "cooldown", "drain", "settle", "network", "classes",
           "marking", "congestion", "agent", "scenarios"]


@_FAST
@given(st.dictionaries(st.sampled_from(_FIELDS), _YAML, max_size=5))
def test_any_experiment_mapping_parses_or_is_a_spec_file_error(changes: dict[str, Any]) -> None:
    try:
        parse_specs(_experiment(**changes), check_apps=False)
    except SpecFileError:
        pass
