"""google-adk's behaviour families, recognised by fingerprint.

A family is a run of google-adk releases whose replaced functions (and the
module-level helpers they reach) have identical code (`_fingerprint`).
`tests/families/record.py` records every release's fingerprints in
`_families.json` (package data); `recognise()` fingerprints the installed google-adk the
same way and finds its family, so a release that leaves these functions
alone is recognised with no new release of this package, and one that
changes any of them is named function by function.

Nothing here imports google-adk's modules: the sources are read and parsed.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import importlib.resources
import json
from typing import Any

from . import _fingerprint

#: Our name -> google-adk's private name of every function this package
#: may replace (which of them a family has is in its `locations`).
NAMES: dict[str, str] = {
    "apply_rewinds": "_apply_rewinds",
    "get_compaction_ranges": "_get_compaction_ranges",
    "process_compaction_events": "_process_compaction_events",
    "recover_compacted_function_calls": "_recover_compacted_function_calls",
    "prompt_chars_saved": "_prompt_chars_saved",
    "run_compaction_for_sliding_window": "_run_compaction_for_sliding_window",
    "run_compaction_for_token_threshold_config": "_run_compaction_for_token_threshold_config",
}

#: The family profiles this release reproduces, by the family's first
#: release. A profile names the decisions of the Rust core and the Python
#: control flow used for that family.
#: Releases before 1.34 (no pairing trim, or one before pending calls
#: only) stay google-adk's own.
PROFILES: dict[str, str] = {
    # 1.34 to 2.2: 2.3's but the pairing trim truncates before pending calls
    # and unresolved requests (1.34-1.39 differ from 2.0 only in guards for
    # `event.actions` being None, which an Event's model never lets it be).
    "1.34.0": "2.0",
    "2.0.0": "2.0",
    # 2.3 to 2.4: 2.5's decisions over every event (no rewinds yet), the
    # sliding window a coroutine.
    "2.3.0": "2.3",
    "2.5.0": "2.5",
    # 2.7 to 2.9: 2.10's decisions but the token count's (2.8-2.9 differ
    # from 2.7 only in `_estimate_prompt_token_count`, which stays Python).
    "2.7.0": "2.7",
    "2.8.0": "2.7",
    "2.10.0": "2.10",
    "2.12.0": "2.12",
    "2.13.0": "2.13",
}

#: The profile exact mode is built on.
EXACT_PROFILE = "2.13"


@dataclasses.dataclass(frozen=True)
class Profile:
    """What sets a family's decisions apart, as flags the code reads."""

    name: str
    #: Compaction keeps to isolation scopes (2.13): the sliding window takes
    #: only unscoped events, the token threshold only its scope's, the seed
    #: and the token-threshold summary carry the scope, and materialized
    #: summaries the compaction event's. Before, scopes are not read.
    scoped: bool
    #: `_recover_compacted_function_calls` matches a response to a call by
    #: id alone (before 2.13; google-adk has the function from 2.5), not to
    #: the latest preceding call (2.13).
    recover_by_id: bool
    #: The pairing trim retries past provably dead calls (2.12 on).
    dead_calls: bool
    #: A selection is priced by `_is_range_worth_compacting` before it is
    #: summarized, and `_summarize_events_with_trace` takes the whole
    #: history (2.12 on).
    priced: bool
    #: `_run_compaction_for_sliding_window` takes `skip_token_compaction`
    #: (before 2.12).
    skip_token_compaction: bool
    #: The observed prompt token count is the agent's own and newer than the
    #: newest compaction (2.10 on); before, the newest count of any event.
    own_counts: bool
    #: `_process_compaction_events(events, agent_name)` attributes the
    #: summaries to the agent (2.7 on); before, it takes the events alone and
    #: every summary's author is "model".
    attributed: bool
    #: The selections leave rewound invocations out first (2.5 on); before,
    #: they read every event.
    rewinds: bool
    #: The pairing trim keeps the longest self-contained prefix (2.3 on);
    #: before, it truncates the window before pending function calls and
    #: unresolved tool confirmation or auth requests.
    self_contained: bool
    #: `_run_compaction_for_sliding_window` is a coroutine that appends the
    #: summary itself (before 2.5); from 2.5 an async generator yielding it.
    sliding_appends: bool

    @functools.cached_property
    def rules(self) -> Any:
        """The flags the native selections read, as the frozen
        `_native.Rules` they take (built once per profile)."""
        from . import _native

        return _native.Rules(
            scoped=self.scoped,
            dead_calls=self.dead_calls,
            priced=self.priced,
            own_counts=self.own_counts,
            rewinds=self.rewinds,
            self_contained=self.self_contained,
        )


#: The profile each rule is on from; every newer profile has it too.
_ON_FROM: dict[str, str] = {
    "self_contained": "2.3",
    "rewinds": "2.5",
    "attributed": "2.7",
    "own_counts": "2.10",
    "dead_calls": "2.12",
    "priced": "2.12",
    "scoped": "2.13",
}

