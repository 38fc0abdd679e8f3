"""ofsoftswitch13 builds as switch kinds (DCNLAB_OFSS_BUILDS), the scheme that installs
nothing (switch_forwarding), and the authors' switch build script's source handling.

All in memory: the builds here are directories with stand-in programs; the real build
and the runs on it are the benchmarks' (dcnlab.benchmarks.authors_switch)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dcnlab.benchmarks import authors_switch
from dcnlab.benchmarks.engine.schema import SpecFileError
from dcnlab.benchmarks.engine.spec import parse_spec
from dcnlab.schemes import registry
from dcnlab.topo import ofss_builds, switches
from dcnlab.topo.switches import ENV_OFSS_BUILDS, SwitchKindError, get_switch_kind

FORWARDING = "switch_forwarding"


def _build(root: Path, name: str, forwards: bool, programs: tuple[str, ...] =
           switches.OFSS_BINARIES) -> Path:
    build = root / name
    (build / "bin").mkdir(parents=True)
    for program in programs:
        path = build / "bin" / program
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(0o755)
    (build / "lib").mkdir()
    (build / ofss_builds.OFSS_BUILD_FILE).write_text(json.dumps(
        {"description": f"test build {name}", "forwards": forwards, "lib": ["lib"]}))
    return build


@pytest.fixture()
def builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two builds under DCNLAB_OFSS_BUILDS, unregistered again afterwards."""
    root = tmp_path / "builds"
    _build(root, "t-fwd", forwards=True)
    _build(root, "t-plain", forwards=False)
    monkeypatch.setenv(ENV_OFSS_BUILDS, str(root))
    yield root
    ofss_builds.unload_ofss_builds(root)


def test_builds_become_switch_kinds_named_after_their_directories(builds: Path) -> None:
    kind = get_switch_kind("t-fwd")  # unknown until the builds directory is read
    assert kind.forwards and kind.description == "test build t-fwd"
    assert kind.program_dir == builds / "t-fwd" / "bin"
    assert kind.missing_programs() == []
    assert not get_switch_kind("t-plain").forwards
    assert {"t-fwd", "t-plain", "ovs"} <= set(switches.switch_kinds())


def test_a_build_missing_a_program_is_refused_naming_it_and_where(builds: Path) -> None:
    (builds / "t-fwd" / "bin" / "dpctl").unlink()
    kind = get_switch_kind("t-fwd")
    assert kind.missing_programs() == ["dpctl"]
    with pytest.raises(SwitchKindError, match=r"needs dpctl in .*t-fwd/bin"):
        kind.check_programs()


def test_the_switch_shell_finds_the_build_programs_and_libraries(builds: Path) -> None:
    """The factory's class exports PATH (the build's bin/ first) and LD_LIBRARY_PATH."""
    kind = get_switch_kind("t-fwd")
    ctx = switches.SwitchContext(run_dir=builds, prefix="t1-", spec=None)  # type: ignore[arg-type]
    cls = kind.factory(ctx)
    assert issubclass(cls, ofss_builds.OfssBuildSwitch)
    env = cls.run_env  # type: ignore[attr-defined]
    assert env["PATH"].split(":")[0] == str((builds / "t-fwd" / "bin").resolve())
    assert env["LD_LIBRARY_PATH"] == str((builds / "t-fwd" / "lib").resolve())


def test_an_unknown_kind_says_how_builds_become_kinds(monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    monkeypatch.delenv(ENV_OFSS_BUILDS, raising=False)
    with pytest.raises(SwitchKindError, match=r"unknown switch kind 'nope'.*"
                       + ENV_OFSS_BUILDS):
        get_switch_kind("nope")


def test_a_builds_directory_that_is_not_there_or_not_json_is_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_OFSS_BUILDS, str(tmp_path / "absent"))
    with pytest.raises(SwitchKindError, match=r"DCNLAB_OFSS_BUILDS=.*absent: no such"):
        get_switch_kind("t-fwd")
    root = tmp_path / "bad"
    _build(root, "t-broken", forwards=True)
    (root / "t-broken" / ofss_builds.OFSS_BUILD_FILE).write_text("{not json")
    monkeypatch.setenv(ENV_OFSS_BUILDS, str(root))
    try:
        with pytest.raises(SwitchKindError, match=r"t-broken/kind.json: not JSON"):
            get_switch_kind("t-broken")
    finally:
        ofss_builds.unload_ofss_builds(root)


