"""The ``dcnlab`` command.

::

    dcnlab up    --topo SPEC --app APP [--switch ovs|ext|ofss]   interactive network
    dcnlab check --topo SPEC --app APP [--switch S]              smoke test, one JSON line
    dcnlab run   EXPERIMENT.yaml [--out DIR]                     comparative experiment
    dcnlab run   --resume DIR                                    continue an interrupted one
    dcnlab report DIR                                            re-render table and plots
    dcnlab topo  SPEC                                            describe a topology spec
    dcnlab schemes                                               list the known schemes
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from dcnlab.topo.spec import SpecError, parse

EXIT_FAILED = 1
EXIT_USAGE = 2


def _die(message: str, code: int = EXIT_USAGE) -> None:
    print(f"dcnlab: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def _require_root() -> None:
    if os.geteuid() != 0:
        _die("building a network needs root (Mininet creates namespaces and veths): "
             "run with sudo")


def _spec_arg(text: str) -> str:
    try:
        return parse(text).spec
    except SpecError as exc:
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
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    _require_root()
    from dcnlab.check import check

    result = check(args.topo, args.app, args.switch, args.select_mode)
    print(result.line(), flush=True)
    return 0 if result.ok else EXIT_FAILED


def _cmd_run(args: argparse.Namespace) -> int:
    from dcnlab.benchmarks.engine import run_experiment
    from dcnlab.benchmarks.engine.runner import (
        resume_source,
        resume_target,
        select_scenarios,
    )
    from dcnlab.benchmarks.engine.spec import load_specs

    wanted = [s for s in args.scenarios.split(",") if s] if args.scenarios else None
    if args.resume is not None:
        if args.experiment is not None or args.out is not None:
            _die("--resume DIR takes the experiment and the output directory from DIR; "
                 "give no EXPERIMENT.yaml or --out with it")
        args.experiment = str(resume_source(args.resume))
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
    select_scenarios(load_specs(args.experiment), wanted)
    _require_root()
    result = run_experiment(args.experiment, args.out, progress=not args.quiet,
                            resume=args.resume is not None, scenarios=wanted)
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
    return 0 if result.ok else EXIT_FAILED


def _cmd_report(args: argparse.Namespace) -> int:
    from dcnlab.benchmarks.engine import report

    result = report(args.dir)
    print(result.table)
    for path in result.files:
        print(f"  {path}")
    return 0


def _app_arg(text: str) -> str:
    """A scheme's short name (``ecmp``), or a Ryu app module or file of one's own."""
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
        if scheme.host_parts:
            needs.append(f"agents {scheme.host_parts}")
        rows.append((scheme.name, scheme.seed or "-", scheme.app, ", ".join(needs) or "-",
                     scheme.check_topology or "any", scheme.summary))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[-1])
    return 0


def _cmd_topo(args: argparse.Namespace) -> int:
    spec = parse(args.spec)
    tiers: dict[str, int] = {}
    for s in spec.switches:
        tiers[s.tier] = tiers.get(s.tier, 0) + 1
    print(f"{spec.spec}: {len(spec.switches)} switches "
          f"({', '.join(f'{n} {t}' for t, n in tiers.items())}), {len(spec.hosts)} hosts, "
          f"{len(spec.links)} links; link defaults {spec.default_params}")
    return 0


def _cmd_mp(args: argparse.Namespace) -> int:
    from dcnlab.hosts.mptransport import MpError, binary

    try:
        exe = binary()
    except MpError as exc:
        _die(str(exc))
    return subprocess.call([exe, *args.mp_args])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dcnlab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    def network_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--topo", required=True, type=_spec_arg,
                        help="topology spec, e.g. fattree:4 or spineleaf:4,4,4")
        sp.add_argument("--app", required=True, type=_app_arg,
                        help="scheme name (see `dcnlab schemes`) or a Ryu app module/file")
        sp.add_argument("--switch", default="ovs", choices=("ovs", "ext", "ofss"),
                        help="switch kind (default: ovs, userspace datapath)")

    up = sub.add_parser("up", help="start a network and open the Mininet CLI")
    network_args(up)
    up.set_defaults(func=_cmd_up)

    chk = sub.add_parser("check", help="smoke test: connectivity plus the app's invariant")
    network_args(chk)
    chk.add_argument("--select-mode", default="random", choices=("random", "rr"),
                     help="per-packet select mode, for schemes that ask switch_ext for one")
    chk.set_defaults(func=_cmd_check)

    run = sub.add_parser("run", help="run a comparative experiment")
    run.add_argument("experiment", nargs="?", help="experiment YAML file")
    run.add_argument("--out", default=None, help="output directory (default: results/<name>)")
    run.add_argument("--resume", metavar="DIR", default=None,
                     help="continue the interrupted or failed experiment in DIR: keep its "
                     "finished runs, run the rest")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--scenarios", metavar="A,B", default=None,
                     help="run only these scenarios of the experiment file")
    run.set_defaults(func=_cmd_run)

    rep = sub.add_parser("report", help="re-render table and plots from a results directory")
    rep.add_argument("dir")
    rep.set_defaults(func=_cmd_report)

    schemes = sub.add_parser("schemes", help="list the known schemes and what they need")
    schemes.set_defaults(func=_cmd_schemes)

    topo = sub.add_parser("topo", help="parse and describe a topology spec")
    topo.add_argument("spec", type=_spec_arg)
    topo.set_defaults(func=_cmd_topo)

    mp = sub.add_parser("mp", help="the multipath transport: `dcnlab mp serve|send|schedulers "
                        "...` (dcnlab-mp; `dcnlab mp --help`)", add_help=False)
    mp.add_argument("mp_args", nargs=argparse.REMAINDER)
    mp.set_defaults(func=_cmd_mp)
    return p


def _stop_on_sigterm() -> None:
    """SIGTERM (``kill PID``, a batch scheduler's time limit) stops a command as Ctrl-C
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
            return 130
    args = build_parser().parse_args(argv)
    from dcnlab.benchmarks.engine import ExperimentError, ResultsError, SpecFileError
    from dcnlab.topo.network import NetworkError

    try:
        return args.func(args)
    except (SpecFileError, ResultsError, SpecError) as exc:
        _die(str(exc))
    except (ExperimentError, NetworkError) as exc:
        _die(str(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        print("dcnlab: interrupted; everything this run started was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
