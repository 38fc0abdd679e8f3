"""UC3 app configuration from environment variables (see ``apps/uc3.py`` for the list).

Also the agents file: JSON mapping a host's fabric IP to where its agent listens, written
by whoever starts the agents (``dcnlab check``, the tests, the experiment engine)::

    {"10.0.0.1": "192.168.0.2",                       # default port
     "10.0.0.2": "192.168.0.3:6690",
     "10.1.0.1": {"addr": "192.168.0.4", "port": 6690}}
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dcnlab.hosts.uc3_agent.agent import DEFAULT_PORT
from dcnlab.schemes.uc3.alloc import WIRE_HEADER_BYTES, AllocConfig, Rounding, ShareMethod

ENV_AGENTS = "DCNLAB_UC3_AGENTS"
ENV_AGENT_PORT = "DCNLAB_UC3_AGENT_PORT"
ENV_SECRET_FILE = "DCNLAB_UC3_SECRET_FILE"
ENV_SECRET = "DCNLAB_AGENT_SECRET"  # the agent's own variable, accepted as a fallback
ENV_INTERVAL = "DCNLAB_UC3_INTERVAL"
ENV_ALPHA = "DCNLAB_UC3_ALPHA"
ENV_BETA = "DCNLAB_UC3_BETA"
ENV_ROUNDING = "DCNLAB_UC3_ROUNDING"
ENV_REALLOCATION = "DCNLAB_UC3_REALLOCATION"
ENV_METHOD = "DCNLAB_UC3_METHOD"
ENV_CAPACITY = "DCNLAB_UC3_CAPACITY"
ENV_MIN_RATE = "DCNLAB_UC3_MIN_RATE"
ENV_HEADER_BYTES = "DCNLAB_UC3_HEADER_BYTES"

_RATE_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}
_FALSE = {"0", "false", "no", "off"}


class ConfigError(ValueError):
    """A UC3 setting that cannot be used; the message names the variable."""


def parse_rate_bps(text: str, name: str) -> float:
    """``100M`` -> 1e8 (bit/s); plain numbers are bit/s."""
    t = text.strip().lower().removesuffix("bps").removesuffix("bit")
    unit = t[-1] if t and t[-1] in "kmg" else ""
    try:
        value = float(t[: len(t) - len(unit)]) * _RATE_UNITS[unit]
    except ValueError:
        raise ConfigError(f"{name}={text!r}: not a rate (e.g. 100M)") from None
    if value <= 0:
        raise ConfigError(f"{name}={text!r}: must be positive")
    return value


@dataclass(frozen=True)
class Uc3Config:
    agents_file: Path | None
    agent_port: int
    secret: bytes | None
    interval_s: float
    alloc: AllocConfig
    capacity_bps: float | None  # None: from the topology's link rates
    min_rate_bps: float

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Uc3Config:
        env = os.environ if env is None else env

        def number(name: str, default: float, lo: float, hi: float) -> float:
            raw = env.get(name, "")
            try:
                value = float(raw) if raw else default
            except ValueError:
                raise ConfigError(f"{name}={raw!r}: not a number") from None
            if not lo <= value <= hi:
                raise ConfigError(f"{name}={value}: must be within [{lo}, {hi}]")
            return value

        secret: bytes | None = None
        secret_file = env.get(ENV_SECRET_FILE)
        if secret_file:
            try:
                secret = Path(secret_file).read_bytes().strip()
            except OSError as exc:
                raise ConfigError(f"{ENV_SECRET_FILE}={secret_file}: {exc.strerror}") from None
        elif env.get(ENV_SECRET):
            secret = env[ENV_SECRET].encode()
        try:
            rounding = Rounding(env.get(ENV_ROUNDING, "up").lower())
            method = ShareMethod(env.get(ENV_METHOD, "bottleneck").lower())
        except ValueError as exc:
            raise ConfigError(f"{ENV_ROUNDING}/{ENV_METHOD}: {exc}") from None
        alloc = AllocConfig(
            alpha=number(ENV_ALPHA, 0.4, 1e-6, 1.0), beta=number(ENV_BETA, 0.8, 0.0, 1.0),
            rounding=rounding, method=method,
            reallocation=env.get(ENV_REALLOCATION, "1").strip().lower() not in _FALSE,
            header_bytes=int(number(ENV_HEADER_BYTES, WIRE_HEADER_BYTES, 0, 1000)))
        capacity = env.get(ENV_CAPACITY)
        agents = env.get(ENV_AGENTS)
        return cls(
            agents_file=Path(agents) if agents else None,
            agent_port=int(number(ENV_AGENT_PORT, DEFAULT_PORT, 1, 65535)),
            secret=secret,
            interval_s=number(ENV_INTERVAL, 0.05, 0.001, 60.0),
            alloc=alloc,
            capacity_bps=parse_rate_bps(capacity, ENV_CAPACITY) if capacity else None,
            min_rate_bps=parse_rate_bps(env.get(ENV_MIN_RATE, "100k"), ENV_MIN_RATE))


def parse_agents(data: object, default_port: int) -> dict[str, tuple[str, int]]:
    """Agents file contents -> {fabric ip: (management address, port)}."""
    if not isinstance(data, dict):
        raise ConfigError("agents file: expected a JSON object {host ip: address}")
    out: dict[str, tuple[str, int]] = {}
    for ip, where in data.items():
        try:
            ipaddress.IPv4Address(ip)
            if isinstance(where, dict):
                addr, port = str(where["addr"]), int(where.get("port", default_port))
            elif isinstance(where, str):
                addr, _, port_text = where.partition(":")
                port = int(port_text) if port_text else default_port
            else:
                raise TypeError(type(where).__name__)
            ipaddress.IPv4Address(addr)
            if not 1 <= port <= 65535:
                raise ValueError(f"port {port}")
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"agents file: entry {ip!r}: {where!r} ({exc})") from None
        out[ip] = (addr, port)
    return out


def read_agents(path: Path, default_port: int) -> dict[str, tuple[str, int]]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"agents file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"agents file {path}: bad JSON ({exc})") from None
    return parse_agents(data, default_port)
