#!/usr/bin/env bash
# Shared setup of the two README commands: a project venv with the pinned
# test requirements and the extension built in release mode. Needs only
# python3 (3.10+) and a Rust toolchain. Safe to run again: it reuses .venv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $("$PY" --version)"
  "$PY" -m venv .venv
fi
export VIRTUAL_ENV="$PWD/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
echo "== installing pinned requirements (tests/requirements.txt) (at ${SECONDS} s)"
# uv (pinned there too) installs them: a few seconds where pip takes a minute.
python -m pip install -q --disable-pip-version-check "$(grep '^uv==' tests/requirements.txt)"
uv pip install -q --python "$VIRTUAL_ENV/bin/python" -r tests/requirements.txt
echo "== building adk_fastcompact._native (release) (at ${SECONDS} s)"
maturin develop --release -q
