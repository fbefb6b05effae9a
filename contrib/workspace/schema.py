"""``patchset.toml`` -> typed, validated objects, and back.

The schema of every table lives here and in :mod:`contrib.workspace.validation`,
and nowhere else (pre-commit's ``clientlib.py`` owns its config the same way):
the top-level keys, ``[sync]`` (written by sync), ``[pr]`` (written by open-pr),
``[decisions]`` (:class:`Decided`, written by :func:`decisions_table` too) and
``history`` here; ``[validation]``, ``[[requires]]`` and
``[[waivers]]`` there.  Every value is checked for type and range when the file
is read, through :class:`~contrib.workspace.table.Table`; a failure names
``file:line`` and what to write instead, and the CLI exits 2.  Code elsewhere
reads these objects, never raw tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from contrib.errors import ConfigError
from contrib.workspace.config import BRANCH_RE
from contrib.workspace.table import SHA_RE, Table, kind
from contrib.workspace.validation import Requirement, Settings, Waiver, read_requirements


class SyncResult(StrEnum):
    """What `contrib sync` concluded for one patchset."""

    UNCHANGED = "unchanged"
    REBASED = "rebased"
    UPSTREAMED = "upstreamed"
    PARTIAL = "partially-upstreamed"
    CONFLICT = "conflict"
    ERROR = "error"


class UpstreamStatus(StrEnum):
    """OpenEmbedded's Upstream-Status values, plus Upstreamed (sync found it upstream) and
    Draft (``contrib enable`` wrote it)."""

    PENDING = "Pending"
    SUBMITTED = "Submitted"
    ACCEPTED = "Accepted"
    BACKPORT = "Backport"
    DENIED = "Denied"
    INAPPROPRIATE = "Inappropriate"
    UPSTREAMED = "Upstreamed"
    DRAFT = "Draft"  # drafted by `contrib enable`, not yet read by a person


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
    share: float | None = None  # how "landed": share of its added lines found upstream
    changed_by: tuple[str, ...] = ()  # how "landed": later commits that touched its files

    @classmethod
    def read(cls, t: Table) -> Landed:
        t.only({f.name for f in fields(cls)})
        return cls(t.need_string("patch"), t.string("how") or "", t.sha("sha"),
                   t.string("subject"), t.integer("pr", low=1),
                   t.string("author"), t.string("date"), t.fraction("share"),
                   t.strings("changed_by", pattern=SHA_RE))

    def evidence(self) -> dict[str, Any]:
        """The landed evidence as sync's report shows it (empty when not "landed")."""
        if self.share is None:
            return {}
        return {"share": self.share, "landed_by": self.commit(),
                "changed_by": [{"sha": sha} for sha in self.changed_by]}

    def commit(self) -> dict[str, Any] | None:
        """The landing commit as sync's report shows it (None: not bisected)."""
        if not self.sha:
            return None
        return {"sha": self.sha, "subject": self.subject, "pr": self.pr, "author": self.author,
                "date": self.date}


_CONFLICT_KEYS = frozenset({"patch", "reason", "files", "worktree", "breaking_diff", "commit",
                            "hunks", "marked", "probes", "upstream_before", "evidence"})


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
            "upstreamed": [_drop_empty(u.__dict__ | {"changed_by": list(u.changed_by)})
                           for u in self.upstreamed],
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


@dataclass(frozen=True)
class SyncRules:
    """``[sync_rules]``: the user's settings for sync (sync never writes this table).

    A table of its own rather than keys inside ``[sync]``: ``[sync]`` is the
    record sync rewrites whole on every run and whose ``result``/``from`` are
    required, so a setting there would be lost or would make a patchset that
    was never synced invalid.
    """

    landed_share: float | None = None  # overrides contrib.carry.landed.LANDED_SHARE

    @classmethod
    def read(cls, t: Table | None) -> SyncRules:
        if t is None:
            return cls()
        t.only({"landed_share"})
        return cls(t.fraction("landed_share"))


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


# -- [decisions] ------------------------------------------------------------------------

class Done(StrEnum):
    """What ``contrib enable`` did at one gate of the chain it drafted (or, for a plain
    string a person wrote, that it is a note)."""

    WIDENED = "widened"  # an edit admits the target there
    LEFT = "left"  # no edit: the code has no shape contrib widens (``why`` says which)
    NOTED = "noted"  # a note a person wrote (a plain string): not a decision of enable's


