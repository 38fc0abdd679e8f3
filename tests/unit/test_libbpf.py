"""dcnlab.libbpf: the shared loader's errors name the caller's type and say why."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from dcnlab import libbpf


class PartError(RuntimeError):
    pass


def test_a_negative_return_is_the_errno_and_the_error_is_the_callers_type() -> None:
    exc = libbpf.errno_error("attaching to eth0", -errno.EPERM, PartError)
    assert isinstance(exc, PartError)
    assert str(exc) == f"attaching to eth0: {os.strerror(errno.EPERM)} (errno {errno.EPERM})"


def test_a_current_prebuilt_object_is_used_as_it_is(tmp_path: Path) -> None:
    source, prebuilt = tmp_path / "x.bpf.c", tmp_path / "x.bpf.o"
    source.write_text("int x;\n")
    prebuilt.write_bytes(b"\x7fELF")
    os.utime(source, (1, 1))
    assert libbpf.object_path(source, prebuilt, tmp_path / "no-script.sh",
                              tmp_path / "work", PartError) == prebuilt


def test_a_stale_object_is_rebuilt_and_a_failing_build_says_what_failed(
        tmp_path: Path) -> None:
    source, prebuilt = tmp_path / "x.bpf.c", tmp_path / "x.bpf.o"
    prebuilt.write_bytes(b"\x7fELF")
    os.utime(prebuilt, (1, 1))
    source.write_text("int x;\n")
    script = tmp_path / "build.sh"
    script.write_text('echo "x.bpf.c:1: error: no" >&2\nexit 1\n')
    with pytest.raises(PartError, match=r"building x\.bpf\.c failed:\nx\.bpf\.c:1: error: no"):
        libbpf.object_path(source, prebuilt, script, tmp_path / "work", PartError)
    script.write_text('printf built > "$1"\n')
    built = libbpf.object_path(source, prebuilt, script, tmp_path / "work", PartError)
    assert built == tmp_path / "work" / "x.bpf.o" and built.read_text() == "built"


def test_libbpf_loads_with_the_common_calls_typed() -> None:
    lib = libbpf.load()
    assert lib.bpf_object__open_file.restype is libbpf.COMMON[0][1]
