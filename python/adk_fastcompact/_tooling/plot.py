"""`bench --plot`: the benchmark's report as a figure (matplotlib, optional)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bench import Report, Row

_SIZE_OPS = ("process+recover", "sliding_window", "token_threshold")
_COLORS = {"python": "tab:blue", "rust": "tab:orange"}
_DECLINED = "tab:red"


def plot(report: Report, path: Path) -> None:
    """Writes `report` to `path`: time per call against session size
    (log-log, one panel per regime, Python dashed and Rust solid per
    operation) and per-turn overhead against turn number.

    A Rust point whose row declined (`Row.declines`) is crossed in red, and
    the figure says how often: such a point is partly google-adk's own time,
    and a figure shown without its table must not pass it off as Rust's.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .bench import total_declines

    rows = report.rows
    regimes = [r for r in ("cold", "warm") if any(row["regime"] == r for row in rows)]
    turn_rows = [row for row in rows if row["regime"] == "turn"]
    panels = len(regimes) + bool(turn_rows)
    if panels == 0:
        raise ValueError("nothing to plot: the report has no timed rows")
    figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.5), squeeze=False)
    markers = dict(zip(_SIZE_OPS, ("o", "s", "^"), strict=True))
    for axis, regime in zip(axes[0], regimes, strict=False):
        for op in _SIZE_OPS:
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
