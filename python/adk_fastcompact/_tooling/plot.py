"""`bench --plot`: the benchmark's report as a figure (matplotlib, optional)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .bench_options import SIZED_REGIMES as _SIZED

if TYPE_CHECKING:
    from .bench_report import Report, Row

SIZE_OPS = ("process+recover", "sliding_window", "token_threshold")
"""The operations drawn against session size (in the cold and warm panels)."""

_TURN = "turn"
_COLORS = {"python": "tab:blue", "rust": "tab:orange"}
_DECLINED = "tab:red"

WHAT_IT_DRAWS = (
    f"--plot draws {', '.join(SIZE_OPS)} against session size (cold and warm: two sizes "
    "or more) and the turn regime's per-turn overhead against turn number (two "
    "checkpoints or more)"
)
"""What a figure needs, for the line printed when there is nothing to draw."""


def panels(points: Iterable[tuple[str, str, int]]) -> list[str]:
    """The panels a figure of `points` has, as (regime, operation, x) (x the
    session size; the turn number in the turn regime): a sized regime where
    one of `SIZE_OPS` has two sizes or more, the turn regime where it has two
    checkpoints or more. A panel of one point per line would be an empty
    frame on log axes: it is left out, and an empty list means no figure."""
    xs: dict[tuple[str, str], set[int]] = {}
    for regime, op, x in points:
        if regime == _TURN or (regime in _SIZED and op in SIZE_OPS):
            xs.setdefault((regime, op if regime != _TURN else ""), set()).add(x)
    drawn = {regime for (regime, _), seen in xs.items() if len(seen) >= 2}
    return [regime for regime in (*_SIZED, _TURN) if regime in drawn]


def _points(rows: Sequence[Row]) -> list[tuple[str, str, int]]:
    return [(row["regime"], row["op"], _x(row)) for row in rows]


def _x(row: Row) -> int:
    """Where `row` stands on its panel's x axis: the session size, or the turn."""
    turn = row.get("turn")
    return turn if isinstance(turn, int) and row["regime"] == _TURN else row["events"]


def describe(drawn: Sequence[str]) -> str:
    """What a figure of the panels `drawn` shows, in words."""
    said = {
        "cold": "cold time per call",
        "warm": "warm time per call",
        "turn": "per-turn overhead",
    }
    return ", ".join(said[regime] for regime in drawn)


def plot(report: Report, path: Path) -> list[str]:
    """Writes `report` to `path`: time per call against session size
    (log-log, one panel per regime, Python dashed and Rust solid per
    operation) and per-turn overhead against turn number; returns the
    panels drawn (`panels`), and writes nothing when there are none.

    A Rust point whose row declined (`Row.declines`) is crossed in red, and
    the figure says how often: such a point is partly google-adk's own time,
    and a figure shown without its table must not pass it off as Rust's.
    """
    drawn = panels(_points(report.rows))
    if not drawn:
        return drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .bench_report import total_declines

    rows = report.rows
    regimes = [r for r in _SIZED if r in drawn]
    turn_rows = [row for row in rows if row["regime"] == _TURN] if _TURN in drawn else []
    figure, axes = plt.subplots(1, len(drawn), figsize=(5.5 * len(drawn), 4.5), squeeze=False)
    markers = dict(zip(SIZE_OPS, ("o", "s", "^"), strict=True))
    for axis, regime in zip(axes[0], regimes, strict=False):
        for op in SIZE_OPS:
            points = sorted(
                (row["events"], row["python_ms"], row["rust_ms"])
                for row in rows
                if row["regime"] == regime and row["op"] == op
            )
            if not points:
                continue
            sizes = [p[0] for p in points]
            for column, (side, style) in enumerate((("python", "--"), ("rust", "-")), 1):
                axis.plot(
                    sizes,
                    [p[column] for p in points],
                    style,
                    marker=markers[op],
                    color=_COLORS[side],
                    label=f"{op} ({side})",
                )
            _cross_declined(
                axis,
                [row for row in rows if row["regime"] == regime and row["op"] == op],
                "events",
            )
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("events in the session")
        axis.set_ylabel("ms per call")
        axis.set_title(f"{regime}: time per call")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    if turn_rows:
        axis = axes[0][-1]
        turns = [row.get("turn", 0) for row in turn_rows]
        axis.plot(
            turns,
            [row["python_ms"] for row in turn_rows],
            "--o",
            color=_COLORS["python"],
            label="python",
        )
        axis.plot(
            turns, [row["rust_ms"] for row in turn_rows], "-o", color=_COLORS["rust"], label="rust"
        )
        _cross_declined(axis, turn_rows, "turn")
        axis.set_xlabel("turn")
        axis.set_ylabel("ms per turn in compaction + filtering")
        axis.set_title("turn: per-turn overhead")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    declined = total_declines(rows)
    if declined:
        reasons = ", ".join(f"{reason}: {count:,}" for reason, count in sorted(declined.items()))
        figure.text(
            0.5,
            0.01,
            f"x: the Rust core declined ({reasons}); those Rust times are partly google-adk's",
            ha="center",
            color=_DECLINED,
            fontsize=8,
        )
        figure.tight_layout(rect=(0, 0.04, 1, 1))
    else:
        figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return drawn


def _cross_declined(axis: Any, rows: Sequence[Row], x: str) -> None:
    """Crosses the Rust points of the `rows` that declined."""
    points = [(row.get(x, 0), row["rust_ms"]) for row in rows if row["declines"]]
    if points:
        axis.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            "x",
            color=_DECLINED,
            markersize=10,
            markeredgewidth=2,
            zorder=5,
        )
