"""Topology spec strings: families, link options, addressing, errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dcnlab.model.balancers import BALANCERS, DEFAULT_BALANCER, check_balancer
from dcnlab.topo.spec import EXTERNAL_TIER, QDISCS, SpecError, TopologySpec, parse

QDISC_SOURCES = Path(__file__).parents[2] / "switch_ext" / "src" / "qdisc"
LB_SOURCES = Path(__file__).parents[2] / "switch_ext" / "src" / "lb"


@pytest.mark.parametrize(
    ("spec", "switches", "hosts"),
    [
        ("fattree:4", 20, 16),
        ("fattree:6", 45, 54),
        ("fattree:48", 2880, 27648),
        ("spineleaf:4,4,20", 8, 80),
        ("threelayer", 16, 8),
        ("incast:10", 1, 11),
        ("dumbbell", 2, 7),
        ("twopath", 3, 2),
        ("torcore:4,4", 5, 16),
        ("torcore:40,25", 41, 1000),  # the seed 002 paper's at-scale network (model only)
    ],
)
def test_family_sizes(spec: str, switches: int, hosts: int) -> None:
    topo = parse(spec)
    assert (len(topo.switches), len(topo.hosts)) == (switches, hosts)


def test_fattree_structure_and_addressing() -> None:
    topo = parse("fattree:4")
    tiers = [s.tier for s in topo.switches]
    assert (tiers.count("core"), tiers.count("agg"), tiers.count("edge")) == (4, 8, 8)
    assert len(list(topo.fabric_links())) == 32
    ips = [h.ip for h in topo.hosts]
    assert len(set(ips)) == 16 and ips[0] == "10.0.0.1"
    assert len({h.mac for h in topo.hosts}) == 16
    # every switch port is used once
    ports = [(lk.a, lk.a_port) for lk in topo.links] + [(lk.b, lk.b_port) for lk in topo.links]
    assert len(ports) == len(set(ports))


def test_torcore_is_non_blocking_tors_under_one_core() -> None:
    topo = parse("torcore:4,3,rate=100M,delay=400us,ingress@host=abq/k=20p")
    tiers = [s.tier for s in topo.switches]
    assert (tiers.count("core"), tiers.count("edge")) == (1, 4)
    core = next(s.name for s in topo.switches if s.tier == "core")
    uplinks = list(topo.fabric_links())
    assert len(uplinks) == 4 and all(core in (lk.a, lk.b) for lk in uplinks)
    # each ToR's uplink carries all its hosts at line rate; delay and qdiscs as given
    assert {lk.params.rate_mbit for lk in uplinks} == {300.0}
    assert {lk.params.delay_us for lk in topo.links} == {400}
    host_links = [lk for lk in topo.links if lk not in uplinks]
    assert len(host_links) == 12 and {lk.params.rate_mbit for lk in host_links} == {100.0}
    assert all(lk.params.qdisc("ingress", True) == "abq/k=20p" for lk in topo.links)
    # hosts of a ToR share its /24, every switch port is used once
    racks = {h.interfaces[0].switch: {h.ip.rsplit(".", 1)[0]} for h in topo.hosts}
    assert len(racks) == 4 and all(len(v) == 1 for v in racks.values())
    ports = [(lk.a, lk.a_port) for lk in topo.links] + [(lk.b, lk.b_port) for lk in topo.links]
    assert len(ports) == len(set(ports))
    assert parse(topo.spec).spec == topo.spec


def test_link_options_apply_to_every_link() -> None:
    topo = parse("fattree:4,rate=10M,delay=25us,jitter=1ms,buffer=100,ecn=20")
    p = topo.default_params
    assert (p.rate_mbit, p.delay_us, p.jitter_us, p.buffer_pkts, p.ecn_threshold_pkts) == (
        10.0, 25, 1000, 100, 20)
    assert all(lk.params == p for lk in topo.links)
    assert parse("fattree:4,buffer=64KB").default_params.buffer_bytes == 65536
    assert topo.spec == "fattree:4,rate=10M,delay=25us,jitter=1ms,buffer=100,ecn=20"


def test_one_link_overrides_its_parameters_in_either_order() -> None:
    topo = parse("fattree:4,link@s17-s1=rate=10M/delay=1ms,rate=100M,delay=25us")
    assert topo.spec == "fattree:4,rate=100M,delay=25us,link@s17-s1=rate=10M/delay=1ms"
    assert parse(topo.spec).spec == topo.spec  # the canonical form parses to itself
    other = {(lk.a, lk.b): lk.params for lk in topo.links if lk.params != topo.default_params}
    (ends, params), = other.items()  # one link only, whichever way round it was built
    assert set(ends) == {"s1", "s17"}
    assert (params.rate_mbit, params.delay_us) == (10.0, 1000)
    assert params.buffer_pkts == topo.default_params.buffer_pkts  # the rest as everywhere
    assert len(topo.links) == len(parse("fattree:4").links)


def test_dumbbell_groups_have_the_seed_access_delays() -> None:
    topo = parse("dumbbell:8,2")
    delays = {lk.a: lk.params.delay_us for lk in topo.host_links()}
    groups = {h.name: h.group for h in topo.hosts if h.role == "client"}
    a = [delays[h] for h, g in groups.items() if g == "A"]
    b = [delays[h] for h, g in groups.items() if g == "B"]
    assert min(a) == 2000 and max(a) == 6000 and min(b) == 10000 and max(b) == 16000
    assert [h.role for h in topo.hosts].count("udp") == 2


def test_dumbbell_outside_switch_holds_group_a2_and_the_udp_sender() -> None:
    # The seed's Fig. 4: A'' clients and a UDP sender behind R5, outside the DC edge.
    topo = parse("dumbbell:16,2,4")
    tiers = {s.name: s.tier for s in topo.switches}
    assert tiers == {"s1": "edge", "s2": "edge", "s3": EXTERNAL_TIER}
    by_group: dict[str, list[str]] = {}
    for h in topo.hosts:
        by_group.setdefault(h.group, []).append(h.name)
    where = {h.name: h.interfaces[0].switch for h in topo.hosts}
    assert len(by_group["A''"]) == 5 and {where[h] for h in by_group["A''"]} == {"s3"}
    clients = [h for h in topo.hosts if h.role == "client"]
    assert sum(h.group == "A''" for h in clients) == 4
    assert sum(h.group == "A'" for h in clients) == 4 and sum(h.group == "B" for h in clients) == 8
    (sender,) = [h for h in topo.hosts if h.role == "udp"]
    (sink,) = [h for h in topo.hosts if h.role == "udp_sink"]
    assert where[sender.name] == "s3" and where[sink.name] == "s1" and sink.group == "A'"
    assert all(h.ip.startswith("10.0.1.") for h in topo.hosts if where[h.name] == "s3")
    assert len({h.ip for h in topo.hosts}) == len(topo.hosts)
    # The outside link is a 1 ms link at the link rate, like the core.
    (out,) = [lk for lk in topo.links if {lk.a, lk.b} == {"s1", "s3"}]
    assert out.params.delay_us == 1000 and out.params.rate_mbit == 100.0
    # Access delays stay the groups' (A'' are the slower half of group A).
    delays = {lk.a: lk.params.delay_us for lk in topo.host_links()}
    assert all(2000 <= delays[h] <= 6000 for h in by_group["A''"] + by_group["A'"])
    # X = 0 is the plain dumbbell.
    assert parse("dumbbell:16,2,0").switches == parse("dumbbell:16,2").switches


def test_twopath_client_has_two_interfaces() -> None:
    client = parse("twopath").host("h1")
    assert len(client.interfaces) == 2
    assert client.interfaces[0].switch != client.interfaces[1].switch


def test_dict_round_trip() -> None:
    topo = parse("spineleaf:2,3,2,rate=50M")
    again = TopologySpec.from_dict(topo.to_dict())
    assert again == topo


def test_queue_disciplines_by_direction_and_port_scope() -> None:
    topo = parse("incast:4,rate=100M,ingress@host=abq/k=20p/mode=ece,"
                 "egress=droptail/buffer=50p/ecn=10p,egress@fabric=droptail/ecn=5p")
    p = topo.default_params
    assert (p.ingress_host, p.ingress_fabric) == ("abq/k=20p/mode=ece", None)
    # A scoped option after an unscoped one overrides it on its ports only.
    assert (p.egress_host, p.egress_fabric) == ("droptail/buffer=50p/ecn=10p",
                                                "droptail/ecn=5p")
    assert p.qdisc("ingress", towards_host=True) == "abq/k=20p/mode=ece"
    assert p.qdisc("ingress", towards_host=False) is None
    assert p.qdisc("egress", towards_host=False) == "droptail/ecn=5p"
    assert p.buffer_pkts == 80  # the family default stays; egress= replaces it at the switch
    assert all(lk.params == p for lk in topo.links)
    assert topo.spec == ("incast:4,rate=100M,ingress@host=abq/k=20p/mode=ece,"
                         "egress=droptail/buffer=50p/ecn=10p,egress@fabric=droptail/ecn=5p")
    assert TopologySpec.from_dict(topo.to_dict()) == topo
    assert topo.needs_emulation()
    assert parse("fattree:4,ingress=abq").default_params.ingress_fabric == "abq"
    plain = parse("fattree:4,rate=10M").default_params
    assert not plain.has_qdisc() and not plain.needs_emulation()


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("fattree:4,ingress@edge=abq", "unknown scope @edge"),
        ("fattree:4,ingress=ABQ", "expected NAME[/KEY=VALUE]"),
        ("fattree:4,egress=droptail/buffer", "expected NAME[/KEY=VALUE]"),
        ("fattree:4,egress=droptail/buffer=20p/", "expected NAME[/KEY=VALUE]"),
        ("fattree:4,ingress=abq/k=a;b", "expected NAME[/KEY=VALUE]"),
        ("fattree:4,queue@host=abq", "unknown link option"),
        # Names and option keys the switch would refuse are refused here, naming the
        # known ones (QDISCS, held to switch_ext's registry below).
        ("fattree:4,egress=nosuch/x=1", "unknown egress discipline 'nosuch'; known: droptail"),
        ("fattree:4,ingress@host=red", "unknown ingress discipline 'red'; known: abq"),
        ("fattree:4,egress@fabric=abq/k=20p", "abq is an ingress discipline"),
        ("fattree:4,egress=droptail/k=5p",
         "egress discipline 'droptail' has no option 'k'; known: buffer, ecn"),
        ("fattree:4,ingress=abq/k=20p/window=1",
         "ingress discipline 'abq' has no option 'window'; known: k, mode,"),
        ("fatree:4", "unknown family"),
        ("fattree:5", "even K"),
        ("fattree:x", "not an integer"),
        ("spineleaf:1,2", "takes 3..3 numbers"),
        ("fattree:4,foo=1", "unknown link option"),
        ("fattree:4,rate=-1", "rate must be positive"),
        ("fattree:4,rate=10M,2", "numbers must come before"),
        ("incast:0", "1 <= N"),
        ("torcore:4", "takes 2..2 numbers"),
        ("torcore:0,4", "1..64 ToRs"),
        ("torcore:4,65", "1..64 hosts"),
        ("spineleaf:1,1,300", "addressing overflow"),
        ("dumbbell:4,2,3", "0 <= X <= N/2"),
        ("dumbbell:8,1,2", "U must be even"),
        ("fattree:4,link@s1-s99=rate=1M", "no link between s1 and s99; s1 links to s13, s17"),
        ("fattree:4,link@s1=rate=1M", "name the link's two ends"),
        ("fattree:4,link@s1-s17=loss=1", "a link takes rate, delay, jitter, buffer or ecn"),
        ("fattree:4,link@s1-s17=rate=fast", "rate 'fast' is not a number"),
        ("fattree:4,link@s99-s1=rate=1M", "no node s99"),
    ],
)
def test_bad_specs_say_why_and_list_valid_forms(spec: str, why: str) -> None:
    with pytest.raises(SpecError) as err:
        parse(spec)
    text = str(err.value)
    assert why in text
    assert "valid forms:" in text and "fattree:K" in text and "spineleaf:S,L,H" in text


def _rust_option_keys(source: str, module: str) -> tuple[str, ...]:
    """The keys a discipline's constructor accepts: the list it names when it refuses an
    unknown one (``unknown_option(k, &["buffer", "ecn"])``, or ``unknown_option(k,
    OPTIONS)`` with ``const OPTIONS: &[&str] = &[...]``)."""
    lists = set(re.findall(r"unknown_option\(\w+,\s*(&\[[^\]]*\]|\w+)\)", source))
    assert len(lists) == 1, (f"{module}.rs: expected one unknown_option(key, KNOWN) list, "
                             f"found {lists}; update this test's reading of the Rust sources")
    known = lists.pop()
    if not known.startswith("&["):
        const = re.search(rf"const {known}: &\[&str\] = (&\[[^\]]*\]);", source)
        assert const, f"{module}.rs: no const {known}"
        known = const.group(1)
    return tuple(re.findall(r'"([^"]+)"', known))


def _rust_registry(sources: Path, table_name: str) -> dict[str, tuple[str, ...]]:
    """One of switch_ext's registries (``pub const TABLE: &[(&str, Ctor)] = &[...]`` in
    ``sources/mod.rs``, each entry ``(module::NAME, module::build)``), read from its
    sources: name -> option keys, in registry order."""
    registry = (sources / "mod.rs").read_text()
    table = re.search(rf"pub const {table_name}: &\[\(&str, \w+\)\] =\s*&\[(.*?)\];",
                      registry, re.S)
    assert table, f"no {table_name} table in {sources.name}/mod.rs"
    # (module::NAME, module::build) or, as switch_ext/README.md shows, ("name", ...)
    entries = re.findall(r'\(\s*(?:"([^"]+)"|\w+::NAME)\s*,\s*(\w+)::build\s*\)',
                         table.group(1))
    assert len(entries) == table.group(1).count("("), \
        f"{table_name}: every entry should read (module::NAME, module::build)"
    found: dict[str, tuple[str, ...]] = {}
    for literal, module in entries:
        source = (sources / f"{module}.rs").read_text()
        name = literal or re.search(r'pub const NAME: &str = "([^"]+)";', source)
        assert name, f"{module}.rs: no pub const NAME"
        found[name if literal else name.group(1)] = _rust_option_keys(source, module)
    return found


def _rust_qdiscs() -> dict[str, dict[str, tuple[str, ...]]]:
    """switch_ext's queue-discipline registry (qdisc/mod.rs: EGRESS, INGRESS)."""
    return {d: _rust_registry(QDISC_SOURCES, d.upper()) for d in ("egress", "ingress")}


