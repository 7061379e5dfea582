#!/usr/bin/env bash
# The wheel on every CPython it serves. Builds the abi3 wheel once
# (`maturin build --release`), then for each CPython 3.10-3.13 found (pyenv's
# versions, else python3.X on PATH; one not found is skipped): a fresh venv
# .venvs/py3.X, the wheel installed (not `maturin develop`) with
# tests/requirements.txt (tests/requirements-py310.txt on 3.10: google-adk
# 2.11.0, the newest the 3.10 pins allow; maturin left out), the import
# checked to come from that venv, the whole pytest suite run from tests/, and
# a short bench.
#
#   bash tests/pythons.sh [--versions 3.10,3.11,3.12,3.13] [--no-bench]
#                         [--wheel FILE.whl] [--bench-args "ARGS"] [-- PYTEST ARGS]
#
# --wheel tests that wheel instead of building one; --bench-args replaces
# the bench's arguments (default: --sizes 10000 --repeat 5 --regimes
# cold,warm,turn; the e2e regime would grow its session to 10,000 events by
# real turns, minutes per version). Logs, the extension's self-tested
# CPython internals, the bench's JSON and a summary go to .venvs/results/.
# The environment passes through, so ADK_FASTCOMPACT_PREFETCH=false (or
# _DIRECT_FIELDS, _DICT_TAGS) runs everything with that internal off. Exit
# status 1 when any version found fails (its requirements, its import or its
# tests), else 0.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

versions=(3.10 3.11 3.12 3.13)
bench=1
bench_args="--sizes 10000 --repeat 5 --regimes cold,warm,turn"
wheel=""
pytest_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --versions) IFS=, read -r -a versions <<< "$2"; shift 2 ;;
    --no-bench) bench=0; shift ;;
    --bench-args) bench_args=$2; shift 2 ;;
    --wheel) wheel=$(realpath "$2"); shift 2 ;;
    --) shift; pytest_args=("$@"); break ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

RESULTS=$ROOT/.venvs/results
mkdir -p "$RESULTS"
SUMMARY=$RESULTS/summary.txt
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

