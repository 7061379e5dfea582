"""The pure-Python google-adk functions this package replaces.

They are resolved from their defining modules on first use and remembered,
so they stay reachable after `install()` rebinds the names. They serve as the
documented fallback for inputs the Rust core declines (NaN ordering keys,
objects that are not plain google-adk models) and as the benchmark baseline.
Where each lives is the recognised behaviour family's (`_families`): the
same function moved between modules over google-adk's releases. On a
google-adk version without one of them, asking for it raises ImportError
naming the missing function; importing this package still works, and
`install()` refuses such versions on its own.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from . import _families

# our name -> (defining google-adk module, private name) in google-adk 2.13,
# where the installed google-adk's family is not recognised.
LOCATIONS: dict[str, tuple[str, str]] = {
    "apply_rewinds": ("google.adk.events._rewind_events", "_apply_rewinds"),
    "get_compaction_ranges": ("google.adk.apps.compaction", "_get_compaction_ranges"),
    "process_compaction_events": (
        "google.adk.flows.llm_flows.context._compaction",
        "_process_compaction_events",
    ),
    "recover_compacted_function_calls": (
        "google.adk.flows.llm_flows.context._compaction",
        "_recover_compacted_function_calls",
    ),
    "run_compaction_for_sliding_window": (
        "google.adk.apps.compaction",
        "_run_compaction_for_sliding_window",
    ),
    "prompt_chars_saved": ("google.adk.apps.compaction", "_prompt_chars_saved"),
    "run_compaction_for_token_threshold_config": (
        "google.adk.apps.compaction",
        "_run_compaction_for_token_threshold_config",
    ),
}

_resolved: dict[str, Callable[..., Any]] = {}


def locations() -> dict[str, tuple[str, str]]:
    """Our name -> (module, private name) of the replaced functions the
    installed google-adk has: its family's, or 2.13's where the family is
    not recognised."""
    found = _families.recognise()
    if found.family is None or found.changed:
        return dict(LOCATIONS)
    return {
        name: (module, _families.NAMES[name]) for name, module in found.family.locations.items()
    }


def binding_modules() -> tuple[str, ...]:
    """The modules to import before rebinding: the defining modules of the
    replaced functions and those that bind one by name at import time."""
    found = _families.recognise()
    fam = found.family
    if fam is None:
        return ()
    return tuple(dict.fromkeys([*sorted(set(fam.locations.values())), *fam.binders]))


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def ours(fn: Any) -> bool:
    """Whether `fn` runs this package's code: told by its code's file, as
    a replacement `install()` binds carries google-adk's names and module."""
    code = getattr(fn, "__code__", None)
    return code is not None and os.path.dirname(os.path.abspath(code.co_filename)) == _PACKAGE


def original(name: str) -> Callable[..., Any]:
    """google-adk's own implementation of `name` (one of `LOCATIONS`)."""
    fn = _resolved.get(name)
    if fn is not None:
        return fn
    where = locations().get(name)
    if where is None:
        raise ImportError(f"the installed google-adk has no function adk-fastcompact calls {name}")
    module_name, attr = where
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"google-adk has no {module_name}.{attr}") from exc
    if ours(fn):
        raise ImportError(f"{module_name}.{attr} is already replaced by adk-fastcompact")
    _resolved[name] = fn
    return fn
