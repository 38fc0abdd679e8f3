"""Experiment spec files (YAML): schema, validation, and the parsed form.

Everything is checked before anything runs; a bad file raises :class:`SpecFileError`
whose message starts with the field's path (``workload.cdf: ...``, ``schemes[1].app:
...``, ``loads[2]: ...``).  Schema (defaults in brackets)::

    name: ecmp_vs_single          # [file name]
    topology: fattree:4           # topology spec string (dcnlab.topo.spec)
    switch: ovs                   # [ovs] ovs | ext | ofss
    link:                         # optional: link parameters for every link
      rate: 10M                   #   Mbit/s (also 1G, 500k)
      delay: 25us                 #   needs switch ext (no netem on this machine)
      jitter: 0
      buffer: 100                 #   packets, or a size: 64KB
      ecn: 20                     #   CE marking threshold, packets
    schemes:                      # compared schemes: a scheme's short name (`dcnlab
      - ecmp                      #   schemes` lists them) or a Ryu app module/file
      - dcnlab.apps.ecmp          #   name = last component ("ecmp")
      - name: single
        app: single_path          #   short name or module
        env: {KEY: value}         #   extra environment for ryu-manager (over the
                                  #   scheme's defaults)
        switch: ext               #   [experiment's switch]
        switch_options: {select_mode: random}   # passed to the switch kind, over the
                                  #   scheme's defaults for that kind; with
                                  #   network: per_run, ext switches get seed: <run seed>
        app_args: []              #   extra ryu-manager arguments
        agents: none              #   host parts (agents) the scheme needs: none or a
                                  #   kind a scheme declares (`dcnlab schemes`) [the
                                  #   scheme's own, else none]: started in every TCP
                                  #   sender, the traffic agents join their cgroups
        agents_interval: 0.1      #   s, the host agents' report period [the kind's
                                  #   default]
        congestion: dctcp         #   TCP congestion control of this scheme's senders
                                  #   [the scheme's own, else the experiment's]; dctcp
                                  #   works without the kernel module (hosts/dctcp: a
                                  #   BPF DCTCP registered while the network runs)
        topology_options: [ecn=40p]   # topology-spec options this scheme's networks
                                  #   get on top of the experiment's (and its own)
        transport_options: {scheduler: ecf}   # for a scheme with a transport (`dcnlab
                                  #   schemes`): its options, over the scheme's defaults
    baseline: ecmp                # [the first scheme of the registry's baseline (ECMP),
                                  #  else the first scheme]; a list ([ecmp, single])
                                  #  also reports ratios to the others, table by table
    workload:
      type: poisson               # poisson | incast | rps_static | rps_random | longlived
                                  #   | sizes | incast_size | shortlong
      ...                         # the type's parameters (workloads.py)
    loads: [0.2, 0.4]             # sweep values; meaning depends on the workload type
    seeds: [1, 2, 3]
    duration: 20                  # s: arrival window (poisson), run length (longlived)
    warmup: 2                     # s: flows starting earlier are not measured
    cooldown: 2                   # s: flows starting in the last cooldown s are not measured
    drain: 60                     # s: after the last scheduled start, wait this long for
                                  #    running flows; then they are recorded unfinished
    settle: 1                     # s: idle pause between runs on one network
    network: per_scheme           # per_scheme (reuse a network for seeds and loads) | per_run
    classes: {mouse_max: 10KB, elephant_min: 10MB}  # mouse < mouse_max <= rabbit
                                  #   <= elephant_min < elephant
    marking: {elephant_min: 10MB, ports: true, dscp: 0,
              elephant_ports: [30001, 60999], other_ports: [10000, 29999]}
    congestion: cubic             # [cubic] per-host TCP congestion control, or a mapping
                                  #  {default: cubic, h3: reno}; null keeps the host default
    sysctls:                      # [none] TCP settings of every host's namespace, e.g.
      net.ipv4.tcp_reordering: 3  #  reordering tolerance, RACK (tcp_recovery) on/off;
      net.ipv4.tcp_recovery: 0    #  net.ipv4.tcp_* only (per namespace, never the machine)
    rto_min: 10ms                 # [null: kernel default] RTO floor on every host route
                                  #  (ip route ... rto_min); hosts of a scheme using dctcp
                                  #  also get ECN on (net.ipv4.tcp_ecn=1)
    plots: [...]                  # [none] figures in a paper's shape, and rank tables
    tables: [...]                 #  (figures.py has the schema)
    slowdown_bins: [100KB, 10MB]  # FCT slowdown by flow size: bins below, between and
                                  #  above these sizes (slowdown.py)
    events:                       # [none] fabric events at set times of every run
      - {at: 5, type: cut, link: s1-s17}       #  (events.py): cut, restore, flap
      - {at: 8, type: restore, link: s1-s17}
    diagnosis: {flow_paths: false, interval: 0.2}   # flow_paths: a tc tap on every
                                  #  fabric link records which links each flow took and
                                  #  each port's load every `interval` s (0.05..5):
                                  #  flowpaths.csv, flowdiag.csv (flowdiag.py) [off: it
                                  #  costs CPU]
    agent: {port: 5001, sample_interval: 0}   # sample_interval > 0: RTT/cwnd samples
                                  #  rx_interval: receiver bytes per flow every so many s
                                  #  (fairness.csv) [0.1 for longlived, else 0 = off]
    scenarios:                    # optional: several experiments in one file, each the
      static:                     #   top-level fields with these replaced; results go to
        workload: {type: rps_static}   # OUT/<scenario>/
        loads: [0, 1, 2]
      random: {workload: {type: rps_random}, loads: [1, 2, 4]}
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from dcnlab.hosts import dctcp
from dcnlab.hosts.dctcp import RTO_MIN_RE
from dcnlab.schemes import registry
from dcnlab.schemes.base import with_topology_options
from dcnlab.topo.spec import SpecError, TopologySpec
from dcnlab.topo.spec import parse as parse_topology

from . import figures, schema, slowdown
from .cdf import CdfError, load_cdf
from .events import Event, parse_events
from .marking import Marking
from .schema import SpecFileError, from_mapping, join
from .workloads import WORKLOAD_TYPES, PoissonWorkload, Workload, WorkloadError, generate

CONGESTION_FILE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
APP_PACKAGE = "dcnlab.apps"
NO_AGENTS = "none"
RX_INTERVAL_LONGLIVED = 0.1  # the seed-004 paper's throughput period


@dataclass(frozen=True)
class LinkOptions:
    rate: float | None = schema.field(None, unit="mbit", min=0.001)
    delay: float | None = schema.field(None, unit="seconds", min=0.0)
    jitter: float | None = schema.field(None, unit="seconds", min=0.0)
    buffer: str | None = schema.field(None, doc="packets (100) or bytes (64KB)")
    ecn: int | None = schema.field(None, min=1)

    def topology_options(self) -> list[str]:
        """The same parameters as topology spec options (``rate=10M``...)."""
        opts = []
        if self.rate is not None:
            opts.append(f"rate={self.rate:g}M")
        if self.delay is not None:
            opts.append(f"delay={self.delay * 1e6:g}us")
        if self.jitter is not None:
            opts.append(f"jitter={self.jitter * 1e6:g}us")
        if self.buffer is not None:
            opts.append(f"buffer={self.buffer}")
        if self.ecn is not None:
            opts.append(f"ecn={self.ecn}")
        return opts


@dataclass(frozen=True)
class Scheme:
    name: str
    app: str
    env: dict[str, str] = schema.field({})
    switch: str | None = None
    switch_options: dict[str, Any] = schema.field({})
    app_args: list[str] = schema.field([])
    # Host parts the scheme needs (a declared kind, or "none"); None until parsed, then
    # the scheme's own (see _resolve).
    agents: str | None = None
    # The host agents' report period (per-flow RTT and throughput); None: the default.
    agents_interval: float | None = schema.field(None, unit="seconds", min=0.01, max=10.0)
    # TCP congestion control of the scheme's senders; None: the experiment's per host.
    congestion: str | None = None
    # Topology-spec options for this scheme's networks only (after the registered
    # scheme's own).
    topology_options: list[str] = schema.field([])
    # options of the scheme's transport (over the registered scheme's defaults)
    transport_options: dict[str, Any] = schema.field({})


@dataclass(frozen=True)
class Classes:
    """Size classes: mouse < mouse_max <= rabbit <= elephant_min < elephant."""

    mouse_max: int = schema.field(10_000, unit="bytes", min=1)
    elephant_min: int = schema.field(10_000_000, unit="bytes", min=1)

    def __post_init__(self) -> None:
        if self.elephant_min < self.mouse_max:
            raise ValueError("classes.elephant_min must not be below classes.mouse_max")


@dataclass(frozen=True)
class AgentOptions:
    port: int = schema.field(5001, min=1, max=65535)
    sample_interval: float = schema.field(0.0, unit="seconds", min=0.0)
    # None until parsed: RX_INTERVAL_LONGLIVED for longlived workloads, else 0 (off).
    rx_interval: float | None = schema.field(None, unit="seconds", min=0.0)


@dataclass(frozen=True)
class Diagnosis:
    """Per-run elephant path diagnosis (flowtap.py, flowdiag.py)."""

    flow_paths: bool = schema.field(False)
    interval: float = schema.field(0.2, unit="seconds", min=0.05, max=5.0)


@dataclass(frozen=True)
class ExperimentSpec:
    name: str
    topology: str  # canonical topology spec, link options included
    switch: str
    schemes: list[Scheme]
    baseline: str  # the one every section's ratios refer to
    workload_type: str
    workload: Any  # one of the workload dataclasses
    loads: list[float]
    seeds: list[int]
    duration: float
    warmup: float
    cooldown: float
    drain: float
    settle: float
    network: str
    classes: Classes
    marking: Marking
    congestion: dict[str, str | None]  # host name or "default" -> algorithm
    agent: AgentOptions
    rto_min: str | None = None  # e.g. "10ms": RTO floor on the hosts' routes
    sysctls: dict[str, str] = field(default_factory=dict)  # net.ipv4.tcp_* per host
    other_baselines: list[str] = field(default_factory=list)  # more ratio tables
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    # figures and rank tables drawn from the summary (figures.py), as validated data
    plots: list[dict[str, Any]] = field(default_factory=list)
    tables: list[dict[str, Any]] = field(default_factory=list)
    # flow-size bin edges (bytes) of the FCT slowdown section (slowdown.py)
    slowdown_bins: tuple[int, ...] = slowdown.DEFAULT_EDGES
    events: list[Event] = field(default_factory=list)  # fabric events (events.py)
    scenario: str | None = None  # its name, when the file has scenarios
    source: Path | None = None  # the spec file
    raw: dict[str, Any] = field(default_factory=dict)  # the YAML mapping as read

    @property
    def base_dir(self) -> Path | None:
        return self.source.parent if self.source is not None else None

    @property
    def sweep(self) -> str:
        return str(self.workload.SWEEP)

    def topo(self) -> TopologySpec:
        return parse_topology(self.topology)

    def congestion_for(self, host: str) -> str | None:
        return self.congestion.get(host, self.congestion.get("default"))

    def measure_window(self) -> tuple[float, float]:
        """Flows starting in [low, high) are measured (warm-up and cool-down excluded)."""
        if self.duration <= 0:
            return 0.0, float("inf")
        return self.warmup, self.duration - self.cooldown


# Top-level fields and the order they are checked in.
_TOP = ["name", "topology", "switch", "link", "schemes", "baseline", "workload", "loads",
        "seeds", "duration", "warmup", "cooldown", "drain", "settle", "network", "classes",
        "marking", "congestion", "rto_min", "sysctls", "diagnosis", "agent", "plots",
        "tables", "slowdown_bins", "events", "scenarios"]
_NEEDS_DURATION = {"poisson", "longlived", "shortlong"}


def parse_seeds(text: str) -> list[int]:
    """A seed list as a command line gives it: ``1-10``, ``4,7`` or ``1-3,8``, in that
    order, each seed once; ValueError says what is wrong."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            first, last = int(lo), int(hi if sep else lo)
        except ValueError:
            raise ValueError(f"seeds {text!r}: {part.strip()!r} is not a seed or a range "
                             "such as 1-10") from None
        if first < 0 or last < first:
            raise ValueError(f"seeds {text!r}: {part.strip()!r} is not a range LOW-HIGH "
                             "with 0 <= LOW <= HIGH")
        seeds.extend(range(first, last + 1))
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise ValueError(f"seeds {text!r}: {', '.join(map(str, repeated))} given twice")
    return seeds


