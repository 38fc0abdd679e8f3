#!/usr/bin/env bash
# Bring a Debian 12 machine (root) to a working dcnlab: apt packages, a Python venv with
# the pinned dependencies, the eventlet shim for Ryu, the pinned Rust toolchain (rustup,
# scripts/install_rust.sh) and the Rust builds (switch_ext, dcnlab-mp, the UC3 agent).
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
# curl/ca-certificates: rustup's installer, where Rust is missing (scripts/install_rust.sh).
# clang/llvm/libbpf-dev/bpftool/linux-libc-dev: the UC3 host agent's BPF sock_ops program.
# openssh-server: the lab-mode tests' emulated hosts run their own sshd (each in a
# namespace the test creates, with keys made for the run; tests/emulated_lab.py).
APT_PACKAGES=(openvswitch-switch mininet iperf3 iputils-ping ethtool iproute2 net-tools
              python3-venv python3-dev build-essential pkg-config curl ca-certificates
              clang llvm libbpf-dev bpftool linux-libc-dev openssh-server)
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

# -- Python venv (scripts/setup_python.sh: no root needed, a contributor runs it alone) --
bash scripts/setup_python.sh
VENV=$ROOT/.venv

# -- Rust: the pinned toolchain, then switch_ext, dcnlab-mp and the UC3 agent loop ----
if [ -f switch_ext/Cargo.toml ]; then
  # The toolchain each crate pins (rust-toolchain.toml), installed with rustup's official
  # installer where cargo is missing or is not the pinned version (Debian 12's is older);
  # without internet it stops with the one command to run.
  CARGO=$(bash scripts/install_rust.sh) || exit 2
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
