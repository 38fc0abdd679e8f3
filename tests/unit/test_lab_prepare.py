"""lab prepare's pieces that need no lab: where the venv is, a wheel's digest that a
rebuild does not change, the report."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from dcnlab.lab.prepare import Prepared, render, venv_of, wheel_digest
from dcnlab.lab.ssh import HostError


def test_the_venv_of_the_lab_files_python() -> None:
    assert venv_of("/opt/dcnlab/venv/bin/python") == "/opt/dcnlab/venv"
    with pytest.raises(HostError, match="expected VENV/bin/python"):
        venv_of("/usr/bin/python3x/python")


def _wheel(path: Path, files: dict[str, bytes], date: tuple[int, ...]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(zipfile.ZipInfo(name, date_time=date), data)  # type: ignore[arg-type]
    return path


def test_a_wheels_digest_is_its_files_not_its_timestamps(tmp_path: Path) -> None:
    files = {"dcnlab/__init__.py": b"x = 1\n", "dcnlab-0.1.0.dist-info/RECORD": b"r1"}
    one = _wheel(tmp_path / "a.whl", files, (2026, 1, 1, 0, 0, 0))
    two = _wheel(tmp_path / "b.whl", {**files, "dcnlab-0.1.0.dist-info/RECORD": b"r2"},
                 (2026, 6, 1, 12, 0, 0))
    assert wheel_digest(one) == wheel_digest(two)
    three = _wheel(tmp_path / "c.whl", {**files, "dcnlab/__init__.py": b"x = 2\n"},
                   (2026, 1, 1, 0, 0, 0))
    assert wheel_digest(three) != wheel_digest(one)


def test_the_report_says_what_is_missing_and_what_some_schemes_lack() -> None:
    text = render([Prepared("h1", ready=["dcnlab at /v/bin/python (installed now)"],
                            lacking=["MPTCP (seed 003's kernel reference: ...)"]),
                   Prepared("h2", missing=["Python 3.11 or newer as python3 (...)"])])
    assert text.splitlines() == [
        "h1: ready", "  ok: dcnlab at /v/bin/python (installed now)",
        "  lacking (some schemes need it): MPTCP (seed 003's kernel reference: ...)",
        "h2: not ready", "  missing: Python 3.11 or newer as python3 (...)"]
