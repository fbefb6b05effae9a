"""Output: human text on stdout, progress on one status line, or one JSON document.

One place decides what a run shows (:func:`show_progress`, :func:`use_colour`):
progress only when stderr is a terminal (as git and pip decide it, so
``contrib audit > gates.txt`` still shows it), never under ``--json``, ``-q``,
``TERM=dumb`` or ``CI`` (``--progress`` forces it, ``--no-progress`` stops it);
colour only on a terminal without ``NO_COLOR``, ``--no-color`` or ``TERM=dumb``.
Everything printed passes through :func:`contrib.secrets.scrub`.

Tables are plain aligned text in a pipe or a file, one row a line, as they
always were; on a terminal :mod:`contrib.termtable` (imported only then) sizes
them to its width and colours the verdicts.  The status line shows a
spinner and the time the step has taken, redrawn by a thread while the work
is silent (a PTX unit, a first clone).

Long work reports through a :class:`Task` (``with ui.task("ptx", total=n) as
task: ... task.step(i, n, unit)``); code below the commands takes a plain
callback (:data:`StepFn` or :data:`contrib.git.repo.ProgressFn`) so it never needs
the UI, and gets ``None`` or a no-op when progress is off.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from contrib.killpoints import reached
from contrib.secrets import scrub

if TYPE_CHECKING:
    from typing import IO, Any

QUIET, NORMAL, VERBOSE = -1, 0, 1

StepFn = Callable[[int, int, str], None]
"""Receives (done, total, what is being worked on now): "3 of 12 units, comm.cu"."""

_DIM, _YELLOW, _RESET = "\x1b[2m", "\x1b[33m", "\x1b[0m"
_MIN_REDRAW_S = 0.1  # a terminal redrawn more often only flickers
_TICK_S = 0.25  # the spinner's beat while the work is silent
_SPINNER = "|/-\\"
_PLAIN_EVERY_S = 5.0  # forced progress to a file or pipe: a line every few seconds


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def show_progress(*, json_mode: bool, verbosity: int, forced: bool | None,
                  env: Mapping[str, str] | None = None,
                  stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> bool:
    """Whether a run shows progress: the one rule every command follows."""
    env = os.environ if env is None else env
    if json_mode or verbosity <= QUIET or forced is False:
        return False
    if forced:
        return True
    if env.get("TERM") == "dumb" or _flag(env, "CI"):
        return False
    del stdout  # stdout may be a file (`contrib audit > gates.txt`): progress is stderr's
    return _isatty(stderr or sys.stderr)


def _columns(stream: IO[str]) -> int:
    """The terminal's width; COLUMNS or 80 where it does not say (0 on a bare pty)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = 0
    if columns <= 0:
        columns = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else 80
    return columns


_colour_off = False  # --no-color


def no_colour() -> None:
    """``--no-color``: no colour codes for the rest of this run, as NO_COLOR says."""
    global _colour_off
    _colour_off = True


def use_colour(stream: IO[str], env: Mapping[str, str] | None = None) -> bool:
    """Colour codes only for a terminal, and never with NO_COLOR (no-color.org),
    ``--no-color`` or TERM=dumb."""
    env = os.environ if env is None else env
    return (not _colour_off and _isatty(stream) and not env.get("NO_COLOR")
            and env.get("TERM") != "dumb")


def prose(text: str, stream: IO[str], *, colour: bool = False) -> str:
    """``text`` as ``stream`` should show it: the one way contrib prints prose (results,
    notes, warnings, errors).  On a terminal each line is wrapped to its width at
    spaces (a path, an identifier or a command is never split; continuations are
    indented under their line), verdicts coloured when ``colour``; in a pipe or a
    file, as it is: one line stays one line, for grep."""
    if not _isatty(stream):
        return text
    from contrib.termtable import render_line

    width = _columns(stream)
    return "\n".join(render_line(line, width=width, colour=colour) for line in text.split("\n"))


def shown_path(path: Path) -> str:
    """``path`` as a message shows it: relative to the current folder when it lies
    inside it (``patchsets/flashinfer/...``, short enough to fit and to paste), else
    whole."""
    try:
        return str(path.relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)


def _aligned(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=False)).rstrip()


def counted(number: int, singular: str, plural: str | None = None) -> str:
    """``1 patch``, ``3 patches``, ``2 entries``: a count in words, never "patch(es)"."""
    if number == 1:
        return f"1 {singular}"
    if plural is None:
        plural = (singular[:-1] + "ies" if singular.endswith("y") and singular[-2:-1] not in "aeiou"
                  else singular + "es" if singular.endswith(("s", "sh", "ch", "x"))
                  else singular + "s")
    return f"{number} {plural}"


