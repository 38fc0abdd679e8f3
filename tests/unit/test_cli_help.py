"""The dcnlab command's help, dcnlab topo's description and its usage errors: what a
first-time user reads.  In memory: no command here builds a network."""

from __future__ import annotations

import argparse
import ast
import os
import re
from pathlib import Path

import pytest

from dcnlab import cli

ROOT = Path(__file__).parents[2]
# Markup that belongs in docstrings, not in a terminal: reST literals, roles, directives.
MARKUP = re.compile(r"``|`|:mod:|:func:|:class:|:meth:|::\s*$", re.M)


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in cli.build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _help(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_top_level_help_lists_every_command_in_plain_text(
        capsys: pytest.CaptureFixture) -> None:
    out = _help(["--help"], capsys)
    assert not MARKUP.search(out), MARKUP.search(out)
    commands = _commands()
    assert set(commands) == {"up", "check", "run", "report", "reproduce", "schemes", "topo",
                             "lab", "mp", "worker"}
    for name in commands:
        # one line per command: its name, then a summary of its own
        line = next((x for x in out.splitlines() if x.split()[:1] == [name]), None)
        assert line is not None and len(line.split()) > 2, f"{name} not listed: {out}"
    assert "{up,check" not in out  # argparse's choice list says nothing a reader needs


@pytest.mark.parametrize("command", ["up", "check", "run", "report", "reproduce", "schemes",
                                     "topo", "lab", "worker"])
def test_each_command_says_root_output_and_exit_status(
        command: str, capsys: pytest.CaptureFixture) -> None:
    out = _help([command, "--help"], capsys)
    assert not MARKUP.search(out), MARKUP.search(out)
    root = re.search(r"^root: (.*)$", out, re.M)
    assert root and re.search(r"^prints: \S", out, re.M), out
    assert root.group(1).startswith("not needed" if command in ("report", "schemes", "topo",
                                                                "lab") else "needed")
    status = out[out.index("exit status:"):]
    codes = re.findall(r"^  (\d+) ", status, re.M)
    assert codes[0] == str(cli.EXIT_OK) and str(cli.EXIT_USAGE) in codes, status


def test_commands_that_say_they_need_root_refuse_without_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
        tmp_path: Path) -> None:
    """The help's root line is true: what says "needed" exits 2 asking for root, what
    says "not needed" runs."""
    from dcnlab.benchmarks.engine.reproduction import registry

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    fixture = ROOT / "tests" / "fixtures" / "reproduction"  # a paper file and its experiments
    monkeypatch.setattr(registry, "PAPERS_DIR", fixture / "papers")
    monkeypatch.setattr(registry, "EXPERIMENTS_DIR", fixture / "experiments")
    experiment = str(ROOT / "benchmarks" / "experiments" / "seed001.yaml")
    for argv in (["up", "--topo", "fattree:4", "--app", "ecmp"],
                 ["check", "--topo", "fattree:4", "--app", "ecmp"], ["run", experiment],
                 ["reproduce", "p900", "--out", str(tmp_path / "p900")]):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == cli.EXIT_USAGE
        assert "needs root" in capsys.readouterr().err
    for argv in (["topo", "fattree:4"], ["schemes"]):
        assert cli.main(argv) == cli.EXIT_OK
        assert "needs root" not in capsys.readouterr().err
    assert not (tmp_path / "p900").exists()  # refused before anything was written


