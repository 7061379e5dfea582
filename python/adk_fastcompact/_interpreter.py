"""The interpreters the compiled extension may be loaded into.

`_native` is built for CPython's stable ABI (abi3, CPython 3.10 and newer),
which is the object layout of the standard build, where the GIL serializes
every access to Python objects. A free-threaded build (`python3.13t`,
`python3.14t`: `Py_GIL_DISABLED`) lays objects out differently, and CPython
before 3.15 has no stable ABI for it yet still loads an `.abi3.so` there
(python/cpython#120901), where the first reference count it touches corrupts
memory. Built from source for such an interpreter, PyO3 0.30 leaves abi3 out
and the module declares that it runs without the GIL, while the binding
reads lists and instance dicts without locks because the GIL would serialize
them. Neither may run, so this module refuses a free-threaded build before
anything imports `_native` (the package's `__init__` imports this module
before any other):
an ImportError saying why and what to use instead, never a crash or a
silent race. The GIL enabled at run time (`PYTHON_GIL=1`, `-X gil=1`) would
stop the race but not change the layout, so it is named in the message and
refused alike.
"""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Callable

_INSTEAD = (
    "Use a standard (GIL) build of CPython 3.10 or newer instead, for example "
    "`python3.13` rather than `python3.13t`."
)


def refusal(gil_disabled_build: object, gil_enabled: Callable[[], bool] | None) -> str | None:
    """Why the extension cannot be loaded into this interpreter, or None.

    Args:
      gil_disabled_build: `sysconfig.get_config_var("Py_GIL_DISABLED")`:
        None or 0 on a standard build, 1 on a free-threaded one.
      gil_enabled: `sys._is_gil_enabled` where the interpreter has it
        (CPython 3.13 and newer), else None.
    """
    if not gil_disabled_build:
        return None
    if gil_enabled is not None and gil_enabled():
        state = (
            "the GIL is enabled at run time (PYTHON_GIL=1 or -X gil=1), which "
            "does not change the free-threaded object layout"
        )
    else:
        state = "the GIL is disabled"
    return (
        "adk-fastcompact does not support free-threaded CPython "
        f"(sysconfig Py_GIL_DISABLED={gil_disabled_build!r}; {state}). Its "
        "extension is built for the stable ABI (abi3) of the standard build, "
        "whose object layout a free-threaded build does not share, and it reads "
        "lists and dicts relying on the GIL: loading it here would crash or race. "
        f"{_INSTEAD}"
    )


def refuse_free_threaded() -> None:
    """Raises ImportError on a free-threaded build (see the module docstring).

    Raises:
      ImportError: the running interpreter is a free-threaded build.
    """
    reason = refusal(
        sysconfig.get_config_var("Py_GIL_DISABLED"),
        getattr(sys, "_is_gil_enabled", None),
    )
    if reason is not None:
        raise ImportError(reason, name="adk_fastcompact")


refuse_free_threaded()
