"""The package's shape: the runtime (`install()`, the drop-ins, exact mode)
apart from the command line's tooling (`adk_fastcompact._tooling`), and rich
an extra that only the command line needs."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import adk_fastcompact as fc
import pytest

PACKAGE = Path(fc.__file__).parent

# Run first in a subprocess: makes rich unimportable, as in an environment
# installed without the `cli` extra (httpx, which google-adk imports, imports
# rich when it can and does without it otherwise).
_NO_RICH = textwrap.dedent(
    """
    import sys

    class NoRich:
        def find_spec(self, name, path=None, target=None):
            if name == "rich" or name.startswith("rich."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoRich())
    """
)


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _NO_RICH + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_the_runtime_runs_without_tooling_or_rich() -> None:
    done = _run(
        """
        import adk_fastcompact as fc

        assert fc.install() is True
        fc.uninstall()
        assert fc.install("exact") is True
        for name in fc.__all__:
            getattr(fc, name)
        fc.uninstall()
        loaded = sorted(m for m in sys.modules if m.startswith(("rich", "adk_fastcompact.")))
        print("\\n".join(loaded))
        """
    )
    assert done.returncode == 0, done.stderr[-4000:]
    loaded = done.stdout.split()
    assert "adk_fastcompact._patch" in loaded and "adk_fastcompact._exact_mode" in loaded
    assert [m for m in loaded if m.startswith("rich")] == []
    assert [m for m in loaded if m.startswith("adk_fastcompact._tooling")] == []


def _imports(path: Path) -> set[str]:
    """Every module `path` imports anywhere (function-local imports too),
    relative imports resolved against `adk_fastcompact`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = path.parent.relative_to(PACKAGE.parent).parts[
                    : None if node.level == 1 else 1 - node.level
                ]
                base = ".".join([*package, base] if base else package)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def test_no_runtime_module_imports_tooling_or_rich() -> None:
    # Also the imports in functions, which the subprocess above may not reach.
    runtime = [p for p in PACKAGE.glob("*.py") if p.name != "__main__.py"]
    assert len(runtime) > 15, runtime
    offending = {
        p.name: sorted(
            m
            for m in _imports(p)
            if m == "rich" or m.startswith(("rich.", "adk_fastcompact._tooling"))
        )
        for p in runtime
    }
    assert {name: found for name, found in offending.items() if found} == {}
    # The check sees what it looks for: the command line's module has both.
    cli = _imports(PACKAGE / "_tooling" / "cli.py")
    assert "rich.table" in cli and "adk_fastcompact._tooling.bench" in cli
    assert "adk_fastcompact._tooling.cli" in _imports(PACKAGE / "__main__.py")


@pytest.mark.parametrize(
    "script",
    [
        "from adk_fastcompact._tooling.cli import main\n"
        "raise SystemExit(main(['bench', '--help']))",
        "import runpy\nsys.argv = ['adk_fastcompact', 'audit', 'x.db']\n"
        "runpy.run_module('adk_fastcompact', run_name='__main__')",
    ],
    ids=["console-script", "python-m"],
)
def test_the_command_line_without_rich_names_the_extra(script: str) -> None:
    done = _run(script)
    assert done.returncode == 2, done.stderr[-4000:]
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: adk-fastcompact's command line needs rich: pip install 'adk-fastcompact[cli]'"
    ]


def test_the_declared_google_adk_requirement_admits_every_release() -> None:
    """pip must install the package beside any google-adk the user has: the
    fingerprint at `install()`, not the resolver, decides what is accelerated
    (docs/platforms.md). So every release `_families.json` names (those of no
    accelerated family too), 1.0.0 (tests/families/run.py imports it) and
    releases after the newest recorded satisfy the declared requirement."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    declared = [
        Requirement(text)
        for text in importlib.metadata.requires("adk-fastcompact") or []
        if Requirement(text).name == "google-adk" and Requirement(text).marker is None
    ]
    assert len(declared) == 1, declared
    (requirement,) = declared
    recorded = json.loads((PACKAGE / "_families.json").read_text())["families"]
    releases = {release for family in recorded for release in family["releases"]}
    assert "1.16.0" in releases and "2.13.0" in releases, sorted(releases)
    newest = max(map(Version, releases))
    later = [f"{newest.major}.{newest.minor + 1}.0", f"{newest.major + 1}.0.0"]
    refused = [
        release
        for release in sorted({*releases, "1.0.0", *later}, key=Version)
        if not requirement.specifier.contains(release, prereleases=True)
    ]
    assert refused == [], f"{requirement} refuses google-adk {', '.join(refused)}"


def test_the_namespace_holds_only_the_api() -> None:
    """`dir(adk_fastcompact)` is `__all__` and the module's dunders; no
    public name but the API is bound (no `Any`, no `annotations`)."""
    import adk_fastcompact

    names = vars(adk_fastcompact)
    dunders = {name for name in names if name.startswith("__") and name.endswith("__")}
    assert dir(adk_fastcompact) == sorted(dunders | set(adk_fastcompact.__all__))
    for name in adk_fastcompact.__all__:
        getattr(adk_fastcompact, name)
    public = {name for name in names if not name.startswith("_")}
    assert public == {name for name in adk_fastcompact.__all__ if not name.startswith("_")}
