"""The family profiles' flags, built from the release each rule starts or
ends at (`_families._ON_FROM`, `_OFF_FROM`), pinned to the values the
hand-written table held for every profile; and the entry points' forms the
profiles bind (`_compaction._entry_point`), pinned to google-adk's
signatures of each family (test_install.py compares the installed family's
with google-adk's own functions)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from adk_fastcompact import _compaction, _families

FLAGS = (
    "scoped",
    "recover_by_id",
    "dead_calls",
    "priced",
    "skip_token_compaction",
    "own_counts",
    "attributed",
    "rewinds",
    "self_contained",
    "sliding_appends",
)

#: Profile -> its flags, in FLAGS' order (1: on), as the table was written
#: before it was derived.
PINNED = {
    "2.0": (0, 1, 0, 0, 1, 0, 0, 0, 0, 1),
    "2.3": (0, 1, 0, 0, 1, 0, 0, 0, 1, 1),
    "2.5": (0, 1, 0, 0, 1, 0, 0, 1, 1, 0),
    "2.7": (0, 1, 0, 0, 1, 0, 1, 1, 1, 0),
    "2.10": (0, 1, 0, 0, 1, 1, 1, 1, 1, 0),
    "2.12": (0, 1, 1, 1, 0, 1, 1, 1, 1, 0),
    "2.13": (1, 0, 1, 1, 0, 1, 1, 1, 1, 0),
}


def test_the_profile_has_these_flags() -> None:
    names = [field.name for field in dataclasses.fields(_families.Profile)]
    assert names == ["name", *FLAGS]


@pytest.mark.parametrize("name", list(PINNED))
def test_each_profile_derives_the_pinned_flags(name: str) -> None:
    profile = _families._PROFILE_FLAGS[name]
    assert profile.name == name
    assert {flag: getattr(profile, flag) for flag in FLAGS} == dict(
        zip(FLAGS, map(bool, PINNED[name]), strict=True)
    )
    assert all(type(getattr(profile, flag)) is bool for flag in FLAGS)


def test_every_profile_and_rule_is_in_the_tables() -> None:
    assert list(_families._PROFILE_FLAGS) == list(PINNED)
    assert set(_families.PROFILES.values()) == set(PINNED)
    # Each rule has one span: a start or an end, not both.
    assert sorted([*_families._ON_FROM, *_families._OFF_FROM]) == sorted(FLAGS)
    assert set(_families._ON_FROM.values()) | set(_families._OFF_FROM.values()) <= set(PINNED)


def test_the_profiles_are_built_once_and_frozen() -> None:
    active = _families.active()
    assert active is _families._PROFILE_FLAGS[active.name]
    assert _families.active() is active
    with pytest.raises(dataclasses.FrozenInstanceError):
        active.scoped = not active.scoped  # type: ignore[misc]


#: Each form of the two entry points: (name, async generator?, signature).
FORMS = [
    (
        "run_compaction_for_sliding_window",
        True,
        "(app: 'Any', session: 'Any', session_service: 'Any') -> 'AsyncGenerator[Event, None]'",
    ),
    (
        "run_compaction_for_sliding_window_skippable",
        True,
        "(app: 'Any', session: 'Any', session_service: 'Any', *,"
        " skip_token_compaction: 'bool' = False) -> 'AsyncGenerator[Event, None]'",
    ),
    (
        "run_compaction_for_sliding_window_appending",
        False,
        "(app: 'Any', session: 'Any', session_service: 'Any', *,"
        " skip_token_compaction: 'bool' = False) -> 'None'",
    ),
    (
        "run_compaction_for_token_threshold_config",
        False,
        "(*, config: 'Any', session: 'Any', session_service: 'Any', agent: 'Any',"
        " agent_name: 'str' = '', current_branch: 'str | None' = None,"
        " isolation_scope: 'str | None' = None) -> 'bool'",
    ),
    (
        "run_compaction_for_token_threshold_config_unscoped",
        False,
        "(*, config: 'Any', session: 'Any', session_service: 'Any', agent: 'Any',"
        " agent_name: 'str' = '', current_branch: 'str | None' = None) -> 'bool'",
    ),
]


@pytest.mark.parametrize(("name", "generator", "signature"), FORMS, ids=[f[0] for f in FORMS])
def test_each_entry_point_form_has_its_families_signature(
    name: str, generator: bool, signature: str
) -> None:
    fn = getattr(_compaction, name)
    assert fn.__name__ == fn.__qualname__ == name
    assert fn.__module__ == "adk_fastcompact._compaction"
    assert str(inspect.signature(fn)) == signature
    assert inspect.isasyncgenfunction(fn) is generator
    assert inspect.iscoroutinefunction(fn) is not generator
    assert fn.__doc__.startswith("Same as google-adk") or fn.__doc__.startswith("Same as `")
    # CPython checks the call against the form's own parameters.
    with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'x'$"):
        fn(x=1)


@pytest.mark.parametrize("name", list(PINNED))
def test_each_profile_hands_the_native_selections_its_flags_once(name: str) -> None:
    from adk_fastcompact import _native

    profile = _families._PROFILE_FLAGS[name]
    selection = ("scoped", "dead_calls", "priced", "own_counts", "rewinds", "self_contained")
    assert profile.rules == _native.Rules(**{flag: getattr(profile, flag) for flag in selection})
    assert profile.rules is profile.rules
    shown = ", ".join(f"{flag}={getattr(profile, flag)}" for flag in selection)
    assert repr(profile.rules) == f"Rules({shown})"
    assert hash(profile.rules) == hash(_native.Rules(**{f: getattr(profile, f) for f in selection}))
    # Each flag tells the rules apart.
    for flag in selection:
        flipped = {f: getattr(profile, f) for f in selection} | {flag: not getattr(profile, flag)}
        assert profile.rules != _native.Rules(**flipped)