def load_spec(path: str | os.PathLike[str]) -> ExperimentSpec:
    """Read and validate a spec file without scenarios (see :func:`load_specs`)."""
    specs = load_specs(path)
    if len(specs) != 1 or specs[0].scenario is not None:
        raise SpecFileError("scenarios", f"{path} holds {len(specs)} scenarios; use "
                            "load_specs()")
    return specs[0]


def load_specs(path: str | os.PathLike[str]) -> list[ExperimentSpec]:
    """Read and validate a spec file: one spec, or one per scenario, all checked before
    any is returned.  Raises SpecFileError naming the field."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise SpecFileError("", f"cannot read spec file {p}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecFileError("", f"{p}: not valid YAML{where}: "
                            f"{getattr(exc, 'problem', None) or exc}") from None
    return parse_specs(data, source=p.absolute())


def parse_specs(data: Any, source: Path | None = None,
                check_apps: bool = True) -> list[ExperimentSpec]:
    """Validate a spec mapping that may hold ``scenarios``."""
    if not isinstance(data, dict) or "scenarios" not in data:
        return [parse_spec(data, source, check_apps)]
    scenarios = data["scenarios"]
    if not isinstance(scenarios, dict) or not scenarios:
        raise SpecFileError("scenarios", "expected a mapping of scenario name -> fields")
    base = {k: v for k, v in data.items() if k != "scenarios"}
    name = str(base.get("name") or (source.stem if source else "experiment"))
    specs = []
    for scenario, overrides in scenarios.items():
        where = join("scenarios", str(scenario))
        if not isinstance(overrides, dict):
            raise SpecFileError(where, "expected a mapping of fields to replace")
        _path_name(str(scenario), where)
        for key in ("name", "scenarios"):
            if key in overrides:
                raise SpecFileError(join(where, key), "cannot be set per scenario")
        merged = {**base, **overrides, "name": name}
        try:
            spec = parse_spec(merged, source, check_apps)
        except SpecFileError as exc:
            top = exc.field.split(".", 1)[0].split("[", 1)[0]
            if top in overrides:
                raise SpecFileError(join(where, exc.field),
                                    str(exc).removeprefix(f"{exc.field}: ")) from None
            raise
        specs.append(replace(spec, scenario=str(scenario)))
    return specs


def parse_spec(data: Any, source: Path | None = None,
               check_apps: bool = True) -> ExperimentSpec:
    """Validate a spec mapping (as loaded from YAML)."""
    if not isinstance(data, dict):
        raise SpecFileError("", "an experiment spec must be a YAML mapping of fields")
    schema.unknown_keys(data, _TOP, "")
    if "scenarios" in data:
        raise SpecFileError("scenarios", "this spec has scenarios: use parse_specs()")
    base_dir = source.parent if source is not None else None

    name = _path_name(_string(data, "name", default=source.stem if source else "experiment"),
                      "name")
    link = from_mapping(LinkOptions, data.get("link"), "link")
    topo_text = _string(data, "topology")
    topo = _topology(topo_text, link)
    switch = _string(data, "switch", default="ovs")
    _check_switch(switch, "switch")

    schemes = _schemes(data.get("schemes"), check_apps)
    _check_scheme_needs(schemes, switch, topo.spec)
    baseline, *other_baselines = _baselines(data.get("baseline"), schemes)

    wtype, workload = _workload(data.get("workload"))
    loads = schema.convert(_required(data, "loads"), list[float], "loads")
    if not loads:
        raise SpecFileError("loads", "needs at least one value")
    seeds = schema.convert(_required(data, "seeds"), list[int], "seeds")
    if not seeds:
        raise SpecFileError("seeds", "needs at least one seed")
    _unique(loads, "loads")
    _unique(seeds, "seeds")

    needs = wtype in _NEEDS_DURATION
    duration = _seconds(data, "duration", None if needs else 0.0)
    if needs and duration <= 0:
        raise SpecFileError("duration", f"must be positive for workload type {wtype}")
    warmup = _seconds(data, "warmup", 0.0)
    cooldown = _seconds(data, "cooldown", 0.0)
    if duration > 0 and warmup + cooldown >= duration:
        raise SpecFileError("warmup", f"warmup ({warmup:g} s) + cooldown ({cooldown:g} s) "
                            f"leave nothing of the {duration:g} s duration to measure")
    drain = _seconds(data, "drain", 60.0)
    settle = _seconds(data, "settle", 1.0)
    network = schema.convert(data.get("network", "per_scheme"), str, "network",
                             {"choices": ("per_scheme", "per_run")})
    classes = from_mapping(Classes, data.get("classes"), "classes")
    marking = from_mapping(Marking, data.get("marking"), "marking")
    congestion = _congestion(data.get("congestion", "cubic"), topo)
    rto_min = data.get("rto_min")
    if rto_min is not None:
        rto_min = str(rto_min)
        if not RTO_MIN_RE.match(rto_min):
            raise SpecFileError("rto_min", f"{rto_min!r}: expected a duration like 10ms, "
                                "200us or 1s")
    sysctls = _sysctls(data.get("sysctls"))
    diagnosis = from_mapping(Diagnosis, data.get("diagnosis"), "diagnosis")
    if diagnosis.flow_paths:
        _check_diagnosis(topo, switch, schemes)
    agent = from_mapping(AgentOptions, data.get("agent"), "agent")
    plots = figures.parse_plots(data.get("plots"))
    tables = figures.parse_tables(data.get("tables"))
    slowdown_bins = _slowdown_bins(data.get("slowdown_bins"))
    fabric_events = parse_events(data.get("events"), topo)
    if agent.rx_interval is None:
        agent = replace(agent, rx_interval=RX_INTERVAL_LONGLIVED if wtype == "longlived"
                        else 0.0)
    elif 0 < agent.rx_interval < 0.01:
        raise SpecFileError("agent.rx_interval", f"{agent.rx_interval:g} s is shorter than "
                            "the traffic agents can sample (0.01 s); 0 turns it off")

    spec = ExperimentSpec(
        name=name, topology=topo.spec, switch=switch, schemes=schemes, baseline=baseline,
        other_baselines=other_baselines,
        workload_type=wtype, workload=workload, loads=loads, seeds=seeds, duration=duration,
        warmup=warmup, cooldown=cooldown, drain=drain, settle=settle, network=network,
        classes=classes, marking=marking, congestion=congestion, agent=agent,
        rto_min=rto_min, sysctls=sysctls, plots=plots, tables=tables, source=source,
        raw=data, diagnosis=diagnosis, slowdown_bins=slowdown_bins,
        events=fabric_events)
    _check_workload(spec, topo, base_dir)
    return spec


# ---------------------------------------------------------------------------


def _check_diagnosis(topo: TopologySpec, switch: str, schemes: list[Scheme]) -> None:
    """The flow tap needs switch-to-switch links and switch kinds that read their ports'
    veths with AF_PACKET (their ``veth_tap``), where its ingress hook sees every frame."""
    from dcnlab.topo.switches import SwitchKindError, get_switch_kind, switch_kinds

    names = {s.name for s in topo.switches}
    if not any(lk.a in names and lk.b in names for lk in topo.links):
        raise SpecFileError("diagnosis.flow_paths", f"topology {topo.spec} has no "
                            "switch-to-switch links to trace")
    for kind in dict.fromkeys([switch, *(s.switch for s in schemes if s.switch)]):
        try:
            tapped = get_switch_kind(kind).veth_tap
        except SwitchKindError as exc:
            raise SpecFileError("diagnosis.flow_paths", str(exc)) from None
        if not tapped:
            able = [k for k in switch_kinds() if get_switch_kind(k).veth_tap]
            raise SpecFileError("diagnosis.flow_paths", f"switch kind {kind!r} is not "
                                f"supported; the flow tap works with {', '.join(able)}")


def _required(data: dict[str, Any], key: str) -> Any:
    if key not in data or data[key] is None:
        raise SpecFileError(key, "required field is missing")
    return data[key]


def _string(data: dict[str, Any], key: str, default: str | None = None) -> str:
    if key not in data and default is not None:
        return default
    return str(schema.convert(_required(data, key), str, key))


def _seconds(data: dict[str, Any], key: str, default: float | None) -> float:
    if data.get(key) is None:
        if default is None:
            raise SpecFileError(key, "required field is missing")
        return default
    value = float(schema.convert(data[key], float, key, {"unit": "seconds"}))
    if value < 0:
        raise SpecFileError(key, f"must not be negative, got {value:g}")
    return value


_PATH_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def _path_name(name: str, where: str) -> str:
    """``name`` if it can name a directory under the output directory (results go to
    OUT/<scenario>/runs/<scheme>/...): no separators, no leading dot, no '..'."""
    if not _PATH_NAME.fullmatch(name) or len(name) > 100:
        raise SpecFileError(where, f"{name!r}: names become directory names: use letters, "
                            "digits, '-', '_' and '.' (not first), at most 100 characters")
    return name


def _unique(values: list[Any], where: str) -> None:
    seen = set()
    for i, v in enumerate(values):
        if v in seen:
            raise SpecFileError(join(where, i), f"{v} appears twice")
        seen.add(v)


def _topology(text: str, link: LinkOptions) -> TopologySpec:
    opts = link.topology_options()
    full = text
    if opts:
        full += ("," if ":" in text else ":") + ",".join(opts)
    try:
        return parse_topology(full)
    except SpecError as exc:
        where = "link" if opts and _parses(text) else "topology"
        raise SpecFileError(where, str(exc)) from None


def _parses(text: str) -> bool:
    try:
        parse_topology(text)
    except SpecError:
        return False
    return True


def _check_switch(kind: str, where: str) -> None:
    from dcnlab.topo.switches import SwitchKindError, get_switch_kind

    try:
        get_switch_kind(kind)
    except SwitchKindError as exc:
        raise SpecFileError(where, str(exc)) from None


def _schemes(value: Any, check_apps: bool) -> list[Scheme]:
    if not isinstance(value, list) or not value:
        raise SpecFileError("schemes", "needs a list of at least one scheme (app module names "
                            "or {name, app} mappings)")
    schemes = []
    for i, item in enumerate(value):
        where = join("schemes", i)
        if isinstance(item, str):
            item = {"app": item}
        if isinstance(item, dict) and "name" not in item and isinstance(item.get("app"), str):
            item = {**item, "name": _default_name(item["app"])}
        scheme = _resolve(from_mapping(Scheme, item, where), where)
        if check_apps:
            _check_app(scheme.app, join(where, "app"))
        if scheme.switch is not None:
            _check_switch(scheme.switch, join(where, "switch"))
        schemes.append(scheme)
    names = [s.name for s in schemes]
    for i, n in enumerate(names):
        _path_name(n, join(join("schemes", i), "name"))
        if names.index(n) != i:
            raise SpecFileError(join("schemes", i), f"scheme name {n!r} is used twice; give "
                                "each scheme a distinct name")
    return schemes


def _check_scheme_needs(schemes: list[Scheme], switch: str, topology: str) -> None:
    """Each registered scheme's switch kind and topology options, checked up front."""
    for i, scheme in enumerate(schemes):
        known = registry.lookup(scheme.app)
        where = join("schemes", i)
        if known is not None:
            why = known.refuses(scheme.switch or switch)
            if why is not None:
                raise SpecFileError(join(where, "switch"), why)
            try:
                parse_topology(with_topology_options(topology, known.topology_options))
            except SpecError as exc:
                raise SpecFileError(where, f"the topology options of scheme {known.name} "
                                    f"({', '.join(known.topology_options)}): {exc}") from None
        if scheme.topology_options:
            options = [*(known.topology_options if known else ()), *scheme.topology_options]
            try:
                parse_topology(with_topology_options(topology, options))
            except SpecError as exc:
                raise SpecFileError(join(where, "topology_options"), str(exc)) from None


