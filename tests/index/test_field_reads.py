"""How the index reads an event's fields: prefetch hints and entry-position
reads where the interpreter's layout is proved (switched off, the same
decisions), and fields found wherever an instance dict holds them.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import sysconfig

import adk_fastcompact as fc
from adk_fastcompact import _native
from adk_fastcompact._tooling import sessions as _sessions
from google.adk.events.event import Event

from support.compare import (
    ORIG_APPLY_REWINDS,
)
from support.index_checks import assert_same_filtering, session


def _switched(variable: str, value: str | None, code: str) -> str:
    env = dict(os.environ)
    env.pop(variable, None)
    if value is not None:
        env[variable] = value
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def _prefetch_switched(value: str | None, code: str) -> str:
    return _switched("ADK_FASTCOMPACT_PREFETCH", value, code)


def test_prefetch_hints_are_given_where_the_layout_is_proved() -> None:
    # The hints read two CPython internals (see src/py/reading/prefetch.rs); they
    # are given on the interpreters whose layout the self-test proves, and
    # the switch turns them off.
    code = "from adk_fastcompact import _native; print(_native.index_stats()['prefetch'])"
    gil = not sysconfig.get_config_var("Py_GIL_DISABLED")
    version = sys.version_info[:2]
    proved = sys.implementation.name == "cpython" and gil and (3, 11) <= version <= (3, 13)
    assert _prefetch_switched(None, code) == str(proved)
    assert _prefetch_switched("false", code) == "False"


_COLD_DECISIONS = (
    "import copy\n"
    "from adk_fastcompact import _native\n"
    "from adk_fastcompact._tooling import sessions as _sessions\n"
    "import adk_fastcompact as fc\n"
    "events = _sessions.build_session(3000, 7)\n"
    "due = _sessions.build_due_session(3000, 7)\n"
    "out = fc.process_compaction_events(copy.deepcopy(events), 'root')\n"
    "rec = fc.recover_compacted_function_calls(out, events)\n"
    "kept = fc.apply_rewinds(copy.deepcopy(events))\n"
    "w = _native.sliding_window(copy.deepcopy(due), 3, 1)\n"
    "key = lambda es: [(e.invocation_id, e.timestamp, e.author) for e in es]\n"
    "print(key(out), key(rec), [e.id for e in kept],\n"
    "      [e.id for e in w[0]], [e.id for e in w[1]], w[2] and w[2][2:])\n"
)
"""A cold read (fresh objects) of sessions with calls, compactions and
rewinds through every operation, printed."""


def test_reads_without_prefetch_hints_give_the_same_decisions() -> None:
    # Hints choose only what to load early; the values are read through the
    # API either way.
    assert _prefetch_switched("false", _COLD_DECISIONS) == _prefetch_switched(None, _COLD_DECISIONS)


def test_fields_are_read_at_their_entry_position_where_the_layout_is_proved() -> None:
    # Entry reads use CPython internals (see src/py/reading/fields.rs): on the
    # interpreters whose layout the self-test proves, and not when switched
    # off; the decisions are the same either way.
    code = "from adk_fastcompact import _native; print(_native.index_stats()['direct_fields'])"
    gil = not sysconfig.get_config_var("Py_GIL_DISABLED")
    version = sys.version_info[:2]
    proved = sys.implementation.name == "cpython" and gil and (3, 11) <= version <= (3, 13)
    variable = "ADK_FASTCOMPACT_DIRECT_FIELDS"
    assert _switched(variable, None, code) == str(proved)
    assert _switched(variable, "false", code) == "False"
    assert _switched(variable, "false", _COLD_DECISIONS) == _switched(
        variable, None, _COLD_DECISIONS
    )


def _shuffled_dicts(events: list[Event]) -> None:
    """Puts the fields of the events' (and their actions') instance dicts at
    other entry positions: reversed, one field deleted and set again (to
    the end), and a non-`str` key added to some (a table of another kind)."""
    for k, event in enumerate(events):
        for d in (event.__dict__, event.actions.__dict__):
            if k % 3 == 0:
                items = list(d.items())[::-1]
                d.clear()
                d.update(items)
            elif k % 3 == 1:
                first = next(iter(d))
                d[first] = d.pop(first)
        if k % 7 == 0:
            event.__dict__[7] = "not a field"


def test_fields_are_found_wherever_a_dict_holds_them() -> None:
    # Entry reads look where a field was found last (see src/py/reading/fields.rs);
    # dicts holding it elsewhere, or of another kind, must read the same.
    events = session(seed=5, n=400)
    shuffled = copy.deepcopy(events)
    _shuffled_dicts(shuffled)
    _native.decline_counts(reset=True)
    assert list(shuffled[0].__dict__) != list(events[0].__dict__)
    assert_same_filtering(shuffled)
    assert [e.id for e in fc.apply_rewinds(shuffled)] == [e.id for e in ORIG_APPLY_REWINDS(events)]
    due = _sessions.build_due_session(600, 5)
    plain, moved = copy.deepcopy(due), copy.deepcopy(due)
    _shuffled_dicts(moved)
    ours, theirs = _native.sliding_window(moved, 3, 1), _native.sliding_window(plain, 3, 1)
    assert ours is not None and theirs is not None
    assert [e.id for e in ours[1]] and [e.id for e in ours[1]] == [e.id for e in theirs[1]]
    assert [e.id for e in ours[0]] == [e.id for e in theirs[0]]
    # Read by Rust, not handed back to google-adk.
    assert _native.decline_counts() == {}
