"""``patchset.toml`` -> typed, validated objects, and back.

The schema of every table lives here and nowhere else (pre-commit's
``clientlib.py`` owns its config the same way): the top-level keys, ``[sync]``
(written by sync), ``[pr]`` (written by open-pr), ``[[requires]]``,
``[[waivers]]``, ``[decisions]`` and ``history``.  ``[validation]`` (the
settings of validate) is read by ``contrib.validate.stages``.  Every value is checked for type and range when the
file is read; a failure names ``file:line`` and what to write instead, and
the CLI exits 2.  Code elsewhere reads these objects, never raw tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

from contrib.errors import ConfigError
from contrib.validate import Waiver
from contrib.workspace.config import NAME_PATTERN, line_of

SHA_RE = re.compile(r"[0-9a-f]{40}")
TARGET_RE = re.compile(f"{NAME_PATTERN}/{NAME_PATTERN}")


class SyncResult(StrEnum):
    """What `contrib sync` concluded for one patchset."""

    UNCHANGED = "unchanged"
    REBASED = "rebased"
    UPSTREAMED = "upstreamed"
    PARTIAL = "partially-upstreamed"
    CONFLICT = "conflict"
    ERROR = "error"


class UpstreamStatus(StrEnum):
    """OpenEmbedded's Upstream-Status values, plus Upstreamed (sync found it upstream)."""

    PENDING = "Pending"
    SUBMITTED = "Submitted"
    ACCEPTED = "Accepted"
    BACKPORT = "Backport"
    DENIED = "Denied"
    INAPPROPRIATE = "Inappropriate"
    UPSTREAMED = "Upstreamed"


class Table:
    """One TOML table being read: typed getters that raise ``file:line`` errors."""

    def __init__(self, path: Path, text: str, name: str, data: Any) -> None:
        self.path, self.text, self.name = path, text, name
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path}:{self.line()}: {self.label} must be a table, "
                              f"not {_kind(data)}")
        self.data: Mapping[str, Any] = data

    @property
    def label(self) -> str:
        return f"[{self.name}]" if self.name else "the top level"

    def line(self, key: str | None = None) -> int:
        table, _, leaf = self.name.rpartition(".")
        return (line_of(self.text, self.name, key) or line_of(self.text, self.name)
                or line_of(self.text, table, leaf) or line_of(self.text, "", self.name.split(".")[0]))

    def fail(self, key: str, what: str) -> ConfigError:
        name = f"{self.name}.{key}" if self.name else key
        return ConfigError(f"{self.path}:{self.line(key)}: {name} {what}")

    def only(self, allowed: set[str] | frozenset[str]) -> None:
        """Reject keys the schema does not know (a typo must not be ignored)."""
        for key in self.data:
            if key not in allowed:
                where = f" in [{self.name}]" if self.name else ""
                raise ConfigError(f"{self.path}:{self.line(key)}: unknown key {key!r}{where} "
                                  f"(allowed: {', '.join(sorted(allowed))})")

    def string(self, key: str, default: str | None = None, *, pattern: re.Pattern[str] | None = None,
            hint: str = "") -> str | None:
        value = self.data.get(key, default)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, not {_kind(value)}")
        if value and pattern is not None and not pattern.fullmatch(value):
            raise self.fail(key, f"must be {hint or pattern.pattern}, got {value!r}")
        return value

    def need_string(self, key: str, **kw: Any) -> str:
        value = self.string(key, **kw)
        if not value:
            raise self.fail(key, "is required (a non-empty string)")
        return value

    def sha(self, key: str) -> str | None:
        """A full 40-hex commit id, or None when absent."""
        return self.string(key, pattern=SHA_RE, hint="a 40-hex commit")

    def integer(self, key: str, default: int | None = None, *, low: int = 0) -> int | None:
        value = self.data.get(key, default)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise self.fail(key, f"must be an integer >= {low}, got {value!r}")
        return value

    def boolean(self, key: str, default: bool | None = None) -> bool | None:
        value = self.data.get(key, default)
        if value is not None and not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, not {_kind(value)}")
        return value

    def strings(self, key: str, *, pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
        value = self.data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "must be a list of strings")
        for item in value:
            if pattern is not None and not pattern.fullmatch(item):
                raise self.fail(key, f"holds {item!r}, which is not {pattern.pattern}")
        return tuple(value)

    def sub(self, key: str) -> Table | None:
        value = self.data.get(key)
        if value is None:
            return None
        return Table(self.path, self.text, f"{self.name}.{key}" if self.name else key, value)

    def subs(self, key: str) -> list[Table]:
        """An array of tables (``[[key]]``); a single table is taken as a list of one."""
        value = self.data.get(key)
        if value is None:
            return []
        if isinstance(value, Mapping):
            value = [value]
        if not isinstance(value, list):
            raise self.fail(key, f"must be [[{key}]] tables, not {_kind(value)}")
        name = f"{self.name}.{key}" if self.name else key
        return [Table(self.path, self.text, name, item) for item in value]


