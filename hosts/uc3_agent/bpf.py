"""Load, attach and drive the clamp program with libbpf (libbpf.so.1) through ctypes.

No bcc, no kernel headers at run time: the object file is built by ``build_bpf.sh``
(clang) and libbpf does the relocation, map creation and BTF work.

Resources, all named after the agent's tag and removed by :meth:`ClampProgram.close`:
- cgroup ``/sys/fs/cgroup/unified/dcnlab-<tag>``: processes whose flows may be clamped
  join it *before* they create their sockets (a socket belongs to the cgroup of the
  process that created it; accepted sockets inherit the listener's).
- pins ``<bpffs>/dcnlab-<tag>/{clamps,prog,flows,stats}``: the maps and program, for
  inspection with ``bpftool map dump pinned ...``, and for the native agent loop
  (``native/``), which opens the maps there.  If /sys/fs/bpf is no bpffs (this machine), a private
  bpffs is mounted in the agent's run directory instead of touching /sys/fs/bpf.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import ipaddress
import logging
import os
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dcnlab import libbpf

log = logging.getLogger(__name__)

CGROUP2_ROOT = Path("/sys/fs/cgroup/unified")
BPFFS_DEFAULT = Path("/sys/fs/bpf")
BPF_FS_MAGIC = 0xCAFE4A11
BPF_CGROUP_SOCK_OPS = 3
BPF_ANY = 0
PROG_NAME = b"dcnlab_clamp"
HERE = Path(__file__).resolve().parent
SOURCE = HERE / "clamp.bpf.c"
PREBUILT = HERE / "clamp.bpf.o"

KEY = struct.Struct("=I16s16sHH")  # struct flow_key
VALUE = struct.Struct("=IIQ")  # struct clamp_val
FLOW_VALUE = struct.Struct("=IIIIQIIQ")  # struct flow_val
STAT_NAMES = ("applied", "lifted", "errors")
PINS = ("clamps", "prog", "flows", "stats")  # under the pin directory


class BpfError(RuntimeError):
    """Loading, attaching or updating the BPF program failed; the message says why."""


@dataclass(frozen=True)
class Tuple4:
    """A TCP flow seen from this host: local address/port, remote address/port."""

    local: str
    lport: int
    remote: str
    rport: int

    def key_bytes(self) -> bytes:
        lip = ipaddress.ip_address(self.local)
        rip = ipaddress.ip_address(self.remote)
        if lip.version != rip.version:
            raise BpfError(f"mixed address families in {self}")
        family = socket.AF_INET if lip.version == 4 else socket.AF_INET6
        return KEY.pack(family, lip.packed.ljust(16, b"\0"), rip.packed.ljust(16, b"\0"),
                        self.lport, self.rport)

    @classmethod
    def from_key(cls, raw: bytes) -> Tuple4 | None:
        """The flow of a ``struct flow_key``; None for a family it does not know."""
        family, laddr, raddr, lport, rport = KEY.unpack(raw)
        if family == socket.AF_INET:
            local, remote = ipaddress.IPv4Address(laddr[:4]), ipaddress.IPv4Address(raddr[:4])
        elif family == socket.AF_INET6:
            local, remote = ipaddress.IPv6Address(laddr), ipaddress.IPv6Address(raddr)
        else:
            return None
        return cls(str(local), lport, str(remote), rport)


@dataclass(frozen=True)
class FlowSample:
    """One TCP flow as the kernel reports it (tcp_info, or the program's map), at one
    instant."""

    flow: Tuple4
    rtt_us: float
    mss: int
    cwnd: int
    delivery_bps: float
    bytes_acked: int


def flow_sample(flow: Tuple4, raw: bytes) -> FlowSample:
    """A ``struct flow_val`` as the agent reports it: delivery rate from the last rate
    sample (packets over an interval) times the MSS."""
    srtt_us, mss, cwnd, _pad, acked, delivered, interval_us, _ns = FLOW_VALUE.unpack(raw)
    rate = delivered * mss * 8 * 1e6 / interval_us if interval_us else 0.0
    return FlowSample(flow=flow, rtt_us=float(srtt_us), mss=mss, cwnd=cwnd,
                      delivery_bps=rate, bytes_acked=acked)


# ---------------------------------------------------------------------------
# Build


def build_object(out: Path) -> Path:
    """Compile clamp.bpf.c with clang (build_bpf.sh) into ``out``."""
    return libbpf.build_object(SOURCE, HERE / "build_bpf.sh", out, BpfError)


def object_path(work_dir: Path) -> Path:
    """The prebuilt object if it is newer than the source, else a fresh build in work_dir."""
    return libbpf.object_path(SOURCE, PREBUILT, HERE / "build_bpf.sh", work_dir, BpfError)


# ---------------------------------------------------------------------------
# libbpf through ctypes (dcnlab.libbpf), with the cgroup and map calls the agent needs

_EXTRA = (
    ("bpf_prog_attach", ctypes.c_int, [ctypes.c_int] * 3 + [ctypes.c_uint]),
    ("bpf_prog_detach2", ctypes.c_int, [ctypes.c_int] * 3),
    ("bpf_obj_pin", ctypes.c_int, [ctypes.c_int, ctypes.c_char_p]),
    ("bpf_map_update_elem", ctypes.c_int,
     [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]),
    ("bpf_map_delete_elem", ctypes.c_int, [ctypes.c_int, ctypes.c_void_p]),
)


def _libbpf() -> ctypes.CDLL:
    return libbpf.load(_EXTRA, BpfError)


def _err(what: str, ret: int | None = None) -> Exception:
    return libbpf.errno_error(what, ret, BpfError)


def _mounts(fstype: str) -> list[Path]:
    """Mount points of a file-system type in this process's mount namespace."""
    try:
        with open("/proc/self/mounts") as fh:
            rows = [line.split() for line in fh]
    except OSError:
        return []
    return [Path(row[1]) for row in rows if len(row) > 2 and row[2] == fstype]


def _is_bpffs(path: Path) -> bool:
    return path in _mounts("bpf") and os.path.ismount(path)


def _mount(fstype: str, where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", fstype, fstype, str(where)], capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise BpfError(f"mount -t {fstype} {where} failed: {proc.stderr.strip()}")


class ClampProgram:
    """The loaded program, its cgroup attachment, map access and clean-up."""

    def __init__(self, tag: str, work_dir: Path, obj: Path | None = None,
                 cgroup_root: Path | None = None) -> None:
        self.tag = tag
        self.work_dir = work_dir
        self._lib = _libbpf()
        self._obj: int | None = None
        self._cg_fd = -1
        self._attached = False
        self._private_bpffs: Path | None = None
        self._private_cgroup2: Path | None = None
        self.pin_dir: Path | None = None
        self.cgroup = Path()
        try:
            self.cgroup = self._cgroup_root(cgroup_root) / f"dcnlab-{tag}"
            self._load(obj or object_path(work_dir))
            self._make_cgroup()
            self._attach()
            self._pin()
        except BaseException:
            self.close()
            raise

    # -- set-up -----------------------------------------------------------

    def _load(self, obj: Path) -> None:
        self._obj = libbpf.open_object(self._lib, obj, BpfError)
        libbpf.load_object(self._lib, self._obj, "the clamp program", BpfError)
        self.prog_fd = libbpf.program_fd(self._lib, self._obj, PROG_NAME, BpfError)
        self.map_fd, self.stats_fd, self.flows_fd = (
            libbpf.map_fd(self._lib, self._obj, name, BpfError)
            for name in (b"clamps", b"stats", b"flows"))

    def _cgroup_root(self, wanted: Path | None) -> Path:
        """Where the (one, machine-wide) cgroup v2 hierarchy is visible to this process.

        Mininet hosts run in a mount namespace with a fresh sysfs, where
        /sys/fs/cgroup/unified is not mounted: then mount cgroup2 privately in the work
        directory.  It is the same hierarchy, so the cgroup is still
        /sys/fs/cgroup/unified/dcnlab-<tag> when seen from the machine.
        """
        if wanted is not None:
            return wanted
        # /proc/self/mounts can list mounts that a later sysfs mount hides: check usability.
        mounted = [m for m in _mounts("cgroup2") if (m / "cgroup.procs").exists()]
        if CGROUP2_ROOT in mounted:
            return CGROUP2_ROOT
        if mounted:
            return mounted[0]
        where = self.work_dir / "cgroup2"
        _mount("cgroup2", where)
        self._private_cgroup2 = where
        return where

    def _make_cgroup(self) -> None:
        self.cgroup.mkdir(exist_ok=False)
        self._cg_fd = os.open(self.cgroup, os.O_RDONLY | os.O_DIRECTORY)

    def _attach(self) -> None:
        # Legacy attach (not a bpf_link): the program stays attached if the agent dies, so
        # lease expiry in the map still lifts clamps (fail open) without the agent.
        ret = self._lib.bpf_prog_attach(self.prog_fd, self._cg_fd, BPF_CGROUP_SOCK_OPS, 0)
        if ret:
            raise _err(f"attaching to {self.cgroup}", ret)
        self._attached = True

    def _pin(self) -> None:
        base = BPFFS_DEFAULT
        if not _is_bpffs(base):
            base = self.work_dir / "bpffs"
            try:
                _mount("bpf", base)
            except BpfError as exc:
                log.warning("no bpffs for pinning (%s); map not pinned", exc)
                return
            self._private_bpffs = base
        self.pin_dir = base / f"dcnlab-{self.tag}"
        self.pin_dir.mkdir(exist_ok=True)
        for fd, name in ((self.map_fd, "clamps"), (self.prog_fd, "prog"),
                         (self.flows_fd, "flows"), (self.stats_fd, "stats")):
            ret = self._lib.bpf_obj_pin(fd, str(self.pin_dir / name).encode())
            if ret:
                raise _err(f"pinning {name} under {self.pin_dir}", ret)

    # -- use ----------------------------------------------------------------

    def map_specs(self) -> tuple[dict[str, str], tuple[int, ...]]:
        """How another process reaches the maps (the native agent's ``--NAME-map``
        options): the pinned paths, or ``fd:N`` for fds it inherits when nothing could be
        pinned; and the fds to pass (none when pinned)."""
        fds = {"clamps": self.map_fd, "flows": self.flows_fd, "stats": self.stats_fd}
        if self.pin_dir is not None:
            return {name: str(self.pin_dir / name) for name in fds}, ()
        return {name: f"fd:{fd}" for name, fd in fds.items()}, tuple(fds.values())

    def join(self, pid: int) -> None:
        """Move a process into the clamp cgroup (its *future* sockets become clampable)."""
        (self.cgroup / "cgroup.procs").write_text(f"{pid}\n")

    @contextlib.contextmanager
    def member(self) -> Iterator[None]:
        """This process in the cgroup for the block (the sockets it opens there are the
        cgroup's flows), then back in the cgroup it came from, so the program's cgroup
        can still be removed."""
        home = next(line.split("::", 1)[1] for line in
                    Path("/proc/self/cgroup").read_text().splitlines()
                    if line.startswith("0::"))
        self.join(os.getpid())
        try:
            yield
        finally:
            (self.cgroup.parent / home.lstrip("/") / "cgroup.procs").write_text(
                f"{os.getpid()}\n")

    def set(self, flow: Tuple4, window: int, expires_ns: int) -> None:
        if not 1 <= window <= 65535:
            raise BpfError(f"window {window} outside [1, 65535]")
        key = ctypes.create_string_buffer(flow.key_bytes(), KEY.size)
        val = ctypes.create_string_buffer(VALUE.pack(window, 0, expires_ns), VALUE.size)
        ret = self._lib.bpf_map_update_elem(self.map_fd, key, val, BPF_ANY)
        if ret:
            raise _err(f"map update for {flow}", ret)

    def delete(self, flow: Tuple4) -> None:
        key = ctypes.create_string_buffer(flow.key_bytes(), KEY.size)
        ret = self._lib.bpf_map_delete_elem(self.map_fd, key)
        if ret and -ret != errno.ENOENT and ctypes.get_errno() != errno.ENOENT:
            raise _err(f"map delete for {flow}", ret)

    def entries(self) -> dict[bytes, tuple[int, int]]:
        """Raw map content: key bytes -> (window, expires_ns)."""
        out: dict[bytes, tuple[int, int]] = {}
        prev = None
        key = ctypes.create_string_buffer(KEY.size)
        val = ctypes.create_string_buffer(VALUE.size)
        while self._lib.bpf_map_get_next_key(self.map_fd, prev, key) == 0:
            if self._lib.bpf_map_lookup_elem(self.map_fd, key, val) == 0:
                window, _flags, expires = VALUE.unpack(val.raw)
                out[key.raw] = (window, expires)
            prev = ctypes.create_string_buffer(key.raw, KEY.size)
        return out

    def flow_samples(self) -> list[FlowSample]:
        """Every established flow of the cgroup, as the program last saw it (one map
        walk: two syscalls per flow, however many sockets the machine has)."""
        out: list[FlowSample] = []
        prev = None
        key = ctypes.create_string_buffer(KEY.size)
        val = ctypes.create_string_buffer(FLOW_VALUE.size)
        while self._lib.bpf_map_get_next_key(self.flows_fd, prev, key) == 0:
            if self._lib.bpf_map_lookup_elem(self.flows_fd, key, val) == 0:
                flow = Tuple4.from_key(key.raw)
                if flow is not None:
                    out.append(flow_sample(flow, val.raw))
            prev = ctypes.create_string_buffer(key.raw, KEY.size)
        return out

    def clear(self) -> int:
        """Delete every entry; the program lifts each clamp at the flow's next ACK."""
        keys = list(self.entries())
        for raw in keys:
            self._lib.bpf_map_delete_elem(self.map_fd, ctypes.create_string_buffer(raw, KEY.size))
        return len(keys)

    def stats(self) -> dict[str, int]:
        result = {}
        val = ctypes.create_string_buffer(8)
        for idx, name in enumerate(STAT_NAMES):
            key = ctypes.c_uint32(idx)
            if self._lib.bpf_map_lookup_elem(self.stats_fd, ctypes.byref(key), val) == 0:
                result[name] = struct.unpack("=Q", val.raw)[0]
        return result

    # -- tear-down ----------------------------------------------------------

    def close(self, grace_s: float = 0.0) -> None:
        """Lift clamps, detach, unpin, remove the cgroup.  Safe to call more than once.

        grace_s: time for live flows to take one more ACK with an empty map (their clamp
        is lifted by the program, which must still be attached then).
        """
        if self._obj:
            with contextlib.suppress(Exception):
                if self.clear() and grace_s > 0:
                    time.sleep(grace_s)
        if self._attached:
            self._lib.bpf_prog_detach2(self.prog_fd, self._cg_fd, BPF_CGROUP_SOCK_OPS)
            self._attached = False
        if self.pin_dir is not None:
            for name in PINS:
                with contextlib.suppress(OSError):
                    (self.pin_dir / name).unlink()
            with contextlib.suppress(OSError):
                self.pin_dir.rmdir()
            self.pin_dir = None
        if self._private_bpffs is not None:
            subprocess.run(["umount", str(self._private_bpffs)], capture_output=True, check=False)
            with contextlib.suppress(OSError):
                self._private_bpffs.rmdir()
            self._private_bpffs = None
        if self._cg_fd >= 0:
            os.close(self._cg_fd)
            self._cg_fd = -1
            self._remove_cgroup()
        if self._private_cgroup2 is not None:
            subprocess.run(["umount", str(self._private_cgroup2)], capture_output=True,
                           check=False)
            with contextlib.suppress(OSError):
                self._private_cgroup2.rmdir()
            self._private_cgroup2 = None
        if self._obj:
            self._lib.bpf_object__close(self._obj)
            self._obj = None

    def _remove_cgroup(self) -> None:
        # Processes still inside go back to the parent (they are not ours to kill).
        procs = self.cgroup / "cgroup.procs"
        with contextlib.suppress(OSError):
            for pid in procs.read_text().split():
                with contextlib.suppress(OSError):
                    (self.cgroup.parent / "cgroup.procs").write_text(pid + "\n")
        for _ in range(20):
            try:
                self.cgroup.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)
        log.warning("could not remove %s", self.cgroup)
