#!/usr/bin/env bash
# The main job: a comparative run of single-path routing against ECMP on a k=4 fat-tree
# (same flows, same seeds), ending with its summary table and plot paths.
# Extra arguments go to `dcnlab run`, e.g. scripts/main.sh --out /tmp/results
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/dcnlab run benchmarks/experiments/ecmp_vs_single.yaml "$@"
