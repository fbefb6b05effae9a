"""A plain ``contrib sync``, run without click; a no-op one answered from an index.

An autopilot runs ``contrib sync`` many times an hour, and nearly every run
finds each patchset already on its upstream's tip.  For that answer the full
command loads click, two TOML readers and the rebase machinery: several times
the interpreter's own start plus the one ``git fetch`` the answer needs (issue 12).

So, as git keeps its index, a full ``sync`` records what it read in
``.contrib/sync-index.json`` (:func:`record`): each patchset's base and series,
and the identity (inode, size, change times) of every file and folder that
decided them.  :func:`run` sees a plain sync command line first (targets,
``--no-fetch``, ``--json``, ``-q``, ``--progress``/``--no-progress``,
``-C DIR``; anything else goes to click).  When the index still matches the
workspace, the fetch succeeds and every selected patchset is on its tip, it
prints exactly what the full command prints and exits 0.

Otherwise the sync command itself runs (:func:`_full`), still without click:
a file or folder changed since the index was written, a pending conflict, an
interrupted transaction, a busy lock, a moved tip, a failed fetch, an
unexpected error.  Nothing is printed before that decision except the
"fetching" step, and the sync neither repeats that step nor the fetch
(:data:`contrib.git.process.prefetched`).  ``CONTRIB_NO_QUICK=1`` leaves every
command line to click.

An entry changed shortly before the index was written is not trusted (git's
"racily clean" rule): a second change within the same clock tick could leave
its size and times as recorded.  The margin is 0.1 s where the file system
keeps sub-second times, 2 s where it keeps whole seconds; the next full sync
writes the index again, and from then on the entry is trusted.

Only the standard library's process and text modules load on the way to the
index's answer (tests/test_startup.py checks it).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

from contrib import __version__, environ
from contrib.errors import ContribError, GitError
from contrib.git.process import fetch, prefetched, spawn
from contrib.ui import NORMAL, QUIET, UI
from contrib.workspace.layout import (
    CONFIG_NAME,
    META_NAME,
    SERIES_NAME,
    STATE_DIR,
    SYNC_STATE_NAME,
    find_root,
)
from contrib.workspace.lockfile import FileLock, LockTimeout, note_holder

TYPE_CHECKING = False  # typing itself costs a no-op sync several milliseconds
if TYPE_CHECKING:
    from typing import Any

    from contrib.workspace.model import Workspace

INDEX_NAME = "sync-index.json"
FORMAT = 1
_FINE_MARGIN_NS = 100_000_000  # 0.1 s: a coarse kernel clock lags by one tick (<= 10 ms)
_WHOLE_SECOND_MARGIN_NS = 2_000_000_000  # FAT keeps 2 s, ext3 and HFS+ 1 s
_SECOND = 1_000_000_000
COLUMNS = ("patchset", "result", "from", "to", "commits", "probes", "details")  # sync's table

Stat = list[int] | None  # [inode, size, mtime_ns, ctime_ns, mode], or None: absent


class Handover(Exception):  # a decision, not an error
    """The quick path cannot answer; the full command runs."""


# -- the command line ------------------------------------------------------------

_GROUP_FLAGS = {"-q": "quiet", "--quiet": "quiet", "--progress": "progress",
                "--no-progress": "no-progress"}
_SYNC_FLAGS = {**_GROUP_FLAGS, "--no-fetch": "no-fetch", "--json": "json"}


class Request:
    """A plain ``contrib sync`` command line, parsed."""

    def __init__(self) -> None:
        self.directory: str | None = None
        self.targets: list[str] = []
        self.fetch = True
        self.json_mode = False
        self.quiet = False
        self.progress: bool | None = None

    def flag(self, name: str) -> None:
        if name == "quiet":
            self.quiet = True
        elif name in ("progress", "no-progress"):
            self.progress = name == "progress"
        elif name == "no-fetch":
            self.fetch = False
        else:
            self.json_mode = True


def parse(argv: list[str]) -> Request | None:
    """``[-C DIR] [-q] [--[no-]progress] sync [TARGET | --no-fetch | --json | -q |
    --[no-]progress]...``, or None for any other command line (click parses those)."""
    request = Request()
    args = iter(argv)
    for arg in args:
        if arg == "sync":
            break
        if arg == "-C":
            request.directory = next(args, None)
            if (not request.directory or request.directory.startswith("-")
                    or os.path.isfile(request.directory)):
                return None  # click refuses it, with its own message
        elif arg in _GROUP_FLAGS:
            request.flag(_GROUP_FLAGS[arg])
        else:
            return None
    else:
        return None
    for arg in args:
        if arg in _SYNC_FLAGS:
            request.flag(_SYNC_FLAGS[arg])
        elif arg.startswith("-") or not arg.strip("/"):
            return None
        else:
            request.targets.append(arg.strip("/"))
    return request


# -- the index -------------------------------------------------------------------

def _stat(path: str) -> Stat:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode]


def _entries(index: dict[str, Any]) -> list[str]:
    """The relative paths whose identity the index vouches for."""
    paths = [CONFIG_NAME, f"{STATE_DIR}/{SYNC_STATE_NAME}", f"{STATE_DIR}/.gitignore",
             "patchsets"]
    paths += index["folders"]
    for ps in index["patchsets"]:
        folder = f"patchsets/{ps['target']}"
        paths += [f"{folder}/{META_NAME}", f"{folder}/{ps['base']}",
                  f"{folder}/{ps['base']}/{SERIES_NAME}"]
    return paths


def _folders(root: str) -> list[str]:
    """Every entry of patchsets/ and of each folder in it: a patchset made, removed,
    renamed or replaced by a link changes one of them."""
    found = []
    base = os.path.join(root, "patchsets")
    try:
        ups = sorted(os.listdir(base))
    except (FileNotFoundError, NotADirectoryError):
        return []
    for up in ups:
        found.append(f"patchsets/{up}")
        try:
            found += [f"patchsets/{up}/{name}" for name in sorted(os.listdir(f"{base}/{up}"))]
        except NotADirectoryError:
            continue
    return found


def record(ws: Workspace) -> None:
    """Write the index for ``ws`` after a full sync (under the workspace lock).

    A workspace the full command cannot read whole (a broken patchset.toml, a
    bad state file) gets no index.
    """
    from contrib.carry.conflict import load_state
    from contrib.git.cache import Mirror
    from contrib.workspace.txn import atomic_write

    path = ws.state_dir / INDEX_NAME
    root = str(ws.root)
    stamp = time.time_ns()  # before any stat: a change after it is later than the margin
    try:
        pending = set(load_state(ws.state_dir))
        patchsets = ws.all_patchsets()
        items = [{"target": ps.target, "upstream": ps.upstream, "base": ps.current.base,
                  "series": ps.current.series(), "pending": ps.target in pending}
                 for ps in patchsets]
        upstreams = {}
        for name, upstream in ws.config.upstreams.items():
            mirror = Mirror(upstream)
            upstreams[name] = {"cache": str(mirror.path), "tip_ref": mirror.tip_ref}
        index: dict[str, Any] = {
            "format": FORMAT, "contrib": __version__, "root": root, "stamp_ns": stamp,
            "cache_root": environ.cache_root_text(), "upstreams": upstreams, "patchsets": items,
            "folders": _folders(root)}
        index["files"] = {rel: _stat(os.path.join(root, rel)) for rel in _entries(index)}
    except (ContribError, OSError):  # a cache: it never fails a sync that is done
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        return
    try:
        atomic_write(path, json.dumps(index, indent=1, sort_keys=True) + "\n",
                     scratch=ws.state_dir / "txn")
    except ContribError:  # cannot write .contrib/: the sync itself is done; stay slow
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _load(root: str) -> dict[str, Any]:
    """The index of the workspace at ``root``, checked against what is on disk now."""
    try:
        with open(os.path.join(root, STATE_DIR, INDEX_NAME), encoding="utf-8") as handle:
            index = json.load(handle)
    except (OSError, ValueError):
        raise Handover from None
    if (not isinstance(index, dict) or index.get("format") != FORMAT
            or index.get("contrib") != __version__ or index.get("root") != root):
        raise Handover
    if _folders(root) != index["folders"]:
        raise Handover
    files = index["files"]
    if sorted(_entries(index)) != sorted(files):
        raise Handover
    recorded = [stat for stat in files.values() if stat is not None]
    whole = all(stat[2] % _SECOND == 0 and stat[3] % _SECOND == 0 for stat in recorded)
    newest = index["stamp_ns"] - (_WHOLE_SECOND_MARGIN_NS if whole else _FINE_MARGIN_NS)
    for rel, stat in files.items():
        if _stat(os.path.join(root, rel)) != stat:
            raise Handover
        if stat is not None and max(stat[2], stat[3]) >= newest:
            raise Handover  # racily clean: a change in the same tick would not show
    return index


# -- the answer ------------------------------------------------------------------

def _select(index: dict[str, Any], targets: list[str]) -> list[dict[str, Any]]:
    """The patchsets ``targets`` name, in the full command's order."""
    every = index["patchsets"]
    if not targets:
        chosen = list(every)
    else:
        chosen = []
        for target in targets:
            if "/" in target:
                hits = [ps for ps in every if ps["target"] == target]
            elif target in index["upstreams"]:
                hits = [ps for ps in every if ps["upstream"] == target]
            else:
                hits = []
            if not hits:
                raise Handover  # the full command names what is wrong
            chosen += [ps for ps in hits if ps not in chosen]
    if not chosen or any(ps["pending"] for ps in chosen):
        raise Handover
    return chosen