def _kind(value: object) -> str:
    names = {str: "a string", int: "an integer", bool: "a boolean", float: "a float",
             list: "a list", dict: "a table"}
    return next((n for t, n in names.items() if type(value) is t), type(value).__name__)


def _drop_empty(d: Mapping[str, Any]) -> dict[str, Any]:
    """TOML has no null: absent, empty lists and empty tables are left out."""
    return {k: v for k, v in d.items() if v is not None and v != [] and v != {} and v != ()}


# -- [sync] -----------------------------------------------------------------------

@dataclass(frozen=True)
class Landed:
    """One patch sync found upstream, and the upstream commit that landed it."""

    patch: str
    how: str = ""
    sha: str | None = None
    subject: str | None = None
    pr: int | None = None
    author: str | None = None
    date: str | None = None

    @classmethod
    def read(cls, t: Table) -> Landed:
        t.only({f.name for f in fields(cls)})
        return cls(t.need_string("patch"), t.string("how") or "", t.sha("sha"),
                   t.string("subject"), t.integer("pr", low=1),
                   t.string("author"), t.string("date"))

    def commit(self) -> dict[str, Any] | None:
        """The landing commit as sync's report shows it (None: not bisected)."""
        if not self.sha:
            return None
        return {"sha": self.sha, "subject": self.subject, "pr": self.pr, "author": self.author,
                "date": self.date}


_CONFLICT_KEYS = frozenset({"patch", "reason", "files", "worktree", "breaking_diff", "commit",
                            "hunks", "marked", "probes", "upstream_before"})


@dataclass(frozen=True)
class SyncDetails:
    """``[sync.details]``: the new version, landed patches, the conflict, notes."""

    version: str | None = None
    patches: tuple[str, ...] = ()
    upstreamed: tuple[Landed, ...] = ()
    conflict: Mapping[str, Any] | None = None  # a record for people; contrib never reads it
    notes: tuple[str, ...] = ()

    @classmethod
    def read(cls, t: Table | None) -> SyncDetails:
        if t is None:
            return cls()
        t.only({f.name for f in fields(cls)})
        conflict = t.sub("conflict")
        if conflict is not None:
            conflict.only(_CONFLICT_KEYS)
        return cls(t.sha("version"), t.strings("patches"),
                   tuple(Landed.read(u) for u in t.subs("upstreamed")),
                   (dict(conflict.data) or None) if conflict is not None else None, t.strings("notes"))

    def to_table(self) -> dict[str, Any]:
        return _drop_empty({
            "version": self.version, "patches": list(self.patches),
            "upstreamed": [_drop_empty(u.__dict__) for u in self.upstreamed],
            "conflict": self.conflict, "notes": list(self.notes)})


