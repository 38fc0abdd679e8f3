"""scripts/install_rust.sh: where cargo is missing (a fresh Debian 12 has none, and
Debian's own is older than the pin) set-up installs the pinned toolchain with rustup's
official installer, and without internet stops with the one command to run.

The script runs for real under bash, with a PATH of only the tools it needs plus stubs of
``curl``, rustup's installer, ``rustup`` and ``cargo`` that record their arguments: no
network, no root, nothing outside tmp_path is touched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install_rust.sh"
CRATES = ("switch_ext", "hosts/mptransport", "hosts/uc3_agent/native")
TOOLS = ("bash", "sh", "sed", "tr", "grep", "mktemp", "rm", "dirname", "cat", "mkdir",
         "chmod", "echo", "cp")

# rustup-init stand-in: records its arguments, then lays out what the real one leaves
# behind (rustup and cargo in $CARGO_HOME/bin, the default toolchain with its components).
INSTALLER = r"""#!/bin/sh
echo "installer $*" >> "$STUB_LOG"
channel=""; comps=""
while [ $# -gt 0 ]; do
  case "$1" in
    --default-toolchain) channel=$2; shift ;;
    -c) comps=$2; shift ;;
  esac
  shift
done
mkdir -p "$CARGO_HOME/bin" "$RUSTUP_HOME/toolchains"
cp "$STUB_DIR/rustup" "$CARGO_HOME/bin/rustup"
cp "$STUB_DIR/cargo" "$CARGO_HOME/bin/cargo"
printf 'cargo-x\nrustc-x\n' > "$RUSTUP_HOME/toolchains/$channel"
for c in $(echo "$comps" | tr ',' ' '); do echo "$c-x" >> "$RUSTUP_HOME/toolchains/$channel"; done
"""

CURL = r"""#!/bin/sh
echo "curl $*" >> "$STUB_LOG"
if [ "$STUB_OFFLINE" = 1 ]; then
  echo "curl: (6) Could not resolve host: sh.rustup.rs" >&2
  exit 6
fi
out=""
while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out=$2; shift; done
cp "$STUB_DIR/installer" "$out"
"""

RUSTUP = r"""#!/bin/sh
echo "rustup $*" >> "$STUB_LOG"
case "$1 $2" in
  "component list")
    [ -f "$RUSTUP_HOME/toolchains/$5" ] || { echo "error: not installed" >&2; exit 1; }
    cat "$RUSTUP_HOME/toolchains/$5" ;;
  "toolchain install")
    [ "$STUB_OFFLINE" = 1 ] && { echo "error: could not download" >&2; exit 1; }
    channel=$3; comps=""
    while [ $# -gt 0 ]; do [ "$1" = "-c" ] && comps=$2; shift; done
    printf 'cargo-x\nrustc-x\n' > "$RUSTUP_HOME/toolchains/$channel"
    for c in $(echo "$comps" | tr ',' ' '); do
      echo "$c-x" >> "$RUSTUP_HOME/toolchains/$channel"
    done ;;
  *) echo "unexpected rustup call" >&2; exit 3 ;;
esac
"""

CARGO = "#!/bin/sh\necho \"cargo $*\" >> \"$STUB_LOG\"\necho 'cargo {version} (stub)'\n"


@dataclass(frozen=True)
class Pin:
    channel: str
    components: list[str]


def _pins() -> list[Pin]:
    pins = []
    for crate in CRATES:
        data = tomllib.loads((REPO / crate / "rust-toolchain.toml").read_text())["toolchain"]
        pins.append(Pin(data["channel"], list(data.get("components", []))))
    return pins


PIN = _pins()[0]


class Sandbox:
    """A HOME, a stub directory and a PATH holding only TOOLS and the stubs put there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.bin = root / "bin"  # what PATH holds
        self.stubs = root / "stubs"  # the stubs' originals (the installer copies them)
        self.log = root / "calls.log"
        for d in (self.home, self.bin, self.stubs):
            d.mkdir(parents=True)
        for tool in TOOLS:
            found = shutil.which(tool)
            if found is not None:
                (self.bin / tool).symlink_to(found)
        self._write(self.stubs / "installer", INSTALLER)
        self._write(self.stubs / "rustup", RUSTUP)
        self._write(self.stubs / "cargo", CARGO.format(version=PIN.channel))
        self.log.write_text("")
        self.offline = False

    @staticmethod
    def _write(path: Path, text: str) -> None:
        path.write_text(text)
        path.chmod(0o755)

    @property
    def cargo_home(self) -> Path:
        return self.home / ".cargo"

    @property
    def rustup_home(self) -> Path:
        return self.home / ".rustup"

    def add_curl(self) -> None:
        self._write(self.bin / "curl", CURL)

    def add_path_cargo(self, version: str) -> None:
        """A cargo on PATH that is not rustup's (Debian's /usr/bin/cargo)."""
        self._write(self.bin / "cargo", CARGO.format(version=version))

    def add_rustup(self, toolchains: dict[str, list[str]]) -> None:
        """rustup as a previous install left it, with these toolchains' components."""
        (self.cargo_home / "bin").mkdir(parents=True)
        (self.rustup_home / "toolchains").mkdir(parents=True)
        shutil.copy(self.stubs / "rustup", self.cargo_home / "bin" / "rustup")
        shutil.copy(self.stubs / "cargo", self.cargo_home / "bin" / "cargo")
        for channel, comps in toolchains.items():
            (self.rustup_home / "toolchains" / channel).write_text(
                "".join(f"{c}-x\n" for c in ["cargo", "rustc", *comps]))

    def run(self) -> subprocess.CompletedProcess[str]:
        env = {"PATH": str(self.bin), "HOME": str(self.home), "STUB_LOG": str(self.log),
               "STUB_DIR": str(self.stubs), "CARGO_HOME": str(self.cargo_home),
               "RUSTUP_HOME": str(self.rustup_home),
               "STUB_OFFLINE": "1" if self.offline else "0"}
        return subprocess.run([shutil.which("bash") or "bash", str(SCRIPT)], env=env,
                              capture_output=True, text=True, timeout=60, check=False)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines()


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


