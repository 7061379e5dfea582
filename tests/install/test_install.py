"""`install()` patches every binding site, reversibly, behind a version gate."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import adk_fastcompact as fc
import pytest
from adk_fastcompact import _families, _patch, _reference

from support.compare import OURS_PROCESS, PROFILE, _original, needs

# The prompt-side originals the installed google-adk has (2.12 has no
# `_get_compaction_ranges`, 2.5-2.11 none, 2.3-2.4 only the first).
ORIGINALS: dict[str, Callable[..., Any]] = {
    f"_{name}": fn
    for name in (
        "apply_rewinds",
        "get_compaction_ranges",
        "process_compaction_events",
        "recover_compacted_function_calls",
    )
    if (fn := _original(name)) is not None
}
# What install() binds: our functions under google-adk's names.
OURS: dict[str, Callable[..., Any]] = {
    original: _patch.replacement(original.lstrip("_")) for original in ORIGINALS
}

# Every module that binds one of the names at import time in google-adk 2.13.0
# (2.12: the same, less `_get_compaction_ranges`; see `_sites`).
_SITES_2_13: dict[str, tuple[str, ...]] = {
    "google.adk.events._rewind_events": ("_apply_rewinds",),
    "google.adk.apps.compaction": ("_apply_rewinds", "_get_compaction_ranges"),
    "google.adk.flows.llm_flows.context._compaction": (
        "_get_compaction_ranges",
        "_process_compaction_events",
        "_recover_compacted_function_calls",
    ),
    "google.adk.flows.llm_flows.context._contents": (
        "_apply_rewinds",
        "_process_compaction_events",
        "_recover_compacted_function_calls",
    ),
    "google.adk.flows.llm_flows.contents": (
        "_process_compaction_events",
        "_recover_compacted_function_calls",
    ),
    "google.adk.runners": ("_apply_rewinds",),
    "google.adk.agents._agent_router": ("_apply_rewinds",),
    "google.adk.tools.model_consult._context": ("_apply_rewinds",),
    "google.adk.workflow.utils._replay_manager": ("_apply_rewinds",),
}


def _recorded_sites() -> dict[str, tuple[str, ...]]:
    """Before 2.12: the modules tests/families/record.py found binding a
    replaced function in the family's wheel, and the names each holds."""
    sites = {}
    for module in _reference.binding_modules():
        held = vars(importlib.import_module(module))
        names = tuple(name for name, fn in ORIGINALS.items() if held.get(name) is fn)
        if names:
            sites[module] = names
    return sites


KNOWN_SITES = (
    {
        module: tuple(name for name in names if name in ORIGINALS)
        for module, names in _SITES_2_13.items()
    }
    if PROFILE.name in ("2.12", "2.13")
    else _recorded_sites()
)

Snapshot = dict[tuple[str, str], Any]


def adk_modules() -> list[tuple[str, types.ModuleType]]:
    return [
        (name, module)
        for name, module in list(sys.modules.items())
        if isinstance(module, types.ModuleType)
        and (name == "google.adk" or name.startswith("google.adk."))
    ]


def bindings(functions: dict[str, Callable[..., Any]]) -> Snapshot:
    """Every (module, attribute) of google-adk bound to one of `functions`."""
    wanted = {id(fn) for fn in functions.values()}
    return {
        (name, attr): value
        for name, module in adk_modules()
        for attr, value in list(vars(module).items())
        if id(value) in wanted
    }


def import_known_sites() -> None:
    for module in KNOWN_SITES:
        importlib.import_module(module)


@pytest.fixture
def originals() -> Snapshot:
    """google-adk untouched, every known site imported; the bindings then."""
    import_known_sites()
    snapshot = bindings(ORIGINALS)
    assert bindings(OURS) == {}
    for module, names in KNOWN_SITES.items():
        for name in names:
            assert snapshot[module, name] is ORIGINALS[name]
    return snapshot


def assert_untouched(snapshot: Snapshot) -> None:
    assert fc.installed() is None
    assert bindings(OURS) == {}
    now = bindings(ORIGINALS)
    assert now.keys() == snapshot.keys()
    assert all(now[key] is snapshot[key] for key in snapshot)


def test_install_patches_every_binding_site(originals: Snapshot) -> None:
    assert fc.install() is True
    assert fc.installed() == "parity"
    assert bindings(ORIGINALS) == {}, "an original is still bound"
    for module, names in KNOWN_SITES.items():
        for name in names:
            assert getattr(sys.modules[module], name) is OURS[name], (module, name)
    # Every binding that held an original now holds the matching replacement.
    assert all(
        getattr(sys.modules[module], attr) is OURS[original.__name__]
        for (module, attr), original in originals.items()
    )


