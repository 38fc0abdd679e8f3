"""The multipath transport's Python side: where ``dcnlab-mp`` is, how to call it.

The transport itself is Rust (``hosts/mptransport/``, binary ``dcnlab-mp``): one
connection over N kernel TCP subflows with a pluggable scheduler (minRTT, round-robin,
redundant, ECF, BLEST, CFS).  This module only builds command lines, runs them (in a
host, through a command prefix such as ``mnexec -a PID``) and parses their JSON lines.

The binary: ``$DCNLAB_MP_BINARY`` if set, else ``hosts/mptransport/target/release/
dcnlab-mp`` of this source tree, else ``dcnlab-mp`` on PATH (scripts/setup.sh builds it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

SCHEDULERS = ("minrtt", "roundrobin", "redundant", "ecf", "blest", "cfs")


class MpError(RuntimeError):
    """dcnlab-mp failed or is missing; the message says why (with its stderr)."""


def binary() -> str:
    env = os.environ.get("DCNLAB_MP_BINARY")
    if env:
        if not os.access(env, os.X_OK):
            raise MpError(f"DCNLAB_MP_BINARY={env} is not an executable file")
        return env
    local = Path(__file__).resolve().parent / "target" / "release" / "dcnlab-mp"
    if local.is_file():
        return str(local)
    found = shutil.which("dcnlab-mp")
    if found:
        return found
    raise MpError("dcnlab-mp not found: build it with `cd hosts/mptransport && cargo build "
                  "--release --locked` (scripts/setup.sh does) or set DCNLAB_MP_BINARY")


def check_scheduler(name: str) -> str:
    if name.lower() not in SCHEDULERS:
        raise MpError(f"unknown scheduler {name!r}; valid: {', '.join(SCHEDULERS)}")
    return name.lower()


def send_argv(to: Sequence[str], size: int | str, scheduler: str, via: Sequence[str] = (),
              program: str | None = None, **options: Any) -> list[str]:
    """``dcnlab-mp send`` arguments: ``to`` ADDR:PORT (one, or one per ``via``),
    ``options`` any further ``--name value`` (window, segment, lowat, seed, timeout, kill);
    ``program``: the binary's path where it runs (None: :func:`binary`, this machine's).
    """
    argv = [program or binary(), "send", "--to", ",".join(to), "--size", str(size),
            "--scheduler", check_scheduler(scheduler)]
    if via:
        argv += ["--via", ",".join(via)]
    for key, value in options.items():
        if value is not None:
            argv += [f"--{key}", str(value)]
    return argv


def parse_line(text: str) -> dict[str, Any]:
    """The last JSON object line of ``text``."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    raise MpError(f"no JSON result in dcnlab-mp output: {text[-300:]!r}")


Popen = Callable[..., Any]  # a host's popen(argv, stdout=, stderr=): a Popen-like process


def _local_popen(prefix: Sequence[str]) -> Popen:
    """Starts a process here, inside a host through ``prefix`` (``mnexec -a PID``)."""
    return lambda argv, **kwargs: subprocess.Popen([*prefix, *argv], **kwargs)


def send(to: Sequence[str], size: int | str, scheduler: str, via: Sequence[str] = (),
         prefix: Sequence[str] = (), timeout: float = 300.0, popen: Popen | None = None,
         program: str | None = None, **options: Any) -> dict[str, Any]:
    """One transfer; returns the sender's JSON result (``fct_ms``, ``intact``, per-subflow
    bytes, ``dup_bytes``, ...).  Raises :class:`MpError` when it fails.  It runs through
    ``popen`` (a fabric host's: a lab server's over SSH), else here behind ``prefix``;
    ``program`` is the binary's path there (None: this machine's)."""
    argv = send_argv(to, size, scheduler, via, program=program, timeout=timeout, **options)
    proc = (popen or _local_popen(prefix))(argv, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT)
    try:
        out, _ = proc.communicate(timeout=timeout + 30)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.wait()
        raise MpError(f"dcnlab-mp send did not finish in {timeout + 30:.0f} s") from exc
    text = out.decode(errors="replace") if isinstance(out, bytes) else out
    if proc.returncode == 2 or not text.strip():
        raise MpError(f"dcnlab-mp send failed (exit {proc.returncode}): "
                      f"{text.strip()[-500:]}")
    return parse_line(text)


class Server:
    """``dcnlab-mp serve`` in the background, in a host: through ``popen`` (a fabric
    host's) with ``program`` its path there, else here behind ``prefix``."""

    def __init__(self, listen: str, prefix: Sequence[str] = (), count: int = 0,
                 log: Path | None = None, popen: Popen | None = None,
                 program: str | None = None) -> None:
        self.listen = listen
        self._popen = popen or _local_popen(prefix)
        self._argv = [program or binary(), "serve", "--listen", listen, "--count", str(count)]
        self._log = log
        self.proc: Any = None
        self.lines: list[dict[str, Any]] = []
        self.output = ""  # stdout and stderr, once stopped
        self.address = ""

    def start(self) -> Server:
        """Starts and waits for the "listening" line (the socket is bound then)."""
        self.proc = self._popen(self._argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode(errors="replace")
        if "listening" not in line:
            self.stop()
            raise MpError(f"dcnlab-mp serve did not start on {self.listen}: {line!r} "
                          f"{self.output[-500:]}")
        self.address = json.loads(line)["listening"]
        return self

    def stop(self) -> list[dict[str, Any]]:
        """Stops the server; returns the receiver's result lines."""
        if self.proc is None:
            return self.lines
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate(timeout=10)
        self.output = (out or b"").decode(errors="replace")
        for line in self.output.splitlines():
            if line.startswith("{"):
                try:
                    self.lines.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        if self._log is not None:
            self._log.write_text(self.output)
        self.proc = None
        return self.lines
