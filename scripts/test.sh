#!/usr/bin/env bash
# The dcnlab test suite: set-up if needed, lint, the Rust switch's tests, then pytest
# (in-memory logic tests and real-network tests with Mininet, OVS/switch_ext, ryu-manager).
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not network".
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH=$PWD/.venv/bin:$HOME/.cargo/bin:$PATH

echo "== lint (ruff)"
ruff check .

echo "== switch_ext (cargo fmt, clippy, test)"
(cd switch_ext && cargo fmt --check && cargo clippy --quiet --release --all-targets --locked \
   -- -D warnings && cargo test --quiet --release --locked)

echo "== hosts/mptransport (cargo fmt, clippy, test)"
(cd hosts/mptransport && cargo fmt --check && cargo clippy --quiet --release --all-targets \
   --locked -- -D warnings && cargo test --quiet --release --locked)

echo "== hosts/uc3_agent/native (cargo fmt, clippy, test)"
(cd hosts/uc3_agent/native && cargo fmt --check && cargo clippy --quiet --release \
   --all-targets --locked -- -D warnings && cargo test --quiet --release --locked)

echo "== pytest"
python -m pytest -p no:cacheprovider -q "$@" tests
