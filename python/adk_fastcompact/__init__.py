"""adk-fastcompact: fast, exact context compaction bookkeeping for google-adk.

Call `install()` once, before building the Runner, and an unchanged ADK app
runs its compaction bookkeeping in Rust. The functions below are also usable
directly; each has the signature and result of the google-adk 2.13.0 function
it replaces.
"""

from __future__ import annotations

from ._analysis import analyze_sessions
from ._compaction import (
    run_compaction_for_sliding_window,
    run_compaction_for_token_threshold_config,
)
from ._filtering import (
    apply_rewinds,
    get_compaction_ranges,
    process_compaction_events,
    recover_compacted_function_calls,
)
from ._native import __version__, index_clear, index_configure, index_stats
from ._patch import (
    MODES,
    SUPPORTED_ADK_VERSIONS,
    UnsupportedAdkVersionError,
    UnsupportedAdkVersionWarning,
    install,
    installed,
    uninstall,
)

__all__ = [
    "MODES",
    "SUPPORTED_ADK_VERSIONS",
    "UnsupportedAdkVersionError",
    "UnsupportedAdkVersionWarning",
    "__version__",
    "analyze_sessions",
    "apply_rewinds",
    "get_compaction_ranges",
    "index_clear",
    "index_configure",
    "index_stats",
    "install",
    "installed",
    "process_compaction_events",
    "recover_compacted_function_calls",
    "run_compaction_for_sliding_window",
    "run_compaction_for_token_threshold_config",
    "uninstall",
]