def test_function_local_imports_see_ours(originals: Snapshot) -> None:
    fc.install()
    # What `from <defining module> import name` inside a function sees.
    for ours, (module, name) in _reference.locations().items():
        if name in ORIGINALS:
            assert getattr(importlib.import_module(module), name) is OURS[name], ours


def test_install_twice_is_idempotent(originals: Snapshot) -> None:
    assert fc.install() is True
    first = bindings(OURS)
    assert fc.install() is True
    assert fc.install(mode="parity") is True
    assert fc.installed() == "parity"
    assert bindings(OURS) == first
    assert bindings(ORIGINALS) == {}
    fc.uninstall()
    assert_untouched(originals)


def test_uninstall_restores_the_exact_originals(originals: Snapshot) -> None:
    fc.install()
    fc.uninstall()
    assert_untouched(originals)
    fc.uninstall()  # idempotent
    assert_untouched(originals)
    # And it can be installed again afterwards.
    assert fc.install() is True
    assert bindings(ORIGINALS) == {}
    fc.uninstall()
    assert_untouched(originals)


def test_installed_reports_the_mode(originals: Snapshot) -> None:
    assert fc.installed() is None
    fc.install()
    assert fc.installed() == "parity"
    fc.uninstall()
    assert fc.installed() is None


def test_unknown_mode_is_a_value_error(originals: Snapshot) -> None:
    with pytest.raises(ValueError, match="bogus"):
        fc.install(mode="bogus")
    assert_untouched(originals)


exact_family = pytest.mark.skipif(
    _families.active().name != _families.EXACT_PROFILE,
    reason="exact mode is built on google-adk 2.13's family",
)


@exact_family
def test_exact_mode_binds_its_own_functions_and_uninstalls_cleanly(
    originals: Snapshot,
) -> None:
    assert fc.install(mode="exact") is True
    assert fc.installed() == "exact"
    assert bindings(ORIGINALS) == {}
    from google.adk.flows.llm_flows.context import _contents

    assert _contents._process_compaction_events.__code__ is (
        _patch.replacement("process_compaction_events", "exact").__code__
    )
    with pytest.raises(ValueError, match="already installed in mode 'exact'"):
        fc.install(mode="parity")
    fc.uninstall()
    assert_untouched(originals)


@pytest.fixture
def other_adk_version(monkeypatch: pytest.MonkeyPatch) -> str:
    """A version string google-adk never released, on 2.13.0's code."""
    real = importlib.metadata.version

    def version(name: str) -> str:
        return "2.13.7" if name.lower().replace("_", "-") == "google-adk" else real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    return "2.13.7"


def test_a_version_string_alone_changes_nothing(
    originals: Snapshot, other_adk_version: str
) -> None:
    # The family is recognised by its code: a patch release that leaves the
    # replaced functions alone is accelerated as its family is.
    assert fc.family()["version"] == other_adk_version
    assert fc.install(strict=True) is True
    fc.uninstall()
    assert_untouched(originals)


@pytest.fixture
def unreproduced_family(monkeypatch: pytest.MonkeyPatch) -> str:
    """The installed family, recorded but without a profile."""
    from adk_fastcompact import _families

    label = fc.family()["family"]
    monkeypatch.setattr(_families, "PROFILES", {})
    return label


def test_unreproduced_family_warns_and_changes_nothing(
    originals: Snapshot, unreproduced_family: str
) -> None:
    with pytest.warns(fc.UnsupportedAdkVersionWarning, match=unreproduced_family):
        assert fc.install() is False
    assert fc.installed() is None
    assert_untouched(originals)


