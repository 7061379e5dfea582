"""Runs adk-fastcompact against other google-adk releases, one venv each.

    python tests/families/run.py imports            # every family's oldest and newest
    python tests/families/run.py parity             # the parity suite per shipped family
    python tests/families/run.py parity --quick     # the quick subset
    python tests/families/run.py parity --ci --others  # what CI runs: one release per profile
    python tests/families/run.py imports --releases 1.0.0,2.4.0
    python tests/families/run.py mutants            # each profile flag flipped: must fail
    python tests/families/run.py imports --jobs 2   # two releases at a time (not mutants)
    python tests/families/run.py venvs --others     # only the venvs `parity --ci`, `imports` use

Builds the wheel once (`maturin build --release`), then for each release a
venv under `.families/venvs/<release>` with `google-adk==<release>` (and, for
`parity`, the pinned test requirements), the wheel installed into it (not
the source tree). `imports` checks that `import adk_fastcompact` and
`install()` never raise there and that `install()` accelerates exactly the
families this release has a profile for; `parity` runs the differential and
end-to-end tests in that venv against that release; `mutants` flips each
flag of each shipped family's profile in the installed copy (a decision of
the family changed on purpose) and checks that the quick parity subset then
fails; `venvs` only makes the venvs of `parity --ci` and of `imports` (the
test command makes them beside its main pytest, which leaves the disk idle).
Exits nonzero if any release fails (or any mutant survives).
"""

from __future__ import annotations

import argparse
import concurrent.futures
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

from adk_fastcompact import _families  # noqa: E402
from adk_fastcompact._families import _PROFILE_FLAGS, PROFILES, families  # noqa: E402

# Releases before compaction existed, where install() must warn and leave
# google-adk alone: the first 1.x and the last one without compaction.
BEFORE = ("1.0.0", "1.15.1")

# The tests that compare every decision with google-adk's own code.
PARITY = (
    "tests/parity/test_differential.py",
    "tests/parity/test_window.py",
    "tests/parity/test_chars_saved.py",
    "tests/parity/test_contents.py",
    "tests/e2e/test_runner_e2e.py",
    "tests/install/test_install.py",
    "tests/install/test_families.py",
)
# The quick subset: google-adk's own scenarios end to end, the differential
# suite with fewer generated examples (HYPOTHESIS_PROFILE=quick) and the
# window selections, under two of the five index states (no index; the same
# lists again).
QUICK = (
    "tests/parity/test_differential.py",
    "tests/parity/test_window.py",
    "tests/e2e/test_runner_e2e.py",
    "tests/install/test_install.py",
    "tests/install/test_families.py",
    "-k",
    "not cold and not copies and not invalidated",
)

