"""What the README tells a newcomer is true: the files and modules it names and the
`dcnlab` subcommands it shows exist; its commands work in a root shell without sudo; the
rustup command it quotes is the one set-up prints; it has the markers the "What you get"
renderer fills; a paper is called a paper, not a seed."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from dcnlab import cli

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
TOPS = ("scripts", "docs", "benchmarks", "hosts", "switch_ext", "apps", "controller", "topo",
        "dcnlab", "tests", ".ci")
_TOP = "|".join(re.escape(t) for t in TOPS)
_PATH = re.compile(rf"(?<![\w./-])((?:{_TOP})/[\w./-]*[\w/])")
# Fenced blocks with their info string; only shell blocks hold commands (the rendered
# "What you get" section holds a ```text block).
_BLOCK = re.compile(r"^\s*```([\w-]*)\n(.*?)^\s*```", re.S | re.M)


def _load(path: Path) -> ModuleType:
    """A file as a module of its own name (dataclasses look their module up there), apart
    from the one pytest may have imported from the same file."""
    name = f"_readme_truths_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _code_lines() -> list[str]:
    return [ln.strip() for lang, block in _BLOCK.findall(README) if lang in ("", "sh", "bash")
            for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def test_paths_the_readme_names_exist() -> None:
    named = set(_PATH.findall(README))
    assert "scripts/setup.sh" in named  # the pattern finds what it should
    assert sorted(p for p in named if not (REPO / p).exists()) == []
    experiments = set(re.findall(r"\b(seed\d{3}\w*\.yaml)\b", README))
    assert experiments
    assert sorted(e for e in experiments
                  if not (REPO / "benchmarks" / "experiments" / e).is_file()) == []


def test_modules_the_readme_runs_exist() -> None:
    modules = set(re.findall(r"(?:-m|ryu-manager)\s+(dcnlab\.[\w.]+)", README))
    assert "dcnlab.apps.ecmp" in modules
    assert sorted(m for m in modules if importlib.util.find_spec(m) is None) == []


def test_dcnlab_subcommands_the_readme_shows_exist(capsys: pytest.CaptureFixture) -> None:
    shown = {m.group(1) for ln in _code_lines()
             for m in [re.match(r"(?:\.venv/bin/)?dcnlab\s+(\w+)", ln)] if m}
    assert {"check", "run", "report", "mp"} <= shown
    # The parser's own list of subcommands, from its answer to one that does not exist
    # (running each with --help would run `dcnlab mp`'s binary, which needs a build).
    with pytest.raises(SystemExit) as info:
        cli.main(["no-such-command"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    listed = re.search(r"choose from (.*)\)", err)
    assert listed is not None, err
    known = set(re.findall(r"'([\w-]+)'", listed.group(1)))
    assert sorted(shown - known) == []


def test_commands_work_in_a_root_shell_without_sudo() -> None:
    # Debian minimal and containers have no sudo: a root shell runs the scripts as shown.
    assert [ln for ln in _code_lines() if ln.startswith("sudo ")] == []
    assert "as root (or with sudo" in README


@pytest.mark.parametrize("path", ["README.md", "docs/experiments.md"])
def test_a_paper_is_called_a_paper(path: str) -> None:
    # "seed 002" reads as a random seed; the files (seed002.yaml) keep their names
    text = (REPO / path).read_text()
    assert re.findall(r"\bseeds? 00\d|\bthe seed's\b", text, re.I) == []


def test_readme_quotes_the_command_set_up_prints_without_internet(tmp_path: Path) -> None:
    install = _load(REPO / "tests" / "unit" / "test_install_rust.py")
    box = install.Sandbox(tmp_path)
    box.add_curl()
    box.offline = True
    result = box.run()
    assert result.returncode == 2
    printed = result.stderr.splitlines()[-1].strip()
    assert printed.startswith("curl ") and printed in README


def test_readme_has_the_what_you_get_markers_once() -> None:
    renderer = _load(REPO / "scripts" / "readme_results.py")
    assert README.count(renderer.BEGIN) == 1 and README.count(renderer.END) == 1
    assert README.index(renderer.BEGIN) < README.index(renderer.END)
    assert "## What you get" in README[:README.index(renderer.BEGIN)]
