"""google-adk's `deep_copy_model` against `_native.deep_copy_model`, side by side.

    python benches/session_copy.py                 # 2,000 and 10,000 events
    python benches/session_copy.py --sizes 500 --repeat 9

The sessions are the bench's realistic ones (`_sessions.build_due_session`:
google-adk-written conversations with tool calls, usage metadata and
compactions), their tool responses padded to records of several KB as
`_bench_store` pads them. Each round copies the session once with each
copier (the order alternating), the copy kept alive until the clock stops
(its deallocation is not timed); the best and the median round are
reported, with the garbage collector on (what a Runner turn meets) and off.
Needs google-adk 2.12 or later (`google.adk.utils._model_copy`).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from adk_fastcompact import _native
from adk_fastcompact._tooling.bench_store import _padded
from adk_fastcompact._tooling.sessions import build_due_session
from google.adk.sessions.session import Session
from google.adk.utils._model_copy import deep_copy_model


def _rounds(
    copiers: dict[str, Callable[..., Any]], session: Session, repeat: int, collect: bool
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in copiers}
    names = list(copiers)
    for r in range(repeat):
        for name in names if r % 2 else reversed(names):
            gc.collect()
            if not collect:
                gc.disable()
            try:
                start = time.perf_counter()
                copied = copiers[name](session)
                times[name].append(time.perf_counter() - start)
            finally:
                gc.enable()
            del copied
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,10000")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--payload", type=int, default=3000, help="tool response bytes")
    args = parser.parse_args()
    copiers = {"google-adk": deep_copy_model, "native": _native.deep_copy_model}
    print(f"{'events':>7} {'gc':>3} {'google-adk ms':>22} {'native ms':>22} {'ratio':>6}")
    for size in (int(s) for s in args.sizes.split(",")):
        events = _padded(build_due_session(size, 0), args.payload, random.Random(0))
        session = Session(id="s", app_name="bench", user_id="u", events=events)
        assert deep_copy_model(session) == _native.deep_copy_model(session)
        for collect in (True, False):
            times = _rounds(copiers, session, args.repeat, collect)
            best = {name: min(t) * 1000 for name, t in times.items()}
            median = {name: statistics.median(t) * 1000 for name, t in times.items()}
            cells = [f"{best[n]:8.1f} (med {median[n]:8.1f})" for n in copiers]
            ratio = best["google-adk"] / best["native"]
            gc_state = "on" if collect else "off"
            print(f"{size:>7} {gc_state:>3} {cells[0]:>22} {cells[1]:>22} {ratio:5.2f}x")


if __name__ == "__main__":
    main()
