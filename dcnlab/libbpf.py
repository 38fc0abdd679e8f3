"""libbpf (libbpf.so.1) through ctypes, and BPF objects built with clang.

Shared by every part that loads a BPF program of its own (the UC3 agent's sock_ops
clamp, the engine's flow tap): no bcc and no kernel headers at run time; an object is
compiled by the part's own build script (clang) at set-up, or on first use when its
source is newer.  Each part raises its own error type (``error=``), so its callers keep
catching what they always caught.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_vp, _cp, _i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int

# Object, program and map calls every loader needs: name, restype, argtypes.
COMMON: tuple[tuple[str, Any, list[Any]], ...] = (
    ("bpf_object__open_file", _vp, [_cp, _vp]),
    ("bpf_object__load", _i, [_vp]),
    ("bpf_object__close", None, [_vp]),
    ("bpf_object__find_program_by_name", _vp, [_vp, _cp]),
    ("bpf_object__find_map_by_name", _vp, [_vp, _cp]),
    ("bpf_program__fd", _i, [_vp]),
    ("bpf_map__fd", _i, [_vp]),
    ("bpf_map_lookup_elem", _i, [_i, _vp, _vp]),
    ("bpf_map_get_next_key", _i, [_i, _vp, _vp]),
)


def load(extra: Iterable[tuple[str, Any, list[Any]]] = (),
         error: type[Exception] = RuntimeError) -> ctypes.CDLL:
    """libbpf with the :data:`COMMON` calls and ``extra`` ones typed."""
    name = ctypes.util.find_library("bpf") or "libbpf.so.1"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise error(f"libbpf not loadable ({exc}): apt-get install libbpf1") from None
    for fname, restype, argtypes in (*COMMON, *extra):
        fn = getattr(lib, fname)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def errno_error(what: str, ret: int | None = None,
                error: type[Exception] = RuntimeError) -> Exception:
    """``error`` saying why a call failed: libbpf's negative return, else errno."""
    code = -ret if ret is not None and ret < 0 else ctypes.get_errno()
    return error(f"{what}: {os.strerror(code) if code else 'failed'} (errno {code})")


def open_object(lib: ctypes.CDLL, path: Path, error: type[Exception] = RuntimeError) -> int:
    """``bpf_object__open_file``: the object's handle (close it with
    ``bpf_object__close``, also when loading it fails)."""
    handle = lib.bpf_object__open_file(str(path).encode(), None)
    if not handle:
        raise errno_error(f"opening {path}", None, error)
    return int(handle)


def load_object(lib: ctypes.CDLL, handle: int, what: str,
                error: type[Exception] = RuntimeError) -> None:
    """``bpf_object__load``: maps created, programs through the kernel's verifier."""
    ret = lib.bpf_object__load(handle)
    if ret:
        raise errno_error(f"loading {what} (kernel BPF verifier or BTF)", ret, error)


def program_fd(lib: ctypes.CDLL, handle: int, name: bytes,
               error: type[Exception] = RuntimeError) -> int:
    """The loaded program ``name``'s file descriptor."""
    prog = lib.bpf_object__find_program_by_name(handle, name)
    fd = lib.bpf_program__fd(prog) if prog else -1
    if fd < 0:
        raise error(f"program {name.decode()} missing from the object")
    return int(fd)


def map_fd(lib: ctypes.CDLL, handle: int, name: bytes,
           error: type[Exception] = RuntimeError) -> int:
    """The loaded map ``name``'s file descriptor."""
    found = lib.bpf_object__find_map_by_name(handle, name)
    fd = lib.bpf_map__fd(found) if found else -1
    if fd < 0:
        raise error(f"map {name.decode()} missing from the object")
    return int(fd)


def build_object(source: Path, script: Path, out: Path,
                 error: type[Exception] = RuntimeError) -> Path:
    """Compile ``source`` with clang through its build ``script`` (``sh script OUT``)."""
    if shutil.which("clang") is None:
        raise error("clang not found: apt-get install clang llvm libbpf-dev linux-libc-dev")
    proc = subprocess.run(["sh", str(script), str(out)], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise error(f"building {source.name} failed:\n{proc.stderr.strip()}")
    return out


def prebuilt_is_current(source: Path, prebuilt: Path) -> bool:
    return prebuilt.exists() and prebuilt.stat().st_mtime >= source.stat().st_mtime


def object_path(source: Path, prebuilt: Path, script: Path, work_dir: Path,
                error: type[Exception] = RuntimeError) -> Path:
    """The prebuilt object if it is newer than the source, else a fresh build in
    ``work_dir`` (named like the prebuilt one)."""
    if prebuilt_is_current(source, prebuilt):
        return prebuilt
    work_dir.mkdir(parents=True, exist_ok=True)
    return build_object(source, script, work_dir / prebuilt.name, error)