def _cache(index: dict[str, Any], name: str) -> str:
    """The cached clone of upstream ``name``, where the full command would use it."""
    cache = str(index["upstreams"][name]["cache"])
    root = str(index["cache_root"])
    if environ.cache_root_text() != root or not os.path.isdir(cache):
        raise Handover
    here = root
    for part in os.path.relpath(cache, root).split(os.sep):
        here = os.path.join(here, part)
        if os.path.islink(here):
            raise Handover  # the full command refuses it, with its message
    return cache


def _tip(cache: str, ref: str) -> str:
    status, out, _ = spawn(["rev-parse", "--verify", "--quiet", "--end-of-options",
                            f"{ref}^{{commit}}"], cwd=cache, env=None, input=None, timeout=None)
    if status != 0:
        raise Handover
    return out.decode().strip()


def _fetch(ui: UI, name: str, cache: str) -> None:
    """Fetch as :meth:`contrib.git.cache.Mirror.ensure` does, under the cache lock; the
    result (success or the error) is kept for the full command."""
    lock = FileLock(cache + ".lock", 0)
    try:
        lock.acquire()
    except LockTimeout:
        raise Handover from None  # the full command waits for it
    progress = ui.progress
    try:
        ui.step(f"fetching {name} ...")
        labelled = None if progress is None else (lambda message: progress(f"{name}: {message}"))
        try:
            fetch(cache, "origin", progress=labelled)
            prefetched[cache] = None
        except GitError as exc:
            prefetched[cache] = exc
            raise Handover from None
    finally:
        if progress is not None:
            progress("")
        lock.release()


