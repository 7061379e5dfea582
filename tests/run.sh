#!/usr/bin/env bash
# The test command: set up (tests/setup.sh), then every gate and test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/setup.sh
echo "== cargo fmt --check (at ${SECONDS} s)"
cargo fmt --check
echo "== cargo clippy (core, benches and the binding layer) (at ${SECONDS} s)"
cargo clippy -q --all-targets -- -D warnings
cargo clippy -q --features python --lib -- -D warnings
echo "== ruff (at ${SECONDS} s)"
ruff check python tests benches
ruff format --check python tests benches
echo "== cargo test, and stubtest and mypy beside it (at ${SECONDS} s)"
# stubtest (mypy, one core) reads the extension built above while cargo
# builds and runs the core's tests, then mypy type-checks the package, its
# command line included ([tool.mypy] in pyproject.toml): a name that does not exist, like
# os.cpucount, fails here rather than at the end of a user's bench. Their
# output follows cargo's.
stubtest_log="$(mktemp)"
{
  python -m mypy.stubtest adk_fastcompact._native &&
    python -m mypy python/adk_fastcompact/
} > "$stubtest_log" 2>&1 &
stubtest_pid=$!
cargo test -q
stubtest_status=0
wait "$stubtest_pid" || stubtest_status=$?
cat "$stubtest_log"
rm -f "$stubtest_log"
[ "$stubtest_status" -eq 0 ] || exit "$stubtest_status"
echo "== the README's main job on a small size: benches/bench.sh (at ${SECONDS} s)"
# The README's first command as it is (its setup, every regime, the tables),
# on sizes of seconds: it must exit 0 and end with its footer (the machine
# line), and print nothing but its own setup lines before the bench.
bench_log="$(mktemp)"
bench_status=0
bash ./benches/bench.sh --sizes 120 --repeat 1 --turns 12 --e2e-turns 1 --e2e-warmup 0 \
  > "$bench_log" 2>&1 || bench_status=$?
cat "$bench_log"
footer='google-adk [^ ,]+, adk-fastcompact [^ ,]+$'
if [ "$bench_status" -ne 0 ] || ! tail -n 1 "$bench_log" | grep -Eq "$footer"; then
  echo "error: benches/bench.sh exited $bench_status without its footer line" >&2
  exit 1
fi
# Before the tables: its setup lines (==), its phase lines (bench:), blank ones.
noise="$(awk '/^measured: /{exit} !/^(== |bench: |$)/' "$bench_log")"
if [ -n "$noise" ]; then
  echo "error: benches/bench.sh printed more than its own lines before the bench:" >&2
  echo "$noise" | head -n 5 >&2
  exit 1
fi
rm -f "$bench_log"
echo "== the wheel users install (maturin build --release; reuses the build above) (at ${SECONDS} s)"
rm -rf target/ci-wheel
maturin build --release -q -o target/ci-wheel
export ADK_FASTCOMPACT_WHEEL
ADK_FASTCOMPACT_WHEEL="$(ls target/ci-wheel/*.whl)"
# The venvs of the other google-adk releases (the two steps after pytest),
# made meanwhile: installing from uv's cache waits on the disk, which the
# tests leave idle. Its log is printed after pytest.
venvs_log="$(mktemp)"
python tests/families/run.py venvs --others --jobs 2 --wheel "$ADK_FASTCOMPACT_WHEEL" \
  > "$venvs_log" 2>&1 &
venvs_pid=$!
echo "== pytest (google-adk 2.13.0), with a PostgreSQL server up (at ${SECONDS} s)"
# Test by test on two workers, the files of conftest.WHOLE_FILES whole.
# tests/support/postgres.py starts a throwaway PostgreSQL server for the tests of
# tests/e2e/test_postgres.py (installing Debian's postgresql as root if need be)
# and stops it after. One that cannot start fails the run in CI (CI=true);
# elsewhere those tests skip, saying why.
python tests/support/postgres.py --optional -- \
  python -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup "$@"
echo "== the other releases' venvs (made beside pytest) (at ${SECONDS} s)"
venvs_status=0
wait "$venvs_pid" || venvs_status=$?
tail -n 1 "$venvs_log"
if [ "$venvs_status" -ne 0 ]; then
  cat "$venvs_log"
  exit "$venvs_status"
fi
rm -f "$venvs_log"
echo "== the other google-adk profiles this release reproduces (CI's parity subset, one venv each) (at ${SECONDS} s)"
# Two releases at a time, each in one pytest process (one per core).
python tests/families/run.py parity --ci --others --jobs 2 --wheel "$ADK_FASTCOMPACT_WHEEL"
echo "== import and install() on 1.0.0, 1.15.1 and the oldest and newest release of every family (at ${SECONDS} s)"
python tests/families/run.py imports --jobs 2 --wheel "$ADK_FASTCOMPACT_WHEEL"
echo "== all passed (at ${SECONDS} s)"