def test_switch_forwarding_runs_only_on_a_kind_that_forwards(builds: Path) -> None:
    scheme = registry.get(FORWARDING)
    assert scheme.refuses("t-fwd") is None
    for kind in ("t-plain", "ovs"):
        why = scheme.refuses(kind)
        assert why is not None and "forwards by itself" in why and kind in why
    # and the experiment file says so before anything runs
    spec = {"topology": "spineleaf:2,2,2", "switch": "ovs", "schemes": ["ecmp", FORWARDING],
            "workload": {"type": "poisson", "cdf": "websearch"}, "loads": [0.1],
            "seeds": [1], "duration": 5}
    with pytest.raises(SpecFileError, match=r"schemes\[1\].*forwards by itself"):
        parse_spec(spec)
    parsed = parse_spec({**spec, "schemes": ["ecmp", {"name": "authors", "app": FORWARDING,
                                                      "switch": "t-fwd"}]})
    assert [s.switch for s in parsed.schemes] == [None, "t-fwd"]


def test_the_app_installs_nothing_not_even_a_table_miss_entry() -> None:
    from dcnlab.apps.switch_forwarding import SwitchForwarding
    from dcnlab.controller.view import NetworkView
    from dcnlab.topo.spec import parse

    view = NetworkView.from_topology(parse("spineleaf:2,2,2"))
    rules = SwitchForwarding.compile(object.__new__(SwitchForwarding), view)
    assert sorted(rules) == view.switches and len(rules) == 4
    assert all(not r.flows and not r.groups for r in rules.values())