# -- the wheel, built once ------------------------------------------------------------
if [ -z "$wheel" ]; then
  if [ -x .venv/bin/maturin ]; then
    maturin=.venv/bin/maturin
  else
    # The pinned maturin in a build venv of its own.
    if [ ! -x .venvs/build/bin/maturin ]; then
      python3 -m venv .venvs/build
      .venvs/build/bin/python -m pip install -q --disable-pip-version-check \
        "$(grep '^maturin' tests/requirements.txt)"
    fi
    maturin=.venvs/build/bin/maturin
  fi
  rm -rf .venvs/wheel
  echo "== maturin build --release"
  start=$SECONDS
  "$maturin" build --release --out .venvs/wheel 2>&1 | grep -v '^ *Compiling' \
    || { echo "maturin build failed" >&2; exit 1; }
  wheel=$(ls .venvs/wheel/*.whl)
  say "wheel: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB, built in $((SECONDS - start)) s)"
else
  say "wheel: $(basename "$wheel") (given)"
fi
case $(basename "$wheel") in
  *-cp310-abi3-*.whl) ;;
  *) say "FAIL: $(basename "$wheel") is not a cp310-abi3 wheel"; exit 1 ;;
esac

# The pins without maturin: tests/requirements-py310.txt on CPython 3.10
# (google-adk 2.12 on, and the newest hypothesis and SQLAlchemy, need 3.11),
# tests/requirements.txt elsewhere.
requirements_for() {
  local pins=tests/requirements.txt out=$RESULTS/requirements-without-maturin.txt
  if [ "$1" = 3.10 ]; then
    pins=tests/requirements-py310.txt
    out=$RESULTS/requirements-py310-without-maturin.txt
  fi
  grep -v '^maturin' "$pins" > "$out"
  echo "$out"
}

# -- the interpreters -----------------------------------------------------------------
# A standard (GIL) CPython 3.X: pyenv's newest 3.X.*, else python3.X on PATH.
read -r -d '' GIL_CPYTHON <<'EOF'
import sys, sysconfig
want = tuple(int(p) for p in sys.argv[1].split("."))
ok = sys.implementation.name == "cpython" and sys.version_info[:2] == want
raise SystemExit(0 if ok and not sysconfig.get_config_var("Py_GIL_DISABLED") else 1)
EOF
find_python() {
  local v=$1 root cand
  root=${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}
  for cand in $(ls -d "$root/versions/$v".* 2>/dev/null | sort -V -r); do
    if [ -x "$cand/bin/python$v" ] && "$cand/bin/python$v" -c "$GIL_CPYTHON" "$v" 2>/dev/null; then
      echo "$cand/bin/python$v"
      return 0
    fi
  done
  cand=$(command -v "python$v") && "$cand" -c "$GIL_CPYTHON" "$v" 2>/dev/null && echo "$cand"
}

# The extension alone (loaded without the package, whose imports need
# google-adk): its file, version and the CPython internals that passed their
# self-tests.
read -r -d '' INTERNALS <<'EOF'
import importlib.util, os
package = importlib.util.find_spec("adk_fastcompact").submodule_search_locations[0]
path = next(e.path for e in os.scandir(package) if e.name.startswith("_native."))
spec = importlib.util.spec_from_file_location("adk_fastcompact._native", path)
native = importlib.util.module_from_spec(spec)
spec.loader.exec_module(native)
stats = native.index_stats()
on = [k for k in ("prefetch", "direct_fields", "dict_tags") if stats[k]]
print(f"{os.path.basename(path)} {native.__version__}, internals: {', '.join(on) or 'none'}")
EOF

# Where `import adk_fastcompact` resolves from the repo root (as pytest's run
# there does): the venv's copy, not python/ of the checkout.
read -r -d '' WHERE <<'EOF'
import adk_fastcompact, sysconfig
where, site = adk_fastcompact.__file__, sysconfig.get_paths()["platlib"]
print(where)
raise SystemExit(0 if where.startswith(site) else f"imported from {where}, not {site}")
EOF

# A line of the bench's speed-ups (Python ms / Rust ms) from its JSON.
read -r -d '' BENCH_SUMMARY <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
def ratio(regime, op, at):
    key = "turn" if regime == "turn" else "events"
    found = [r["ratio"] for r in rows if (r["regime"], r["op"], r.get(key)) == (regime, op, at)]
    return f"{found[0]:.1f}x" if found else "-"
n = max((r["events"] for r in rows if r["regime"] != "turn"), default=0)
t = max((r["turn"] for r in rows if r["regime"] == "turn"), default=0)
print(
    f"cold {n:,}: process+recover {ratio('cold', 'process+recover', n)},"
    f" sliding_window {ratio('cold', 'sliding_window', n)},"
    f" token_threshold {ratio('cold', 'token_threshold', n)};"
    f" warm {n:,}: process+recover {ratio('warm', 'process+recover', n)},"
    f" sliding_window {ratio('warm', 'sliding_window', n)};"
    f" turn {t}: {ratio('turn', 'turn_overhead', t)};"
    f" declines {sum(r['declines'] for r in rows)}"
)
EOF

failed=()
for v in "${versions[@]}"; do
  echo
  echo "==== CPython $v"
  py=$(find_python "$v") || { say "py$v: skipped (no standard CPython $v found)"; continue; }
  venv=$ROOT/.venvs/py$v
  out=$RESULTS/py$v
  rm -rf "$venv" "$out"
  mkdir -p "$out"
  "$py" -m venv "$venv" || { say "py$v: FAIL (venv)"; failed+=("$v"); continue; }
  pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
  "${pip[@]}" --no-deps "$wheel" > "$out/pip.log" 2>&1 || {
    say "py$v: FAIL (the wheel does not install: $(grep -m1 ERROR "$out/pip.log"))"
    failed+=("$v")
    continue
  }
  internals=$(cd "$venv" && "$venv/bin/python" -c "$INTERNALS" 2>&1) || {
    say "py$v: FAIL (the extension does not load: ${internals##*$'\n'})"
    failed+=("$v")
    continue
  }
  say "py$v: $("$venv/bin/python" -c 'import platform; print(platform.python_version())'), $internals"
  requirements=$(requirements_for "$v")
  echo "== pip install the wheel and $(basename "$requirements")"
  if ! "${pip[@]}" "$wheel" -r "$requirements" >> "$out/pip.log" 2>&1; then
    say "py$v: FAIL (requirements do not install; pip says:"
    grep -E '^ERROR' "$out/pip.log" | cut -c1-400 | sed 's/^/    /' | tee -a "$SUMMARY"
    say "  )"
    failed+=("$v")
    continue
  fi
  if ! where=$(PYTHONPATH='' "$venv/bin/python" -c "$WHERE" 2>&1); then
    say "py$v: FAIL (${where##*$'\n'})"
    failed+=("$v")
    continue
  fi
  adk=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("google-adk"))')
  say "  imports $where, google-adk $adk"
  echo "== pytest (CPython $v)"
  start=$SECONDS
  # tests/install/test_wheel.py smoke-tests this very wheel (the venv has no maturin).
  PATH="$venv/bin:$PATH" PYTHONPATH='' VIRTUAL_ENV=$venv ADK_FASTCOMPACT_WHEEL=$wheel \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup \
    "${pytest_args[@]}" 2>&1 | tee "$out/pytest.log" | tail -n 25
  status=${PIPESTATUS[0]}
  result=$(grep -E '^(=+ )?[0-9]+ (passed|failed)|^=+ .*(passed|failed|error).* in ' "$out/pytest.log" | tail -n1 | tr -d '=')
  if [ "$status" -ne 0 ]; then
    say "  tests: FAIL (exit $status):${result:- no summary} [$((SECONDS - start)) s]"
    failed+=("$v")
  else
    say "  tests:${result} [$((SECONDS - start)) s]"
  fi
  if [ "$bench" = 1 ]; then
    echo "== bench (CPython $v): python -m adk_fastcompact bench $bench_args --json"
    start=$SECONDS
    # shellcheck disable=SC2086 # the arguments are split on purpose
    if (cd "$out" && "$venv/bin/python" -m adk_fastcompact bench $bench_args --json \
          > bench.json 2> bench.err); then
      say "  bench [$((SECONDS - start)) s]: $("$venv/bin/python" -c "$BENCH_SUMMARY" "$out/bench.json")"
    else
      say "  bench: FAIL (see $out/bench.err)"
      failed+=("$v")
    fi
  fi
done

echo
echo "==== summary (also in $SUMMARY)"
cat "$SUMMARY"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: $(printf '%s\n' "${failed[@]}" | uniq | tr '\n' ' ')"
  exit 1
fi
