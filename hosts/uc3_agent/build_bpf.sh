#!/bin/sh
# Build the UC3 agent's sock_ops program: clamp.bpf.c -> clamp.bpf.o (next to it, or $1).
# Needs Debian packages clang, llvm, libbpf-dev, linux-libc-dev (scripts/setup.sh).
# -g is required: the sk_storage map needs BTF for its key/value types.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/clamp.bpf.o"}
arch=$(uname -m)
# <asm/types.h> lives in the multiarch include directory on Debian.
exec clang -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_x86 \
    -I"/usr/include/${arch}-linux-gnu" \
    -c "$here/clamp.bpf.c" -o "$out"
