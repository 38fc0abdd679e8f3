"""Build a controller app in memory from a topology spec (no ryu-manager, no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dcnlab.topo.spec import TopologySpec, parse


def app_from_topology(app_cls: type, topo: str, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch, **env: str) -> tuple[Any, TopologySpec]:
    """``app_cls`` as ryu-manager would start it with DCNLAB_TOPOLOGY set to ``topo``: no
    stats polling, no state file, ``env`` on top."""
    spec = parse(topo)
    path = tmp_path / "topo.json"
    path.write_text(json.dumps(spec.to_dict()))
    monkeypatch.setenv("DCNLAB_TOPOLOGY", str(path))
    monkeypatch.setenv("DCNLAB_STATS_INTERVAL", "0")
    monkeypatch.delenv("DCNLAB_STATE_FILE", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return app_cls(), spec
