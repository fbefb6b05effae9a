"""What every command of the command line receives: the :class:`Context` (the workspace
folder, how to print, which lock the command runs under) and the options every command
shares (``-C DIR``, ``-q``/``-v``, ``--progress``, ``--no-colour``, ``--json``, the
example that ends its ``--help``).

It stays as light as :mod:`contrib.cli`: the runner and the workspace load inside the
methods that use them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from contrib.ui import NORMAL, QUIET, UI, VERBOSE, no_colour

if TYPE_CHECKING:  # the workspace model loads when a command asks for it, not at start-up
    from contrib.workspace.model import Workspace


class Context:
    """What every command receives: where the workspace is, how to print."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self.verbosity = NORMAL
        self.progress: bool | None = None
        self.ui = UI()

    def make_ui(self, json_mode: bool) -> UI:
        """The UI for this run, from --json, -q/-v and --progress (see contrib.ui)."""
        from contrib.git.process import trace_commands

        self.ui = UI(json_mode, verbosity=self.verbosity, progress=self.progress)
        trace_commands(self.ui.trace if self.verbosity >= VERBOSE else None)
        return self.ui

    def workspace(self) -> Workspace:
        from contrib.workspace.model import Workspace

        return Workspace.find(self.directory)

    def locked(self, json_mode: bool, body: Callable[[Any, UI], int]) -> int:
        """``body(workspace, ui)`` holding the workspace lock (a command that writes)."""
        from contrib.runner import locked

        return locked(self.directory, self.make_ui(json_mode), body)

    def unlocked(self, json_mode: bool, body: Callable[[Any, UI], int]) -> int:
        """``body(workspace, ui)`` with no lock (it writes only what has a lock of its own)."""
        from contrib.runner import unlocked

        return unlocked(self.directory, self.make_ui(json_mode), body)

    def reading(self, json_mode: bool, body: Callable[[Any, UI], int]) -> int:
        """``body(workspace, ui)`` reading only: it never waits on a writer."""
        from contrib.runner import reading

        return reading(self.directory, self.make_ui(json_mode), body)


pass_ctx = click.make_pass_decorator(Context)


def _set_quiet(click_ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value:
        click_ctx.ensure_object(Context).verbosity = QUIET


def _set_verbose(click_ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value:
        click_ctx.ensure_object(Context).verbosity = VERBOSE


def _set_progress(click_ctx: click.Context, _: click.Parameter, value: bool | None) -> None:
    if value is not None:
        click_ctx.ensure_object(Context).progress = value


def _set_no_colour(_ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value:
        no_colour()


def _set_directory(click_ctx: click.Context, _: click.Parameter, value: Path | None) -> None:
    if value is not None:
        click_ctx.ensure_object(Context).directory = value


# -C DIR before the command (git's place) or after it, among the command's options.
DIR_TYPE = click.Path(exists=True, file_okay=False, path_type=Path)
DIR_HELP = "Run as if started in DIR (the workspace or below it)."

_OUTPUT_OPTIONS = (
    click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=_set_quiet,
                 help="No progress and no step messages: results, warnings and errors only."),
    click.option("-v", "--verbose", is_flag=True, expose_value=False, callback=_set_verbose,
                 help="Also show each git command run (tokens hidden)."),
    click.option("--progress/--no-progress", default=None, expose_value=False,
                 callback=_set_progress,
                 help="Force progress on (even without a terminal or with CI set) or off."),
    click.option("--no-color", "--no-colour", is_flag=True, expose_value=False,
                 callback=_set_no_colour, help="No colour, as NO_COLOR=1 says."),
)


def output_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """-q/--quiet, -v/--verbose and --progress/--no-progress (stored on the Context)."""
    for option in reversed(_OUTPUT_OPTIONS):
        func = option(func)
    return func


def json_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--json (passed as ``json_mode``) plus the :func:`output_options` and ``-C DIR``."""
    func = output_options(func)
    func = click.option("-C", "workdir", expose_value=False, callback=_set_directory,
                        type=DIR_TYPE, help=DIR_HELP)(func)
    return click.option("--json", "json_mode", is_flag=True,
                        help="Print one JSON document on stdout and nothing else there.")(func)


def example(*lines: str) -> str:
    """The epilog every command's --help ends with: one example."""
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)