class _Ready:
    """A decided answer: the workspace lock is held until it is shown."""

    def __init__(self, lock: FileLock, ui: UI, chosen: list[dict[str, Any]]) -> None:
        self.lock, self.ui, self.chosen = lock, ui, chosen

    def show(self) -> int:
        try:
            _show(self.ui, self.chosen)
        finally:
            self.ui.done()
            self.lock.release()
        return 0


def _decide(request: Request) -> _Ready:
    """Everything the answer needs, checked; :class:`Handover` (or any error) when the
    full command must run.  Prints nothing but the fetch step and its progress."""
    environ.check()
    root = find_root(request.directory)
    if root is None:
        raise Handover  # the full command says where it looked
    state = os.path.join(root, STATE_DIR)
    lock = FileLock(os.path.join(state, "lock"), 0)
    try:
        lock.acquire()
    except (LockTimeout, FileNotFoundError):
        raise Handover from None  # busy: the full command waits, and says who holds it
    ui = UI(request.json_mode, verbosity=QUIET if request.quiet else NORMAL,
            progress=request.progress)
    try:
        txn = os.path.join(state, "txn")
        if os.path.isdir(txn) and os.listdir(txn):
            raise Handover  # an interrupted transaction: the full command recovers it
        index = _load(root)
        chosen = _select(index, request.targets)
        note_holder(os.path.join(state, "lock.pid"))
        tips = {}
        for name in sorted({ps["upstream"] for ps in chosen}):
            cache = _cache(index, name)
            if request.fetch:
                _fetch(ui, name, cache)
            tips[name] = _tip(cache, index["upstreams"][name]["tip_ref"])
        if any(ps["base"] != tips[ps["upstream"]] for ps in chosen):
            raise Handover  # there is work to do
    except BaseException:
        ui.done()
        lock.release()
        raise
    return _Ready(lock, ui, chosen)


def _show(ui: UI, chosen: list[dict[str, Any]]) -> None:
    """What :func:`contrib.carry.report.show` shows for patchsets on their tip."""
    with ui.task("sync", total=len(chosen)) as task:
        for ps in chosen:
            task.update(ps["target"])
            task.advance(ps["target"])
    rows = [[ps["target"], "unchanged", ps["base"][:10], ps["base"][:10], "", "",
             f"{len(ps['series'])} patch(es)"] for ps in chosen]
    ui.table("sync", COLUMNS, rows)
    ui.emit({"commit": None, "results": [
        {"base": ps["base"], "commits": 0, "conflict": None, "error": None, "notes": [],
         "patches": ps["series"], "patchset": ps["target"], "probes": 0,
         "result": "unchanged", "target": ps["base"], "upstreamed": [], "version": None}
        for ps in chosen]})
    sys.stdout.flush()


def run(argv: list[str]) -> int | None:
    """The exit code of a plain sync, answered here or carried out by the full sync
    command without click; None for any other command line (click parses it)."""
    if os.environ.get("CONTRIB_NO_QUICK", "").strip() not in ("", "0"):
        return None
    request = parse(argv)
    if request is None:
        return None
    from contrib.runner import guarded

    try:
        return guarded(lambda: _run(request), request.json_mode)
    finally:
        prefetched.clear()  # kept for this one command only


def _run(request: Request) -> int:
    try:
        ready = _decide(request)
    except (Handover, ContribError, OSError, ValueError, KeyError, TypeError, IndexError):
        return _full(request)  # the index cannot answer: the whole sync decides, and reports
    return ready.show()  # from here on the answer is given: nothing runs it again


def _full(request: Request) -> int:
    """What ``contrib sync`` does through click, for a command line parsed here."""
    from pathlib import Path

    from contrib.commands.sync import sync
    from contrib.runner import locked

    ui = UI(request.json_mode, verbosity=QUIET if request.quiet else NORMAL,
            progress=request.progress)
    directory = None if request.directory is None else Path(request.directory)
    return locked(directory, ui, lambda ws, ui: sync(
        ws, ui, request.targets, to=None, commit=False, continue_=False, abort=False,
        fetch=request.fetch))
