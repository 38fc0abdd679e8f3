"""The flow tap: which fabric links each flow crossed, and every fabric link's load.

What it measures (``flowtap.bpf.c``): a tc classifier on the *ingress* of the
switch-side veth of every fabric (switch-to-switch) port of a run, so a packet is
counted once per directed link it crossed, when the peer switch's transmission arrives.
Per (IPv4 5-tuple, ifindex): bytes, packets, first and last CLOCK_MONOTONIC ns of its
non-SYN packets, SYN packets apart (TCP-Path floods SYN copies over links the flow never
uses).  It returns TC_ACT_OK, always: forwarding is not touched.  Both switch kinds see
the same packets there: ``__netif_receive_skb_core`` hands a received frame first to the
packet taps (the AF_PACKET sockets of ``switch_ext`` and of Open vSwitch's userspace
datapath each get their own reference) and then to the clsact ingress hook, so the hook
sees every frame the switch reads, microseconds later, and cannot change what the switch
got.  Ingress rather than egress because
``switch_ext`` sends with PACKET_QDISC_BYPASS, which skips the egress hook.

The load timeline: the same helper reads ``/proc/net/dev`` (per network namespace, so
inside the run's) every ``interval`` seconds and keeps every fabric veth's tx bytes with
the CLOCK_MONOTONIC time of the read, the clock of the tap's ns stamps.

How it runs: the switch-side veths live in the run's network namespace, so the loader is
a helper process started there (``mnexec -a <namespace pid> python -m
dcnlab.benchmarks.engine.flowtap``).  It creates a clsact qdisc where there is none
(and remembers which), attaches, prints ``ready``, samples until a ``stop`` line (or end
of input) on stdin, then writes ``taps.json.gz`` (map dump, packet counts, the helper's
own CPU seconds) and ``links.json.gz`` (timeline)
into its output directory, detaches its filters and removes the qdiscs it created.  The
runner stops it in ``finally``; if it is killed instead, the veths (and the filters on
them) go with the network.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gzip
import json
import os
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from dcnlab import libbpf

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "flowtap.bpf.c"
PREBUILT = HERE / "flowtap.bpf.o"
PROG_NAME = b"dcnlab_flowtap"
KEY = struct.Struct("=4s4sHHBxxxI")  # struct tap_key
VALUE = struct.Struct("=QQQQQQ")  # struct tap_val
STAT_NAMES = ("seen", "counted", "lost")
BPF_TC_INGRESS = 1
TAPS_JSON = "taps.json.gz"
LINKS_JSON = "links.json.gz"
READY = "ready"


class TapError(RuntimeError):
    """Building, loading, attaching or running the flow tap failed; the message says why."""


# ---------------------------------------------------------------------------- build


def build_object(out: Path) -> Path:
    """Compile flowtap.bpf.c with clang (build_flowtap.sh) into ``out``."""
    return libbpf.build_object(SOURCE, HERE / "build_flowtap.sh", out, TapError)


def object_path(work_dir: Path) -> Path:
    """The prebuilt object if it is newer than the source, else a fresh build in work_dir."""
    return libbpf.object_path(SOURCE, PREBUILT, HERE / "build_flowtap.sh", work_dir,
                              TapError)


def check_available() -> None:
    """libbpf loads and the object is there or builds (before an experiment starts)."""
    import tempfile

    _libbpf()
    if libbpf.prebuilt_is_current(SOURCE, PREBUILT):
        return
    with tempfile.TemporaryDirectory(prefix="dcnlab-flowtap-") as tmp:
        build_object(Path(tmp) / "flowtap.bpf.o")


# ---------------------------------------------------------------------------- libbpf


class _TcHook(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("ifindex", ctypes.c_int),
                ("attach_point", ctypes.c_int), ("parent", ctypes.c_uint32),
                ("_end", ctypes.c_size_t * 0)]


class _TcOpts(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("prog_fd", ctypes.c_int),
                ("flags", ctypes.c_uint32), ("prog_id", ctypes.c_uint32),
                ("handle", ctypes.c_uint32), ("priority", ctypes.c_uint32),
                ("_end", ctypes.c_size_t * 0)]


class _TestRunOpts(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("data_in", ctypes.c_void_p),
                ("data_out", ctypes.c_void_p), ("data_size_in", ctypes.c_uint32),
                ("data_size_out", ctypes.c_uint32), ("ctx_in", ctypes.c_void_p),
                ("ctx_out", ctypes.c_void_p), ("ctx_size_in", ctypes.c_uint32),
                ("ctx_size_out", ctypes.c_uint32), ("retval", ctypes.c_uint32),
                ("repeat", ctypes.c_int), ("duration", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("cpu", ctypes.c_uint32),
                ("batch_size", ctypes.c_uint32)]


def _libbpf() -> ctypes.CDLL:
    i = ctypes.c_int
    hook, opts = ctypes.POINTER(_TcHook), ctypes.POINTER(_TcOpts)
    return libbpf.load((
        ("bpf_tc_hook_create", i, [hook]),
        ("bpf_tc_hook_destroy", i, [hook]),
        ("bpf_tc_attach", i, [hook, opts]),
        ("bpf_tc_detach", i, [hook, opts]),
        ("bpf_prog_test_run_opts", i, [i, ctypes.POINTER(_TestRunOpts)]),
    ), TapError)


def _err(what: str, ret: int) -> Exception:
    return libbpf.errno_error(what, ret, TapError)


@dataclass(frozen=True)
class TapEntry:
    """One (flow, interface) of the map: the flow's packets that arrived there."""

    src: str
    dst: str
    sport: int
    dport: int
    proto: int
    iface: str
    bytes: int
    pkts: int
    first_ns: int  # 0: only SYN packets
    last_ns: int
    syn_pkts: int
    seen_ns: int  # first packet of any kind

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class FlowTap:
    """The loaded program attached to the ingress of ``ifaces`` (names in this process's
    network namespace); :meth:`close` detaches what it attached."""

    def __init__(self, ifaces: Sequence[str], obj: Path) -> None:
        self._lib = _libbpf()
        self._obj: int | None = None
        self._attached: list[tuple[_TcHook, _TcOpts]] = []
        self._created: list[_TcHook] = []  # clsact qdiscs this tap created
        self.names: dict[int, str] = {}
        try:
            self._load(obj)
            for name in ifaces:
                self._attach(name)
        except BaseException:
            self.close()
            raise

    def _load(self, obj: Path) -> None:
        self._obj = libbpf.open_object(self._lib, obj, TapError)
        libbpf.load_object(self._lib, self._obj, "the flow tap", TapError)
        self.prog_fd = libbpf.program_fd(self._lib, self._obj, PROG_NAME, TapError)
        self.map_fd = libbpf.map_fd(self._lib, self._obj, b"taps", TapError)
        self.stats_fd = libbpf.map_fd(self._lib, self._obj, b"tapstats", TapError)

    def _attach(self, name: str) -> None:
        try:
            ifindex = socket.if_nametoindex(name)
        except OSError:
            raise TapError(f"no interface {name!r} in this network namespace") from None
        hook = _TcHook(sz=ctypes.sizeof(_TcHook), ifindex=ifindex,
                       attach_point=BPF_TC_INGRESS)
        ret = self._lib.bpf_tc_hook_create(ctypes.byref(hook))
        if ret == 0:
            self._created.append(hook)
        elif ret != -17:  # EEXIST: a clsact qdisc is there already; keep it
            raise _err(f"creating the clsact qdisc on {name}", ret)
        opts = _TcOpts(sz=ctypes.sizeof(_TcOpts), prog_fd=self.prog_fd)
        ret = self._lib.bpf_tc_attach(ctypes.byref(hook), ctypes.byref(opts))
        if ret:
            raise _err(f"attaching the flow tap to {name}", ret)
        self._attached.append((hook, opts))
        self.names[ifindex] = name

    def entries(self) -> list[TapEntry]:
        """The map, one entry per (flow, interface)."""
        out = []
        prev = None
        key = ctypes.create_string_buffer(KEY.size)
        val = ctypes.create_string_buffer(VALUE.size)
        while self._lib.bpf_map_get_next_key(self.map_fd, prev, key) == 0:
            if self._lib.bpf_map_lookup_elem(self.map_fd, key, val) == 0:
                saddr, daddr, sport, dport, proto, ifindex = KEY.unpack(key.raw)
                nbytes, pkts, first, last, syn, seen = VALUE.unpack(val.raw)
                out.append(TapEntry(socket.inet_ntoa(saddr), socket.inet_ntoa(daddr), sport,
                                    dport, proto, self.names.get(ifindex, str(ifindex)),
                                    nbytes, pkts, first, last, syn, seen))
            prev = ctypes.create_string_buffer(key.raw, KEY.size)
        return out

    def test_run(self, frame: bytes, repeat: int = 1) -> tuple[int, int]:
        """Run the program on ``frame`` (an Ethernet frame) ``repeat`` times in the
        kernel (BPF_PROG_TEST_RUN, no interface involved): (return code, mean ns per
        run).  The map sees the frame like any other, on interface index 1."""
        buf = ctypes.create_string_buffer(frame, len(frame))
        opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts),
                            data_in=ctypes.cast(buf, ctypes.c_void_p),
                            data_size_in=len(frame), repeat=repeat)
        ret = self._lib.bpf_prog_test_run_opts(self.prog_fd, ctypes.byref(opts))
        if ret:
            raise _err("BPF_PROG_TEST_RUN", ret)
        return opts.retval, opts.duration

    def stats(self) -> dict[str, int]:
        """seen / counted / lost packets, summed over the CPUs."""
        possible = _possible_cpus()
        out = {}
        val = ctypes.create_string_buffer(8 * possible)  # one u64 per possible CPU
        for idx, name in enumerate(STAT_NAMES):
            key = ctypes.c_uint32(idx)
            if self._lib.bpf_map_lookup_elem(self.stats_fd, ctypes.byref(key), val) == 0:
                out[name] = sum(struct.unpack_from("=Q", val.raw, 8 * c)[0]
                                for c in range(possible))
        return out

    def close(self) -> None:
        """Detach our filters, remove the qdiscs we created, free the object.  Safe to
        call more than once; an interface that is gone already is not an error."""
        while self._attached:
            hook, opts = self._attached.pop()
            detach = _TcOpts(sz=ctypes.sizeof(_TcOpts), handle=opts.handle,
                             priority=opts.priority)
            self._lib.bpf_tc_detach(ctypes.byref(hook), ctypes.byref(detach))
        while self._created:
            hook = self._created.pop()
            hook.attach_point = BPF_TC_INGRESS | 2  # both: removes the clsact qdisc
            self._lib.bpf_tc_hook_destroy(ctypes.byref(hook))
        if self._obj:
            self._lib.bpf_object__close(self._obj)
            self._obj = None