def _resolve(scheme: Scheme, where: str) -> Scheme:
    """A short name becomes its app module; the registered scheme's environment and host
    parts fill what the file leaves out."""
    try:
        known = registry.lookup(scheme.app)
    except registry.UnknownSchemeError as exc:
        raise SpecFileError(join(where, "app"), str(exc)) from None
    if known is not None:
        scheme = replace(scheme, app=known.app if not registry.is_app_path(scheme.app)
                         else scheme.app, env={**known.env, **scheme.env})
    agents = scheme.agents
    if agents is None:
        agents = known.host_parts if known is not None and known.host_parts else NO_AGENTS
    choices = (NO_AGENTS, *registry.host_part_names())
    agents = schema.convert(agents, str, join(where, "agents"), {"choices": choices})
    interval = scheme.agents_interval
    if agents == NO_AGENTS and interval is not None:
        raise SpecFileError(join(where, "agents_interval"), "only schemes with host agents "
                            f"(agents: {' | '.join(choices[1:])}) have a report interval")
    if agents != NO_AGENTS and interval is None:
        interval = registry.host_parts(agents).default_interval
    congestion = scheme.congestion
    if congestion is None and known is not None:
        congestion = known.congestion
    if congestion is not None:
        available = _available_congestion()
        if available is not None and congestion not in available:
            raise SpecFileError(join(where, "congestion"), f"{congestion!r} is not available "
                                f"on this machine (available: {', '.join(sorted(available))})")
    options = dict(scheme.transport_options)
    if options:
        transport = known.transport if known is not None else None
        if transport is None:
            raise SpecFileError(join(where, "transport_options"),
                                "this scheme has no transport (its senders use plain TCP)")
        unknown = sorted(set(options) - set(transport.option_names))
        if unknown:
            raise SpecFileError(join(where, "transport_options"),
                                f"unknown option(s) {', '.join(unknown)} of transport "
                                f"{transport.name}; valid: {', '.join(transport.option_names)}")
    if known is not None and known.transport is not None:
        options = {**known.transport_options, **options}
        if known.transport.check_options is not None:
            try:
                known.transport.check_options(options)
            except ValueError as exc:
                raise SpecFileError(join(where, "transport_options"), str(exc)) from None
    return replace(scheme, agents=agents, agents_interval=interval, congestion=congestion,
                   transport_options=options)