_DONE_WRITTEN = (Done.WIDENED, Done.LEFT)  # what a ``[decisions."GATE"]`` table may say


class GateAt(NamedTuple):
    """Where a gate is: its file, line and function.  A ``[decisions]`` key says it as
    ``file:line function`` (:meth:`of_key` reads that, here alone)."""

    path: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.function}"

    @classmethod
    def of_key(cls, key: str) -> GateAt | None:
        """The gate a ``[decisions]`` key names; None for a note's key (``main_target``)."""
        where, _, function = key.partition(" ")
        path, _, line = where.rpartition(":")
        return cls(path, int(line), function) if path and line.isdigit() and function else None


# The sentence ``enable`` wrote each decision as before its tables, read back in
# :meth:`Decided.from_sentence` alone.
_LEFT_SENTENCE = "left as it is: "
_WHY_SENTENCE = ". Why: "


@dataclass(frozen=True)
class Decided:
    """One entry of ``[decisions]``: what was done at a gate, and why, as values.

    ``contrib enable`` writes ``[decisions."file:line function"]`` tables (``done``,
    ``what``, ``why``); a person writes a plain string, a note for reviewers."""

    gate: str  # "file:line function", at the version's base (a note: its key)
    done: Done
    what: str = ""  # the edit in words: "pkg/jit.py:5: majors [9, 10] -> [9, 10, 12] (f)"
    why: str = ""  # widened: the audit's reading of the gate; left: why no edit was made

    @property
    def left(self) -> bool:
        """``enable`` left the gate as it is."""
        return self.done is Done.LEFT

    @property
    def at(self) -> GateAt | None:
        """The gate its key names (None: a note's key)."""
        return GateAt.of_key(self.gate)

    @classmethod
    def read(cls, parent: Table, key: str) -> Decided:
        value = parent.data[key]
        if isinstance(value, str):
            return cls.from_sentence(key, value)
        if not isinstance(value, Mapping):
            raise parent.fail(key, "must be a string (a note) or a table (done, what, why), "
                                   f"not {kind(value)}")
        t = Table(parent.path, parent.text, f'{parent.name}."{key}"', value)
        t.only({"done", "what", "why"})
        done = t.need_string("done")
        if done not in _DONE_WRITTEN:
            raise t.fail("done", f"must be one of {', '.join(_DONE_WRITTEN)}, got {done!r}")
        return cls(key, Done(done), t.string("what") or "", t.string("why") or "")

    @classmethod
    def from_sentence(cls, key: str, text: str) -> Decided:
        """A plain string: a note, or a decision in the sentence ``enable`` wrote before
        its tables (``"WHAT. Why: WHY"``, ``"left as it is: WHY"``).  The one place that
        sentence is read back, once, when the file is read: everything after reads the
        value, and a new draft writes the tables."""
        if text.startswith(_LEFT_SENTENCE):
            return cls(key, Done.LEFT, why=text.removeprefix(_LEFT_SENTENCE))
        what, said, why = text.partition(_WHY_SENTENCE)
        if said:
            return cls(key, Done.WIDENED, what, why)
        return cls(key, Done.NOTED, text)

    def to_table(self) -> dict[str, str] | str:
        """The TOML value: a note stays the string it was; a decision, its table."""
        if self.done is Done.NOTED:
            return self.what
        return _drop_empty({"done": str(self.done), "what": self.what, "why": self.why})


def read_decisions(t: Table | None) -> dict[str, Decided]:
    """``[decisions]``, in its order: gate (or a note's key) -> :class:`Decided`."""
    if t is None:
        return {}
    return {str(key): Decided.read(t, str(key)) for key in t.data}


def decisions_table(decisions: Iterable[Decided]) -> dict[str, Any]:
    """``[decisions]`` as written: one ``[decisions."GATE"]`` table per decision."""
    return {d.gate: d.to_table() for d in decisions}


# -- the whole file ---------------------------------------------------------------------

TOP_KEYS = frozenset({"title", "summary", "arch", "current", "upstream_status", "created",
                      "sync", "sync_rules", "pr", "validation", "waivers", "requires", "history",
                      "decisions", "targets", "target"})


# -- targets: the branches a patchset is carried on ----------------------------------------