# What CI runs per profile: the differential suite with no index, few
# examples and every fourth block of seeded sessions, one end-to-end
# conversation (both triggers, on the SQLite service: 70 turns, each
# reloading the session), install().
CI = (
    "tests/parity/test_differential.py",
    "tests/e2e/test_runner_e2e.py",
    "tests/install/test_install.py",
    "-k",
    "not cold and not copies and not invalidated and not warm and not memory"
    " and not window-sqlite and not token-sqlite",
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


def venv(release: str, built: pathlib.Path, tests: bool, log: list[str]) -> pathlib.Path:
    """The release's venv with google-adk, the pinned test requirements
    (for `parity`/`mutants`) and the wheel, installed by uv (a venv per
    release costs seconds, not the minute pip takes). A venv made for
    `parity` serves `imports` too: it has google-adk and the wheel."""
    home = WORK / "venvs" / release
    python = home / "bin" / "python"
    uv = pathlib.Path(sys.executable).parent / "uv"
    if not python.exists():
        run([str(uv), "venv", "-q", "--python", sys.executable, str(home)], log)
    install = [str(uv), "pip", "install", "-q", "--python", str(python)]
    wanted = [f"google-adk=={release}"]
    if tests:
        pinned = [
            line.split("#")[0].strip()
            for line in (ROOT / "tests" / "requirements.txt").read_text().splitlines()
        ]
        wanted += [
            p
            for p in pinned
            if p and not p.startswith(("google-adk", "maturin", "uv", "distributed"))
        ]
    run([*install, *wanted], log)
    run([*install, "--reinstall", "--no-deps", str(built)], log)
    return python


def run(command: list[str], log: list[str]) -> None:
    """Runs `command`, its output going to `log`; raises if it fails."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    log.append(done.stdout + done.stderr)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, command)


def releases_for(kind: str) -> list[str]:
    fams = families()
    if kind == "imports":
        picked = list(BEFORE)
        for fam in fams:
            picked += [fam.releases[0], fam.releases[-1]]
        return list(dict.fromkeys(picked))
    # One release per shipped family: its newest.
    return [fam.releases[-1] for fam in fams if fam.releases[0] in PROFILES]


def one_per_profile() -> list[str]:
    """The newest release of each profile's newest family (what CI runs)."""
    newest: dict[str, str] = {}
    for fam in families():
        if fam.releases[0] in PROFILES:
            newest[PROFILES[fam.releases[0]]] = fam.releases[-1]
    return list(newest.values())


def imports(python: pathlib.Path, release: str, log: list[str]) -> bool:
    done = subprocess.run(
        [str(python), "-c", SMOKE], capture_output=True, text=True, cwd=WORK, check=False
    )
    if done.returncode != 0:
        log.append(f"  FAIL {release}: exit {done.returncode}\n{done.stderr[-3000:]}\n")
        return False
    found = json.loads(done.stdout)
    fam = next((f for f in families() if release in f.releases), None)
    expected = fam is not None and fam.releases[0] in PROFILES
    ok = found["active"] is expected and found["changed"] == []
    ok &= expected or bool(found["warnings"])
    log.append(f"  {'ok' if ok else 'FAIL'} {release}: {json.dumps(found)}\n")
    return ok


def parity(
    python: pathlib.Path, release: str, quick: bool, log: list[str], ci: bool = False
) -> bool:
    env = {**os.environ, "HYPOTHESIS_PROFILE": "quick" if quick or ci else "ci"}
    if ci:
        # Every fourth block of seeded sessions (conftest._SEEDED_EVERY).
        env["ADK_FASTCOMPACT_SEEDED_EVERY"] = "4"
        # The SQLite Runner conversation of 70 turns (100 in the main run):
        # the fewest at which its non-vacuity checks hold on every release
        # CI checks (at 50 the token threshold fires twice, under the 3 it
        # asks for).
        env["ADK_FASTCOMPACT_SQLITE_TURNS"] = "70"
    args = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if not ci:
        # Test by test, the files of conftest.WHOLE_FILES whole.
        args += ["-n", "2", "--dist", "loadgroup"]
    # CI's subset in one process: CI runs two releases at a time, and two
    # workers per release cost more to start (each imports google-adk and
    # the suite) than they save there (73 s alone against 44 s on two
    # workers, but 80 s of CPU against 73).
    args += list(CI if ci else QUICK if quick else PARITY)
    # An older google-adk pins older dependencies (opentelemetry, fastapi)
    # that warn of deprecations at import; every other warning stays an error.
    args += ["-W", "ignore::DeprecationWarning"]
    # 2.12 announces its experimental tool confirmation once per process.
    args += ["-W", "ignore:[EXPERIMENTAL]:UserWarning"]
    # From the project root, whose python/ is not on the path: the tests
    # import the wheel installed in the venv.
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    log.append(done.stdout + done.stderr)
    return done.returncode == 0


def mutants(python: pathlib.Path, release: str, only: list[str] | None = None) -> bool:
    """Flips each flag of the release's profile in the installed package;
    True when the quick parity subset fails for every flip."""
    found = subprocess.run(
        [str(python), "-c", "import adk_fastcompact._families as f; print(f.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=WORK,
    )
    path = pathlib.Path(found.stdout.strip())
    original = path.read_text()
    fam = next(f for f in families() if release in f.releases)
    profile = _PROFILE_FLAGS[PROFILES[fam.releases[0]]]
    flags = [f for f in vars(profile) if f != "name" and (only is None or f in only)]
    killed = True
    try:
        for flag in flags:
            value = getattr(profile, flag)
            # The profiles are built once at import; the mutant's line, run
            # last, rebuilds this one with the flag flipped.
            mutant = (
                f"\n_PROFILE_FLAGS[{profile.name!r}] = dataclasses.replace("
                f"_PROFILE_FLAGS[{profile.name!r}], {flag}={not value})\n"
            )
            path.write_text(original + mutant)
            log: list[str] = []
            failed = not parity(python, release, quick=True, log=log)
            if not failed:
                print("".join(log), end="")
            print(f"   {release} with {flag}={not value}: {'failed' if failed else 'PASSED'}")
            killed &= failed
    finally:
        path.write_text(original)
    return killed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("imports", "parity", "mutants", "venvs"))
    parser.add_argument("--releases", help="comma-separated google-adk releases")
    parser.add_argument("--quick", action="store_true", help="the quick parity subset")
    parser.add_argument(
        "--ci",
        action="store_true",
        help="CI's parity subset, on the newest release of each profile",
    )
    parser.add_argument(
        "--others",
        action="store_true",
        help="leave out the family of the google-adk running this script (CI tests it in full)",
    )
    parser.add_argument("--wheel", type=pathlib.Path, help="a wheel built already")
    parser.add_argument("--flags", help="mutants: the comma-separated profile flags to flip")
    parser.add_argument(
        "--jobs", type=int, default=1, help="releases run at a time (mutants: always one)"
    )
    args = parser.parse_args()
    WORK.mkdir(exist_ok=True)
    built = args.wheel or wheel()
    here = _families.recognise().family if args.others else None
    tested = set(one_per_profile())
    if args.releases:
        picked = args.releases.split(",")
    elif args.kind == "venvs":
        picked = list(dict.fromkeys([*one_per_profile(), *releases_for("imports")]))
    elif args.ci:
        picked = one_per_profile()
    else:
        picked = releases_for(args.kind)
    if here is not None:
        picked = [r for r in picked if r not in here.releases or args.kind == "venvs"]
        tested -= set(here.releases)

    def one(release: str) -> tuple[bool, str]:
        """Runs `args.kind` on `release`; its success and its log."""
        start = time.perf_counter()
        log = [f"== google-adk {release}\n"]
        try:
            if args.kind == "venvs":
                venv(release, built, tests=release in tested, log=log)
                log.append(f"   {release}: made in {time.perf_counter() - start:.0f} s\n")
                return True, "".join(log)
            python = venv(release, built, tests=args.kind != "imports", log=log)
            if args.kind == "imports":
                ok = imports(python, release, log)
            elif args.kind == "parity":
                ok = parity(python, release, args.quick, log, args.ci)
            else:
                print("".join(log), end="", flush=True)
                log = []
                ok = mutants(python, release, args.flags.split(",") if args.flags else None)
        except subprocess.CalledProcessError as error:
            log.append(f"  FAIL {release}: {error}\n")
            ok = False
        log.append(
            f"   {release}: {'ok' if ok else 'FAILED'} in {time.perf_counter() - start:.0f} s\n"
        )
        return ok, "".join(log)

    # Releases run `--jobs` at a time (a venv's install waits on the disk
    # and the network more than on the CPU); each one's log is printed
    # whole when it is done.
    failed = []
    jobs = 1 if args.kind == "mutants" else args.jobs
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for release, (ok, log) in zip(picked, pool.map(one, picked), strict=True):
            print(log, end="", flush=True)
            if not ok:
                failed.append(release)
    print("failed:", ", ".join(failed) if failed else "none")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
