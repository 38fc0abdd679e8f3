"""The ``dcnlab`` command.

The subcommands and their help (root, output, exit status) are declared once, in
:func:`build_parser`; ``dcnlab --help`` lists them and ``dcnlab COMMAND --help`` explains
one.  Help text is plain text for a terminal: no markup.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dcnlab.topo.spec import (
    DEFAULT_EGRESS_QDISC,
    LinkParams,
    SpecError,
    TopologySpec,
    parse,
)

if TYPE_CHECKING:
    from dcnlab.benchmarks.engine.reproduction.runner import ReproductionResult
    from dcnlab.lab.fabric import LabPlace

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C

SWITCH_KINDS = ("ovs", "ext", "ofss")


def _switch_kinds() -> list[str]:
    """--switch's choices: the built-in kinds and the ofss builds DCNLAB_OFSS_BUILDS
    names (the registry of switch kinds)."""
    from dcnlab.topo.switches import SwitchKindError, switch_kinds

    try:
        return sorted({*SWITCH_KINDS, *switch_kinds()})
    except SwitchKindError as exc:  # a broken build directory: say so, keep the rest
        print(f"dcnlab: {exc}", file=sys.stderr)
        return list(SWITCH_KINDS)
WIDTH = 92  # help and description text is wrapped to this many columns

DESCRIPTION = ("The dcnlab command: build emulated data-center networks with a routing "
               "scheme, test them, run comparative experiments and report on them.")
ROOT_WHY = "Mininet creates network namespaces and veths"


def _die(message: str, code: int = EXIT_USAGE) -> None:
    print(f"dcnlab: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def _require_root() -> None:
    if os.geteuid() != 0:
        _die(f"building a network needs root ({ROOT_WHY}): run with sudo")


def _topology_arg(text: str) -> TopologySpec:
    try:
        return parse(text)
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seeds_arg(text: str) -> list[int]:
    from dcnlab.benchmarks.engine.spec import parse_seeds

    try:
        return parse_seeds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _spec_arg(text: str) -> str:
    return _topology_arg(text).spec


def _balancer_arg(text: str) -> str:
    from dcnlab.model.balancers import check_balancer

    try:
        return check_balancer(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cmd_up(args: argparse.Namespace) -> int:
    _require_root()
    from mininet.cli import CLI

    from dcnlab.schemes.registry import app_module
    from dcnlab.topo.network import Network

    with Network(args.topo, app=app_module(args.app), switch=args.switch) as net:
        print(f"dcnlab: {args.topo} with {args.app} on {args.switch} switches is up; "
              f"controller log: {net.controller_log}; node names carry prefix {net.prefix}")
        CLI(net.mn)
    return EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    from dcnlab.check import check

    place = _lab_place(args.lab) if args.lab is not None else None
    topo, switch = args.topo, args.switch
    if place is not None:
        # the lab's switches are what they are: its file says which kind
        if args.switch is not None:
            _die("--switch and --lab: a lab's switches are its file's switch_kind "
                 f"({place.lab.switch_kind}); give one or the other")
        switch = place.lab.switch_kind
        topo = topo or place.lab.topology
        if topo is None:
            _die(f"--lab {args.lab}: give --topo (the lab file has no topology)")
    else:
        switch = switch or "ovs"
        if topo is None:
            _die("--topo SPEC is required (or --lab LAB.yaml, whose file gives a topology)")
    _require_root()
    result = check(topo, args.app, switch, args.select_mode, place=place)
    print(result.line(), flush=True)
    return EXIT_OK if result.ok else EXIT_FAILED


def _cmd_run(args: argparse.Namespace) -> int:
    from dcnlab.benchmarks.engine import ExperimentError, run_experiment
    from dcnlab.benchmarks.engine.runner import (
        resume_source,
        resume_target,
        select_scenarios,
        with_seeds,
    )
    from dcnlab.benchmarks.engine.spec import load_specs

    wanted = [s for s in args.scenarios.split(",") if s] if args.scenarios else None
    if args.resume is not None:
        if args.experiment is not None or args.out is not None:
            _die("--resume DIR takes the experiment and the output directory from DIR; "
                 "give no EXPERIMENT.yaml or --out with it")
        if not Path(args.resume).is_dir():
            _die(f"--resume {args.resume}: no such directory (give the output directory of "
                 "an earlier dcnlab run)")
        try:
            args.experiment = str(resume_source(args.resume))
        except ExperimentError as exc:  # not a results directory: a usage error
            _die(str(exc))
        # One scenario's directory resumes that scenario, in place (not every scenario
        # of the file, nested under it).
        args.out, scenario = resume_target(args.resume)
        if scenario is not None:
            if wanted not in (None, [scenario]):
                _die(f"{args.resume} holds scenario {scenario} only; to resume others, give "
                     f"--resume {args.out} --scenarios {','.join(wanted or [])}")
            wanted = [scenario]
    elif args.experiment is None:
        _die("give an experiment file (or --resume DIR)")
    # A bad spec file or scenario name is reported before asking for root.
    specs = select_scenarios(load_specs(args.experiment), wanted)
    place = _lab_place(args.lab) if args.lab is not None else None
    if args.cluster is not None:
        if place is not None:
            _die("--cluster and --lab: a lab is one place; give one or the other")
        _check_cluster(args.cluster)
    for spec in specs if place is not None else []:
        why = place.refuse(spec)
        if why is not None:
            scenario = f" / {spec.scenario}" if spec.scenario else ""
            _die(f"{spec.name}{scenario} cannot run on the lab {args.lab}: {why}")
    if args.resume is not None and args.seeds is not None:
        try:  # seeds that drop a recorded one: a usage error, before root
            for spec in specs:
                with_seeds(spec, Path(args.out) / (spec.scenario or ""), args.seeds)
        except ExperimentError as exc:
            _die(str(exc))
    if args.cluster is None:  # a cluster's workers run the networks (and are checked)
        _require_root()
    result = run_experiment(args.experiment, args.out, progress=not args.quiet,
                            resume=args.resume is not None, scenarios=wanted,
                            seeds=args.seeds, place=place, cluster=args.cluster)
    if args.quiet:  # otherwise the progress output already ended with table and place
        print(result.table)
        print(f"dcnlab: results in {result.out_dir}")
    for path in result.files:
        print(f"  {path}")
    if result.not_ok:
        # Failed flows are data (their rows say why), not a failed run.
        # With scenarios, name each scenario's flows.csv that holds some.
        where = [r.flows_csv for r in result.scenarios.values() if r.not_ok] \
            or [result.flows_csv]
        print(f"dcnlab: {result.not_ok} flow(s) did not complete; see their status in "
              f"{', '.join(map(str, where))}", file=sys.stderr)
    for error in result.errors:
        print(f"dcnlab: error: {error}", file=sys.stderr)
    return EXIT_OK if result.ok else EXIT_FAILED


def _check_cluster(target: str) -> None:
    """A bad --cluster value is a usage error, before anything starts."""
    from dcnlab.benchmarks.engine.cluster.targets import ClusterTargetError, parse_target

    try:
        parse_target(target)
    except ClusterTargetError as exc:
        _die(str(exc))


def _cmd_worker(args: argparse.Namespace) -> int:
    import socket

    from dcnlab.benchmarks.engine.cluster.facts import RESOURCE

    if not args.scheduler.startswith("tcp://"):
        _die(f"{args.scheduler}: give the scheduler as tcp://HOST:PORT")
    _require_root()
    # distributed's own command line in this process's place: its options, logging and
    # signal handling (SIGTERM reaches the worker itself, which closes cleanly)
    argv = [sys.executable, "-m", "distributed.cli.dask_worker", args.scheduler,
            "--nthreads", "1", "--nworkers", "1", "--resources", f"{RESOURCE}=1",
            "--memory-limit", "0", "--no-dashboard",
            "--name", args.name or socket.gethostname()]
    sys.stdout.flush()
    os.execv(sys.executable, argv)


def _lab_place(path: str) -> LabPlace:
    """The lab file's place to run (a bad file is a usage error, before root)."""
    from dcnlab.lab.fabric import LabPlace
    from dcnlab.lab.spec import LabFileError, load

    try:
        return LabPlace(load(path))
    except LabFileError as exc:
        _die(str(exc))