def test_exact_mode_on_another_family_is_refused(
    originals: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    if _families.active().name == _families.EXACT_PROFILE:
        # Pretend exact mode were built on another family.
        monkeypatch.setattr(_families, "EXACT_PROFILE", "no such profile")
    with pytest.warns(fc.UnsupportedAdkVersionWarning, match="exact mode is built on"):
        assert fc.install(mode="exact") is False
    with pytest.raises(fc.UnsupportedAdkVersionError, match="install\\(mode='parity'\\)"):
        fc.install(mode="exact", strict=True)
    assert_untouched(originals)
    assert fc.install() is True  # parity mode is not refused
    fc.uninstall()


def test_unreproduced_family_strict_raises(originals: Snapshot, unreproduced_family: str) -> None:
    with pytest.raises(fc.UnsupportedAdkVersionError, match="leaves to google-adk's own code"):
        fc.install(strict=True)
    assert_untouched(originals)


def test_version_gate_matches_the_pinned_adk() -> None:
    assert importlib.metadata.version("google-adk") in fc.SUPPORTED_ADK_VERSIONS
    assert issubclass(fc.UnsupportedAdkVersionWarning, Warning)
    assert isinstance(fc.__version__, str) and fc.__version__


def test_every_adk_module_in_a_fresh_interpreter() -> None:
    """Imports all of google-adk (what imports cleanly) after `install()`, then
    checks that no module binds an original and that `uninstall()` leaves no
    replacement behind anywhere, including modules first imported while
    installed."""
    script = textwrap.dedent(
        """
        import importlib, pkgutil, sys, types, warnings
        warnings.simplefilter("ignore")
        import google.adk
        import adk_fastcompact as fc
        from adk_fastcompact import _reference as ref

        originals = {id(ref.original(name)) for name in fc._patch.replacements("parity")}
        ours = {id(fc._patch.replacement(name)) for name in fc._patch.replacements("parity")}

        def bound(ids):
            return sorted(
                f"{name}.{attr}"
                for name, mod in list(sys.modules.items())
                if isinstance(mod, types.ModuleType)
                and name.startswith("google.adk")
                for attr, value in list(vars(mod).items())
                if id(value) in ids
            )

        assert fc.install() is True
        imported = 0
        for info in pkgutil.walk_packages(google.adk.__path__, "google.adk.",
                                          onerror=lambda name: None):
            try:
                importlib.import_module(info.name)
                imported += 1
            except BaseException:
                pass
        assert imported > 100, imported
        assert bound(originals) == [], bound(originals)
        fc.uninstall()
        assert bound(ours) == [], bound(ours)
        print("ok", imported)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.startswith("ok")


def test_database_session_service_is_hooked_when_the_app_imports_it(tmp_path: Path) -> None:
    """`install()` imports no SQLAlchemy where the app has not imported
    `DatabaseSessionService` (some 50,000 objects every full collection
    would walk): its hooks wait for the import, then its loads go through
    the row memo as when it was imported first; `uninstall()` restores it
    and cancels a hook still waiting."""
    script = textwrap.dedent(
        """
        import asyncio, sys, warnings
        warnings.simplefilter("ignore")
        import google.adk.runners
        import adk_fastcompact as fc
        from adk_fastcompact import _native

        assert fc.install() is True
        assert "sqlalchemy" not in sys.modules
        from google.adk.sessions import DatabaseSessionService
        from google.adk.events.event import Event

        hooked = DatabaseSessionService.get_session
        assert getattr(hooked, "__wrapped__", None) is not None
        assert hooked.__qualname__ == "DatabaseSessionService.get_session"

        async def load():
            service = DatabaseSessionService(f"sqlite+aiosqlite:///{sys.argv[1]}")
            session = await service.create_session(app_name="a", user_id="u", session_id="s")
            await service.append_event(
                session, Event(id="e1", invocation_id="i1", author="user", timestamp=1.0)
            )
            got = await service.get_session(app_name="a", user_id="u", session_id="s")
            await service.close()
            return len(got.events)

        assert asyncio.run(load()) == 1
        assert _native.index_stats()["rows_decoded_first"] == 1
        fc.uninstall()
        assert not hasattr(DatabaseSessionService.get_session, "__wrapped__")
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "db.sqlite")],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.startswith("ok")


