"""Behaviour families: fingerprints of google-adk's code, not version strings."""

from __future__ import annotations

import ast
import itertools
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import adk_fastcompact as fc
import google.adk
import pytest
from adk_fastcompact import _families, _fingerprint

ORIGINAL = textwrap.dedent(
    '''
    LIMIT = 3

    def helper(x):
        return x + LIMIT

    def unrelated():
        return 0

    def root(events):
        """Docs."""
        # a comment
        return [helper(e) for e in events]
    '''
)


def prints(source: str) -> dict[str, str]:
    return _fingerprint.module_fingerprints(source, ["root"])


def test_a_fingerprint_covers_the_helpers_and_constants_a_function_reaches() -> None:
    assert set(prints(ORIGINAL)) == {"root", "helper", "LIMIT"}


def test_layout_comments_and_docstrings_do_not_change_a_fingerprint() -> None:
    relaid = textwrap.dedent(
        """
        def unrelated():
            return 1  # changed, but not reached

        def root(events):
            return [
                helper(e)
                for e in events
            ]

        def helper(x):
            '''Other docs.'''
            return x + LIMIT

        LIMIT = 3
        """
    )
    assert prints(relaid) == prints(ORIGINAL)


@pytest.mark.parametrize(
    "edit",
    [
        ("LIMIT = 3", "LIMIT = 4"),
        ("x + LIMIT", "x - LIMIT"),
        ("for e in events", "for e in events[1:]"),
    ],
)
def test_a_code_change_anywhere_reached_changes_that_fingerprint(edit: tuple[str, str]) -> None:
    before = prints(ORIGINAL)
    after = prints(ORIGINAL.replace(*edit))
    changed = {name for name in before if before[name] != after[name]}
    assert len(changed) == 1


def test_the_canonical_text_leaves_out_empty_fields() -> None:
    # CPython 3.12 added `type_params` to definitions (empty here); the text
    # must not depend on which fields a version has.
    tree = ast.parse("def f(a, b=1):\n    return a\n")
    text = _fingerprint.canonical(tree)
    assert "type_params" not in text and "lineno" not in text and "None" not in text


def test_the_installed_google_adk_is_recognised_as_its_recorded_family() -> None:
    found = _families.recognise()
    assert found.matched
    assert found.version in found.family.releases
    assert found.family.profile == _families.PROFILES[found.family.releases[0]]
    info = fc.family()
    assert info["supported"] and info["changed"] == ()
    assert info["profile"] == _families.active().name


def test_recorded_families_are_consecutive_and_distinct() -> None:
    fams = _families.families()
    key = [tuple(int(p) for p in v.split(".")) for f in fams for v in f.releases]
    assert key == sorted(key) and len(set(key)) == len(key)
    for older, newer in itertools.pairwise(fams):
        assert (older.locations, older.prints) != (newer.locations, newer.prints)
    # Every shipped profile's family and the anchor releases are recorded.
    recorded = {v for f in fams for v in f.releases}
    assert {"2.13.0", "2.12.0", "2.6.3", "2.0.0", "1.39.1"} <= recorded


# The edits below are of google-adk 2.13's text; the mechanism they test is
# the same for every family.
on_2_13 = pytest.mark.skipif(
    _families.active().name != "2.13", reason="edits google-adk 2.13's source text"
)


def _edited_copy(tmp_path: pathlib.Path, module: str, old: str, new: str) -> pathlib.Path:
    """A copy of the installed google-adk with `old` replaced by `new` in
    `module`'s source, importable ahead of the installed one."""
    root = tmp_path / "site"
    target = root / "google" / "adk"
    shutil.copytree(pathlib.Path(google.adk.__file__).parent, target)
    path = root / (module.replace(".", "/") + ".py")
    source = path.read_text()
    assert source.count(old) == 1, old
    path.write_text(source.replace(old, new))
    return root


def _run(root: pathlib.Path, script: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=env,
    )


CHECK_REFUSED = """
    import warnings
    import google.adk
    assert google.adk.__file__.startswith({root!r}), google.adk.__file__
    import adk_fastcompact as fc
    from google.adk.apps import compaction
    before = compaction._run_compaction_for_sliding_window
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fc.install() is False
    assert compaction._run_compaction_for_sliding_window is before
    assert fc.installed() is None
    [warning] = [w for w in caught if issubclass(w.category, fc.UnsupportedAdkVersionWarning)]
    print(warning.message)
    print(fc.family()["changed"])
"""


@on_2_13
def test_an_edited_helper_is_refused_with_a_warning_naming_it(tmp_path: pathlib.Path) -> None:
    # `_latest_prompt_token_count` is not replaced, but the token-threshold
    # entry point reaches it: a change there changes the decisions.
    root = _edited_copy(
        tmp_path,
        "google.adk.apps.compaction",
        "scoped_events = [e for e in events if e.isolation_scope == isolation_scope]",
        "scoped_events = [e for e in events]",
    )
    done = _run(root, CHECK_REFUSED.format(root=str(root)))
    assert done.returncode == 0, done.stderr[-3000:]
    message, changed = done.stdout.splitlines()
    assert "google.adk.apps.compaction._latest_prompt_token_count" in message
    assert "left unchanged" in message
    assert changed == "('google.adk.apps.compaction._latest_prompt_token_count',)"


@on_2_13
def test_an_edited_replaced_function_is_refused_with_a_warning_naming_it(
    tmp_path: pathlib.Path,
) -> None:
    root = _edited_copy(
        tmp_path,
        "google.adk.flows.llm_flows.context._compaction",
        "return index >= 0 and ts <= coverage[index][1]",
        "return index >= 0 and ts < coverage[index][1]",
    )
    done = _run(root, CHECK_REFUSED.format(root=str(root)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "google.adk.flows.llm_flows.context._compaction._process_compaction_events" in done.stdout
    )


@on_2_13
def test_an_edit_outside_the_replaced_code_is_accepted(tmp_path: pathlib.Path) -> None:
    # A patch release that touches compaction.py but not what is replaced
    # (here a log message of the summarizer's setup) keeps the accelerator.
    root = _edited_copy(
        tmp_path,
        "google.adk.apps.compaction",
        "from ..telemetry.tracing import tracer",
        "from ..telemetry.tracing import tracer  # edited\nEDITED = True",
    )
    done = _run(
        root,
        f"""
        import google.adk
        assert google.adk.__file__.startswith({str(root)!r})
        import adk_fastcompact as fc
        assert fc.install(strict=True) is True
        print(fc.installed())
        """,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "parity"


def test_import_needs_nothing_of_google_adk() -> None:
    # `import adk_fastcompact` must work beside any google-adk release (or
    # none importable): it imports no google-adk module.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, adk_fastcompact; "
            "print(sorted(m for m in sys.modules if m.startswith('google.adk')))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"