def _installer_args() -> str:
    return (f"-y --profile minimal --default-toolchain {PIN.channel} "
            f"-c {','.join(PIN.components)} --no-modify-path")


def _one_command() -> str:
    return ("curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- "
            + _installer_args())


def test_every_crate_pins_the_same_toolchain_with_what_test_sh_needs() -> None:
    pins = _pins()
    assert {p.channel for p in pins} == {PIN.channel}
    assert re.fullmatch(r"\d+\.\d+\.\d+", PIN.channel)  # a version, not a moving "stable"
    for pin in pins:  # scripts/test.sh runs cargo fmt --check and cargo clippy
        assert {"clippy", "rustfmt"} <= set(pin.components)


def test_without_cargo_rustup_installs_the_pinned_toolchain_once(box: Sandbox) -> None:
    box.add_curl()
    first = box.run()
    assert first.returncode == 0, first.stderr
    cargo = box.cargo_home / "bin" / "cargo"
    assert first.stdout.strip() == str(cargo)
    calls = box.calls()
    curl = [c for c in calls if c.startswith("curl ")]
    assert len(curl) == 1
    assert "--proto =https" in curl[0] and "--tlsv1.2" in curl[0]
    assert "https://sh.rustup.rs" in curl[0]
    assert [c for c in calls if c.startswith("installer ")] == [
        "installer " + _installer_args()]
    assert "cargo not found" in first.stderr
    # Idempotent: everything is there now; no download, no install.
    box.log.write_text("")
    again = box.run()
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == str(cargo)
    assert not [c for c in box.calls() if not c.startswith("rustup component list")]


def test_without_internet_it_stops_with_the_one_command(box: Sandbox) -> None:
    box.add_curl()
    box.offline = True
    result = box.run()
    assert result.returncode == 2
    assert result.stdout == ""  # setup.sh must not take a message for a cargo path
    assert _one_command() in result.stderr.splitlines()[-1]
    assert not (box.cargo_home / "bin" / "cargo").exists()
    assert not [c for c in box.calls() if c.startswith("installer ")]


def test_without_curl_it_says_so_and_prints_the_one_command(box: Sandbox) -> None:
    result = box.run()
    assert result.returncode == 2 and result.stdout == ""
    assert "curl is missing" in result.stderr
    assert _one_command() in result.stderr


def test_a_distribution_cargo_older_than_the_pin_is_not_used(box: Sandbox) -> None:
    box.add_curl()
    box.add_path_cargo("1.63.0")  # Debian 12's
    result = box.run()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(box.cargo_home / "bin" / "cargo")
    assert "not the pinned" in result.stderr
    assert any(c.startswith("installer ") for c in box.calls())


def test_a_cargo_of_the_pinned_version_without_rustup_is_used(box: Sandbox) -> None:
    box.add_path_cargo(PIN.channel)
    result = box.run()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(box.bin / "cargo")
    assert not [c for c in box.calls() if not c.startswith("cargo --version")]


def test_rustup_without_the_pinned_toolchain_installs_it(box: Sandbox) -> None:
    box.add_rustup({"1.70.0": ["rustfmt", "clippy"]})
    result = box.run()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(box.cargo_home / "bin" / "cargo")
    installs = [c for c in box.calls() if c.startswith("rustup toolchain install")]
    assert installs == [f"rustup toolchain install {PIN.channel} --profile minimal "
                        f"--no-self-update -c {','.join(PIN.components)}"]
    assert not [c for c in box.calls() if c.startswith("curl")]


def test_rustup_missing_a_component_installs_it_and_offline_prints_the_command(
        box: Sandbox) -> None:
    box.add_rustup({PIN.channel: []})  # a minimal profile without clippy and rustfmt
    box.offline = True
    result = box.run()
    assert result.returncode == 2 and result.stdout == ""
    rustup = box.cargo_home / "bin" / "rustup"
    assert (f"{rustup} toolchain install {PIN.channel} --profile minimal --no-self-update "
            f"-c {','.join(PIN.components)}") in result.stderr
    box.offline = False
    assert box.run().returncode == 0


def test_setup_builds_with_the_cargo_install_rust_gives() -> None:
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "scripts/install_rust.sh" in setup
    assert "cargo not found" not in setup  # the old dead end
    apt = re.search(r"APT_PACKAGES=\((.*?)\)", setup, re.S)
    assert apt is not None
    assert {"curl", "ca-certificates"} <= set(apt.group(1).split())


def test_script_is_executable() -> None:
    assert os.access(SCRIPT, os.X_OK)