class StatusLine:
    """One line on stderr that is redrawn in place (``\\r``, no escape codes, so it
    also works where cursor control does not); plain lines when not a terminal.

    On a terminal it starts with a spinner and ends with the time since the line
    was first shown; a daemon thread redraws it while the work says nothing (a
    PTX unit compiling, a clone between git's reports), so it is never still.
    """

    def __init__(self) -> None:
        self._shown = 0
        self._last = 0.0
        self._text = ""
        self._since: float | None = None
        self._frame = 0
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None

    def show(self, text: str, *, force: bool = False) -> None:
        """Redraw the line with ``text`` (throttled); an empty text clears it."""
        if not text:
            self.clear()
            return
        with self._lock:
            now = time.monotonic()
            interactive = _isatty(sys.stderr)
            self._text = scrub(text).replace("\n", " ")
            if self._since is None:
                self._since = now
            if not force and now - self._last < (_MIN_REDRAW_S if interactive else _PLAIN_EVERY_S):
                return
            self._draw(now, interactive)
        if interactive and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="contrib-spinner", daemon=True)
            self._ticker.start()

    def _draw(self, now: float, interactive: bool) -> None:
        """Write the line (the caller holds the lock)."""
        stream = sys.stderr
        self._last = now
        elapsed = f"  {_elapsed(now - (self._since or now))}"
        if not interactive:
            stream.write(self._text + elapsed + "\n")
        else:
            self._frame = (self._frame + 1) % len(_SPINNER)
            width = max(_columns(stream) - 1, 10) - 2 - len(elapsed)
            body = self._text if len(self._text) <= width else self._text[:width - 3] + "..."
            line = f"{_SPINNER[self._frame]} {body}{elapsed}"
            stream.write("\r" + line + " " * max(self._shown - len(line), 0))
            self._shown = len(line)
        stream.flush()

    def _tick(self) -> None:
        while True:
            time.sleep(_TICK_S)
            with self._lock:
                if self._shown and time.monotonic() - self._last >= _TICK_S:
                    self._draw(time.monotonic(), True)

    def clear(self) -> None:
        """Blank the line so the next output starts at column 0."""
        with self._lock:
            if self._shown:
                sys.stderr.write("\r" + " " * self._shown + "\r")
                sys.stderr.flush()
                self._shown = 0
            self._last = 0.0
            self._since = None


def _elapsed(seconds: float) -> str:
    """``4s``, ``2m05s``: how long the step on the status line has run."""
    whole = int(seconds)
    return f"{whole}s" if whole < 60 else f"{whole // 60}m{whole % 60:02d}s"


class Task:
    """One long piece of work on the status line: ``label  n/N  current item``."""

    def __init__(self, line: StatusLine | None, label: str, total: int | None = None) -> None:
        self._line = line
        self.label = label
        self.total = total
        self.done = 0

    def update(self, detail: str = "", *, done: int | None = None,
               total: int | None = None) -> None:
        """Show what is being worked on now; ``done``/``total`` move the count."""
        if done is not None:
            self.done = done
        if total is not None:
            self.total = total
        if self._line is None:
            return
        count = f" {self.done}/{self.total}" if self.total else ""
        self._line.show(f"{self.label}{count}{'  ' + detail if detail else ''}",
                        force=bool(self.total) and self.done == self.total)

    def advance(self, detail: str = "") -> None:
        """One more item done."""
        self.update(detail, done=self.done + 1)

    def step(self, done: int, total: int, detail: str) -> None:
        """A :data:`StepFn`: hand ``task.step`` to code that counts its own work."""
        self.update(detail, done=done, total=total)

    def message(self, text: str) -> None:
        """A free-form message (e.g. git's own progress) after the label."""
        self.update(text)


class _Held(io.StringIO):
    """A terminal's output held for the pager: a terminal still, of the same width."""

    def __init__(self, terminal: IO[str]) -> None:
        super().__init__()
        self._terminal = terminal

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._terminal.fileno()


def _page(text: str, terminal: IO[str]) -> None:
    """``text`` on ``terminal``, through the pager when it does not fit."""
    pager = os.environ.get("PAGER", "less")
    try:
        rows = os.get_terminal_size(terminal.fileno()).lines
    except (OSError, ValueError):
        rows = 0
    if not text or pager in ("", "cat") or rows <= 0 or text.count("\n") < rows:
        terminal.write(text)
        terminal.flush()
        return
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")  # quit if one screen, keep colour, no clearing
    try:
        subprocess.run(pager, shell=True, input=text, text=True, env=env, check=False,
                       stdout=terminal)
    except OSError:  # no shell: print it as it is
        terminal.write(text)
        terminal.flush()


