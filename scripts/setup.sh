#!/usr/bin/env bash
# Bring a Debian 12 machine (root) to a working dcnlab: apt packages, a Python venv with
# the pinned dependencies, the eventlet shim for Ryu, and the switch_ext Rust build.
# Idempotent: each step checks what is there and does only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
say() { echo "setup: $*"; }

if [ "$(id -u)" != 0 ]; then
  echo "setup: run as root (apt-get, Mininet namespaces and veths need it): sudo $0" >&2
  exit 2
fi

# -- apt packages -------------------------------------------------------------
# openvswitch-switch: ovs-vswitchd/ovsdb-server (a private instance per run, userspace
# datapath); mininet: mnexec (PyPI's mininet has the Python code but not mnexec);
# iperf3/iputils-ping/ethtool/net-tools: traffic, checks, offloads, Mininet's ifconfig.
# clang/llvm/libbpf-dev/bpftool/linux-libc-dev: the UC3 host agent's BPF sock_ops program.
APT_PACKAGES=(openvswitch-switch mininet iperf3 iputils-ping ethtool iproute2 net-tools
              python3-venv python3-dev build-essential pkg-config
              clang llvm libbpf-dev bpftool linux-libc-dev)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing apt packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# -- Python venv ----------------------------------------------------------------
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: dcnlab needs Python >= 3.11 (found: $("$PYTHON" --version 2>&1))." \
       "Set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
VENV=$ROOT/.venv
if [ ! -x "$VENV/bin/python" ]; then
  say "creating venv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
# Reinstall only when the dependency pins or the package layout changed.
stamp=$VENV/.dcnlab-installed
want=$(cat setup.py pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing Python dependencies (pinned in constraints.txt)"
  # Ryu 4.34 builds only with setuptools < 67: the constraint reaches pip's isolated
  # build environments through PIP_CONSTRAINT.
  PIP_CONSTRAINT=$ROOT/constraints.txt "$VENV/bin/pip" install -q --disable-pip-version-check \
    -e "$ROOT[dev]"
  echo "$want" > "$stamp"
fi
# Editable installs skip data_files, so place the eventlet shim's .pth by hand
# (regular wheel installs carry it themselves; see dcnlab/compat.py).
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cmp -s dcnlab-compat.pth "$site/dcnlab-compat.pth" || cp dcnlab-compat.pth "$site/"

# -- switch_ext (Rust) ------------------------------------------------------------
if [ -f switch_ext/Cargo.toml ]; then
  CARGO=$(command -v cargo || true)
  [ -n "$CARGO" ] || { [ -x "$HOME/.cargo/bin/cargo" ] && CARGO=$HOME/.cargo/bin/cargo; }
  if [ -z "$CARGO" ]; then
    echo "setup: cargo not found: switch_ext needs Rust (rustup, toolchain pinned in" \
         "switch_ext/rust-toolchain.toml)" >&2
    exit 2
  fi
  say "building switch_ext (cargo build --release --locked)"
  (cd switch_ext && "$CARGO" build --release --locked --quiet)
  if [ -f hosts/mptransport/Cargo.toml ]; then
    say "building dcnlab-mp, the multipath transport (cargo build --release --locked)"
    (cd hosts/mptransport && "$CARGO" build --release --locked --quiet)
  fi
  if [ -f hosts/uc3_agent/native/Cargo.toml ]; then
    say "building dcnlab-uc3-agentd, the UC3 host agent's loop (cargo build --release --locked)"
    (cd hosts/uc3_agent/native && "$CARGO" build --release --locked --quiet)
  fi
fi
# -- UC3 host agent's BPF object ----------------------------------------------------
bpf=hosts/uc3_agent
if [ ! -f $bpf/clamp.bpf.o ] || [ $bpf/clamp.bpf.c -nt $bpf/clamp.bpf.o ]; then
  say "building the host agent's BPF program ($bpf/clamp.bpf.o)"
  bash $bpf/build_bpf.sh
fi
# -- BPF DCTCP (hosts/dctcp): `congestion: dctcp` on a kernel without the module -----
bpf=hosts/dctcp
if [ ! -f $bpf/dctcp.bpf.o ] || [ $bpf/dctcp.bpf.c -nt $bpf/dctcp.bpf.o ]; then
  say "building the BPF DCTCP ($bpf/dctcp.bpf.o)"
  sh $bpf/build_bpf.sh
fi
# -- the engine's flow tap (benchmarks/engine/flowtap.py, `diagnosis: {flow_paths: true}`)
bpf=benchmarks/engine
if [ ! -f $bpf/flowtap.bpf.o ] || [ $bpf/flowtap.bpf.c -nt $bpf/flowtap.bpf.o ]; then
  say "building the engine's flow tap ($bpf/flowtap.bpf.o)"
  sh $bpf/build_flowtap.sh
fi
say "ready: $VENV/bin/dcnlab"
