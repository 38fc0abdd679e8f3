#!/usr/bin/env bash
# The Python half of set-up, which needs no root: a venv in .venv with dcnlab (editable)
# and its pinned dependencies, and the eventlet shim for Ryu.  scripts/setup.sh runs it
# after the apt packages; a contributor without root runs it alone for the in-memory
# tests (README, "Contributing").  Idempotent: it reinstalls only when the pins changed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
say() { echo "setup: $*"; }

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: dcnlab needs Python >= 3.11 (found: $("$PYTHON" --version 2>&1))." \
       "Set PYTHON=/path/to/python3.11" >&2
  exit 2
fi
VENV=$ROOT/.venv
# pip, not python: a venv made where python3-venv was missing has a python but no pip,
# and making it again over the old one repairs it.
if [ ! -x "$VENV/bin/pip" ]; then
  say "creating venv $VENV"
  if ! "$PYTHON" -m venv "$VENV"; then
    echo "setup: could not create the venv; on Debian, as root: apt-get install python3-venv" >&2
    exit 2
  fi
fi
# Reinstall only when the dependency pins or the package layout changed.
stamp=$VENV/.dcnlab-installed
want=$(cat setup.py pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing Python dependencies (pinned in constraints.txt)"
  # Ryu 4.34 builds only with setuptools < 67: the constraint reaches pip's isolated
  # build environments through PIP_CONSTRAINT.
  PIP_CONSTRAINT=$ROOT/constraints.txt "$VENV/bin/pip" install -q --disable-pip-version-check \
    -e "${ROOT}[dev]"
  echo "$want" > "$stamp"
fi
# Editable installs skip data_files, so place the eventlet shim's .pth by hand
# (regular wheel installs carry it themselves; see dcnlab/compat.py).
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cmp -s dcnlab-compat.pth "$site/dcnlab-compat.pth" || cp dcnlab-compat.pth "$site/"
