"""The bench's sides: google-adk's pure-Python originals, the Rust-backed
functions `install()` binds, and exact mode's; switching google-adk between
them; and the Rust core's decline counters, read around a side's calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from google.adk.events.event import Event

from .. import _exact_mode, _families, _filtering, _native, _patch, _reference


class Implementation(NamedTuple):
    """The functions under test as one implementation provides them."""

    name: str
    #: None where the installed google-adk has none (before 2.5).
    apply_rewinds: Callable[[list[Event]], list[Event]] | None
    #: None where the installed google-adk has none (before 2.13).
    get_compaction_ranges: Callable[[list[Event]], list[tuple[int, float, float]]] | None
    #: Called `(events, agent_name)`; before 2.7 google-adk's takes the
    #: events alone, and the name is dropped on both sides.
    process_compaction_events: Callable[[list[Event], str], list[Event]]
    #: None where the installed google-adk has none (before 2.5).
    recover_compacted_function_calls: Callable[[list[Event], Sequence[Event]], list[Event]] | None
    run_compaction_for_sliding_window: Callable[..., Any]
    run_compaction_for_token_threshold_config: Callable[..., Any]
    #: Whether the compaction entry points run with `install()` active.
    patched: bool
    #: The mode `install()` is called with when `patched`.
    mode: str = "parity"


def python_implementation() -> Implementation:
    """google-adk's pure-Python originals, the baseline, called directly.

    Resolved through `_reference` on first use, so this works after
    `install()` as long as the originals were resolved before it.
    """
    return Implementation(
        "python",
        _present("apply_rewinds"),
        _present("get_compaction_ranges"),
        named(_reference.original("process_compaction_events")),
        _present("recover_compacted_function_calls"),
        _reference.original("run_compaction_for_sliding_window"),
        _reference.original("run_compaction_for_token_threshold_config"),
        patched=False,
    )


def _present(name: str) -> Any:
    """google-adk's `name` where the installed release has it, else None."""
    return _reference.original(name) if name in _reference.locations() else None


def named(process: Callable[..., list[Event]]) -> Callable[[list[Event], str], list[Event]]:
    """`process` called `(events, agent_name)`: before 2.7 google-adk's
    `_process_compaction_events` takes the events alone (summaries by "model")."""
    if _families.active().attributed:
        return process

    def unattributed(events: list[Event], agent_name: str) -> list[Event]:
        return process(events)

    return unattributed


def _ours(name: str) -> Any:
    """What `install()` binds for `name` on the installed family."""
    return _patch.replacements("parity").get(name)


RUST = Implementation(
    "rust",
    _ours("apply_rewinds"),
    _ours("get_compaction_ranges"),
    named(_ours("process_compaction_events")),
    _ours("recover_compacted_function_calls"),
    _ours("run_compaction_for_sliding_window"),
    _ours("run_compaction_for_token_threshold_config"),
    patched=True,
)
"""The Rust-backed functions `install()` puts in their place."""

EXACT = Implementation(
    "exact",
    _filtering.apply_rewinds,
    _filtering.get_compaction_ranges,
    _exact_mode.process_compaction_events,
    _filtering.recover_compacted_function_calls,
    _exact_mode.run_compaction_for_sliding_window,
    _exact_mode.run_compaction_for_token_threshold_config,
    patched=True,
    mode="exact",
)
"""The functions `install(mode="exact")` puts in their place."""


def has_ranges() -> bool:
    """Whether the installed google-adk has `_get_compaction_ranges` (2.13)."""
    return "get_compaction_ranges" in _reference.locations()


def measured_family() -> str:
    """The google-adk family the bench measures, for its report."""
    info = _patch.family()
    label = info["family"] or "no recorded family"
    profile = f"profile {info['profile']}" if info["profile"] else "not accelerated"
    return f"google-adk {info['version']} ({label}; {profile})"


def set_installed(patched: bool, mode: str = "parity") -> None:
    """Switches google-adk to ours in `mode` (`patched`) or to its own code."""
    wanted = mode if patched else None
    if _patch.installed() not in (None, wanted):
        _patch.unpatch()
    if wanted is not None and _patch.installed() is None:
        _patch.install(wanted, strict=True)
    elif wanted is None and _patch.installed() is not None:
        _patch.unpatch()


def read_declines(reset: bool) -> dict[str, int]:
    """The Rust core's declines on this thread since the last reset, by reason."""
    counts: dict[str, int] = _native.decline_counts(reset)
    return {reason: count for reason, count in counts.items() if count}
