"""The family profiles' flags, built from the release each rule starts or
ends at (`_families._ON_FROM`, `_OFF_FROM`), pinned to the values the
hand-written table held for every profile."""

from __future__ import annotations

import dataclasses

import pytest
from adk_fastcompact import _families

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