def test_reproduce_offers_the_installed_papers(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture,
                                              tmp_path: Path) -> None:
    """PAPER's choices are the paper files there are, named in the help; another id is
    a usage error."""
    from dcnlab.benchmarks.engine.reproduction import registry

    for name in ("p001.yaml", "p004.yaml", "README.yaml"):
        (tmp_path / name).write_text("")
    monkeypatch.setattr(registry, "PAPERS_DIR", tmp_path)
    out = " ".join(_help(["reproduce", "--help"], capsys).split())
    assert "the paper (one of p001, p004: benchmarks/papers/PAPER.yaml)" in out
    assert "DIR is a reproduction of PAPER (one of p001, p004" in \
        " ".join(_help(["report", "--help"], capsys).split())
    with pytest.raises(SystemExit) as exc:
        cli.main(["reproduce", "p002"])
    assert exc.value.code == cli.EXIT_USAGE
    assert "invalid choice: 'p002' (choose from 'p001', 'p004')" in capsys.readouterr().err
    monkeypatch.setattr(registry, "PAPERS_DIR", tmp_path / "none")
    assert "no paper file is installed" in " ".join(
        _help(["reproduce", "--help"], capsys).split())


def _fields_check_sets() -> set[str]:
    """Every JSON field dcnlab/check.py writes: ``CheckResult({...})`` keys,
    ``result.fields[...] =``, ``result.fields.update(key=...)``, and what ``line()`` adds."""
    tree = ast.parse((ROOT / "dcnlab" / "check.py").read_text())
    found = {"ok", "failures"}  # CheckResult.line()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CheckResult":
            found |= {k.value for k in node.args[0].keys}  # type: ignore[attr-defined]
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
                and ast.unparse(node.value) == "result.fields"):
            found.add(node.slice.value)  # type: ignore[attr-defined]
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "result.fields.update":
            found |= {k.arg for k in node.keywords if k.arg is not None}
    return found


def test_check_help_explains_every_field_of_its_json_line(
        capsys: pytest.CaptureFixture) -> None:
    from dcnlab.check import FIELDS
    from dcnlab.schemes import registry

    assert set(FIELDS) == _fields_check_sets()
    out = _help(["check", "--help"], capsys)
    listed = out[out.index("the JSON line's fields:"):]
    for name in FIELDS:
        assert re.search(rf"^  {name} +\S", listed, re.M), f"{name} not explained"
    # Schemes add their own: the help names those with an invariant, from the registry.
    for scheme in registry.registry().schemes.values():
        assert (re.search(rf"\b{scheme.name}\b", listed) is not None) == (scheme.check is not None)


def test_app_help_names_the_registered_schemes(capsys: pytest.CaptureFixture) -> None:
    from dcnlab.schemes import registry

    out = " ".join(_help(["up", "--help"], capsys).split())
    assert all(re.search(rf"\b{name}\b", out) for name in registry.names())


# ---------------------------------------------------------------------------- dcnlab topo