@dataclass(frozen=True)
class SyncRecord:
    """``[sync]``: the last sync of the patchset."""

    result: SyncResult
    base: str  # written as ``from``: the version the sync started from
    target: str | None = None
    at: str = ""
    commits: int = 0
    probes: int = 0
    details: SyncDetails = field(default_factory=SyncDetails)

    @classmethod
    def read(cls, t: Table) -> SyncRecord:
        t.only({"result", "from", "target", "at", "commits", "probes", "details"})
        result = t.need_string("result")
        if result not in SyncResult.__members__.values():
            raise t.fail("result", f"must be one of {', '.join(SyncResult)}, got {result!r}")
        base = t.sha("from")
        if not base:
            raise t.fail("from", "is required (the 40-hex commit the sync started from)")
        return cls(SyncResult(result), base, t.sha("target"),
                   t.string("at") or "", t.integer("commits") or 0, t.integer("probes") or 0,
                   SyncDetails.read(t.sub("details")))

    def to_table(self) -> dict[str, Any]:
        return _drop_empty({"result": str(self.result), "from": self.base, "target": self.target,
                            "at": self.at or None, "commits": self.commits,
                            "probes": self.probes, "details": self.details.to_table()})


# -- [pr] -------------------------------------------------------------------------

PR_STATES = ("open", "closed", "merged")