@dataclass(frozen=True)
class TargetState:
    """Where one target branch other than the first stands: ``[target."BRANCH"]``.

    The first target keeps its state at the top level (``current``, ``[sync]``,
    ``[pr]``), as every patchset.toml written before targets existed does."""

    current: str | None = None  # None: not carried yet; it starts from the first target's
    upstream_status: UpstreamStatus | None = None
    sync: SyncRecord | None = None
    pr: PrRecord | None = None
    title: str | None = None  # this line's own PR title (a backport's differs); None: the top's

    @classmethod
    def read(cls, t: Table) -> TargetState:
        t.only({"current", "upstream_status", "sync", "pr", "title"})
        status = t.string("upstream_status")
        if status is not None and status not in UpstreamStatus.__members__.values():
            raise t.fail("upstream_status", f"must be one of {', '.join(UpstreamStatus)}, "
                                            f"got {status!r}")
        sync, pr = t.sub("sync"), t.sub("pr")
        title = t.string("title")
        if title is not None and not title.strip():
            raise t.fail("title", "is blank; give the title or remove the key")
        return cls(t.sha("current"), UpstreamStatus(status) if status else None,
                   SyncRecord.read(sync) if sync else None, PrRecord.read(pr) if pr else None,
                   title)


def _targets(top: Table) -> tuple[tuple[str, ...], dict[str, TargetState]]:
    branches = top.strings("targets", pattern=BRANCH_RE)
    for branch in branches:
        if ".." in branch or branch.endswith((".lock", "/")):
            raise top.fail("targets", f"holds {branch!r}, which is not a git branch name")
    if len(set(branches)) != len(branches):
        raise top.fail("targets", "names a branch twice")
    states = {}
    table = top.sub("target")
    for branch in table.data if table is not None else ():
        assert table is not None
        if str(branch) not in branches[1:]:
            raise table.fail(str(branch), "is not one of the targets after the first "
                                          f"({', '.join(branches[1:]) or 'none'}); the first "
                                          "target's state is the top level")
        sub = table.sub(str(branch))
        assert sub is not None
        states[str(branch)] = TargetState.read(sub)
    return branches, states


@dataclass(frozen=True)
class Meta:
    """Everything contrib reads from one ``patchset.toml``."""

    current: str
    title: str = ""
    summary: str = ""
    arch: str = "sm_120a"
    upstream_status: UpstreamStatus = UpstreamStatus.PENDING
    created: str = ""
    sync: SyncRecord | None = None
    pr: PrRecord | None = None
    sync_rules: SyncRules = field(default_factory=SyncRules)
    requires: tuple[Requirement, ...] = ()
    decisions: Mapping[str, Decided] = field(default_factory=dict)  # key: its gate
    history: tuple[Mapping[str, Any], ...] = ()
    waivers: tuple[Waiver, ...] = ()
    validation: Settings = field(default_factory=Settings)
    targets: tuple[str, ...] = ()  # the branches it is carried on; () = the upstream's branch
    target_states: Mapping[str, TargetState] = field(default_factory=dict)


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
    waivers = tuple(Waiver.read(t) for t in top.subs("waivers"))
    return Meta(current, top.string("title", "") or "", top.string("summary", "") or "",
                top.string("arch", "sm_120a") or "sm_120a", UpstreamStatus(status),
                _when(top, "created"), SyncRecord.read(sync) if sync else None,
                PrRecord.read(pr) if pr else None, SyncRules.read(top.sub("sync_rules")),
                read_requirements(top),
                read_decisions(top.sub("decisions")), _history(top), waivers,
                Settings.read(top.sub("validation"), waivers), *_targets(top))


def _when(t: Table, key: str) -> str:
    """A timestamp key: TOML dates are accepted and kept as their ISO text."""
    value = t.data.get(key)
    if value is not None and not isinstance(value, str) and hasattr(value, "isoformat"):
        return str(value.isoformat())
    return t.string(key, "") or ""




def _history(top: Table) -> tuple[Mapping[str, Any], ...]:
    """``[[history]]``: free-form notes for people; each entry must be a table of scalars."""
    entries = top.subs("history")
    for entry in entries:
        for key, value in entry.data.items():
            if not isinstance(value, (str, int, bool, float)) and not hasattr(value, "isoformat"):
                raise entry.fail(key, f"must be a string, number or date, not {kind(value)}")
    return tuple(dict(e.data) for e in entries)
