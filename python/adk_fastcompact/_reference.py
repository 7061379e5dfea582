"""The pure-Python google-adk functions this package replaces.

They are captured from their defining modules the first time this module is
imported, before `install()` can patch anything, and serve two purposes: the
documented fallback for inputs the Rust core declines (NaN ordering keys,
objects that are not plain google-adk Events), and the baseline of the
benchmark.
"""

from __future__ import annotations

from google.adk.apps import compaction as _apps_compaction
from google.adk.events import _rewind_events
from google.adk.flows.llm_flows.context import _compaction

def _original(module: object, name: str):  # noqa: ANN202
    fn = getattr(module, name)
    if getattr(fn, "__module__", "").startswith("adk_fastcompact."):
        raise ImportError(f"{name} is already replaced; cannot find the original")
    return fn


apply_rewinds = _original(_rewind_events, "_apply_rewinds")
get_compaction_ranges = _original(_apps_compaction, "_get_compaction_ranges")
process_compaction_events = _original(_compaction, "_process_compaction_events")
recover_compacted_function_calls = _original(
    _compaction, "_recover_compacted_function_calls"
)
