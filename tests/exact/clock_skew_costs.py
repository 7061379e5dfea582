"""What the plain bounds' margin for other clocks (`install(mode="exact",
clock_skew=...)`) costs: the events google-adk without the accelerator sees
repeated beside their summary in the final session, margin by margin, on
exact mode's Runner scenarios and on the audit's ground-truth stores
(docs/exact-mode.md, "Clocks other than the writer's").

    python tests/exact/clock_skew_costs.py                # every table
    python tests/exact/clock_skew_costs.py --only runs    # runs, stores or paced
    python tests/exact/clock_skew_costs.py --only stores --kind sqlite --margins 1

`runs` and `stores` run on the tests' own clock (a quarter second per clock
reading); `paced` runs the Runner scenarios on a clock that reads a
millisecond apart and moves on as a deployment's does: 5 s between
questions, 1 s per model answer, 2 s per summary. Nothing here is timed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import adk_fastcompact
from google.adk.apps.app import EventsCompactionConfig

from support.exact_runs import Pace, Run, chat, run

MARGINS = [0.0, 0.1, 0.5, 1.0, 2.0, 5.0]


def _runs() -> dict[str, Callable[..., Run]]:
    both = EventsCompactionConfig(
        compaction_interval=2, overlap_size=0, token_threshold=600, event_retention_size=5
    )
    near = EventsCompactionConfig(token_threshold=150, event_retention_size=2)
    pending = EventsCompactionConfig(
        compaction_interval=2, overlap_size=0, token_threshold=400, event_retention_size=2
    )
    tied = EventsCompactionConfig(
        compaction_interval=2, overlap_size=1, token_threshold=300, event_retention_size=1
    )
    sliding = EventsCompactionConfig(compaction_interval=2, overlap_size=0)
    overlap: list[str | tuple[str, ...]] = [
        (f"<<u{k}>> first", f"<<u{k + 1}>> second") for k in range(1, 30, 2)
    ]
    slow: list[str | tuple[str, ...]] = [
        (f"<<u{k}>> answer slowly", f"<<u{k + 1}>> second") for k in range(1, 12, 2)
    ]
    return {
        "both strategies, 300 turns": lambda **o: run(
            both, chat(300), mode="exact", answer_words=100, **o
        ),
        "tail retention near the threshold, 120 turns": lambda **o: run(
            near, chat(120), mode="exact", **o
        ),
        "a call pending for 40 turns": lambda **o: run(
            pending, ["<<u0>> please call the job", *chat(40)], mode="exact", **o
        ),
        "tied timestamps, 40 turns": lambda **o: run(tied, chat(40), mode="exact", ties=2, **o),
        "overlapping invocations, 15 rounds": lambda **o: run(
            sliding, overlap, mode="exact", delay=0.002, summary_delay=0.003, **o
        ),
        "a coarse clock, 30 turns": lambda **o: run(sliding, chat(30), mode="exact", ties=12, **o),
        "a slow invocation, 6 rounds": lambda **o: run(
            sliding, slow, mode="exact", slow_delay=0.05, **o
        ),
    }


def _table(title: str, rows: dict[str, list[str]]) -> None:
    print(f"\n{title}\n")
    print("| scenario | " + " | ".join(f"{m:g} s" for m in MARGINS) + " |")
    print("| --- |" + " ---: |" * len(MARGINS))
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |")


def runs(pace: Pace | None) -> None:
    rows: dict[str, list[str]] = {}
    for name, make in _runs().items():
        if pace is not None and name in ("a coarse clock, 30 turns", "tied timestamps, 40 turns"):
            continue  # their point is the quarter-second clock's ties
        cells = []
        for margin in MARGINS:
            result = make(clock_skew=margin, pace=pace)
            assert result.plain_lost == set(), (name, margin, result.plain_lost)
            raw = {t for e in result.final for t in _tags(e)}
            cells.append(f"{len(result.final_duplicated)} of {len(raw)}")
        rows[name] = cells
        print(name, cells, file=sys.stderr)
    clock = "the tests' clock" if pace is None else f"a paced clock ({pace})"
    _table(f"Runner scenarios (tests/exact/test_exact_mode.py), {clock}", rows)


def _tags(event: Any) -> set[str]:
    from support.exact_llm import event_tags

    return event_tags(event)


def stores(kind: str) -> None:
    from support.truth_scenarios import SCENARIOS, write_scenario

    install = adk_fastcompact.install
    rows: dict[str, list[str]] = {}
    for name, (*_, kinds) in SCENARIOS.items():
        if kind not in kinds:
            continue
        cells = []
        for margin in MARGINS:

            def with_margin(mode: str = "parity", **kwargs: Any) -> bool:
                if mode == "exact":
                    kwargs.setdefault("clock_skew", margin)  # noqa: B023
                return install(mode, **kwargs)

            adk_fastcompact.install = with_margin  # type: ignore[assignment]
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    written = write_scenario(Path(tmp), name, kind, "exact")
            finally:
                adk_fastcompact.install = install  # type: ignore[assignment]
            assert written.plain_hidden == set(), (name, margin, written.plain_hidden)
            events = written.truth.events
            compactions = {e.id for e in events if e.actions and e.actions.compaction}
            raw = [e for e in events if e.id not in compactions and e.content is not None]
            cells.append(f"{len(written.truth.duplicated)} of {len(raw)}")
        rows[name] = cells
        print(name, cells, file=sys.stderr)
    _table(f"Ground-truth stores (tests/audit/test_audit_truth.py), {kind}", rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("runs", "stores", "paced"))
    parser.add_argument("--kind", default="memory", help="the stores' service (KINDS)")
    parser.add_argument("--margins", type=float, nargs="+", default=MARGINS)
    args = parser.parse_args()
    MARGINS[:] = args.margins
    import warnings

    warnings.simplefilter("ignore")
    if args.only in (None, "stores"):
        stores(args.kind)
    if args.only in (None, "runs"):
        runs(None)
    if args.only in (None, "paced"):
        runs(Pace())


if __name__ == "__main__":
    main()
