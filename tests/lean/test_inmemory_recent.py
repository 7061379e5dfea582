"""google-adk's own `num_recent_events` cut against lean loading, on the
e2e bench's app (`support.lean_recent`): on the same session, grown by real
turns to 600 events and then taken three turns further, the cut google-adk's
docstring recommends beside compaction
(`RunConfig(get_session_config=GetSessionConfig(num_recent_events=50))`)
changes what the model is asked (fewer contents, fewer of the summaries
that stand, fewer characters) where a lean load asks exactly what the whole
session does while loading a fraction of it. `benches/lean_vs_recent.py`
prints the same comparison as a table (2,000 events by default).
"""

from __future__ import annotations

from support.lean_recent import FULL, LEAN, compare_loads, recent

SIZE = 600
RECENT = recent(50)


def test_num_recent_events_changes_the_prompt_where_lean_does_not() -> None:
    found = compare_loads(SIZE, (FULL, LEAN, RECENT))
    full, lean, cut = found[FULL], found[LEAN], found[RECENT]

    # The whole session: every load holds every stored event, and the
    # prompt holds many contents, most of them standing summaries.
    assert full.loaded == full.stored >= SIZE
    assert full.summaries >= 10 and full.contents > full.summaries

    # Lean: the same requests, every one of the three turns, from a load
    # holding a fraction of the session.
    assert lean.requests == full.requests
    assert (lean.contents, lean.summaries, lean.chars) == (
        full.contents,
        full.summaries,
        full.chars,
    )
    assert lean.stored == full.stored and lean.loaded < full.stored // 4

    # num_recent_events=50: 50 events loaded, and the model asked something
    # else: fewer contents, summaries and characters.
    assert cut.loaded == 50
    assert cut.requests[0] != full.requests[0]
    assert cut.contents < full.contents // 2
    assert cut.summaries < full.summaries // 2
    assert cut.chars < full.chars // 2
