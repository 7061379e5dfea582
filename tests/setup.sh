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
# Python writes the bytecode of what it imports (into __pycache__, which
# git ignores) here, even where the environment says PYTHONDONTWRITEBYTECODE
# (as sandboxes and CI images do): uv installs no bytecode, so every
# interpreter the tests start (pytest's workers, the bench's side
# processes, fresh interpreters, the other releases' venvs) would compile
# google-adk, google-genai and pydantic from source again (2.3 s per
# `import google.adk.runners` compiled, 4.8 s from source).
unset PYTHONDONTWRITEBYTECODE
export PATH="$VIRTUAL_ENV/bin:$PATH"
echo "== installing pinned requirements (tests/requirements.txt) (at ${SECONDS} s)"
# uv (pinned there too) installs them: a few seconds where pip takes a minute.
python -m pip install -q --disable-pip-version-check "$(grep '^uv==' tests/requirements.txt)"
uv pip install -q --python "$VIRTUAL_ENV/bin/python" -r tests/requirements.txt
echo "== building adk_fastcompact._native (release; minutes on a first build) (at ${SECONDS} s)"
# uv installs the package's dependencies (all there already, from the line
# above). maturin's own lines and the installer's are kept in a log printed
# only if the build fails: the two commands print just these setup lines.
build_log="$(mktemp)"
if ! maturin develop --release -q --uv > "$build_log" 2>&1; then
  cat "$build_log" >&2
  rm -f "$build_log"
  echo "error: maturin develop --release failed (its output is above)" >&2
  exit 1
fi
rm -f "$build_log"