def test_load_balancers_known_here_are_switch_exts() -> None:
    """BALANCERS (switch options and the app's encoder check names and keys against it)
    is switch_ext's registry (lb/mod.rs: BALANCERS): the same names in the same order
    (the first is the default) and the same option keys."""
    rust = _rust_registry(LB_SOURCES, "BALANCERS")
    assert list(rust)[:3] == ["hash", "rr", "random"]
    assert list(BALANCERS.items()) == list(rust.items())
    assert DEFAULT_BALANCER == "hash"


@pytest.mark.parametrize(("text", "why"), [
    ("spray", "unknown load balancer 'spray'; known: hash, rr, random, letflow, drill, "
              "flowcell, conga"),
    ("rr/k=1", "load balancer 'rr' has no option 'k'; known: none"),
    ("RR", "expected NAME[/KEY=VALUE]"),
    ("rr/", "expected NAME[/KEY=VALUE]"),
])
def test_bad_balancers_say_why(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        check_balancer(text)
    assert check_balancer("random") == "random"


def test_queue_disciplines_known_here_are_switch_exts() -> None:
    """QDISCS (the spec parser checks names and keys against it) is switch_ext's
    registry: the same directions, names in the same order (the first egress one is the
    default) and the same option keys."""
    rust = _rust_qdiscs()
    assert rust["egress"] and rust["ingress"]
    assert {d: list(t.items()) for d, t in QDISCS.items()} == \
        {d: list(t.items()) for d, t in rust.items()}


def test_every_known_discipline_and_key_is_accepted() -> None:
    for direction, names in QDISCS.items():
        for name, keys in names.items():
            text = "/".join([name, *(f"{key}=1" for key in keys)])
            params = parse(f"fattree:4,{direction}@host={text}").default_params
            assert params.qdisc(direction, towards_host=True) == text


def test_twopath_has_the_seed_003_paths_and_reorder_is_an_option() -> None:
    from dcnlab.topo.ext_switch import egress_options

    spec = parse("twopath")
    h1 = {lk.a_port: lk.params for lk in spec.links if lk.a == "h1"}
    assert (h1[0].rate_mbit, h1[0].delay_us, h1[0].jitter_us) == (500.0, 10000, 7500)
    assert (h1[1].rate_mbit, h1[1].delay_us, h1[1].jitter_us) == (150.0, 100000, 75000)
    assert not h1[0].reorder
    assert "reorder" not in egress_options(h1[0], towards_host=True)
    scaled = {lk.a_port: lk.params for lk in parse("twopath:rate=100M,reorder=1").links
              if lk.a == "h1"}
    assert (scaled[0].rate_mbit, scaled[1].rate_mbit) == (100.0, 30.0)
    assert scaled[1].delay_us == 100000 and scaled[1].reorder
    assert "reorder" in egress_options(scaled[1], towards_host=True)
    with pytest.raises(SpecError, match="reorder"):
        parse("twopath:reorder=maybe")
