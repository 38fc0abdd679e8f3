#!/usr/bin/env bash
# Make sure the Rust toolchain every crate pins (rust-toolchain.toml: channel and
# components) is installed, and print the cargo to build with on stdout (messages go to
# stderr).  scripts/setup.sh calls it; it needs no root (rustup installs under $HOME).
#
# - rustup there (on PATH or in $CARGO_HOME/bin): install a pinned toolchain or component
#   only if `rustup component list --installed` says it is missing, so a second run does
#   nothing and needs no network.
# - no rustup, but a cargo that already is the pinned version (checked in each crate):
#   use it.
# - otherwise (no cargo, or an unpinned one such as Debian's, older than the pin):
#   rustup's official installer, with the pinned toolchain as default.
# Where that cannot run (no curl, no internet), it stops with exit 2 and prints the one
# command to run.
set -euo pipefail
cd "$(dirname "$0")/.."
CRATES=(switch_ext hosts/mptransport hosts/uc3_agent/native)
RUSTUP_URL=https://sh.rustup.rs
CARGO_BIN=${CARGO_HOME:-$HOME/.cargo}/bin
say() { echo "install_rust: $*" >&2; }

# channel and components of one rust-toolchain.toml (the two keys rustup reads here)
channel_of() { sed -n 's/^channel *= *"\([^"]*\)".*/\1/p' "$1"; }
components_of() {
  sed -n 's/^components *= *\[\(.*\)\].*/\1/p' "$1" | tr -d '" ' | tr -s ',' | sed 's/,$//'
}

# The pins, one "channel components" line per distinct channel (components joined by ',').
pins=()
for crate in "${CRATES[@]}"; do
  file=$crate/rust-toolchain.toml
  [ -f "$crate/Cargo.toml" ] || continue
  if [ ! -f "$file" ]; then
    say "$crate has no rust-toolchain.toml: every crate pins its toolchain"
    exit 2
  fi
  ch=$(channel_of "$file")
  if [ -z "$ch" ]; then
    say "$file has no channel = \"...\" line"
    exit 2
  fi
  line="$ch $(components_of "$file")"
  case " ${pins[*]-} " in *" $line "*) ;; *) pins+=("$line") ;; esac
done
if [ ${#pins[@]} -eq 0 ]; then
  exit 0  # no crate to build
fi
first=${pins[0]}
default_channel=${first%% *}
default_components=${first#* }

installer_command() {
  local comp=""
  [ -n "$default_components" ] && comp=" -c $default_components"
  echo "curl --proto '=https' --tlsv1.2 -sSf $RUSTUP_URL | sh -s -- -y --profile minimal" \
       "--default-toolchain $default_channel$comp --no-modify-path"
}

find_rustup() {
  if command -v rustup >/dev/null 2>&1; then command -v rustup
  elif [ -x "$CARGO_BIN/rustup" ]; then echo "$CARGO_BIN/rustup"
  fi
}

# A cargo not managed by rustup is usable only if it already is the pinned version.
pinned_cargo() {
  local cargo ch
  cargo=$(command -v cargo 2>/dev/null) || return 1
  for line in "${pins[@]}"; do
    ch=${line%% *}
    "$cargo" --version 2>/dev/null | grep -q "^cargo ${ch//./\\.}[ -]" || return 1
  done
  echo "$cargo"
}

RUSTUP=$(find_rustup)
if [ -z "$RUSTUP" ]; then
  if cargo=$(pinned_cargo); then
    echo "$cargo"
    exit 0
  fi
  found=$(command -v cargo 2>/dev/null || true)
  if [ -n "$found" ]; then
    say "$found is $("$found" --version 2>&1), not the pinned $default_channel, and" \
        "there is no rustup: installing rustup's toolchain $default_channel beside it"
  else
    say "cargo not found: installing Rust $default_channel with rustup's official installer"
  fi
  if ! command -v curl >/dev/null 2>&1; then
    say "curl is missing (apt-get install curl ca-certificates). Then run:"
    echo "  $(installer_command)" >&2
    exit 2
  fi
  tmp=$(mktemp)
  trap 'rm -f "$tmp"' EXIT
  if ! curl --proto '=https' --tlsv1.2 -sSf "$RUSTUP_URL" -o "$tmp"; then
    say "cannot download rustup's installer from $RUSTUP_URL (no internet?)." \
        "Where the internet is reachable, run:"
    echo "  $(installer_command)" >&2
    exit 2
  fi
  comp=()
  [ -n "$default_components" ] && comp=(-c "$default_components")
  if ! sh "$tmp" -y --profile minimal --default-toolchain "$default_channel" "${comp[@]}" \
       --no-modify-path >&2; then
    say "rustup's installer failed (its messages are above). To retry, run:"
    echo "  $(installer_command)" >&2
    exit 2
  fi
  RUSTUP=$(find_rustup)
  if [ -z "$RUSTUP" ]; then
    say "rustup's installer finished but $CARGO_BIN/rustup is not there"
    exit 2
  fi
fi

# Every pinned toolchain with its components (the default one is there after a fresh
# install; a second pin, or a rustup that predates this checkout, may still miss some).
for line in "${pins[@]}"; do
  ch=${line%% *}
  components=${line#* }
  installed=$("$RUSTUP" component list --installed --toolchain "$ch" 2>/dev/null || true)
  missing=""
  [ -n "$installed" ] || missing="toolchain"
  for c in ${components//,/ }; do
    echo "$installed" | grep -q "^$c-" || missing="$missing $c"
  done
  [ -z "$missing" ] && continue
  command=("$RUSTUP" toolchain install "$ch" --profile minimal --no-self-update)
  [ -n "$components" ] && command+=(-c "$components")
  say "installing Rust $ch (missing:$missing)"
  if ! "${command[@]}" >&2; then
    say "could not install Rust $ch (no internet?). Where the internet is reachable, run:"
    echo "  ${command[*]}" >&2
    exit 2
  fi
done

cargo=$(dirname "$RUSTUP")/cargo
[ -x "$cargo" ] || cargo=$(command -v cargo 2>/dev/null || true)
if [ -z "$cargo" ]; then
  say "rustup is at $RUSTUP but there is no cargo beside it or on PATH"
  exit 2
fi
echo "$cargo"
