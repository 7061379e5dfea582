"""What the model is asked at a turn of a long session: the whole session
loaded, a lean load, and google-adk's `num_recent_events` cut.

    python benches/lean_vs_recent.py                  # 2,000 events, num_recent_events=50
    python benches/lean_vs_recent.py --events 600 --recent 50 100 --json

Grows the e2e bench's app (`adk_fastcompact._tooling.e2e_app`: an
`LlmAgent` with a tool, sliding window and token threshold compaction) by
real turns to `--events` events, copies the session once per loading into
an `InMemorySessionService` and runs the next `--turns` turns on each copy
through google-adk's `Runner`: plain google-adk (the whole session),
`install(loading="lean")`, and plain google-adk given
`RunConfig(get_session_config=GetSessionConfig(num_recent_events=N))`
for each `--recent` N (what google-adk's docstring recommends beside
compaction). Prints, per loading, the events the Runner's first load held
(and the stored session then), the contents of the model's first request,
the compaction summaries among them, its characters, and whether every
request of the turns equals the whole session's. The measurement is
`tests/support/lean_recent.py`'s, which `tests/lean/test_inmemory_recent.py`
checks on 600 events. Counts, not timings: the bench's e2e regime times turns.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.lean_recent import FULL, LEAN, as_json, compare_loads, recent, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="session size (default 2000)")
    parser.add_argument(
        "--recent", type=int, nargs="+", default=[50], help="num_recent_events (default 50)"
    )
    parser.add_argument("--turns", type=int, default=3, help="turns compared (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args()
    loadings = (FULL, LEAN, *(recent(n) for n in args.recent))
    found = compare_loads(args.events, loadings, turns=args.turns, seed=args.seed)
    print(as_json(args.events, found) if args.json else table(args.events, found))


if __name__ == "__main__":
    main()