# ------------------------------------------------------------- the build script's sources


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True, env={**os.environ, "GIT_AUTHOR_NAME": "t",
                                          "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                                          "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()


def _authors_tree(root: Path) -> Path:
    """A stand-in of gistnetserv-uah/TCP-PATH: mininet/udatapath/pipeline.c with the
    mode line, committed, plus a bare clone."""
    work = root / "work"
    pipeline = work / authors_switch.SWITCH_SUBDIR / authors_switch.PIPELINE
    pipeline.parent.mkdir(parents=True)
    pipeline.write_text(f"#define PUERTO_ELEFANTE 30000\n{authors_switch.MODE_LINE} //x\n")
    (work / authors_switch.SWITCH_SUBDIR / "boot.sh").write_text("#!/bin/sh\n")
    (work / "README.md").write_text("top\n")
    _git("init", "-q", cwd=work)
    _git("add", ".", cwd=work)
    _git("commit", "-qm", "c", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(root / "bare"), cwd=root)
    return work


@pytest.mark.parametrize("bare", [False, True])
def test_a_source_is_exported_from_a_work_tree_or_a_bare_repository(
        tmp_path: Path, bare: bool) -> None:
    work = _authors_tree(tmp_path)
    src = tmp_path / "bare" if bare else work
    out = authors_switch.export_source(src, tmp_path / "out", authors_switch.SWITCH_SUBDIR)
    assert out.commit == _git("rev-parse", "HEAD", cwd=work)
    assert sorted(p.name for p in out.path.iterdir()) == ["boot.sh", "udatapath"]
    authors_switch.set_mode(out.path, authors_switch.MODES["tcppath"])
    text = (out.path / authors_switch.PIPELINE).read_text()
    assert "#define TCP_PATH 1 //x" in text and authors_switch.MODE_LINE not in text


def test_a_partial_mirror_is_exported_without_its_absent_files(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A mirror may lack a tree's largest files: they are left out and named, and the
    build fails later only if it needs them."""
    work = _authors_tree(tmp_path)
    sha = _git("rev-parse", "HEAD:README.md", cwd=work)
    (tmp_path / "bare" / "objects" / sha[:2] / sha[2:]).unlink()
    assert authors_switch.missing_blobs(tmp_path / "bare") == ["README.md"]
    out = authors_switch.export_source(tmp_path / "bare", tmp_path / "out")
    assert sorted(p.name for p in out.path.iterdir()) == [authors_switch.SWITCH_SUBDIR]
    assert "1 file(s) absent from the repository, left out: README.md" in \
        capsys.readouterr().out


def test_a_source_fix_that_matches_nothing_fails_the_build(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.cpp").write_text("std::make_pair<int, int>(1, 2);\n")
    fix = authors_switch.SourceFix("src/**/*.[ch]*", "make_pair<", "pair<", "why")
    assert authors_switch.apply_fixes(tmp_path, (fix,)) == ["'make_pair<' -> 'pair<' x1 (why)"]
    assert (tmp_path / "src" / "a.cpp").read_text() == "std::pair<int, int>(1, 2);\n"
    with pytest.raises(authors_switch.BuildError, match="matches nothing"):
        authors_switch.apply_fixes(tmp_path, (fix,))


def test_a_source_without_the_mode_line_is_refused(tmp_path: Path) -> None:
    work = _authors_tree(tmp_path)
    pipeline = work / authors_switch.SWITCH_SUBDIR / authors_switch.PIPELINE
    pipeline.write_text("#define TCP_PATH 2\n")
    out = authors_switch.export_source(work, tmp_path / "out", authors_switch.SWITCH_SUBDIR)
    with pytest.raises(authors_switch.BuildError, match="expected one line"):
        authors_switch.set_mode(out.path, 1)
    with pytest.raises(authors_switch.BuildError, match="no such directory"):
        authors_switch.export_source(tmp_path / "absent", tmp_path / "out2")


def test_the_written_kind_is_what_dcnlab_registers(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    into = tmp_path / "into"
    _build(into, "authors-tcppath", forwards=False)  # bin/ as make install leaves it
    (into / "netbee" / "lib").mkdir(parents=True)
    authors_switch.write_kind(into, "tcppath", authors_switch.Source(tmp_path, "a" * 40),
                              authors_switch.Source(tmp_path, None))
    monkeypatch.setenv(ENV_OFSS_BUILDS, str(into))
    try:
        kind = get_switch_kind("authors-tcppath")
        assert kind.forwards and "TCP-Path" in kind.description and "aaaaaaaaaaaa" in \
            kind.description
        assert registry.get(FORWARDING).refuses("authors-tcppath") is None
    finally:
        ofss_builds.unload_ofss_builds(into)


# ------------------------------------------------------------------ dpids by tier


def test_a_kind_that_reads_roles_from_dpids_gets_them_numbered_by_tier() -> None:
    """The authors' switch: rack switches below 100, cores (spines) from 1000; names,
    ports and links stay, so everything keyed by name is unchanged."""
    from dcnlab.topo.spec import parse

    spec = parse("spineleaf:4,4,4")
    out = switches.renumbered(spec, authors_switch.DPID_BY_TIER)
    assert [(s.name, s.tier, s.dpid) for s in out.switches] == [
        *((f"s{i}", "spine", 999 + i) for i in range(1, 5)),
        *((f"s{i}", "leaf", i - 4) for i in range(5, 9))]
    assert out.links == spec.links and out.hosts == spec.hosts
    assert switches.renumbered(spec, None) is spec
    fat = switches.renumbered(parse("fattree:4"), authors_switch.DPID_BY_TIER)
    assert sorted(s.dpid for s in fat.switches if s.tier == "agg") == list(range(100, 108))
    with pytest.raises(SwitchKindError, match=r"knows no tier leaf"):
        switches.renumbered(spec, {"spine": 1000})
    with pytest.raises(SwitchKindError, match="the same dpid"):
        switches.renumbered(spec, {"spine": 1, "leaf": 2})


def test_dpid_by_tier_in_kind_json_is_checked(builds: Path) -> None:
    manifest = builds / "t-fwd" / ofss_builds.OFSS_BUILD_FILE
    manifest.write_text(json.dumps({"forwards": True, "dpid_by_tier": {"leaf": 1,
                                                                       "spine": 1000}}))
    assert get_switch_kind("t-fwd").dpids == {"leaf": 1, "spine": 1000}
    ofss_builds.unload_ofss_builds(builds)
    manifest.write_text(json.dumps({"dpid_by_tier": {"leaf": "one"}}))
    with pytest.raises(SwitchKindError, match="dpid_by_tier must map tier names"):
        get_switch_kind("t-fwd")