def scheme_topology(spec: ExperimentSpec, scheme: Scheme) -> str:
    """The topology spec string of ``scheme``'s networks: the experiment's, plus the
    options its registered scheme adds (a queue discipline, say)."""
    known = registry.lookup(scheme.app)
    return with_topology_options(spec.topology, [*(known.topology_options if known else ()),
                                                 *scheme.topology_options])


def _default_name(app: str) -> str:
    stem = app.removesuffix(".py").replace(os.sep, ".")
    return stem.rsplit(".", 1)[-1]


def _check_app(app: str, where: str) -> None:
    """The app must exist where ryu-manager will look: a file, or an importable module."""
    if app.endswith(".py") or os.sep in app:
        if not Path(app).is_file():
            raise SpecFileError(where, f"app file {app} does not exist")
        return
    try:
        found = importlib.util.find_spec(app)
    except (ImportError, ValueError):
        found = None
    if found is None:
        hint = ""
        if app.startswith(APP_PACKAGE + "."):
            hint = " (is the app written yet? see apps/)"
        raise SpecFileError(where, f"no module named {app!r}{hint}")


def _baselines(value: Any, schemes: list[Scheme]) -> list[str]:
    """The baseline, then any others (``baseline: [ecmp, single]``)."""
    names = [s.name for s in schemes]
    if value is None:
        for s in schemes:
            known = registry.lookup(s.app)
            if known is not None and known.baseline:
                return [s.name]
        return [names[0]]
    values = value if isinstance(value, list) else [value]
    if not values:
        raise SpecFileError("baseline", "needs a scheme name (or a list of them)")
    out: list[str] = []
    for i, item in enumerate(values):
        where = join("baseline", i) if isinstance(value, list) else "baseline"
        text = str(schema.convert(item, str, where))
        if text not in names:
            raise SpecFileError(where, f"{text!r} is not a scheme name ({', '.join(names)})")
        if text in out:
            raise SpecFileError(where, f"{text!r} appears twice")
        out.append(text)
    return out