def test_a_hook_still_waiting_is_cancelled_by_uninstall() -> None:
    """Installed and uninstalled before the app imports
    `DatabaseSessionService`: its import hooks nothing."""
    script = textwrap.dedent(
        """
        import sys, warnings
        warnings.simplefilter("ignore")
        import adk_fastcompact as fc

        assert fc.install() is True
        fc.uninstall()
        from google.adk.sessions.database_session_service import DatabaseSessionService
        assert not hasattr(DatabaseSessionService.get_session, "__wrapped__")
        assert not [f for f in sys.meta_path if type(f).__module__ == "adk_fastcompact._imports"]
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.startswith("ok")


def _call_error(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The message of the `TypeError` a wrong call raises (before any
    coroutine or generator starts)."""
    with pytest.raises(TypeError) as raised:
        fn(*args, **kwargs)
    return str(raised.value)


@pytest.mark.parametrize("name", list(_patch.replacements("parity")))
def test_replacements_carry_the_replaced_names_and_errors(name: str) -> None:
    original = fc._reference.original(name)
    bound = _patch.replacement(name)
    assert bound.__name__ == original.__name__
    assert bound.__qualname__ == original.__qualname__
    assert bound.__code__.co_name == original.__code__.co_name
    if sys.version_info >= (3, 11):
        assert bound.__code__.co_qualname == original.__code__.co_qualname
    assert inspect.signature(bound).parameters.keys() == (
        inspect.signature(original).parameters.keys()
    )
    # A wrong call raises the very TypeError google-adk's function raises.
    for args, kwargs in (
        ((), {"no_such_argument": 1}),
        ((), {}),
        ((1, 2, 3, 4, 5, 6, 7, 8), {}),
    ):
        assert _call_error(bound, *args, **kwargs) == _call_error(original, *args, **kwargs)
    # Our own public function keeps its own name; the bound one runs its code.
    ours = _patch.replacements("parity")[name]
    assert ours.__name__.startswith(name)
    assert bound.__code__.co_code == ours.__code__.co_code
    assert bound.__globals__ is ours.__globals__


@needs("apply_rewinds")
def test_tracebacks_name_the_replaced_function(originals: Snapshot) -> None:
    fc.install()
    from google.adk.events import _rewind_events

    with pytest.raises(Exception) as raised:
        _rewind_events._apply_rewinds([object()])  # type: ignore[list-item]
    names = [entry.name for entry in raised.traceback]
    assert "_apply_rewinds" in names and "apply_rewinds" not in names, names


def test_the_bench_runs_on_the_installed_family() -> None:
    """`python -m adk_fastcompact bench`, the README's main job, runs on every
    family install() accelerates and says which it measured; the rolled
    summary (exact mode's steady state) is timed only on exact mode's family.
    (It raised UnsupportedAdkVersionError on every other family.)"""
    from adk_fastcompact._tooling import bench as _bench

    report = _bench.run_bench(sizes=[120], repeat=1, turns=[12])
    ops = {row["op"] for row in report.rows}
    assert {"process_compaction_events", "sliding_window", "token_threshold"} <= ops
    assert "turn_overhead" in ops
    assert ("token_threshold_rolled" in ops) is (PROFILE.name == _families.EXACT_PROFILE)
    assert report.family.startswith(f"google-adk {_families.adk_version()} ")
    assert fc.installed() is None


def test_a_warm_prompt_hands_out_the_summaries_it_built() -> None:
    """On every family, `_process_compaction_events` over events it has
    seen hands out the summaries it built for them (the per-session index
    caches each). Events of google-adk 1.x have no `node_info`, and the
    cache took no summary without one: every call on 1.34-1.39 built all
    its summaries again (the bench's warm prompt ratio there was 22x)."""
    from adk_fastcompact import _native
    from adk_fastcompact._tooling import sessions as _sessions

    events = _sessions.build_session(400, 3)
    handed = []
    for _ in range(3):
        before = _native.index_stats()
        out = OURS_PROCESS(events, "root")
        handed.append([e for e in out if not any(e is x for x in events)])
    reused = int(_native.index_stats()["summaries_reused"]) - int(before["summaries_reused"])
    assert len(handed[-1]) >= 10 and reused == len(handed[-1])
    assert all(a is b for a, b in zip(handed[-1], handed[-2], strict=True))


def test_a_refusal_lists_the_reproduced_families_newest_first() -> None:
    """The warning for a family left to google-adk names the families this
    release reproduces, newest first (they were sorted as strings: "2.8.0
    to 2.9.2" before "2.13.0")."""
    oldest = _families.families()[0]
    assert oldest.profile is None
    message = _patch._refusal(_families.Recognition(oldest.releases[0], oldest), "parity")
    assert message is not None
    listed = message.split("it reproduces: ")[1].split(")")[0].split("; ")
    expected = [f.label for f in reversed(_families.families()) if f.profile is not None]
    assert listed == expected
    assert listed[0] == "google-adk 2.13.0"


def test_a_binding_module_the_release_lacks_is_passed_over(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A family's binding modules are those of all its releases (2.9 added
    `google.adk.agents._agent_router`, 2.11 `google.adk.tools.model_consult`),
    so its oldest release lacks some: install() passes over a missing module
    or package (it raised ModuleNotFoundError on 2.8.0 and 2.10.0). A
    dependency missing inside a module that exists still raises."""
    real = _reference.binding_modules()
    for absent in ("google.adk.no_such_module", "google.adk.no_such_package.module"):
        monkeypatch.setattr(_reference, "binding_modules", lambda absent=absent: (*real, absent))
        try:
            assert fc.install() is True
            assert fc.installed() == "parity"
        finally:
            fc.uninstall()
    (tmp_path / "adk_fastcompact_broken.py").write_text("import adk_fastcompact_missing_dep\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_reference, "binding_modules", lambda: (*real, "adk_fastcompact_broken"))
    with pytest.raises(ModuleNotFoundError, match="adk_fastcompact_missing_dep"):
        fc.install()
    assert fc.installed() is None