def _cmd_lab(args: argparse.Namespace) -> int:
    import tempfile

    place = _lab_place(args.lab_file)
    if args.action == "prepare":
        from dcnlab.lab import prepare

        reports = prepare.prepare(place.lab, place.loop)
        print(prepare.render(reports))
        return EXIT_OK if all(r.ok for r in reports) else EXIT_FAILED
    from dcnlab.lab.describe import describe, render

    with tempfile.TemporaryDirectory(prefix="dcnlab-lab-") as scratch:
        desc = describe(place.lab, Path(args.out or scratch), place.loop)
        print(render(desc))
    return EXIT_OK if desc.ok else EXIT_FAILED


def _cmd_report(args: argparse.Namespace) -> int:
    from dcnlab.benchmarks.engine import report

    if args.reproduction is not None:
        return _report_reproduction(args)
    result = report(args.dir)
    print(result.table)
    for path in result.files:
        print(f"  {path}")
    return EXIT_OK


def _print_reproduction(result: ReproductionResult) -> None:
    from dcnlab.benchmarks.engine.reproduction.runner import verdict_lines

    for line in verdict_lines(result.results):
        print(line)
    for path in result.files:
        print(f"  {path}")


def _report_reproduction(args: argparse.Namespace) -> int:
    from dcnlab.benchmarks.engine.reproduction import papers
    from dcnlab.benchmarks.engine.reproduction.errors import ReproductionError
    from dcnlab.benchmarks.engine.reproduction.runner import regenerate

    try:
        result = regenerate(papers.load(args.reproduction), Path(args.dir))
    except ReproductionError as exc:
        _die(str(exc))
    _print_reproduction(result)
    return EXIT_OK


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from dcnlab.benchmarks.engine.reproduction import papers
    from dcnlab.benchmarks.engine.reproduction.errors import ReproductionError
    from dcnlab.benchmarks.engine.reproduction.runner import default_out, plan, run

    if args.resume is not None and args.out is not None:
        _die("--resume DIR continues the reproduction in DIR; give no --out with it")
    out = Path(args.resume or args.out or default_out(args.paper))
    try:
        # The paper file, its experiment files and the output directory are checked
        # before asking for root; a resumed reproduction with nothing left to run
        # needs none.
        paper = papers.load(args.paper)
        steps = plan(paper, out, resume=args.resume is not None)
        if args.cluster is not None:
            _check_cluster(args.cluster)  # the workers are checked when it starts
        elif not all(step.complete for step in steps):
            _require_root()
        result = run(paper, out, steps, resume=args.resume is not None,
                     progress=not args.quiet, cluster=args.cluster)
    except ReproductionError as exc:
        _die(str(exc))
    _print_reproduction(result)
    print(f"dcnlab: {out / 'REPRODUCTION.md'}")
    return EXIT_OK


