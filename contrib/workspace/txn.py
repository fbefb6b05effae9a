"""Atomic writes and multi-file transactions for the workspace.

A single file is written aside and renamed over its target.  A change that
touches several paths (a new version directory *and* ``patchset.toml``) is a
:class:`Transaction`: everything is staged first under ``.contrib/txn/ID/``;
then a plan file is renamed into place -- the commit point -- and the staged
paths are renamed over their targets.  A run killed before the commit point
leaves the workspace as it was (the stage is swept later); one killed after
it is rolled forward by :func:`recover` on the next run, under the lock.
Replaced directories are moved to ``.contrib/superseded/``, never deleted; a
directory the transaction removes (a pruned version, whose history is in the
workspace repository) is renamed into the stage in one step and deleted from
there, so a run killed meanwhile leaves it either in place or gone, never half.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
import time
import uuid
from pathlib import Path

from contrib.errors import ContribError
from contrib.killpoints import reached

PLAN_VERSION = 1


_NAME_MAX = 255  # bytes in one path component on every common file system
_ESCAPED = re.compile("[\udc80-\udcff]")


def utf8(text: str) -> str:
    """``text`` as contrib writes text files: valid UTF-8 whatever git handed over.

    Patch headers and commit messages that are not UTF-8 (a Latin-1 Subject: with
    no declared charset) reach Python as surrogate escapes, which cannot be
    written as UTF-8; each such byte is read as Latin-1 instead, the reading
    mail clients give undeclared 8-bit text.  The patch files themselves are
    written as bytes and keep the original bytes.
    """
    return _ESCAPED.sub(lambda m: chr(ord(m.group()) - 0xDC00), text)


def _encode(data: bytes | str) -> bytes:
    return utf8(data).encode("utf-8") if isinstance(data, str) else data


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (best effort on filesystems without it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# The process's umask, read once while nothing else runs (os.umask can only be read by
# setting it); a new file gets 0666 less it, as open() would give it.
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _mode_for(path: Path) -> int:
    """The mode a replaced file keeps, or a new file's (0644 under the usual umask)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~_UMASK


def atomic_write(path: Path, data: bytes | str, *, scratch: Path | None = None) -> None:
    """Write ``data`` to ``path`` by writing a temp file and renaming it over ``path``.

    The temp file is a sibling, or lives in ``scratch`` (same filesystem) so that
    a run killed mid-write leaves no litter among the user's files: contrib's
    ``.contrib/txn/`` is swept by :func:`recover`.
    """
    raw = _encode(data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        where = path.parent
        if scratch is not None:
            scratch.mkdir(parents=True, exist_ok=True)
            if scratch.stat().st_dev == where.stat().st_dev:
                where = scratch
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=where)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fchmod(handle.fileno(), _mode_for(path))  # mkstemp's 0600 is no file's mode
            os.fsync(handle.fileno())
        reached("write")
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise cannot_write(path, exc) from None
    fsync_dir(path.parent)
    reached("written")


def check_inside(root: Path, path: Path) -> None:
    """Refuse to write ``path`` unless it lies inside ``root`` through real folders only.

    A symlinked component (a version folder linked elsewhere) would redirect the
    write outside the workspace or cache; nothing is written then (exit 2).
    """
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise ContribError(f"{path}: outside {root}; contrib writes only inside the workspace "
                           "and the upstream cache") from None
    if ".." in rel.parts:
        raise ContribError(f"{path}: leaves {root} through '..'; nothing was written")
    here = root
    for part in rel.parts:
        if len(os.fsencode(part)) > _NAME_MAX:
            raise ContribError(f"{here / part}: the name {part[:40]!r}... is longer than the file "
                               f"system allows ({_NAME_MAX} bytes); choose a shorter name. "
                               "Nothing was written")
        here = here / part
        if here.is_symlink():
            raise ContribError(f"{here}: is a symlink (to {os.readlink(here)}); contrib does not "
                               "write through symlinks: replace it with a real folder or file. "
                               "Nothing was written")


def cannot_write(path: Path, exc: OSError) -> ContribError:
    """A full disk or a permission problem, as one line saying nothing changed."""
    return ContribError(f"{path}: cannot write: {exc.strerror or exc}; "
                        "nothing was changed (free space or fix permissions)")


