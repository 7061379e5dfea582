"""adk-fastcompact: fast, exact context compaction bookkeeping for google-adk.

Call `install()` once, before building the Runner, and an unchanged ADK app
runs its compaction bookkeeping in Rust. `install()` recognises the installed
google-adk's behaviour family by a fingerprint of the functions it replaces
and leaves google-adk unchanged, with a warning, where it does not reproduce
that family. Importing this package never fails on account of google-adk's
version: the drop-in functions below (each with the signature and result of
the google-adk 2.13.0 function it replaces) are imported on first use.
"""

from typing import Any as _Any

from . import _interpreter as _interpreter  # first: refuses free-threaded builds
from ._native import __version__, index_clear, index_configure, index_stats
from ._patch import (
    LOADINGS,
    MODES,
    SUPPORTED_ADK_VERSIONS,
    UnsupportedAdkVersionError,
    UnsupportedAdkVersionWarning,
    family,
    install,
    installed,
    uninstall,
)

# Public name -> module defining it; these need google-adk 2.13's modules.
_LAZY: dict[str, str] = {
    "LeanSessionConfig": "_lean",
    "analyze_sessions": "_analysis",
    "loading_stats": "_lean",
    "run_compaction_for_sliding_window": "_compaction",
    "run_compaction_for_token_threshold_config": "_compaction",
    "apply_rewinds": "_filtering",
    "get_compaction_ranges": "_filtering",
    "process_compaction_events": "_filtering",
    "recover_compacted_function_calls": "_filtering",
}


def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API (`__all__`) and the module's own dunder attributes:
    what `help()` and completion offer (the private submodules and helpers
    stay reachable by name)."""
    dunders = {name for name in globals() if name.startswith("__") and name.endswith("__")}
    return sorted(dunders | set(__all__))


__all__ = [
    "LOADINGS",
    "MODES",
    "SUPPORTED_ADK_VERSIONS",
    "LeanSessionConfig",
    "UnsupportedAdkVersionError",
    "UnsupportedAdkVersionWarning",
    "__version__",
    "analyze_sessions",
    "apply_rewinds",
    "family",
    "get_compaction_ranges",
    "index_clear",
    "index_configure",
    "index_stats",
    "install",
    "installed",
    "loading_stats",
    "process_compaction_events",
    "recover_compacted_function_calls",
    "run_compaction_for_sliding_window",
    "run_compaction_for_token_threshold_config",
    "uninstall",
]