def _app_arg(text: str) -> str:
    """A scheme's short name (ecmp), or a Ryu app module or file of one's own."""
    from dcnlab.schemes import registry

    if not registry.is_app_path(text):
        try:
            registry.get(text)
        except registry.UnknownSchemeError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _cmd_schemes(args: argparse.Namespace) -> int:
    from dcnlab.schemes import registry

    rows = [("scheme", "seed", "app", "needs", "check on", "what it does")]
    for scheme in registry.registry().schemes.values():
        needs = [f"switch {'/'.join(scheme.requires_switch)}"] if scheme.requires_switch else []
        if scheme.requires_forwarding_switch:
            needs.append("a forwarding switch")
        if scheme.host_parts:
            needs.append(f"agents {scheme.host_parts}")
        rows.append((scheme.name, scheme.seed or "-", scheme.app, ", ".join(needs) or "-",
                     scheme.check_topology or "any", scheme.summary))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[-1])
    return EXIT_OK


# ---------------------------------------------------------------------------- dcnlab topo

# Lists longer than this (hosts, the links of one kind) are cut short unless --all.
TOPO_LIST_LIMIT = 64


def _amount(value: float, unit: str) -> str:
    return f"{value:g} {unit}"


def _rate(mbit: float) -> str:
    if mbit >= 1000:
        return _amount(mbit / 1000, "Gbit/s")
    if mbit < 1:
        return _amount(mbit * 1000, "kbit/s")
    return _amount(mbit, "Mbit/s")


def _time(us: int) -> str:
    if us >= 1_000_000:
        return _amount(us / 1_000_000, "s")
    if us >= 1000:
        return _amount(us / 1000, "ms")
    return _amount(us, "us")


@functools.cache  # links of a family share a few LinkParams; fattree:48 has 82,944 links
def describe_link(params: LinkParams, towards_host: bool) -> str:
    """One line of a link's parameters, as the switch port at its end applies them
    (a port facing a host when ``towards_host``, else one facing another switch)."""
    parts = [_rate(params.rate_mbit) if params.rate_mbit is not None else "unshaped (no rate)"]
    parts.append(f"delay {_time(params.delay_us)} one way" if params.delay_us
                 else "no added delay")
    if params.jitter_us:
        parts.append(f"jitter {_time(params.jitter_us)}"
                     + (" (may reorder)" if params.reorder else " (in order)"))
    egress = params.qdisc("egress", towards_host)
    if egress is not None:  # an explicit discipline replaces buffer=/ecn= on its ports
        queue = [f"egress {egress}"]
    else:
        queue = [f"buffer {params.buffer_pkts} packets" if params.buffer_pkts is not None
                 else f"buffer {params.buffer_bytes} bytes" if params.buffer_bytes is not None
                 else "buffer unbounded"]
        if params.ecn_threshold_pkts is not None:
            queue.append(f"ECN mark from {params.ecn_threshold_pkts} packets queued")
        queue.append(f"egress {DEFAULT_EGRESS_QDISC} (default)")
    shaped = params.rate_mbit is not None
    queued = egress is not None or params.buffer_pkts is not None \
        or params.buffer_bytes is not None or params.ecn_threshold_pkts is not None
    if queued and not shaped:
        queue[-1] += " (ignored: a queue needs a rate)"
    parts += queue
    ingress = params.qdisc("ingress", towards_host)
    parts.append(f"ingress {ingress}" if ingress is not None else "no ingress discipline")
    return ", ".join(parts)