def _workload(value: Any) -> tuple[str, Workload]:
    if value is None:
        raise SpecFileError("workload", "required field is missing")
    if not isinstance(value, dict):
        raise SpecFileError("workload", "expected a mapping with a 'type' field")
    wtype = schema.convert(value.get("type", "poisson"), str, "workload.type",
                           {"choices": tuple(WORKLOAD_TYPES)})
    params = {k: v for k, v in value.items() if k != "type"}
    workload = from_mapping(WORKLOAD_TYPES[wtype], params, "workload")
    return wtype, workload


SYSCTL_PREFIX = "net.ipv4.tcp_"
SYSCTL_DIR = Path("/proc/sys")
_SYSCTL_VALUE = re.compile(r"[A-Za-z0-9 ._-]{1,64}")


def _slowdown_bins(value: Any) -> tuple[int, ...]:
    if value is None:
        return slowdown.DEFAULT_EDGES
    if not isinstance(value, list):
        raise SpecFileError("slowdown_bins", f"{value!r}: expected a list of sizes, e.g. "
                            "[100KB, 10MB]")
    try:
        return slowdown.check_edges([schema.parse_bytes(v) for v in value])
    except ValueError as exc:
        raise SpecFileError("slowdown_bins", str(exc)) from None


def _sysctls(value: Any) -> dict[str, str]:
    """TCP settings for every host namespace: ``net.ipv4.tcp_*`` names that exist on
    this machine, plain values (they go to ``sysctl -w`` in each host, never the root)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecFileError("sysctls", "expected a mapping {net.ipv4.tcp_NAME: value}")
    out: dict[str, str] = {}
    for name, item in value.items():
        where = join("sysctls", str(name))
        name = str(name)
        if not name.startswith(SYSCTL_PREFIX) or "/" in name or ".." in name:
            raise SpecFileError(where, f"only {SYSCTL_PREFIX}* settings are per network "
                                "namespace (others would change the whole machine)")
        if not (SYSCTL_DIR / name.replace(".", "/")).exists():
            raise SpecFileError(where, "no such setting on this machine's kernel")
        text = str(int(item)) if isinstance(item, bool) else str(item)
        if not _SYSCTL_VALUE.fullmatch(text):
            raise SpecFileError(where, f"{text!r}: expected a plain value (letters, digits, "
                                "space, '.', '_', '-')")
        out[name] = text
    return out


def _congestion(value: Any, topo: TopologySpec) -> dict[str, str | None]:
    if value is None or isinstance(value, str):
        mapping: dict[str, Any] = {"default": value}
    elif isinstance(value, dict):
        mapping = {str(k): v for k, v in value.items()}
    else:
        raise SpecFileError("congestion", "expected an algorithm name or a mapping "
                            "{default: cubic, <host>: <algorithm>}")
    hosts = {h.name for h in topo.hosts}
    available = _available_congestion()
    out: dict[str, str | None] = {}
    for key, algo in mapping.items():
        where = join("congestion", key)
        if key != "default" and key not in hosts:
            raise SpecFileError(where, f"{key!r} is neither 'default' nor a host of "
                                f"{topo.spec}")
        if algo is not None:
            algo = str(schema.convert(algo, str, where))
            if available is not None and algo not in available:
                raise SpecFileError(where, f"{algo!r} is not available on this machine "
                                    f"(available: {', '.join(sorted(available))})")
        out[key] = algo
    return out


def _available_congestion() -> set[str] | None:
    """The kernel's congestion controls plus those dcnlab provides itself (dctcp as a BPF
    struct_ops, registered while a network that needs it runs: hosts/dctcp)."""
    try:
        names = set(CONGESTION_FILE.read_text().split())
    except OSError:
        return None
    return names | dctcp.provides(names)


def _check_workload(spec: ExperimentSpec, topo: TopologySpec, base_dir: Path | None) -> None:
    """Generate nothing, but check everything the generator will need, per sweep value."""
    if isinstance(spec.workload, PoissonWorkload):
        try:
            load_cdf(spec.workload.cdf, base_dir)
        except CdfError as exc:
            raise SpecFileError("workload.cdf", str(exc)) from None
    for i, value in enumerate(spec.loads):
        try:
            spec.workload.check(topo, value, base_dir, spec.duration)
        except WorkloadError as exc:
            where = join("workload", exc.field) if exc.field else join("loads", i)
            raise SpecFileError(where, str(exc).removeprefix(f"{exc.field}: ")) from None


def flows_for(spec: ExperimentSpec, seed: int, value: float) -> list[Any]:
    """Convenience for callers holding a spec: the marked flow list of one run."""
    from .marking import assign_marks

    flows = generate(spec.workload, spec.topo(), value, seed, spec.duration, spec.base_dir)
    return assign_marks(flows, spec.marking, seed)


def with_overrides(spec: ExperimentSpec, **changes: Any) -> ExperimentSpec:
    """A copy with some fields replaced (tests and scripts shrink shipped specs)."""
    return replace(spec, **changes)
