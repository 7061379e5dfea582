"""Records the behaviour families of google-adk's released wheels.

Downloads every google-adk release from 1.16.0 on (or reads them from
`--cache`), fingerprints the functions adk-fastcompact replaces with the
package's own `_fingerprint` code, groups consecutive releases whose
fingerprints are identical, and writes `python/adk_fastcompact/_families.json`
(package data, read by `_families.families()`).

    python tests/families/record.py --cache .families/wheels

Run it again when google-adk publishes a release; a release whose
fingerprints match a recorded family needs no new entry to be recognised.
"""

from __future__ import annotations

import argparse
import ast
import json
import pathlib
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from adk_fastcompact import _fingerprint  # noqa: E402
from adk_fastcompact._families import NAMES  # noqa: E402

# Every module that has ever defined one of the replaced functions.
MODULES = (
    "google.adk.events._rewind_events",
    "google.adk.apps.compaction",
    "google.adk.flows.llm_flows.contents",
    "google.adk.flows.llm_flows._content_compaction",
    "google.adk.flows.llm_flows.context._compaction",
)
OLDEST = (1, 16, 0)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def releases() -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "google-adk"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    listed = out.splitlines()[1].split(":", 1)[1]
    found = [v.strip() for v in listed.split(",")]
    return sorted(
        (v for v in found if v and v.replace(".", "").isdigit() and version_key(v) >= OLDEST),
        key=version_key,
    )


def wheel(cache: pathlib.Path, version: str) -> pathlib.Path:
    found = sorted(cache.glob(f"google_adk-{version}-*.whl"))
    if not found:
        subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", "-q", "--no-deps"),
                *(f"google-adk=={version}", "-d", str(cache)),
            ],
            check=True,
        )
        found = sorted(cache.glob(f"google_adk-{version}-*.whl"))
    return found[0]


def sources(path: pathlib.Path) -> dict[str, str]:
    """Module name -> source, for every `google.adk` module in the wheel."""
    out = {}
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if name.startswith("google/adk/") and name.endswith(".py"):
                module = name[:-3].replace("/", ".").removesuffix(".__init__")
                out[module] = zf.read(name).decode("utf-8", errors="replace")
    return out


def defined(tree: ast.Module) -> set[str]:
    return {
        stmt.name for stmt in tree.body if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def record(version: str, modules: dict[str, str]) -> dict:
    """The fingerprints of one release and the modules that bind a replaced
    function by name at import time."""
    private = {adk: ours for ours, adk in NAMES.items()}
    locations: dict[str, str] = {}
    prints: dict[str, dict[str, str]] = {}
    for module in MODULES:
        if module not in modules:
            continue
        tree = ast.parse(modules[module])
        roots = sorted(defined(tree) & set(private))
        if roots:
            prints[module] = _fingerprint.module_fingerprints(modules[module], roots)
            for root in roots:
                locations[private[root]] = module
    binders = []
    for module, source in sorted(modules.items()):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for stmt in tree.body:
            if isinstance(stmt, ast.ImportFrom) and any(a.name in private for a in stmt.names):
                binders.append(module)
                break
    return {"version": version, "locations": locations, "prints": prints, "binders": binders}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=pathlib.Path, default=ROOT / ".families" / "wheels")
    parser.add_argument(
        "--out", type=pathlib.Path, default=ROOT / "python" / "adk_fastcompact" / "_families.json"
    )
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    families: list[dict] = []
    for version in releases():
        rec = record(version, sources(wheel(args.cache, version)))
        if not rec["prints"]:
            continue
        last = families[-1] if families else None
        same = last is not None and all(last[k] == rec[k] for k in ("locations", "prints"))
        if same:
            last["releases"].append(version)
            last["binders"] = sorted(set(last["binders"]) | set(rec["binders"]))
        else:
            families.append({**rec, "releases": [version]})
        print(version, "->", families[-1]["releases"][0], file=sys.stderr)
    table = {
        "comment": (
            "Generated by tests/families/record.py: the fingerprints of the functions"
            " adk-fastcompact replaces, per behaviour family of google-adk's releases"
            " (consecutive releases whose fingerprints are identical). Do not edit."
        ),
        "families": [
            {
                "releases": f["releases"],
                "locations": f["locations"],
                "prints": f["prints"],
                "binders": f["binders"],
            }
            for f in families
        ],
    }
    args.out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