def _names(names: Iterable[str]) -> str:
    """s1 s2 s3 s5 s6 -> "s1..s3 s5 s6": runs of three or more consecutive numbers as
    ranges."""
    out: list[str] = []
    run: list[tuple[str, int]] = []

    def flush() -> None:
        if run:
            first, last = run[0], run[-1]
            if len(run) < 3:
                out.extend(f"{stem}{n}" for stem, n in run)
            else:
                out.append(f"{first[0]}{first[1]}..{last[0]}{last[1]}")
            run.clear()

    for name in names:
        stem, digits = name.rstrip("0123456789"), name[len(name.rstrip("0123456789")):]
        if not digits:
            flush()
            out.append(name)
            continue
        if run and run[-1][0] == stem and run[-1][1] + 1 == int(digits):
            run.append((stem, int(digits)))
        else:
            flush()
            run.append((stem, int(digits)))
    flush()
    return " ".join(out)


def _count(items: Sequence[object], noun: str, plural: str = "s") -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else plural}"


def _pack(items: Sequence[str], indent: str) -> list[str]:
    """``items`` separated by commas in lines of at most WIDTH columns, none split."""
    lines: list[str] = []
    for i, item in enumerate(items):
        text = item + ("," if i < len(items) - 1 else "")
        if lines and len(lines[-1]) + 1 + len(text) <= WIDTH:
            lines[-1] += " " + text
        else:
            lines.append(indent + text)
    return lines


def _cut(items: list[str], limit: int | None) -> tuple[list[str], str]:
    if limit is None or len(items) <= limit:
        return items, ""
    return items[:limit], f"... and {len(items) - limit} more (--all lists every one)"


def describe(topo: TopologySpec, limit: int | None = TOPO_LIST_LIMIT) -> list[str]:
    """``dcnlab topo``'s description of a topology: switches by tier, hosts with their
    addresses and attachments, links grouped by their parameters."""
    is_switch = {s.name for s in topo.switches}
    lines = [f"{topo.spec}: {_count(topo.switches, 'switch', 'es')}, "
             f"{_count(topo.hosts, 'host')}, {_count(topo.links, 'link')}"]

    lines.append("switches by tier:")
    tiers: dict[str, list] = {}
    for s in topo.switches:
        tiers.setdefault(s.tier, []).append(s)
    width = max(len(t) for t in tiers)
    for tier, members in tiers.items():
        pods: dict[int | None, list[str]] = {}
        for s in members:
            pods.setdefault(s.pod, []).append(s.name)
        where = "; ".join(_names(names) if pod is None or len(pods) == 1
                          else f"pod {pod}: {_names(names)}" for pod, names in pods.items())
        lines.append(f"  {tier:<{width}}  {len(members):>3}  {where}")

    lines.append("hosts (address on switch port):")
    by_iface = {(lk.a, lk.a_port): lk for lk in topo.links if lk.a not in is_switch}
    rows = []
    for h in topo.hosts:
        ifaces = []
        for index, iface in enumerate(h.interfaces):
            text = f"{iface.ip} on {iface.switch} port {iface.port}"
            link = by_iface.get((h.name, index))
            if len(h.interfaces) > 1 and link is not None:  # one path each: say which is which
                text += f" ({describe_link(link.params, towards_host=True).split(', ')[0]})"
            ifaces.append(text)
        label = ", ".join(x for x in (h.role, f"group {h.group}" if h.group else "") if x)
        rows.append(f"  {h.name:<6} {'; '.join(ifaces)}" + (f"  [{label}]" if label else ""))
    shown, more = _cut(rows, limit)
    lines += shown + ([f"  {more}"] if more else [])

    lines.append("links (switch:port, host-interface), grouped by parameters:")
    groups: dict[tuple[bool, str], list[str]] = {}
    kinds: set[LinkParams] = set()
    for lk in topo.links:
        kinds.add(lk.params)
        to_host = (lk.a in is_switch) != (lk.b in is_switch)
        ends = [f"{n}:{p}" if n in is_switch else f"{n}-eth{p}"
                for n, p in ((lk.a, lk.a_port), (lk.b, lk.b_port))]
        groups.setdefault((to_host, describe_link(lk.params, to_host)), []).append(
            " <-> ".join(ends))
    for (to_host, text), links in groups.items():
        kind = "host" if to_host else "switch-to-switch"
        lines += textwrap.wrap(f"{_count(links, f'{kind} link')}: {text}", WIDTH,
                               initial_indent="  ", subsequent_indent="      ")
        shown, more = _cut(links, limit)
        lines += _pack(shown, "    ")
        if more:
            lines.append(f"    {more}")
    if any(p.needs_emulation() for p in kinds):  # TopologySpec.needs_emulation, but faster
        lines += textwrap.wrap("delay, jitter, buffers, ECN marking and queue disciplines "
                               "take effect on --switch ext; ovs and ofss apply the rate "
                               "only (with a warning)", WIDTH)
    return lines


