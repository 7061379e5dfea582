"""The interpreters the extension runs on: free-threaded builds refused on
import (`_interpreter`), and the CPython internals each version gets.

No free-threaded interpreter is at hand, so the refusal is tested on its
inputs: `sysconfig`'s `Py_GIL_DISABLED` and `sys._is_gil_enabled`, patched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Callable

import pytest
from adk_fastcompact import _interpreter, _native


@pytest.mark.parametrize(
    ("gil_disabled_build", "gil_enabled"),
    [
        (None, None),  # CPython 3.10-3.12: no such variable, no such function
        (0, lambda: True),  # a standard 3.13+ build
    ],
)
def test_a_standard_build_is_accepted(
    gil_disabled_build: object, gil_enabled: Callable[[], bool] | None
) -> None:
    assert _interpreter.refusal(gil_disabled_build, gil_enabled) is None


@pytest.mark.parametrize(
    ("gil_enabled", "state"),
    [
        (lambda: False, "the GIL is disabled"),
        (None, "the GIL is disabled"),
        # PYTHON_GIL=1: no race, but the layout is still the free-threaded one.
        (lambda: True, "the GIL is enabled at run time"),
    ],
)
def test_a_free_threaded_build_is_refused_with_the_reason_and_what_to_use(
    gil_enabled: Callable[[], bool] | None, state: str
) -> None:
    reason = _interpreter.refusal(1, gil_enabled)
    assert reason is not None
    assert "free-threaded" in reason and "Py_GIL_DISABLED=1" in reason and state in reason
    assert "abi3" in reason and "crash or race" in reason
    assert "standard (GIL) build of CPython 3.10 or newer" in reason
    assert "`python3.13` rather than `python3.13t`" in reason


def test_the_check_reads_sysconfig_and_is_gil_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    _interpreter.refuse_free_threaded()  # this interpreter: a standard build
    real = sysconfig.get_config_var

    def free_threaded(name: str) -> object:
        return 1 if name == "Py_GIL_DISABLED" else real(name)

    monkeypatch.setattr(sysconfig, "get_config_var", free_threaded)
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: False, raising=False)
    with pytest.raises(ImportError, match="the GIL is disabled") as refused:
        _interpreter.refuse_free_threaded()
    assert refused.value.name == "adk_fastcompact"
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: True)
    with pytest.raises(ImportError, match="enabled at run time"):
        _interpreter.refuse_free_threaded()
    monkeypatch.delattr(sys, "_is_gil_enabled")
    with pytest.raises(ImportError, match="the GIL is disabled"):
        _interpreter.refuse_free_threaded()


# A fresh interpreter made to look free-threaded before the package loads.
_IMPORT_AS_FREE_THREADED = textwrap.dedent(
    """
    import sys, sysconfig
    real = sysconfig.get_config_var
    sysconfig.get_config_var = lambda name: 1 if name == "Py_GIL_DISABLED" else real(name)
    sys._is_gil_enabled = lambda: False
    try:
        import adk_fastcompact
    except ImportError as error:
        print("refused:", error)
    print("native loaded:", "adk_fastcompact._native" in sys.modules)
    """
)


def test_importing_on_a_free_threaded_build_raises_before_the_extension_loads() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_AS_FREE_THREADED],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: adk-fastcompact does not support free-threaded CPython" in done.stdout
    assert "native loaded: False" in done.stdout


def _dict_tags(env: dict[str, str]) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from adk_fastcompact import _native; print(_native.index_stats()['dict_tags'])",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_dict_version_tags_are_read_where_the_layout_is_proved() -> None:
    # src/py/reading/version_tag.rs: CPython 3.10-3.13 GIL builds pass its self-test;
    # index_stats() says so, and the switch turns the tags off.
    env = {k: v for k, v in os.environ.items() if k != "ADK_FASTCOMPACT_DICT_TAGS"}
    proved = sys.implementation.name == "cpython" and (3, 10) <= sys.version_info[:2] <= (3, 13)
    assert _dict_tags(env) == str(proved)
    assert _dict_tags({**env, "ADK_FASTCOMPACT_DICT_TAGS": "false"}) == "False"
    assert isinstance(_native.index_stats()["dict_tags"], bool)
