#!/usr/bin/env bash
# The test command: set up (tests/setup.sh), then every gate and test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/setup.sh
echo "== cargo fmt --check"
cargo fmt --check
echo "== cargo clippy (core, benches and the binding layer)"
cargo clippy -q --all-targets -- -D warnings
cargo clippy -q --features python --lib -- -D warnings
echo "== cargo test"
cargo test -q
echo "== ruff"
ruff check python tests
ruff format --check python tests
echo "== stubtest"
python -m mypy.stubtest adk_fastcompact._native
echo "== pytest"
python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile "$@"
