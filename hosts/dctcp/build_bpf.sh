#!/bin/sh
# Build the BPF DCTCP: dctcp.bpf.c -> dctcp.bpf.o (next to it, or $1).
# Needs Debian packages clang, llvm, libbpf-dev, bpftool (scripts/setup.sh) and the
# running kernel's BTF (/sys/kernel/btf/vmlinux), from which vmlinux.h is generated
# into a temporary directory (it is kernel-specific, so it is not kept in the tree).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/dctcp.bpf.o"}
arch=$(uname -m)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bpftool btf dump file /sys/kernel/btf/vmlinux format c > "$tmp/vmlinux.h"
clang -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_x86 \
    -I"$tmp" -I"/usr/include/${arch}-linux-gnu" \
    -c "$here/dctcp.bpf.c" -o "$out"
