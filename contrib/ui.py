"""Output: human tables on stdout, or exactly one JSON document with --json.

Everything printed passes through :func:`contrib.secrets.scrub`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from contrib.secrets import scrub


class UI:
    """Where a command reports: human text, or one JSON document."""

    def __init__(self, json_mode: bool = False) -> None:
        self.json_mode = json_mode
        # Piped output (CI logs, `| less`) gets wide tables instead of rich's 80 columns.
        width = None if sys.stdout.isatty() else 160
        self.out = Console(highlight=False, soft_wrap=True, width=width)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True, width=width)

    @property
    def progress(self) -> bool:
        """Show fetch progress only to a person at a terminal."""
        return not self.json_mode and sys.stderr.isatty()

    def info(self, message: str) -> None:
        """A human line on stdout (suppressed under --json)."""
        if not self.json_mode:
            self.out.print(scrub(message), markup=False)

    def step(self, message: str) -> None:
        """A progress line on stderr (suppressed under --json)."""
        if not self.json_mode:
            self.err.print(scrub(message), markup=False, style="dim")

    def warn(self, message: str) -> None:
        self.err.print(scrub(message), markup=False, style="yellow")

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        if self.json_mode:
            return
        table = Table(title=title, title_justify="left", show_lines=False)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            # Text, not markup: a cell may hold "[...]" from a file (a hostname, a title)
            table.add_row(*(Text(scrub("" if cell is None else str(cell))) for cell in row))
        self.out.print(table)

    def emit(self, document: Any) -> None:
        """The one JSON document of a --json run."""
        if self.json_mode:
            sys.stdout.write(scrub(json.dumps(document, indent=2, sort_keys=True, default=str)))
            sys.stdout.write("\n")
            sys.stdout.flush()
