"""controller/switch_balancer.py: the SET_GROUP_BALANCER encoder (the bytes are checked against the
switch's decoder in switch_ext/tests/vectors.rs) and the balancer an app asks for."""

from __future__ import annotations

import importlib

import pytest

from dcnlab.benchmarks.engine.runner import app_environment
from dcnlab.check import default_select_mode
from dcnlab.controller import switch_balancer as sb
from dcnlab.schemes import conga, drill, letflow, registry
from dcnlab.schemes.base import CheckContext
from dcnlab.topo.spec import parse


def test_body_layout_pads_to_eight_bytes() -> None:
    assert sb.group_balancer_body("rr", 2) == bytes.fromhex("00000002" "0002" "0000"
                                                              "7272000000000000")
    assert sb.group_balancer_body("random") == bytes.fromhex("fffffffc" "0006" "0000"
                                                               "72616e646f6d0000")
    # Empty: the group goes back to the switch default; the body is the header alone.
    assert sb.group_balancer_body("", 7) == bytes.fromhex("00000007" "0000" "0000")
    for spec in ("hash", "random", "rr"):
        assert len(sb.group_balancer_body(spec)) % 8 == 0


@pytest.mark.parametrize("kw, msg", [
    ({"spec": "spray"}, "unknown load balancer 'spray'; known: hash, rr, random"),
    ({"spec": "rr/k=1"}, "load balancer 'rr' has no option 'k'"),
    ({"spec": "Random"}, "expected NAME"),
    ({"spec": "rr", "group_id": -1}, "group -1"),
    ({"spec": "rr", "group_id": 1 << 32}, "not a 32-bit OpenFlow group id"),
])
def test_bad_arguments_are_refused(kw: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        sb.group_balancer_body(**kw)


def test_the_app_asks_for_its_own_balancer_or_the_environments_of_its_family() -> None:
    assert sb.balancer_from_env("letflow", ("letflow",), {}) == "letflow"
    env = {"DCNLAB_SELECT_MODE": "letflow/timeout=50ms"}
    assert sb.balancer_from_env("letflow", ("letflow",), env) == "letflow/timeout=50ms"
    assert sb.balancer_from_env("random", ("random", "rr"), {"DCNLAB_SELECT_MODE": "rr"}) == "rr"
    with pytest.raises(ValueError, match=r"DCNLAB_SELECT_MODE='rr': this app runs letflow$"):
        sb.balancer_from_env("letflow", ("letflow",), {"DCNLAB_SELECT_MODE": "rr"})
    with pytest.raises(ValueError, match="DCNLAB_SELECT_MODE='letflow/gap=1': load balancer "
                                         "'letflow' has no option 'gap'"):
        sb.balancer_from_env("letflow", ("letflow",), {"DCNLAB_SELECT_MODE": "letflow/gap=1"})


@pytest.mark.parametrize("name", ["letflow", "flowcell", "drill", "conga"])
def test_the_balancer_schemes_ask_for_their_own_balancer_on_ext_only(name: str) -> None:
    scheme = registry.get(name)
    app = importlib.import_module(scheme.app)
    cls = next(c for c in vars(app).values() if isinstance(c, type)
               and issubclass(c, sb.SwitchBalancerApp) and c.__module__ == app.__name__)
    assert cls.BALANCER == name and cls.FAMILY == (name,)
    assert scheme.options_for("ext")["select_mode"] == name
    assert registry.lookup(scheme.app) is scheme, "one app per scheme"
    assert scheme.refuses("ovs") == f"scheme {name} runs only on switch kind ext, not ovs"
    assert {c.kind for c in scheme.switch_columns} == {name}
    assert scheme.switch_columns[0].section == "balancer"


def test_a_check_runs_the_schemes_balancer_unless_told_otherwise() -> None:
    assert default_select_mode(registry.get("letflow")) == "letflow/timeout=200ms"
    assert letflow.timeout_ms("letflow/timeout=200ms") == 200
    assert letflow.timeout_ms("letflow/table=64/timeout=500us") == 0.5
    assert letflow.timeout_ms("letflow") is None
    assert default_select_mode(registry.get("flowcell")) == "flowcell"
    assert default_select_mode(registry.get("spray")) == "random"
    assert default_select_mode(registry.get("ecmp")) == "random"
    assert default_select_mode(None) == "random"


def test_the_engine_tells_the_app_the_balancer_its_switches_start_with() -> None:
    # An experiment's switch option alone reaches the app too (its own default would
    # otherwise replace the option when the switches connect); an env of its own wins.
    options = {"select_mode": "letflow/timeout=50ms", "seed": 3}
    assert app_environment({}, options, {}) == {"DCNLAB_SELECT_MODE": "letflow/timeout=50ms"}
    assert app_environment({"DCNLAB_SELECT_MODE": "letflow"}, options, {"X": "1"}) == {
        "DCNLAB_SELECT_MODE": "letflow", "X": "1"}
    assert app_environment({"A": "b"}, {"seed": 3}, {}) == {"A": "b"}


def test_the_switch_benchmark_rates_each_balancer_against_hash_in_the_same_run() -> None:
    from dcnlab.benchmarks import switch_throughput as bench

    rows = [bench.Result("ext/hash", 3, tcp_mbit=400, udp_rx_pps=50_000),
            bench.Result("ext/letflow", 3, tcp_mbit=380, udp_rx_pps=47_500),
            bench.Result("ext/drill/d=3", 3, tcp_mbit=200, udp_rx_pps=10_000)]
    text = bench.table(rows, [])
    rows_ = [ln.split() for ln in text.splitlines()]
    ratios = {r[1]: r[2:] for r in rows_ if len(r) > 1 and r[1] in ("letflow/hash", "drill/hash")}
    assert [r[1] for r in rows_ if len(r) > 1 and r[1].endswith("/hash")] == [
        "ext/hash", "letflow/hash", "drill/hash"], "one ratio row under each balancer's row"
    assert ratios == {"letflow/hash": ["0.95", "0.95"], "drill/hash": ["0.50", "0.20"]}


def test_drill_is_checked_on_shaped_fabrics_only() -> None:
    # Ports without a rate queue nothing: DRILL would keep each group's first port, so
    # its check says where it means something instead of failing on the spread.
    ctx = CheckContext(None, parse("twopath"), "ext", "drill", {}, [])
    fields, failures = drill.drill_follows_queues(ctx)
    assert fields == {} and failures == [
        "DRILL chooses by egress queue length and switch_ext ports without a rate queue "
        "nothing: check on a shaped fabric, e.g. --topo fattree:4 (100 Mbit/s links)"]
    assert registry.get("drill").check_topology == "fattree:4"


def test_drill_and_conga_need_a_shaped_fabric_to_check() -> None:
    ctx = CheckContext(None, parse("twopath"), "ext", "conga/timeout=50ms", {}, [])
    fields, failures = conga.new_flowlets_avoid_a_filled_path(ctx)
    assert fields == {} and len(failures) == 1
    assert failures[0].endswith("check on a shaped fabric, e.g. --topo fattree:4 (100 Mbit/s "
                                "links)")
    assert default_select_mode(registry.get("conga")) == "conga/timeout=50ms/age=5s"


def test_the_conga_app_numbers_the_leaves_from_the_topology() -> None:
    from dcnlab.apps import conga as app
    from dcnlab.controller.view import NetworkView

    class Stub:  # the app's balancer_for reads only these
        balancer = "conga/timeout=50ms"
        view = NetworkView.from_topology(parse("spineleaf:2,3,1"))
        warnings: list[str] = []

        def warn(self, text: str) -> None:
            self.warnings.append(text)

    stub = Stub()
    spec = parse("spineleaf:2,3,1")
    specs = {sw.tier: [] for sw in spec.switches}
    for sw in sorted(spec.switches, key=lambda s: s.dpid):
        specs[sw.tier].append(app.Conga.balancer_for(stub, sw.dpid))  # type: ignore[arg-type]
    assert specs["leaf"] == [f"conga/timeout=50ms/leaf={i}" for i in range(3)]
    assert specs["spine"] == ["conga/timeout=50ms"] * 2
    assert stub.warnings == []
