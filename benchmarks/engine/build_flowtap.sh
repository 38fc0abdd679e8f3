#!/bin/sh
# Build the engine's flow tap: flowtap.bpf.c -> flowtap.bpf.o (next to it, or $1).
# Needs Debian packages clang, llvm, libbpf-dev, linux-libc-dev (scripts/setup.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/flowtap.bpf.o"}
arch=$(uname -m)
exec clang -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_x86 \
    -I"/usr/include/${arch}-linux-gnu" \
    -c "$here/flowtap.bpf.c" -o "$out"