def _cmd_topo(args: argparse.Namespace) -> int:
    print("\n".join(describe(args.spec, None if args.all else TOPO_LIST_LIMIT)))
    return EXIT_OK


def _cmd_mp(args: argparse.Namespace) -> int:
    from dcnlab.hosts.mptransport import MpError, binary

    try:
        exe = binary()
    except MpError as exc:
        _die(str(exc))
    return subprocess.call([exe, *args.mp_args])


# ---------------------------------------------------------------------------- help


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as given (wrapped here); the command list without argparse's line
    of the form {up,check,...} above it."""

    def _format_action(self, action: argparse.Action) -> str:
        text = super()._format_action(action)
        if action.nargs == argparse.PARSER:
            text = text.split("\n", 1)[1]
        return text

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if action.nargs == argparse.PARSER:
            # The command names sit one indent deeper than argparse counts them, so a
            # name two characters longer than the others (reproduce) would push its
            # summary to the next line: count them where they are printed.
            longest = max((len(self._format_action_invocation(s))
                           for s in action._get_subactions()), default=0)
            self._action_max_length = max(self._action_max_length, longest
                                          + self._current_indent + self._indent_increment)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose help may end with text made only when help is shown
    (``details``): ``check``'s fields come from :mod:`dcnlab.check`, which imports
    Mininet, too slow to import for every command."""

    details: Callable[[], str] | None = None

    def format_help(self) -> str:
        text = super().format_help()
        return text + "\n" + self.details() if self.details is not None else text


def _wrap(text: str, indent: str = "") -> str:
    return "\n".join(textwrap.wrap(text, WIDTH, initial_indent=indent,
                                   subsequent_indent=indent + ("  " if indent else "")))


def _table(rows: Iterable[tuple[str, str]], indent: str = "  ") -> str:
    rows = list(rows)
    width = max(len(key) for key, _ in rows)
    lead = indent + " " * (width + 2)
    return "\n".join(textwrap.fill(value, WIDTH, initial_indent=f"{indent}{key:<{width}}  ",
                                   subsequent_indent=lead) for key, value in rows)


INTERRUPTED = "interrupted (Ctrl-C, or SIGTERM as from kill or a batch scheduler)"


def _epilog(root: str, prints: str, exits: Sequence[tuple[int, str]]) -> str:
    return "\n".join([_wrap(f"root: {root}"), _wrap(f"prints: {prints}"), "exit status:",
                      _table((str(code), why) for code, why in exits)])


def _add(sub: argparse._SubParsersAction, name: str, summary: str, what: str, root: str,
         prints: str, exits: Sequence[tuple[int, str]],
         func: Callable[[argparse.Namespace], int], more: str = "") -> _Parser:
    """Subcommand ``name``: ``summary`` in the command list, ``what`` it does (then
    ``more``, preformatted) atop its help, and below it whether it needs ``root``, what
    it ``prints`` and its ``exits`` (code, meaning)."""
    parser: _Parser = sub.add_parser(
        name, help=summary, description=_wrap(what) + more,
        epilog=_epilog(root, prints, exits), formatter_class=_Formatter)
    parser.set_defaults(func=func)
    return parser


def _check_details() -> str:
    from dcnlab.check import FIELDS
    from dcnlab.schemes import registry

    own = [s.name for s in registry.registry().schemes.values() if s.check is not None]
    return "\n".join([
        "the JSON line's fields:", _table(FIELDS.items()),
        _wrap(f"Schemes with an invariant of their own ({', '.join(own)}) add fields and "
              "failures of their own after cores (see the scheme's check in "
              "dcnlab/schemes/NAME). A scheme that refuses the switch kind makes a line of "
              "topo, app, switch, ok and failures only."), ""])


