"""The scheme registry: declarations, lookups, and that generic code names no scheme."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from dcnlab.benchmarks.engine import controller_stats, fairness
from dcnlab.benchmarks.engine.schema import SpecFileError
from dcnlab.benchmarks.engine.spec import parse_spec, scheme_topology
from dcnlab.schemes import registry
from dcnlab.schemes.base import Scheme, with_topology_options
from dcnlab.schemes.uc3 import engine as uc3_engine

ROOT = Path(__file__).resolve().parents[2]
# Code that must stay generic: it reads the registry, it never names a scheme.
GENERIC = ["controller", "topo", "benchmarks/engine", "dcnlab/check.py", "dcnlab/cli.py",
           "dcnlab/compat.py", "dcnlab/model", "dcnlab/schemes/base.py",
           "dcnlab/schemes/registry.py", "dcnlab/schemes/common.py"]


def _spec(**changes: object) -> dict:
    return {"topology": "fattree:4", "schemes": ["ecmp"],
            "workload": {"type": "poisson", "cdf": "websearch"}, "loads": [0.1],
            "seeds": [1], "duration": 5, **changes}


def test_every_scheme_names_an_importable_app_and_declared_host_parts() -> None:
    reg = registry.registry()
    assert {"single_path", "ecmp", "spray", "tcppath", "tfe", "uc3", "random_path"} \
        <= set(reg.schemes)
    for scheme in reg.schemes.values():
        assert importlib.util.find_spec(scheme.app) is not None, scheme.app
        assert scheme.summary
        if scheme.host_parts is not None:
            assert scheme.host_parts in reg.host_parts
    assert [s.name for s in reg.schemes.values() if s.baseline] == ["ecmp"]


def test_lookup_by_short_name_module_or_file() -> None:
    assert registry.lookup("uc3").app == "dcnlab.apps.uc3"
    assert registry.lookup("dcnlab.apps.tfe").name == "tfe"
    assert registry.lookup("apps/spray.py").name == "spray"
    assert registry.lookup("ryu.app.simple_switch_13") is None
    # one app module, one scheme: a module names the scheme it belongs to
    apps = [s.app for s in registry.registry().schemes.values()]
    assert len(apps) == len(set(apps))
    assert registry.app_module("random_path") == "dcnlab.apps.random_path"
    with pytest.raises(registry.UnknownSchemeError, match=r"known: .*ecmp"):
        registry.get("ecmpp")


def test_experiment_files_take_short_names() -> None:
    spec = parse_spec(_spec(schemes=["ecmp", "spray", {"name": "u", "app": "uc3"}]))
    assert [(s.name, s.app) for s in spec.schemes] == [
        ("ecmp", "dcnlab.apps.ecmp"), ("spray", "dcnlab.apps.spray"), ("u", "dcnlab.apps.uc3")]
    assert [s.agents for s in spec.schemes] == ["none", "none", "uc3"]
    assert spec.baseline == "ecmp"
    with pytest.raises(SpecFileError, match=r"schemes\[1\]\.app: unknown scheme 'sprya'"):
        parse_spec(_spec(schemes=["ecmp", "sprya"]))


def test_results_columns_come_from_the_declarations_unchanged() -> None:
    # the columns the engine wrote before the registry existed, in the same order, then
    # (registry order: by module name) those of schemes added since
    historical = [
        "scheme", "load", "seed", "entries_mean", "entries_max", "entries_samples",
        "packet_in", "explorations", "copy_packet_in", "copy_packet_out", "copies_sent",
        "late_dropped", "dead_end_dropped", "duplicate_dropped", "unknown_dropped", "not_elephant"]
    added = ["arppath_explorations", "arppath_late_dropped", "arppath_dead_end_dropped",
             "arppath_fabric_miss", "arppath_path_fail", "arppath_repaired",
             # the exploration broadcast at the leaves (a scheme's copies_section)
             "leaf_copy_bytes", "leaf_rx_bytes", "bcast_data_pct"]
    assert [c for c in controller_stats.COLUMNS if c in historical] == historical
    assert sorted(controller_stats.COLUMNS) == sorted(historical + added)
    assert fairness.COLUMNS[-5:] == list(uc3_engine.COLUMNS)
    assert registry.host_parts("uc3").columns == uc3_engine.COLUMNS


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings, with their line."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            docs.add(id(body[0].value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_generic_code_names_no_scheme() -> None:
    names = set(registry.names()) | set(registry.host_part_names())
    modules = {s.app for s in registry.registry().schemes.values()}
    found = []
    for where in GENERIC:
        base = ROOT / where
        for path in sorted([base] if base.is_file() else base.rglob("*.py")):
            for line, text in _code_strings(path):
                if text in names or any(m in text for m in modules):
                    found.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert not found, "generic code names a scheme (declare it in dcnlab/schemes):\n" \
        + "\n".join(found)


@pytest.fixture
def with_scheme(monkeypatch: pytest.MonkeyPatch):
    """The real registry plus one scheme made for the test."""
    def add(scheme: Scheme) -> None:
        real = registry.registry()
        extended = registry.Registry({**real.schemes, scheme.name: scheme}, real.host_parts)
        monkeypatch.setattr(registry, "registry", lambda: extended)
    return add


def test_a_scheme_that_needs_ext_is_refused_on_ovs(with_scheme) -> None:
    with_scheme(Scheme("needs_ext", "dcnlab.apps.ecmp_needs_ext", "t",
                       requires_switch=("ext",)))
    with pytest.raises(SpecFileError, match=r"schemes\[0\]\.switch: scheme needs_ext runs "
                                            "only on switch kind ext, not ovs"):
        parse_spec(_spec(schemes=["needs_ext"]), check_apps=False)
    ok = parse_spec(_spec(schemes=[{"app": "needs_ext", "switch": "ext"}]), check_apps=False)
    assert ok.schemes[0].switch == "ext"


def test_scheme_topology_options_and_congestion_reach_its_networks(with_scheme) -> None:
    with_scheme(Scheme("marked", "dcnlab.apps.marked", "t", topology_options=("ecn=20",),
                       congestion="reno"))
    spec = parse_spec(_spec(schemes=["ecmp", "marked", {"app": "marked", "name": "m2",
                                                        "congestion": "cubic"}]),
                      check_apps=False)
    assert [s.congestion for s in spec.schemes] == [None, "reno", "cubic"]
    assert scheme_topology(spec, spec.schemes[0]) == "fattree:4"
    assert scheme_topology(spec, spec.schemes[1]) == "fattree:4,ecn=20"
    with_scheme(Scheme("bad", "dcnlab.apps.bad", "t", topology_options=("ecn=lots",)))
    with pytest.raises(SpecFileError, match=r"schemes\[0\]: the topology options of scheme "
                                            "bad"):
        parse_spec(_spec(schemes=["bad"]), check_apps=False)


def test_with_topology_options() -> None:
    assert with_topology_options("fattree:4", ()) == "fattree:4"
    assert with_topology_options("twopath", ("rate=10M", "ecn=5")) == "twopath:rate=10M,ecn=5"
    assert with_topology_options("fattree:4,rate=10M", ("ecn=5",)) == "fattree:4,rate=10M,ecn=5"
