"""Runs adk-fastcompact against other google-adk releases, one venv each.

    python tests/families/run.py imports            # every family's oldest and newest
    python tests/families/run.py parity             # the parity suite per shipped family
    python tests/families/run.py parity --quick     # the quick subset CI runs
    python tests/families/run.py imports --releases 1.0.0,2.4.0

Builds the wheel once (`maturin build --release`), then for each release a
venv under `.families/venvs/<release>` with `google-adk==<release>` (and, for
`parity`, the pinned test requirements), the wheel installed into it (not
the source tree). `imports` checks that `import adk_fastcompact` and
`install()` never raise there and that `install()` accelerates exactly the
families this release has a profile for; `parity` runs the differential and
end-to-end tests in that venv against that release. Exits nonzero if any
release fails.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORK = ROOT / ".families"
sys.path.insert(0, str(ROOT / "python"))

from adk_fastcompact._families import PROFILES, families  # noqa: E402

# Releases before compaction existed, where install() must warn and leave
# google-adk alone: the first 1.x and the last one without compaction.
BEFORE = ("1.0.0", "1.15.1")

# The tests that compare every decision with google-adk's own code.
PARITY = (
    "tests/test_differential.py",
    "tests/test_window.py",
    "tests/test_chars_saved.py",
    "tests/test_contents.py",
    "tests/test_runner_e2e.py",
    "tests/test_install.py",
    "tests/test_families.py",
)
# The quick subset: google-adk's own scenarios end to end and the
# differential suite with fewer generated examples (HYPOTHESIS_PROFILE=quick).
QUICK = (
    "tests/test_differential.py",
    "tests/test_runner_e2e.py",
    "tests/test_install.py",
    "tests/test_families.py",
)

SMOKE = """
import json, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import adk_fastcompact as fc
    info = fc.family()
    active = fc.install()
    mode = fc.installed()
    fc.uninstall()
    exact = fc.install(mode="exact")
    fc.uninstall()
print(json.dumps({
    "family": info["family"], "profile": info["profile"], "changed": list(info["changed"]),
    "active": active, "mode": mode, "exact": exact,
    "warnings": [
        str(w.message) for w in caught
        if issubclass(w.category, fc.UnsupportedAdkVersionWarning)
    ],
}))
"""


def wheel() -> pathlib.Path:
    out = WORK / "wheel"
    shutil.rmtree(out, ignore_errors=True)
    maturin = pathlib.Path(sys.executable).parent / "maturin"
    subprocess.run([str(maturin), "build", "--release", "-q", "-o", str(out)], cwd=ROOT, check=True)
    [built] = out.glob("*.whl")
    return built


def venv(release: str, built: pathlib.Path, tests: bool) -> pathlib.Path:
    home = WORK / "venvs" / release
    python = home / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, f"google-adk=={release}", "rich>=13"], check=True)
    if tests:
        pinned = [
            line.split("#")[0].strip()
            for line in (ROOT / "tests" / "requirements.txt").read_text().splitlines()
        ]
        keep = [p for p in pinned if p and not p.startswith(("google-adk", "maturin"))]
        subprocess.run([*pip, *keep], check=True)
    subprocess.run([*pip, "--force-reinstall", "--no-deps", str(built)], check=True)
    return python


def releases_for(kind: str) -> list[str]:
    fams = families()
    if kind == "imports":
        picked = list(BEFORE)
        for fam in fams:
            picked += [fam.releases[0], fam.releases[-1]]
        return list(dict.fromkeys(picked))
    # One release per shipped family: its newest.
    return [fam.releases[-1] for fam in fams if fam.releases[0] in PROFILES]


def imports(python: pathlib.Path, release: str) -> bool:
    done = subprocess.run(
        [str(python), "-c", SMOKE], capture_output=True, text=True, cwd=WORK, check=False
    )
    if done.returncode != 0:
        print(f"  FAIL {release}: exit {done.returncode}\n{done.stderr[-3000:]}")
        return False
    found = json.loads(done.stdout)
    fam = next((f for f in families() if release in f.releases), None)
    expected = fam is not None and fam.releases[0] in PROFILES
    ok = found["active"] is expected and found["changed"] == []
    ok &= expected or bool(found["warnings"])
    print(f"  {'ok' if ok else 'FAIL'} {release}: {json.dumps(found)}")
    return ok


def parity(python: pathlib.Path, release: str, quick: bool) -> bool:
    env = {**os.environ, "HYPOTHESIS_PROFILE": "quick" if quick else "ci"}
    args = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
    args += ["--dist", "loadfile", *(QUICK if quick else PARITY)]
    # An older google-adk pins older dependencies (opentelemetry, fastapi)
    # that warn of deprecations at import; every other warning stays an error.
    args += ["-W", "ignore::DeprecationWarning"]
    # 2.12 announces its experimental tool confirmation once per process.
    args += ["-W", "ignore:[EXPERIMENTAL]:UserWarning"]
    # From the project root, whose python/ is not on the path: the tests
    # import the wheel installed in the venv.
    done = subprocess.run(args, cwd=ROOT, env=env, check=False)
    return done.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("imports", "parity"))
    parser.add_argument("--releases", help="comma-separated google-adk releases")
    parser.add_argument("--quick", action="store_true", help="the quick parity subset")
    parser.add_argument("--wheel", type=pathlib.Path, help="a wheel built already")
    args = parser.parse_args()
    WORK.mkdir(exist_ok=True)
    built = args.wheel or wheel()
    picked = args.releases.split(",") if args.releases else releases_for(args.kind)
    failed = []
    for release in picked:
        start = time.perf_counter()
        print(f"== google-adk {release}", flush=True)
        python = venv(release, built, tests=args.kind == "parity")
        ok = imports(python, release) if args.kind == "imports" else False
        if args.kind == "parity":
            ok = parity(python, release, args.quick)
        print(f"   {release}: {'ok' if ok else 'FAILED'} in {time.perf_counter() - start:.0f} s")
        if not ok:
            failed.append(release)
    print("failed:", ", ".join(failed) if failed else "none")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