class UI:
    """Where a command reports: human text, a status line, or one JSON document."""

    def __init__(self, json_mode: bool = False, *, verbosity: int = NORMAL,
                 progress: bool | None = None) -> None:
        self.json_mode = json_mode
        self.verbosity = verbosity
        self.show_progress = show_progress(json_mode=json_mode, verbosity=verbosity,
                                           forced=progress)
        self._line = StatusLine() if self.show_progress else None

    @property
    def progress(self) -> Callable[[str], None] | None:
        """The status line as a function of one message, or None when progress is off.

        Pass it to :meth:`contrib.git.cache.Mirror.ensure` and git's own fetch
        progress appears on it; an empty message clears it.
        """
        return self._line.show if self._line is not None else None

    @contextmanager
    def task(self, label: str, total: int | None = None) -> Iterator[Task]:
        """A :class:`Task` on the status line for the ``with`` block (a silent one when
        progress is off), cleared at the end."""
        task = Task(self._line, label, total)
        try:
            yield task
        finally:
            self.done()

    @contextmanager
    def paged(self) -> Iterator[None]:
        """Human output of the block through a pager when it is longer than the terminal
        is tall, as git does: ``$PAGER`` (run by the shell), else ``less`` with
        ``LESS=FRX`` unless set; ``PAGER=cat`` or an empty one, a pipe or a file, and
        --json print as they are."""
        if self.json_mode or not _isatty(sys.stdout):
            yield
            return
        real = sys.stdout
        held = _Held(real)
        sys.stdout = held
        try:
            yield
        finally:
            sys.stdout = real
            _page(held.getvalue(), real)

    def done(self) -> None:
        """Clear the status line (before other output, and when the command ends)."""
        if self._line is not None:
            self._line.clear()

    @property
    def colour_on_stdout(self) -> bool:
        """Whether stdout takes colour (a terminal, no NO_COLOR or --no-color, not --json)."""
        return not self.json_mode and use_colour(sys.stdout)

    def info(self, message: str, *, as_is: bool = False) -> None:
        """A human line on stdout (suppressed under --json); on a terminal wrapped to
        its width with verdicts coloured, unless ``as_is`` (git's coloured output)."""
        if not self.json_mode:
            self.done()
            text = scrub(message)
            if not as_is:
                text = prose(text, sys.stdout, colour=use_colour(sys.stdout))
            sys.stdout.write(text + "\n")

    def step(self, message: str) -> None:
        """A line on stderr saying what is happening (suppressed by --json and -q)."""
        reached("step")
        if not self.json_mode and self.verbosity > QUIET:
            self._stderr(message, _DIM)

    def trace(self, message: str) -> None:
        """A ``-v`` line on stderr (e.g. each git command); --json keeps stdout clean."""
        if self.verbosity >= VERBOSE:
            self._stderr("+ " + message, _DIM)

    def warn(self, message: str) -> None:
        """A warning on stderr (shown even with -q)."""
        self._stderr(message, _YELLOW)

    def _stderr(self, message: str, colour: str) -> None:
        self.done()
        text = prose(scrub(message), sys.stderr)
        if use_colour(sys.stderr):
            text = colour + text + _RESET
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
              wrap: Sequence[str] = (), keys: Sequence[str] = ()) -> None:
        """Aligned columns on stdout (suppressed by --json).

        In a pipe or a file: plain text, one row a line, so it greps well.  On a
        terminal: sized to its width; the columns named in ``wrap`` (default: the
        last) wrap, then move under the row with the others, never the ``keys``
        (default: the first column), which are never cut; the header bold and
        verdicts coloured.  ``title``
        names the table for a reader of the code (the header says what it is).
        """
        if self.json_mode:
            return
        self.done()
        cells = [[scrub(" ".join(str("" if cell is None else cell).split())) for cell in row]
                 for row in rows]
        if _isatty(sys.stdout):
            from contrib.termtable import render_table

            sys.stdout.write(render_table(list(columns), cells, width=_columns(sys.stdout),
                                          colour=use_colour(sys.stdout), wrap=wrap,
                                          keys=keys) + "\n")
            return
        widths = [max([len(column), *(len(row[n]) for row in cells if n < len(row))])
                  for n, column in enumerate(columns)]
        lines = [_aligned(columns, widths), *(_aligned(row, widths) for row in cells)]
        sys.stdout.write("\n".join(lines) + "\n")

    def emit(self, document: Any) -> None:
        """The one JSON document of a --json run."""
        if self.json_mode:
            import json

            sys.stdout.write(scrub(json.dumps(document, indent=2, sort_keys=True, default=str)))
            sys.stdout.write("\n")
            sys.stdout.flush()