def _possible_cpus() -> int:
    """Per-CPU map values have one slot per *possible* CPU."""
    try:
        text = Path("/sys/devices/system/cpu/possible").read_text().strip()
    except OSError:
        return os.cpu_count() or 1
    total = 0
    for part in text.split(","):
        low, _, high = part.partition("-")
        total += int(high or low) - int(low) + 1
    return total


def frame(src: str, dst: str, sport: int, dport: int, proto: int = 6, flags: int = 0x10,
          payload: int = 0) -> bytes:
    """An Ethernet/IPv4 frame with a TCP (``flags``) or UDP header and ``payload`` zero
    bytes, for :meth:`FlowTap.test_run` (checksums left zero: nothing checks them)."""
    if proto == 6:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, flags, 65535, 0, 0)
    else:
        l4 = struct.pack("!HHHH", sport, dport, 8 + payload, 0)
    total = 20 + len(l4) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, proto, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
    return eth + ip + l4 + bytes(payload)


# ---------------------------------------------------------------------------- timeline


def read_tx_bytes(names: Sequence[str], text: str | None = None) -> dict[str, int]:
    """tx bytes of ``names`` from /proc/net/dev (this process's network namespace)."""
    if text is None:
        text = Path("/proc/net/dev").read_text()
    wanted = set(names)
    out = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        name = name.strip()
        if name in wanted:
            fields = rest.split()
            out[name] = int(fields[8])  # rx: 8 fields, then tx bytes
    return out


