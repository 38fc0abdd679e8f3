"""environment.versions(): what meta.json records of the code a run came from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dcnlab.benchmarks.engine import environment


def test_the_commit_is_read_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit made while an experiment runs does not change what its later scenarios
    record: the process still runs the code it loaded (with the changes it had)."""
    heads = iter(["a" * 40, "b" * 40])

    def run(argv: list[str], cwd: Path | None = None) -> str | None:
        if argv[:2] == ["git", "rev-parse"]:
            return next(heads)
        if argv[:2] == ["git", "status"]:
            return " M apps/ecmp.py"
        return None

    monkeypatch.setattr(environment, "_run", run)
    environment._git.cache_clear()
    try:
        first: dict[str, Any] = environment.versions()
        second = environment.versions()
    finally:
        environment._git.cache_clear()
    assert (first["git_commit"], first["git_dirty"]) == ("a" * 40, True)
    assert (second["git_commit"], second["git_dirty"]) == ("a" * 40, True)
