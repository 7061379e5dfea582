"""What the command line's subcommands share: argument types and the error line."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def _int_from(lowest: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least `lowest`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"must be >= {lowest}, got {value}")
        return value

    return parse


positive_int = _int_from(1)
count = _int_from(0)


def error_line(console: Console, message: str) -> None:
    from rich.markup import escape

    # One line, whatever the width: scripts and CI logs grep it.
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