class Transaction:
    """Stage files and directories, then install them all or none."""

    def __init__(self, root: Path, state_dir: Path) -> None:
        self.root = root
        self.state_dir = state_dir
        self.id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        self.stage = state_dir / "txn" / self.id
        self.ops: list[dict[str, str]] = []

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def _staged(self, target: Path) -> Path:
        check_inside(self.root, target)
        return self.stage / str(len(self.ops)) / target.name

    def write(self, target: Path, data: bytes | str) -> None:
        """Stage ``data`` to replace the file ``target``."""
        staged = self._staged(target)
        try:  # a full disk while staging: __exit__ sweeps the stage, nothing changed
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.write_bytes(_encode(data))
        except OSError as exc:
            raise cannot_write(target, exc) from None
        self.ops.append({"kind": "file", "staged": str(staged), "target": str(target)})
        reached("stage")

    def write_dir(self, target: Path, files: dict[str, bytes | str]) -> None:
        """Stage a whole directory (name -> content) to replace ``target``."""
        staged = self._staged(target)
        try:
            staged.mkdir(parents=True, exist_ok=True)
            for name, data in files.items():
                (staged / name).write_bytes(_encode(data))
        except OSError as exc:
            raise cannot_write(target, exc) from None
        self.ops.append({"kind": "dir", "staged": str(staged), "target": str(target)})
        reached("stage")

    def remove(self, target: Path) -> None:
        """Stage the removal of the directory ``target`` (gone at the commit point)."""
        staged = self._staged(target)
        self.ops.append({"kind": "remove", "staged": str(staged), "target": str(target)})
        reached("stage")

    def commit(self) -> None:
        """Write the plan (the commit point) and install every staged path."""
        if not self.ops:
            shutil.rmtree(self.stage, ignore_errors=True)
            return
        plan = self.state_dir / "txn" / f"{self.id}.json"
        for op in self.ops:  # before the commit point: a refusal then changes nothing
            _check_writable(Path(op["target"]))
        try:
            for op in self.ops:
                if op["kind"] != "remove":
                    _fsync_tree(Path(op["staged"]))
            atomic_write(plan, json.dumps({"version": PLAN_VERSION, "ops": self.ops}, indent=1))
        except (ContribError, OSError) as exc:
            shutil.rmtree(self.stage, ignore_errors=True)
            if isinstance(exc, OSError):
                raise cannot_write(Path(self.ops[0]["target"]), exc) from None
            raise
        reached("commit")
        try:
            _roll_forward(plan, self.state_dir)
        except OSError as exc:  # past the commit point: the next run rolls it forward
            raise ContribError(f"{plan}: interrupted while installing ({exc.strerror or exc}); "
                               "run contrib again to finish it") from None

    def abort(self) -> None:
        shutil.rmtree(self.stage, ignore_errors=True)


def _check_writable(target: Path) -> None:
    """ContribError unless the folder that will receive ``target`` can be written."""
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ContribError(f"{target}: cannot write: {folder} is read-only; nothing was "
                           "changed (fix its permissions)")


def _fsync_tree(path: Path) -> None:
    paths = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for file in paths:
        with open(file, "rb") as handle:
            os.fsync(handle.fileno())


def read_plan(plan: Path, state_dir: Path) -> list[tuple[str, Path, Path]]:
    """A committed plan's operations (kind, staged, target), each checked to stay inside."""
    advice = (f"remove it and the folder {plan.with_suffix('')} (the change it held is then "
              "dropped; the workspace keeps its files as they are)")
    try:
        data = json.loads(plan.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ContribError(f"{plan}: unreadable transaction plan ({exc}); {advice}") from None
    if not isinstance(data, dict) or data.get("version") != PLAN_VERSION:
        raise ContribError(f"{plan}: not a version-{PLAN_VERSION} transaction plan (written by "
                           f"another contrib version?); finish with that version, or {advice}")
    ops, out = data.get("ops"), []
    if not isinstance(ops, list) or set(data) != {"version", "ops"}:
        raise ContribError(f"{plan}: 'ops' must be the only other key, a list; {advice}")
    for index, op in enumerate(ops):
        if (not isinstance(op, dict) or set(op) != {"kind", "staged", "target"}
                or op["kind"] not in ("file", "dir", "remove")
                or not all(isinstance(op[k], str) for k in ("staged", "target"))):
            raise ContribError(f"{plan}: ops[{index}] must be {{kind: file|dir|remove, staged, "
                               f"target}}; {advice}")
        staged, target = Path(op["staged"]), Path(op["target"])
        check_inside(state_dir / "txn", staged)
        check_inside(state_dir.parent, target)
        out.append((str(op["kind"]), staged, target))
    return out


def _roll_forward(plan: Path, state_dir: Path) -> None:
    for kind, staged, target in read_plan(plan, state_dir):
        if kind == "remove":
            if target.exists() or target.is_symlink():
                staged.parent.mkdir(parents=True, exist_ok=True)
                os.replace(target, staged)  # one rename: the folder is there or gone
                fsync_dir(target.parent)
                reached("install")
            continue
        if not staged.exists():
            continue  # installed before an interruption
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "dir" and target.exists():
            keep = state_dir / "superseded" / f"{target.parent.name}-{target.name}-{plan.stem}"
            keep.parent.mkdir(parents=True, exist_ok=True)
            if keep.exists():
                shutil.rmtree(target)  # a previous roll-forward already kept the old one
            else:
                os.replace(target, keep)
        os.replace(staged, target)
        fsync_dir(target.parent)
        reached("install")
    stage = plan.with_suffix("")
    plan.unlink()
    shutil.rmtree(stage, ignore_errors=True)


def recover(state_dir: Path) -> int:
    """Finish committed transactions and sweep uncommitted stages; returns plans finished."""
    txn_dir = state_dir / "txn"
    if not txn_dir.is_dir():
        return 0
    finished = 0
    for plan in sorted(txn_dir.glob("*.json")):
        _roll_forward(plan, state_dir)
        finished += 1
    for leftover in txn_dir.iterdir():
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        elif leftover.name.endswith(".tmp"):
            leftover.unlink(missing_ok=True)
    return finished