def _topo(spec: str, capsys: pytest.CaptureFixture, *extra: str) -> str:
    assert cli.main(["topo", *extra, spec]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "LinkParams" not in out and "None" not in out and "_mbit" not in out, out
    return out


def test_topo_describes_switches_hosts_and_links(capsys: pytest.CaptureFixture) -> None:
    out = _topo("fattree:4,rate=10M", capsys)
    assert out.splitlines()[0] == "fattree:4,rate=10M: 20 switches, 16 hosts, 48 links"
    assert re.search(r"^  core +4  s1\.\.s4$", out, re.M)
    assert re.search(r"^  edge +8  pod 0: s7 s8; pod 1: s11 s12;", out, re.M)
    assert re.search(r"^  h1 +10\.0\.0\.1 on s7 port 3$", out, re.M)
    assert re.search(r"^  h16 +10\.3\.1\.2 on s20 port 4$", out, re.M)
    assert "32 switch-to-switch links: 10 Mbit/s, no added delay, buffer unbounded, " \
           "egress droptail (default), no ingress discipline" in " ".join(out.split())
    assert "16 host links: 10 Mbit/s" in out
    assert "s7:1 <-> s5:1" in out and "h1-eth0 <-> s7:3" in out


def test_topo_twopath_shows_both_paths_rates(capsys: pytest.CaptureFixture) -> None:
    out = _topo("twopath", capsys)
    flat = " ".join(out.split())
    assert re.search(r"h1 +10\.0\.0\.1 on s1 port 2 \(500 Mbit/s\); "
                     r"10\.1\.0\.1 on s2 port 2 \(150 Mbit/s\) +\[client\]", out)
    assert "1 host link: 500 Mbit/s, delay 10 ms one way, jitter 7.5 ms (in order)" in flat
    assert "1 host link: 150 Mbit/s, delay 100 ms one way, jitter 75 ms (in order)" in flat
    assert "2 switch-to-switch links: unshaped (no rate)" in flat
    assert "take effect on --switch ext" in flat  # delay and jitter need the ext switch
    # rate=R scales both paths (the second at 0.3 R)
    assert "(1 Gbit/s); 10.1.0.1 on s2 port 2 (300 Mbit/s)" in _topo("twopath:rate=1G", capsys)


def test_topo_dumbbell_shows_groups_delays_and_buffers(capsys: pytest.CaptureFixture) -> None:
    flat = " ".join(_topo("dumbbell", capsys).split())
    assert "[client, group A]" in flat and "[client, group B]" in flat and "[server]" in flat
    for delay in ("2 ms", "6 ms", "10 ms", "16 ms"):
        assert f"100 Mbit/s, delay {delay} one way, buffer 200 packets" in flat
    assert "1 switch-to-switch link: 100 Mbit/s, delay 1 ms one way" in flat


def test_topo_shows_queue_disciplines_per_kind_of_port(capsys: pytest.CaptureFixture) -> None:
    flat = " ".join(_topo("spineleaf:1,2,1,rate=10M,buffer=20,ecn=5,"
                          "egress@fabric=droptail/buffer=50p,ingress@host=abq/k=20p/mode=ece",
                          capsys).split())
    # switch ports facing switches: the explicit discipline replaces buffer=/ecn=
    assert ("2 switch-to-switch links: 10 Mbit/s, no added delay, egress droptail/buffer=50p, "
            "no ingress discipline") in flat
    assert ("2 host links: 10 Mbit/s, no added delay, buffer 20 packets, ECN mark from 5 "
            "packets queued, egress droptail (default), ingress abq/k=20p/mode=ece") in flat
    # a queue without a rate forms nowhere: said so rather than shown as if it applied
    assert "buffer 20 packets, egress droptail (default) (ignored: a queue needs a rate)" in \
        " ".join(_topo("twopath:buffer=20", capsys).split())


def test_topo_cuts_long_lists_unless_all(capsys: pytest.CaptureFixture) -> None:
    short = _topo("spineleaf:1,1,70", capsys)
    assert re.search(r"^  h64 ", short, re.M) and not re.search(r"^  h65 ", short, re.M)
    assert "... and 6 more (--all lists every one)" in short
    full = _topo("spineleaf:1,1,70", capsys, "--all")
    assert re.search(r"^  h70 +10\.0\.0\.70 on s2 port 71$", full, re.M)
    assert "h70-eth0 <-> s2:71" in full and "more (--all" not in full


# ---------------------------------------------------------------------------- usage errors


def test_unknown_queue_discipline_is_a_spec_error(capsys: pytest.CaptureFixture) -> None:
    for argv in (["topo", "fattree:4,egress=nosuch/x=1"],
                 ["check", "--topo", "fattree:4,egress=nosuch/x=1", "--app", "ecmp"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert "unknown egress discipline 'nosuch'; known: droptail" in err, err


def test_resume_of_a_directory_that_is_no_run_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--resume", str(tmp_path / "nonexistent")])
    assert exc.value.code == cli.EXIT_USAGE
    assert f"--resume {tmp_path / 'nonexistent'}: no such directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # a directory, but no run's output
        cli.main(["run", "--resume", str(tmp_path)])
    assert exc.value.code == cli.EXIT_USAGE
    assert "cannot resume" in capsys.readouterr().err