# ---------------------------------------------------------------------------- helper


def serve(ifaces: Sequence[str], obj: Path, out: Path, interval: float,
          commands: IO[str], ready: IO[str]) -> None:
    """Attach, sample every ``interval`` s until ``stop`` (or EOF) on ``commands``,
    write taps.json.gz and links.json.gz into ``out``, detach."""
    tap = FlowTap(ifaces, obj)
    samples: list[dict[str, Any]] = []
    stop = threading.Event()

    def sample() -> None:
        samples.append({"t_ns": time.monotonic_ns(), "tx": read_tx_bytes(ifaces)})

    def sampler() -> None:
        while not stop.is_set():
            sample()
            stop.wait(interval)

    try:
        mono, wall = time.monotonic_ns(), time.time_ns()
        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        ready.write(f"{READY}\n")
        ready.flush()
        for line in commands:
            if line.strip() == "stop":
                break
        stop.set()
        thread.join()
        sample()
        out.mkdir(parents=True, exist_ok=True)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _write(out / TAPS_JSON, {
            "wall_minus_mono_ns": wall - mono, "stats": tap.stats(),
            "helper_cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "entries": [e.to_dict() for e in tap.entries()]})
        _write(out / LINKS_JSON, {"interval": interval, "samples": samples})
    finally:
        stop.set()
        tap.close()


def _write(path: Path, data: Any) -> None:
    with gzip.open(path, "wt") as fh:
        json.dump(data, fh)


def read(path: Path) -> Any:
    """A file the helper wrote (gzip-compressed JSON)."""
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--obj", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("ifaces", nargs="+")
    args = parser.parse_args(argv)
    try:
        serve(args.ifaces, args.obj, args.out, args.interval, sys.stdin, sys.stdout)
    except TapError as exc:
        print(f"flowtap: {exc}", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------- runner side


class TapSession:
    """The helper process of one run: :meth:`start` returns once it is attached,
    :meth:`stop` ends it and returns (taps, links) as written, :meth:`kill` is for
    ``finally``."""

    def __init__(self, netns_pid: int, ifaces: Sequence[str], out: Path,
                 interval: float) -> None:
        self.out = out
        self.out.mkdir(parents=True, exist_ok=True)
        obj = object_path(out)
        mnexec = shutil.which("mnexec") or "mnexec"
        self._log = open(out / "flowtap.log", "w")  # noqa: SIM115 - closed in stop/kill
        self.proc = subprocess.Popen(
            [mnexec, "-a", str(netns_pid), sys.executable, "-m",
             "dcnlab.benchmarks.engine.flowtap", "--obj", str(obj), "--out", str(out),
             "--interval", f"{interval:g}", *ifaces],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
            start_new_session=True)

    def start(self, timeout: float = 30.0) -> None:
        assert self.proc.stdout is not None
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        if not line or line[0].strip() != READY:
            self.kill()
            raise TapError("the flow tap did not attach: " + self._why())

    def stop(self, timeout: float = 60.0) -> tuple[dict[str, Any], dict[str, Any]]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.close()
            self.proc.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
            raise TapError("the flow tap did not stop: " + self._why()) from None
        finally:
            self._log.close()
        if self.proc.returncode != 0:
            raise TapError(f"the flow tap failed (exit {self.proc.returncode}): {self._why()}")
        try:
            return read(self.out / TAPS_JSON), read(self.out / LINKS_JSON)
        except (OSError, ValueError) as exc:
            raise TapError(f"the flow tap's output is unreadable: {exc}") from None

    def kill(self) -> None:
        """End the helper (SIGTERM, so it detaches; SIGKILL after 10 s)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        with contextlib.suppress(OSError):
            self._log.close()

    def _why(self) -> str:
        with contextlib.suppress(OSError):
            text = (self.out / "flowtap.log").read_text().strip()
            if text:
                return text.splitlines()[-1]
        return f"exit {self.proc.poll()}"


def fabric_ifaces(prefix: str, links: Sequence[tuple[str, int, str, int]],
                  switches: Mapping[str, Any] | Sequence[str]) -> dict[str, tuple[str, int,
                                                                            str, int]]:
    """``{veth name: (from switch, from port, to switch, to port)}``: the ingress veth of
    each direction of every switch-to-switch link (``<prefix><switch>-eth<port>``)."""
    names = set(switches)
    out = {}
    for a, ap, b, bp in links:
        if a in names and b in names:
            out[f"{prefix}{b}-eth{bp}"] = (a, ap, b, bp)  # arrives at b: a -> b
            out[f"{prefix}{a}-eth{ap}"] = (b, bp, a, ap)  # arrives at a: b -> a
    return out


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # run serve's finally: detach
    sys.exit(main())
