"""The workspace on disk: patchsets, their versions, the lock.

Layout (SPEC.md)::

    contrib.toml
    patchsets/<upstream>/<name>/patchset.toml
    patchsets/<upstream>/<name>/<40-hex base sha>/{series, 0001-*.patch, validation.json}
    .contrib/            # contrib's private state: lock, transactions (git-ignored)
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit import TOMLDocument

from contrib.config import CONFIG_NAME, NAME_RE, Config, load_config
from contrib.errors import ConfigError, ContribError, LockError, PatchError, UsageError
from contrib.lockfile import FileLock, LockTimeout
from contrib.txn import Transaction, atomic_write, recover

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
STATE_DIR = ".contrib"
META_NAME = "patchset.toml"
SERIES_NAME = "series"
VALIDATION_NAME = "validation.json"
# OpenEmbedded's Upstream-Status values, plus Upstreamed (sync found it upstream).
UPSTREAM_STATUSES = ("Pending", "Submitted", "Accepted", "Backport", "Denied", "Inappropriate",
                     "Upstreamed")
_META_KEYS = {
    "title", "summary", "arch", "current", "upstream_status", "created", "sync", "pr",
    "validation", "waivers", "requires", "history", "decisions",
}


def lock_timeout() -> float:
    """Seconds a second contrib waits for the workspace lock (CONTRIB_LOCK_TIMEOUT)."""
    try:
        return float(os.environ.get("CONTRIB_LOCK_TIMEOUT", "30"))
    except ValueError:
        return 30.0


@dataclass
class Version:
    """One version of a patchset: its series, made against one upstream commit."""

    patchset: Patchset
    base: str

    @property
    def dir(self) -> Path:
        return self.patchset.dir / self.base

    @property
    def validation_path(self) -> Path:
        return self.dir / VALIDATION_NAME

    def series(self) -> list[str]:
        """Patch file names in order; PatchError naming file:line on any problem."""
        path = self.dir / SERIES_NAME
        text = read_user_text(path, PatchError, "a version directory needs a series file "
                              "listing its patches in order")
        names: list[str] = []
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            where = f"{path}:{number}"
            if " " in line or "/" in line or "\\" in line or line in (".", ".."):
                raise PatchError(f"{where}: {line!r} is not a plain patch file name "
                                 "(one file name a line, no options or folders)")
            if line in names:
                raise PatchError(f"{where}: {line!r} is listed twice")
            if not (self.dir / line).is_file():
                raise PatchError(f"{where}: names {line!r}, which is not in {self.dir}")
            names.append(line)
        if not names:
            raise PatchError(f"{path}: empty series; list at least one patch file")
        return names

    def patch_paths(self) -> list[Path]:
        return [self.dir / name for name in self.series()]

    def patch_texts(self) -> list[tuple[str, bytes]]:
        """(file name, raw bytes) of each patch in series order."""
        return [(p.name, p.read_bytes()) for p in self.patch_paths()]


class Patchset:
    """One intended upstream PR: metadata plus versions per upstream commit."""

    def __init__(self, workspace: Workspace, upstream: str, name: str) -> None:
        self.workspace = workspace
        self.upstream = upstream
        self.name = name
        self.dir = workspace.root / "patchsets" / upstream / name
        self.meta_path = self.dir / META_NAME
        self._text, self._data = self._load_meta()
        self._meta: TOMLDocument | None = None

    @property
    def target(self) -> str:
        return f"{self.upstream}/{self.name}"

    @property
    def meta(self) -> TOMLDocument:
        """patchset.toml as a tomlkit document (comments and layout kept), to change and
        write.  Parsed on first use: tomlkit takes ten times tomllib's time, and most
        runs only read (``status`` of fifty patchsets, a no-op ``sync``; issue 12)."""
        if self._meta is None:
            self._meta = tomlkit.parse(self._text)
        return self._meta

    @property
    def data(self) -> Mapping[str, Any]:
        """patchset.toml's values: the document once it is being changed, else as read."""
        return self._meta if self._meta is not None else self._data

    def _load_meta(self) -> tuple[str, dict[str, Any]]:
        from contrib.config import check_keys, line_of, parse_toml_text

        path = self.meta_path
        text = read_user_text(path, ConfigError, "every patchset folder needs patchset.toml "
                              "(create patchsets with `contrib new`)")
        doc = parse_toml_text(path, text)
        for key in doc:
            if key not in _META_KEYS:
                raise ConfigError(f"{path}:{line_of(text, '', key) or line_of(text, key)}: "
                                  f"unknown key {key!r} (allowed: {', '.join(sorted(_META_KEYS))})")
        check_keys(path, text, "", {k: doc[k] for k in ("title", "summary", "arch", "current")
                                    if k in doc}, {"title": str, "summary": str, "arch": str,
                                                   "current": str})
        status = str(doc.get("upstream_status", "Pending"))
        if status not in UPSTREAM_STATUSES:
            raise ConfigError(f"{path}:{line_of(text, '', 'upstream_status')}: upstream_status "
                              f"{status!r} is not one of {', '.join(UPSTREAM_STATUSES)}")
        current = str(doc.get("current", ""))
        if not SHA_RE.match(current):
            raise ConfigError(f"{path}:{line_of(text, '', 'current')}: current must be the "
                              f"40-hex upstream commit of a version folder, got {current!r}")
        if not (self.dir / current).is_dir():
            raise ConfigError(f"{path}: current = {current} but {self.dir / current} does not "
                              "exist; point current at an existing version folder")
        return text, doc

    @property
    def current(self) -> Version:
        return Version(self, str(self.data["current"]))

    def version(self, base: str) -> Version:
        return Version(self, base)

    def versions(self) -> list[Version]:
        """Every version folder (named by a full sha); others are reported."""
        out = []
        for child in sorted(self.dir.iterdir()):
            if not child.is_dir() or child.name.startswith("."):
                continue
            if not SHA_RE.match(child.name):
                raise ConfigError(f"{child}: version folders must be named by a full 40-hex "
                                  "upstream commit; rename or remove it")
            out.append(Version(self, child.name))
        return out

    def get(self, table: str, key: str, default: Any = None) -> Any:
        """A value from a sub-table of patchset.toml, unwrapped."""
        sub = self.data.get(table)
        if not isinstance(sub, dict):
            return default
        value = sub.get(key, default)
        return value.unwrap() if hasattr(value, "unwrap") else value

    def set(self, table: str, **values: Any) -> None:
        """Set keys of a sub-table (created if absent); None removes a key."""
        if table not in self.meta:
            self.meta[table] = tomlkit.table()
        sub = self.meta[table]
        for key, value in values.items():
            if value is None:
                sub.pop(key, None)  # type: ignore[union-attr]
            else:
                sub[key] = value  # type: ignore[index]

    @property
    def arch(self) -> str:
        return str(self.data.get("arch", "sm_120a"))

    def meta_text(self) -> str:
        """patchset.toml's text as it would be written (the file's own, while unchanged)."""
        return self._text if self._meta is None else tomlkit.dumps(self._meta)

    def save_meta(self, txn: Transaction | None = None) -> None:
        """Write patchset.toml (inside ``txn`` if given, else atomically on its own)."""
        if txn is not None:
            txn.write(self.meta_path, self.meta_text())
        else:
            self.workspace.write_file(self.meta_path, self.meta_text())


