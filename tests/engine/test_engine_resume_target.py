"""``dcnlab run --resume DIR`` where DIR is one scenario's output directory: that scenario
is continued in place, never every scenario of the file nested under it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dcnlab import cli
from dcnlab.benchmarks.engine.runner import resume_target


def _scenario_dir(tmp_path: Path, name: str = "threelayer") -> Path:
    out = tmp_path / "exp" / name
    out.mkdir(parents=True)
    (out / "meta.json").write_text(json.dumps({"name": "exp", "scenario": name}))
    (out / "spec.yaml").write_text("name: exp\n")
    return out


def test_a_scenario_directory_resumes_that_scenario_in_its_parent(tmp_path: Path) -> None:
    out = _scenario_dir(tmp_path)
    assert resume_target(out) == (tmp_path / "exp", "threelayer")
    # The experiment's own directory (no meta.json of its own) and an experiment without
    # scenarios resume where they are, with whatever --scenarios says.
    assert resume_target(tmp_path / "exp") == (tmp_path / "exp", None)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "meta.json").write_text(json.dumps({"name": "plain", "scenario": None}))
    assert resume_target(plain) == (plain, None)
    # A directory named otherwise than its scenario is not taken for one.
    moved = tmp_path / "moved"
    out.rename(moved)
    assert resume_target(moved) == (moved, None)


def test_resuming_a_scenario_directory_for_another_scenario_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = _scenario_dir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--resume", str(out), "--scenarios", "ovs"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "holds scenario threelayer only" in err and "--scenarios ovs" in err
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "spec.yaml"]  # untouched