@dataclass(frozen=True)
class PrRecord:
    """``[pr]``: the pull request and the pushes open-pr made for it."""

    repo: str | None = None
    head: str | None = None
    branch: str | None = None
    number: int | None = None
    url: str | None = None
    state: str | None = None
    draft: bool | None = None
    updated: str | None = None
    merged_at: str | None = None
    merge_commit_sha: str | None = None
    pushed: str | None = None  # the branch tip last pushed to the fork
    version: str | None = None  # the version (base) that push was made from
    pushed_history: tuple[str, ...] = ()  # every tip contrib ever pushed there
    previous: str | None = None  # the push before ``pushed`` (for the range-diff)
    previous_version: str | None = None

    @classmethod
    def read(cls, t: Table) -> PrRecord:
        t.only({f.name for f in fields(cls)})
        state = t.string("state")
        if state is not None and state not in PR_STATES:
            raise t.fail("state", f"must be one of {', '.join(PR_STATES)}, got {state!r}")
        return cls(t.string("repo"), t.string("head"), t.string("branch"), t.integer("number", low=1),
                   t.string("url"), state, t.boolean("draft"), t.string("updated"), t.string("merged_at"),
                   t.sha("merge_commit_sha"), t.sha("pushed"),
                   t.sha("version"), t.strings("pushed_history", pattern=SHA_RE),
                   t.sha("previous"), t.sha("previous_version"))

    def to_table(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["pushed_history"] = list(self.pushed_history)
        return _drop_empty(data)


# -- [[requires]] -------------------------------------------------------------------

@dataclass(frozen=True)
class Requirement:
    """One ``[[requires]]`` entry: a fix another upstream must contain."""

    upstream: str
    commit: str
    patchset: str = ""
    pin_file: str = ""
    pin_package: str = ""
    tag_format: str = "v{version}"
    reason: str = ""

    @classmethod
    def read(cls, t: Table) -> Requirement:
        t.only({f.name for f in fields(cls)})
        req = cls(t.need_string("upstream", pattern=re.compile(NAME_PATTERN), hint="an upstream name"),
                  t.need_string("commit", pattern=re.compile(r"[0-9A-Za-z._/-]+"),
                             hint="a commit or tag"),
                  t.string("patchset", "", pattern=TARGET_RE, hint="UPSTREAM/NAME") or "",
                  t.string("pin_file", "") or "", t.string("pin_package", "") or "",
                  t.string("tag_format", "v{version}") or "", t.string("reason", "") or "")
        if bool(req.pin_file) != bool(req.pin_package):
            raise t.fail("pin_file", "and pin_package must be given together")
        try:
            if req.tag_format.format(version="1.0") == req.tag_format:
                raise ValueError("no {version}")
        except (KeyError, IndexError, ValueError, AttributeError):
            raise t.fail("tag_format", f"must contain {{version}} and no other {{...}}, "
                                       f"got {req.tag_format!r}") from None
        return req

    def describe(self) -> str:
        what = f"{self.upstream} commit {self.commit[:12]}"
        if self.patchset:
            what += f" (or patchset {self.patchset})"
        return what


# -- [[waivers]] --------------------------------------------------------------------------

def read_waiver(t: Table) -> Waiver:
    """One ``[[waivers]]`` entry: file, a written reason, and line or pattern."""
    t.only({"file", "reason", "line", "pattern"})
    file, reason = t.need_string("file"), (t.string("reason") or "").strip()
    if not reason:
        raise t.fail("reason", "is required: say why the finding is safe")
    line, pattern = t.integer("line", low=1), t.string("pattern")
    if line is None and pattern is None:
        raise t.fail("line", "or pattern is required, so the waiver is specific")
    try:
        regex = re.compile(pattern) if pattern is not None else None
    except re.error as exc:
        raise t.fail("pattern", f"is not a regular expression ({exc})") from None
    return Waiver(file, reason, line, pattern, regex)


# -- the whole file ---------------------------------------------------------------------

TOP_KEYS = frozenset({"title", "summary", "arch", "current", "upstream_status", "created",
                      "sync", "pr", "validation", "waivers", "requires", "history",
                      "decisions"})


@dataclass(frozen=True)
class Meta:
    """Everything contrib reads from one ``patchset.toml`` (but validation settings)."""

    current: str
    title: str = ""
    summary: str = ""
    arch: str = "sm_120a"
    upstream_status: UpstreamStatus = UpstreamStatus.PENDING
    created: str = ""
    sync: SyncRecord | None = None
    pr: PrRecord | None = None
    requires: tuple[Requirement, ...] = ()
    decisions: Mapping[str, str] = field(default_factory=dict)
    history: tuple[Mapping[str, Any], ...] = ()
    waivers: tuple[Waiver, ...] = ()


def read_meta(path: Path, text: str, data: Mapping[str, Any]) -> Meta:
    """Check the parsed ``patchset.toml`` ``data`` against the schema; ConfigError on any fault."""
    top = Table(path, text, "", data)
    top.only(TOP_KEYS)
    status = top.string("upstream_status", "Pending") or "Pending"
    if status not in UpstreamStatus.__members__.values():
        raise top.fail("upstream_status", f"must be one of {', '.join(UpstreamStatus)}, "
                                          f"got {status!r}")
    current = top.string("current", "") or ""
    if not SHA_RE.fullmatch(current):
        raise ConfigError(f"{path}:{top.line('current')}: current must be the 40-hex upstream "
                          f"commit of a version folder, got {current!r}")
    sync, pr = top.sub("sync"), top.sub("pr")
    return Meta(current, top.string("title", "") or "", top.string("summary", "") or "",
                top.string("arch", "sm_120a") or "sm_120a", UpstreamStatus(status),
                _when(top, "created"), SyncRecord.read(sync) if sync else None,
                PrRecord.read(pr) if pr else None,
                tuple(Requirement.read(t) for t in top.subs("requires")),
                _decisions(top.sub("decisions")), _history(top),
                tuple(read_waiver(t) for t in top.subs("waivers")))


def _when(t: Table, key: str) -> str:
    """A timestamp key: TOML dates are accepted and kept as their ISO text."""
    value = t.data.get(key)
    if value is not None and not isinstance(value, str) and hasattr(value, "isoformat"):
        return str(value.isoformat())
    return t.string(key, "") or ""


def _decisions(t: Table | None) -> dict[str, str]:
    if t is None:
        return {}
    for key in t.data:
        t.string(key)
    return {str(k): str(v) for k, v in t.data.items()}


def _history(top: Table) -> tuple[Mapping[str, Any], ...]:
    """``[[history]]``: free-form notes for people; each entry must be a table of scalars."""
    entries = top.subs("history")
    for entry in entries:
        for key, value in entry.data.items():
            if not isinstance(value, (str, int, bool, float)) and not hasattr(value, "isoformat"):
                raise entry.fail(key, f"must be a string, number or date, not {_kind(value)}")
    return tuple(dict(e.data) for e in entries)