def build_parser() -> argparse.ArgumentParser:
    from dcnlab.benchmarks.engine.reproduction import registry as reproduction_registry
    from dcnlab.schemes import registry

    p = argparse.ArgumentParser(
        prog="dcnlab", description=_wrap(DESCRIPTION),
        epilog=_wrap("Each command's --help says whether it needs root, what it prints and "
                     "its exit status."),
        formatter_class=_Formatter)
    sub = p.add_subparsers(dest="command", required=True, title="commands",
                           metavar="COMMAND", parser_class=_Parser)
    schemes = registry.names()
    paper_ids = reproduction_registry.paper_ids()  # the files of benchmarks/papers/
    papers_known = (f"one of {', '.join(paper_ids)}" if paper_ids
                    else "no paper file is installed") + ": benchmarks/papers/PAPER.yaml"
    usage_error = (EXIT_USAGE, "usage error: bad arguments or topology spec, unknown scheme, "
                               "not root (message on stderr)")
    interrupted = (EXIT_INTERRUPTED, f"{INTERRUPTED}: everything it started was stopped")
    needs_root = f"needed ({ROOT_WHY}); run with sudo"

    from dcnlab.benchmarks.engine.cluster.targets import usage as cluster_usage_text

    cluster_usage = cluster_usage_text()
    kinds = _switch_kinds()  # read once: it may load the ofss builds and say they are bad

    def network_args(sp: argparse.ArgumentParser, lab: bool = False) -> None:
        sp.add_argument("--topo", required=not lab, type=_spec_arg, metavar="SPEC",
                        help="topology spec, e.g. fattree:4 or spineleaf:4,4,4 (dcnlab topo "
                        "--help lists the forms)" + ("; with --lab, default: the lab "
                                                     "file's topology" if lab else ""))
        sp.add_argument("--app", required=True, type=_app_arg, metavar="APP",
                        help=f"a scheme ({', '.join(schemes)}; dcnlab schemes describes "
                        "them) or a Ryu app module or file of your own")
        sp.add_argument("--switch", default=None if lab else "ovs", choices=kinds,
                        help="switch kind: ovs (Open vSwitch, userspace datapath; the "
                        "default), ext (dcnlab's own switch: delay, buffers, ECN, queue "
                        "disciplines), ofss (ofsoftswitch13, if installed) or an "
                        "ofsoftswitch13 build in $DCNLAB_OFSS_BUILDS"
                        + ("; not with --lab" if lab else ""))

    up = _add(sub, "up", "start a network and open the Mininet CLI (root)",
              "Build the network of --topo with --switch switches and the app's controller, "
              "then open the Mininet CLI on it (mininet> prompt); leaving it (exit or "
              "Ctrl-D) stops and removes everything.", needs_root,
              "one line: the spec, app and switch kind, the controller's log file and the "
              "run's node-name prefix; then the Mininet CLI's own output",
              [(EXIT_OK, "the CLI was left and the network taken down"),
               (EXIT_FAILED, "the network could not be built (message on stderr)"),
               usage_error,
               (EXIT_INTERRUPTED, f"{INTERRUPTED} while the network was being built; at the "
                                  "mininet> prompt Ctrl-C stops the running command only")],
              _cmd_up)
    network_args(up)

    chk = _add(sub, "check", "smoke-test a scheme on a network, print one JSON line (root)",
               "Build the network, ping every ordered pair of hosts, run concurrent TCP "
               "transfers between pods, count the bytes each top-tier switch carried, then "
               "test the scheme's own invariant (ECMP spreads flows over the top tier, "
               "TCP-Path explores around a loaded spine, ...); dcnlab schemes names the "
               "topology each invariant is meant for. Apps of no scheme get the generic "
               "part only.", needs_root,
               "one JSON object on one line on stdout (fields below); diagnostics on stderr",
               [(EXIT_OK, "every part passed: the line has \"ok\": true"),
                (EXIT_FAILED, "a part failed (\"ok\": false, \"failures\" say which), or the "
                              "network could not be built (message on stderr, no line)"),
                usage_error, interrupted],
               _cmd_check)
    chk.details = _check_details
    network_args(chk, lab=True)
    chk.add_argument("--select-mode", default=None, type=_balancer_arg, metavar="NAME[/K=V]",
                     help="the load balancer (switch_ext's, see its README) for schemes whose "
                     "app asks switch_ext for one: random or rr for spray, letflow/timeout=D "
                     "for letflow; default: the scheme's own (dcnlab schemes)")
    chk.add_argument("--lab", metavar="LAB.yaml", default=None,
                     help="check on the lab this file describes (its switches and servers, "
                     "over SSH; docs/lab.md) instead of a Mininet network; the switch kind "
                     "is the lab file's")

    run = _add(sub, "run", "run a comparative experiment from a YAML file (root)",
               "Run every scheme x seed x load (or other swept value) of the experiment file, "
               "each on a fresh network, and write per-flow and per-run CSVs, a summary "
               "table and plots. --resume DIR continues an interrupted or failed experiment "
               "in its output directory.",
               "needed to run (with --cluster, on the workers, not here); the experiment "
               "file, --scenarios and --cluster are checked first, without root",
               "on stderr, a time estimate, a progress bar, the summary table and where the "
               "results are; on stdout the files written (with --quiet: no progress bar, and "
               "the table and the results directory go to stdout); flows that did not "
               "complete are counted on stderr",
               [(EXIT_OK, "every run ran (flows that did not complete are data: flows.csv "
                          "says why)"),
                (EXIT_FAILED, "the experiment did not run (its output directory already "
                              "holds results, say) or stopped early (a network did not "
                              "start, a run failed): what ran is kept and --resume DIR "
                              "continues it"),
                (EXIT_USAGE, "usage error: bad experiment file, unknown scenario, --resume "
                             "on a directory that is not a run's output, not root"),
                (EXIT_INTERRUPTED, f"{INTERRUPTED}: everything it started was stopped, the "
                                   "results so far are kept; --resume DIR continues")],
               _cmd_run)
    run.add_argument("experiment", nargs="?", help="experiment YAML file")
    run.add_argument("--out", default=None, help="output directory (default: results/<name>)")
    run.add_argument("--resume", metavar="DIR", default=None,
                     help="continue the interrupted or failed experiment in DIR: keep its "
                     "finished runs, run the rest")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--lab", metavar="LAB.yaml", default=None,
                     help="run on the lab this file describes (real OpenFlow switches and "
                     "servers over SSH; docs/lab.md) instead of Mininet")
    run.add_argument("--scenarios", metavar="A,B", default=None,
                     help="run only these scenarios of the experiment file")
    run.add_argument("--cluster", metavar="TARGET", default=None,
                     help="spread the runs over the workers of a Dask cluster, one network "
                     "per machine at a time, and merge their results here "
                     f"(docs/cluster.md): {cluster_usage}")
    run.add_argument("--seeds", metavar="LIST", type=_seeds_arg, default=None,
                     help="run these seeds instead of the file's, e.g. 1-10 or 1,4,7 "
                     "(every scenario); with --resume, seeds may be added to the ones run: "
                     "the recorded runs are kept and only the new seeds run")

    rep = _add(sub, "report", "re-render a results directory's table and plots",
               "Read the CSVs of an experiment's output directory and write its summary "
               "table and plots again. With --reproduction PAPER, DIR is the output "
               "directory of dcnlab reproduce PAPER: its reproduction.json, "
               "REPRODUCTION.md and claims.png are written again from the results there.",
               "not needed",
               "the summary table, then the files written; with --reproduction, one line "
               "per claim and sweep value with its verdict, then the files written",
               [(EXIT_OK, "done"),
                (EXIT_USAGE, "usage error: DIR is not a results directory, bad "
                             "arguments; with --reproduction: a bad paper file, or "
                             "results that lack what a claim needs (the message names "
                             "the claim and the missing file or column)")],
               _cmd_report)
    rep.add_argument("dir", metavar="DIR", help="an experiment's output directory")
    rep.add_argument("--reproduction", metavar="PAPER", default=None, choices=paper_ids,
                     help="DIR is a reproduction of PAPER (" + papers_known + ")")

    repro = _add(
        sub, "reproduce", "run a paper's experiments and judge its claims (root)",
        "Run the experiment files a paper file lists (benchmarks/papers/PAPER.yaml), in "
        "its order, each as dcnlab run would into OUT/<experiment>, then write into OUT "
        "reproduction.json (the numbers the claims need), REPRODUCTION.md (every claim: "
        "the paper's value, the measured one with its 95% interval and a verdict by one "
        "rule: reproduced, direction, inconclusive or opposite) and claims.png. --resume "
        "OUT continues an interrupted or failed reproduction: complete experiments are "
        "kept as they are, the others continue as dcnlab run --resume does.",
        "needed to run experiments; the paper file, its experiment files and the output "
        "directory are checked first, without root; a resumed reproduction whose "
        "experiments are all complete needs none",
        "on stderr, each experiment's time estimate, progress bar and summary table; on "
        "stdout one line per claim and sweep value with its verdict, the files written "
        "and where REPRODUCTION.md is",
        [(EXIT_OK, "every experiment ran and every claim has a verdict (whatever it is)"),
         (EXIT_FAILED, "an experiment did not run (OUT already holds results, say) or "
                       "stopped early: what ran is kept and --resume OUT continues"),
         (EXIT_USAGE, "usage error: unknown paper, bad paper or experiment file, --resume "
                      "of a directory that is not a reproduction of PAPER, results that "
                      "lack what a claim needs (the message names the claim and the "
                      "missing file or column), not root"),
         (EXIT_INTERRUPTED, f"{INTERRUPTED}: everything it started was stopped, the results "
                            "so far are kept; --resume OUT continues")],
        _cmd_reproduce)
    repro.add_argument("paper", metavar="PAPER", choices=paper_ids,
                       help="the paper (" + papers_known + ")")
    repro.add_argument("--out", default=None, metavar="DIR",
                       help="output directory (default: results/PAPER)")
    repro.add_argument("--resume", metavar="DIR", default=None,
                       help="continue the interrupted or failed reproduction in DIR")
    repro.add_argument("--quiet", action="store_true", help="no progress bar")
    repro.add_argument("--cluster", metavar="TARGET", default=None,
                       help="run each experiment on a Dask cluster, as dcnlab run --cluster "
                       f"does (docs/cluster.md): {cluster_usage}")

    _add(sub, "schemes", "list the known schemes and what they need",
         "List every scheme: the seed paper it reproduces, its Ryu app, the switch kind or "
         "host agents it needs, the topology its dcnlab check invariant is meant for, and "
         "what it does.", "not needed", "a table, one scheme a line",
         [(EXIT_OK, "listed"), (EXIT_USAGE, "usage error: bad arguments")], _cmd_schemes)

    from dcnlab.topo.spec import VALID_FORMS

    topo = _add(sub, "topo", "describe a topology spec",
                "Parse a topology spec and describe the network it builds: switches by "
                "tier, hosts with their addresses and attachments, and links with their "
                "rate, delay, buffer, ECN marking and queue disciplines.", "not needed",
                "the description, one section each for switches, hosts and links",
                [(EXIT_OK, "the spec is valid"),
                 (EXIT_USAGE, "a bad spec: the message says why and lists the valid forms")],
                _cmd_topo, more="\n\nforms:\n" + "\n".join(_wrap(f, "  ") for f in VALID_FORMS))
    topo.add_argument("spec", type=_topology_arg, metavar="SPEC",
                      help="a topology spec, of one of the forms above")
    topo.add_argument("--all", action="store_true",
                      help=f"list every host and link (default: at most {TOPO_LIST_LIMIT} "
                      "of each list)")

    lab = _add(sub, "lab", "describe or prepare a lab of real switches and servers",
               "prepare: install dcnlab (a wheel built from this checkout, without its "
               "dependencies: the traffic agents use the standard library only) in a "
               "virtual environment at the lab file's python on every host, unless that "
               "host has this checkout's already, and report per host what is ready, what "
               "is missing (with the fix) and which kernel features some schemes need "
               "(cgroup v2, BTF, MPTCP). describe: reach every host of the lab file over "
               "SSH (root login, kernel, "
               "the data-plane interface and address, dcnlab on the file's python), start "
               "the controller here in discovery mode on the file's address, let every "
               "host ping every other, and print the switches, fabric links and host "
               "attachments found, and where they differ from the lab file (docs/lab.md).",
               "not needed here (the hosts' logins must be root)",
               "the hosts with what each lacks, the switches, links and host attachments "
               "found, the differences from the lab file",
               [(EXIT_OK, "the lab is as the file says and every host is ready "
                          "(prepare: every host is ready)"),
                (EXIT_FAILED, "a difference, a host not ready, or the controller did not "
                              "start: the output says which"),
                (EXIT_USAGE, "usage error: a bad lab file")],
               _cmd_lab)
    lab.add_argument("action", choices=["describe", "prepare"], help="what to do")
    lab.add_argument("lab_file", metavar="LAB.yaml", help="the lab file")
    lab.add_argument("--out", default=None, help="where the controller's log and state go "
                     "(default: a temporary directory, removed afterwards)")

    wrk = _add(sub, "worker", "serve a cluster's runs on this machine (root)",
               "Start a Dask worker for dcnlab run --cluster tcp://HOST:PORT: one thread, "
               "the resource machine=1 (one emulation at a time on this machine), named "
               "after this host.  Run it as root on each machine, from a checkout at the "
               "client's commit set up with scripts/setup.sh (docs/cluster.md).",
               "needed (the runs build networks)", "Dask's worker log on stderr",
               [(EXIT_OK, "the worker stopped"), (EXIT_USAGE, "usage error, not root")],
               _cmd_worker)
    wrk.add_argument("scheduler", metavar="tcp://HOST:PORT", help="the Dask scheduler")
    wrk.add_argument("--name", default=None, help="the worker's name (default: the host name)")

    mp = sub.add_parser("mp", help="the multipath transport dcnlab-mp: serve, send, "
                        "schedulers ... (no root; dcnlab mp --help is its own help: "
                        "output and exit status)", add_help=False)
    mp.add_argument("mp_args", nargs=argparse.REMAINDER)
    mp.set_defaults(func=_cmd_mp)
    return p


def _stop_on_sigterm() -> None:
    """SIGTERM (kill PID, a batch scheduler's time limit) stops a command as Ctrl-C
    does: everything a run started is stopped and its results so far are kept.  A second
    SIGTERM while that clean-up runs is ignored (SIGKILL still ends it)."""
    def interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _stop_on_sigterm()
    if argv[:1] == ["mp"]:  # everything after `mp` belongs to dcnlab-mp, --help included
        try:
            return _cmd_mp(argparse.Namespace(mp_args=argv[1:]))
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: subprocess.call ended dcnlab-mp
            return EXIT_INTERRUPTED
    args = build_parser().parse_args(argv)
    from dcnlab.benchmarks.engine import ExperimentError, ResultsError, SpecFileError
    from dcnlab.topo.errors import NetworkError  # not .network: that imports Mininet

    try:
        return args.func(args)
    except (SpecFileError, ResultsError, SpecError) as exc:
        _die(str(exc))
    except (ExperimentError, NetworkError) as exc:
        _die(str(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        print("dcnlab: interrupted; everything this run started was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
