"""How the Python side hands the UC3 agent's steady state to the native loop: the
command line (no secret on it), the maps by pin or by inherited fd, the engine choice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dcnlab.hosts.uc3_agent import agent as agent_mod
from dcnlab.hosts.uc3_agent import native
from dcnlab.hosts.uc3_agent.__main__ import main
from dcnlab.hosts.uc3_agent.agent import AgentConfig

SECRET = b"s3cr3t-s3cr3t-s3cr3t-0123456789"


class Program:
    """The parts of a ClampProgram the hand-over reads."""

    def __init__(self, pin_dir: Path | None) -> None:
        self.cgroup = Path("/sys/fs/cgroup/unified/dcnlab-x")
        self.pin_dir = pin_dir

    def map_specs(self) -> tuple[dict[str, str], tuple[int, ...]]:
        if self.pin_dir is not None:
            return {n: str(self.pin_dir / n) for n in ("clamps", "flows", "stats")}, ()
        return {"clamps": "fd:7", "flows": "fd:8", "stats": "fd:9"}, (7, 8, 9)


def _opts(argv: list[str]) -> dict[str, str]:
    return dict(zip(argv[1::2], argv[2::2], strict=False))


@pytest.fixture()
def built(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    exe = tmp_path / "dcnlab-uc3-agentd"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(native, "BINARY", exe)
    return exe


def test_the_command_carries_no_secret_and_names_the_pinned_maps(built: Path,
                                                                  tmp_path: Path) -> None:
    cfg = AgentConfig(secret=SECRET, listen="192.168.0.3", port=6690, interval_s=0.1,
                      timeout_s=2.0, state_file=tmp_path / "state.json")
    argv, fds = native.command(cfg, Program(Path("/run/x/bpffs/dcnlab-x")),  # type: ignore[arg-type]
                               "h1", secret_fd=5)
    assert argv[0] == str(built)
    assert not any(SECRET.decode() in a for a in argv)
    opts = _opts(argv)
    assert opts["--secret-fd"] == "5" and fds == (5,)
    assert opts["--clamps-map"] == "/run/x/bpffs/dcnlab-x/clamps"
    assert opts["--flows-map"] == "/run/x/bpffs/dcnlab-x/flows"
    assert opts["--stats-map"] == "/run/x/bpffs/dcnlab-x/stats"
    assert opts["--pins"] == "/run/x/bpffs/dcnlab-x"
    assert (opts["--listen"], opts["--port"], opts["--name"]) == ("192.168.0.3", "6690", "h1")
    assert (float(opts["--interval"]), float(opts["--timeout"])) == (0.1, 2.0)
    assert opts["--cgroup"] == "/sys/fs/cgroup/unified/dcnlab-x"
    assert opts["--state-file"] == str(tmp_path / "state.json")
    assert float(opts["--auth-timeout"]) == agent_mod.AUTH_TIMEOUT_S
    assert int(opts["--max-connections"]) == agent_mod.MAX_CONNECTIONS


def test_unpinned_maps_are_passed_as_inherited_fds(built: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_mod, "AUTH_TIMEOUT_S", 0.5)  # read when called
    program: Any = Program(None)
    argv, fds = native.command(AgentConfig(secret=SECRET), program, "h1", secret_fd=4)
    opts = _opts(argv)
    assert (opts["--clamps-map"], opts["--flows-map"], opts["--stats-map"]) == \
        ("fd:7", "fd:8", "fd:9")
    assert fds == (4, 7, 8, 9) and "--pins" not in opts and "--state-file" not in opts
    assert opts["--auth-timeout"] == "0.5"


def test_the_engine_defaults_to_native_only_when_built(
        built: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert native.default_engine() == "native"
    monkeypatch.setattr(native, "BINARY", tmp_path / "missing")
    assert native.binary() is None and native.default_engine() == "python"
    program: Any = Program(None)
    with pytest.raises(FileNotFoundError, match="not built"):
        native.command(AgentConfig(secret=SECRET), program, "h1", secret_fd=4)


def test_bad_engine_and_short_secret_are_refused(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    secret = tmp_path / "secret"
    secret.write_text("short")
    with pytest.raises(SystemExit):
        main(["--engine", "fortran", "--secret-file", str(secret)])
    assert "invalid choice: 'fortran'" in capsys.readouterr().err
    assert main(["--engine", "native", "--secret-file", str(secret)]) == 1
    assert "at least 16 bytes" in capsys.readouterr().err