#: The profile each rule is off from; every older profile has it.
_OFF_FROM: dict[str, str] = {
    "sliding_appends": "2.5",
    "skip_token_compaction": "2.12",
    "recover_by_id": "2.13",
}


def _release(profile: str) -> tuple[int, ...]:
    return tuple(int(part) for part in profile.split("."))


def _flags(name: str) -> Profile:
    """A profile's flags, from the release each rule starts or ends at."""
    at = _release(name)
    return Profile(
        name,
        **{rule: at >= _release(since) for rule, since in _ON_FROM.items()},
        **{rule: at < _release(until) for rule, until in _OFF_FROM.items()},
    )


#: Every profile's flags, built once.
_PROFILE_FLAGS: dict[str, Profile] = {
    name: _flags(name) for name in sorted(set(PROFILES.values()), key=_release)
}


@dataclasses.dataclass(frozen=True)
class Family:
    """A recorded behaviour family."""

    releases: tuple[str, ...]
    #: our name -> defining module, for the replaced functions it has.
    locations: dict[str, str]
    #: module -> {function or helper -> digest}.
    prints: dict[str, dict[str, str]]
    #: modules that bind a replaced function by name at import time.
    binders: tuple[str, ...]

    @property
    def label(self) -> str:
        first, last = self.releases[0], self.releases[-1]
        return f"google-adk {first}" if first == last else f"google-adk {first} to {last}"

    @property
    def profile(self) -> str | None:
        """The profile this release reproduces it with, or None."""
        return PROFILES.get(self.releases[0])

    def roots(self, module: str) -> list[str]:
        """google-adk's names of the replaced functions `module` defines."""
        return sorted(NAMES[ours] for ours, where in self.locations.items() if where == module)


@functools.cache
def families() -> tuple[Family, ...]:
    """Every recorded family, oldest first."""
    recorded = importlib.resources.files(__package__).joinpath("_families.json").read_text()
    return tuple(
        Family(
            releases=tuple(f["releases"]),
            locations=dict(f["locations"]),
            prints={m: dict(p) for m, p in f["prints"].items()},
            binders=tuple(f["binders"]),
        )
        for f in json.loads(recorded)["families"]
    )


@dataclasses.dataclass(frozen=True)
class Recognition:
    """What `recognise()` found for the installed google-adk."""

    version: str
    #: The family whose fingerprints the installed code has, or the nearest
    #: one (most equal fingerprints) when `changed` is not empty.
    family: Family | None
    #: Functions (`module.name`) whose code differs from `family`'s.
    changed: tuple[str, ...] = ()

    @property
    def matched(self) -> bool:
        return self.family is not None and not self.changed


def installed_prints(family: Family) -> dict[str, dict[str, str] | None]:
    """The installed google-adk's fingerprints of what `family` records."""
    return {
        module: _installed(module, tuple(family.roots(module)) or tuple(recorded))
        for module, recorded in family.prints.items()
    }


@functools.cache
def _installed(module: str, roots: tuple[str, ...]) -> dict[str, str] | None:
    return _fingerprint.fingerprints(module, roots)


def _differences(family: Family) -> tuple[int, tuple[str, ...]]:
    """(equal fingerprints, changed functions) of the installed code."""
    equal = 0
    changed: list[str] = []
    for module, found in installed_prints(family).items():
        recorded = family.prints[module]
        if found is None:
            changed.extend(f"{module}.{name}" for name in family.roots(module))
            continue
        for name in sorted(set(recorded) | set(found)):
            if recorded.get(name) == found.get(name):
                equal += 1
            else:
                changed.append(f"{module}.{name}")
    return equal, tuple(changed)


def adk_version() -> str:
    """The installed google-adk's version string."""
    return importlib.metadata.version("google-adk")


def recognise() -> Recognition:
    """The family of the installed google-adk (never raises for a missing
    module or unreadable source: those count as changed)."""
    version = adk_version()
    best: tuple[int, Family, tuple[str, ...]] | None = None
    for family in reversed(families()):
        equal, changed = _differences(family)
        if not changed:
            return Recognition(version, family)
        if equal and (best is None or equal > best[0]):
            best = (equal, family, changed)
    if best is None:
        return Recognition(version, None)
    return Recognition(version, best[1], best[2])


@functools.cache
def active() -> Profile:
    """The profile the drop-ins follow: the installed google-adk's family's,
    or the newest where it has none (`install()` then refuses to bind them;
    called directly, they answer as google-adk 2.13 does)."""
    found = recognise()
    name = found.family.profile if found.matched and found.family is not None else None
    return _PROFILE_FLAGS[name or EXACT_PROFILE]


def clear() -> None:
    """Forgets the fingerprints taken (for tests that edit google-adk)."""
    _installed.cache_clear()
    active.cache_clear()