class Workspace:
    """A folder with contrib.toml and patchsets/."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.config: Config = load_config(self.root)
        self.state_dir = self.root / STATE_DIR

    @classmethod
    def find(cls, start: Path | None = None) -> Workspace:
        """The workspace containing ``start`` (default: cwd), found by contrib.toml."""
        here = (start or Path.cwd()).resolve()
        for folder in (here, *here.parents):
            if (folder / CONFIG_NAME).is_file():
                return cls(folder)
        raise UsageError(f"no {CONFIG_NAME} in {here} or any parent folder: run contrib in a "
                         "workspace, pass -C DIR, or see the README to create one")

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the workspace lock; a second contrib waits, then refuses (exit 2)."""
        self.state_dir.mkdir(exist_ok=True)
        ignore = self.state_dir / ".gitignore"
        if not ignore.exists():
            atomic_write(ignore, "*\n")
        path = self.state_dir / "lock"
        timeout = lock_timeout()
        lock = FileLock(path, timeout)
        try:
            lock.acquire()
        except LockTimeout:
            holder = _read_pid(self.state_dir / "lock.pid")
            raise LockError(f"{path}: another contrib process{holder} is working on this "
                            f"workspace; waited {timeout:g}s (CONTRIB_LOCK_TIMEOUT). "
                            "Try again when it has finished") from None
        try:
            atomic_write(self.state_dir / "lock.pid", f"{os.getpid()} {time.time():.0f}\n")
            recover(self.state_dir)
            yield
        finally:
            lock.release()

    def write_file(self, path: Path, data: bytes | str) -> None:
        """Atomically replace one workspace file; a kill mid-write leaves no temp file."""
        atomic_write(path, data, scratch=self.state_dir / "txn")

    def transaction(self) -> Transaction:
        return Transaction(self.root, self.state_dir)

    def all_patchsets(self) -> list[Patchset]:
        return [Patchset(self, upstream, name) for upstream, name in self._names()]

    def _names(self) -> list[tuple[str, str]]:
        """(upstream, name) of every patchset folder, nothing read yet: a command on one
        patchset parses only its patchset.toml."""
        base = self.root / "patchsets"
        found = []
        if base.is_dir():
            for up in sorted(p for p in base.iterdir() if p.is_dir()):
                for ps in sorted(p for p in up.iterdir() if p.is_dir()):
                    if (ps / META_NAME).is_file():
                        found.append((up.name, ps.name))
        return found

    def patchsets(self, targets: list[str] | tuple[str, ...] = ()) -> list[Patchset]:
        """Patchsets selected by ``UPSTREAM`` or ``UPSTREAM/NAME`` targets (none = all)."""
        every = self._names()
        if not targets:
            return self.all_patchsets()
        chosen: list[tuple[str, str]] = []
        for target in targets:
            upstream, _, name = target.strip("/").partition("/")
            if upstream not in self.config.upstreams:
                known = ", ".join(sorted(self.config.upstreams)) or "none"
                raise UsageError(f"unknown target {target!r}: no upstream {upstream!r} in "
                                 f"{self.config.path} (known: {known})")
            hits = [(u, n) for u, n in every if u == upstream and (not name or n == name)]
            if name and not hits:
                names = ", ".join(f"{u}/{n}" for u, n in every if u == upstream) or "none"
                raise UsageError(f"unknown target {target!r}: no patchset {name!r} under "
                                 f"patchsets/{upstream}/ (have: {names})")
            chosen += [hit for hit in hits if hit not in chosen]
        return [Patchset(self, upstream, name) for upstream, name in chosen]

    def patchset(self, target: str) -> Patchset:
        """Exactly one patchset named ``UPSTREAM/NAME``."""
        upstream, _, name = target.partition("/")
        if not name:
            raise UsageError(f"{target!r}: name one patchset as UPSTREAM/NAME")
        return self.patchsets([target])[0]


def read_user_text(path: Path, error: type[ContribError], missing: str) -> str:
    """A file the user may have edited or removed, as text; ``error`` naming it if not."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: missing; {missing}") from None
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None


def check_name(name: str, what: str = "patchset name") -> None:
    if not NAME_RE.match(name):
        raise UsageError(f"invalid {what} {name!r}: use lowercase [a-z0-9][a-z0-9._-]*")


def _read_pid(path: Path) -> str:
    try:
        return f" (pid {path.read_text().split()[0]})"
    except (OSError, IndexError):
        return ""
