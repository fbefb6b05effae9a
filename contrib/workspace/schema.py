"""``patchset.toml`` -> typed, validated objects, and back.

The schema of every table lives here and nowhere else (pre-commit's
``clientlib.py`` owns its config the same way): the top-level keys, ``[sync]``
(written by sync), ``[pr]`` (written by open-pr), ``[validation]``,
``[[requires]]``, ``[[waivers]]``, ``[decisions]`` and ``history``.  Every
value is checked for type and range when the file is read, through
:class:`~contrib.workspace.table.Table`; a failure names ``file:line`` and what
to write instead, and the CLI exits 2.  Code elsewhere reads these objects,
never raw tables.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

from contrib.errors import ConfigError
from contrib.workspace.config import BRANCH_RE, NAME_PATTERN
from contrib.workspace.table import SHA_RE, Table, kind

TARGET_RE = re.compile(f"{NAME_PATTERN}/{NAME_PATTERN}(?:@{BRANCH_RE.pattern})?")


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


def _requirements(top: Table) -> tuple[Requirement, ...]:
    """``[[requires]]``: every entry a table of the schema.  ``[[history]]`` and
    ``[decisions]`` take any key, so a ``requires = ...`` that TOML gave them (a key
    belongs to the table header above it, and the file ends in ``[[history]]``) is
    refused here rather than read as theirs and ignored."""
    decisions = top.sub("decisions")
    for label, t in [*(("[[history]]", h) for h in top.subs("history")),
                     *([("[decisions]", decisions)] if decisions is not None else [])]:
        if "requires" in t.data:
            raise ConfigError(
                f"{t.at('requires')}: requires is read as part of {label} (a key belongs "
                "to the table header above it); declare requirements as [[requires]] tables "
                "(upstream = ..., commit = ...) or move the key above the first table header")
    return tuple(Requirement.read(t) for t in top.subs("requires"))


# -- [[waivers]] --------------------------------------------------------------------------

@dataclass(frozen=True)
class Waiver:
    """``[[waivers]]``: a finding at file plus line or pattern, explained by a reason."""

    file: str
    reason: str
    line: int | None = None
    pattern: str | None = None
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def read(cls, t: Table) -> Waiver:
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
        return cls(file, reason, line, pattern, regex)


# -- [validation] -------------------------------------------------------------------------

# Validate's stages in the order they run, and whether open-pr needs each by default
# (``[validation] require`` overrides).  A not-applicable stage counts as done, so
# ``ptx`` is only needed where a touched gate compiles CUDA sources.
STAGES: tuple[tuple[str, bool], ...] = (
    ("apply", True), ("syntax", True), ("gates", True), ("arch-guards", True), ("ptx", True),
    ("tests", False), ("bench", False), ("requires", False),
)
STAGE_NAMES = tuple(name for name, _ in STAGES)
_VALIDATION_KEYS = frozenset({
    "python", "tests", "compile", "sources", "compare", "tests_need_gpu", "test_limit",
    "ptx_sources", "ptx_include_dirs", "ptx_flags", "require", "pytest_args", "bench",
})  # fmt: skip
_BENCH_KEYS = frozenset({"command", "metrics", "better", "repeat", "threshold", "needs_gpu",
                         "baseline", "timeout"})
_METRIC_RE = re.compile(r"[A-Za-z_][\w.-]*")


@dataclass(frozen=True)
class BenchSettings:
    """``[validation.bench]``: a command that prints JSON metrics, run on base and patched.

    ``where`` keeps ``patchset.toml:LINE`` of each key, so what only the run can
    find wrong (a metric the output lacks, output that is not JSON) names the line."""

    command: str
    metrics: tuple[str, ...]
    better: str = "lower"  # or "higher"
    repeat: int = 7  # A/B pairs, interleaved
    threshold: float = 0.05  # a change smaller than this is never a failure
    needs_gpu: bool = True
    baseline: str | None = None  # the replaced path, measured when the base cannot run
    timeout: int = 600  # seconds per run of the command
    where: Mapping[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def read(cls, t: Table | None) -> BenchSettings | None:
        if t is None:
            return None
        t.only(_BENCH_KEYS)
        command = t.need_string("command")
        metrics = t.strings("metrics", pattern=_METRIC_RE)
        if not metrics:
            raise t.fail("metrics", "is required: the keys of the JSON object the command prints, "
                                    'e.g. ["latency_ms"]')
        better = t.string("better", "lower")
        if better not in ("lower", "higher"):
            raise t.fail("better", f'must be "lower" or "higher", got {better!r}')
        repeat = t.integer("repeat", 7, low=0) or 0
        if not 3 <= repeat <= 1000:
            raise t.fail("repeat", f"must be between 3 and 1000 (A/B pairs; an interval needs "
                                   f"at least 3), got {repeat}")
        threshold = t.data.get("threshold", 0.05)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
                or not 0 <= threshold < 1:
            raise t.fail("threshold", f"must be a number from 0 to 1 (0.05: 5%), got {threshold!r}")
        baseline = t.string("baseline")
        if baseline is not None and not baseline.strip():
            raise t.fail("baseline", "must be a command (or left out)")
        needs_gpu = t.boolean("needs_gpu", True)
        where = {k: t.at(k) for k in ("command", "metrics", "baseline")}
        return cls(command, tuple(dict.fromkeys(metrics)), better, repeat, float(threshold),
                   True if needs_gpu is None else needs_gpu, baseline,
                   t.integer("timeout", 600, low=1) or 600, where)

    def to_dict(self) -> dict[str, Any]:
        """The settings as the stage records them (the line positions left out)."""
        return {"command": self.command, "metrics": list(self.metrics), "better": self.better,
                "repeat": self.repeat, "threshold": self.threshold, "needs_gpu": self.needs_gpu,
                "baseline": self.baseline, "timeout": self.timeout}


@dataclass
class Settings:
    """``[validation]`` of patchset.toml, with its ``[[waivers]]``."""

    sources: list[str] = field(default_factory=list)  # extra CUDA sources to analyse
    compare: list[int] = field(default_factory=list)  # majors to compare when no gate says
    tests: list[str] = field(default_factory=list)
    tests_need_gpu: bool = True
    test_limit: int = 20
    python: str | None = None
    compile: list[str] = field(default_factory=list)  # PTX command run in a worktree
    ptx_sources: list[str] = field(default_factory=list)
    ptx_include_dirs: list[str] = field(default_factory=list)
    ptx_flags: list[str] = field(default_factory=list)
    waivers: list[Waiver] = field(default_factory=list)
    require: tuple[str, ...] | None = None  # None: the stages STAGES marks required
    pytest_args: list[str] = field(default_factory=list)  # e.g. ["-k", "bf16"]: which cases run
    bench: BenchSettings | None = None  # [validation.bench]; None: no bench stage

    @classmethod
    def read(cls, t: Table | None, waivers: tuple[Waiver, ...] = ()) -> Settings:
        """``[validation]`` (``t``; None when absent) with the already-read waivers."""
        if t is None:
            return cls(waivers=list(waivers))
        t.only(_VALIDATION_KEYS)
        compare = t.data.get("compare", [])
        if not isinstance(compare, list) or not all(
                isinstance(m, int) and not isinstance(m, bool) and 1 <= m <= 99 for m in compare):
            raise t.fail("compare", "must be a list of major versions, e.g. [9, 10]")
        python = t.string("python")
        if python is not None and not python.strip():
            raise t.fail("python", "must be a path to an interpreter")
        limit = t.integer("test_limit", 20, low=1) or 20
        if limit > 100_000:
            raise t.fail("test_limit", f"must be at most 100000, got {limit}")
        need_gpu = t.boolean("tests_need_gpu", True)
        return cls(
            list(t.strings("sources")), list(compare), list(t.strings("tests")),
            True if need_gpu is None else need_gpu, limit, python, _command(t),
            list(t.strings("ptx_sources")), list(t.strings("ptx_include_dirs")),
            list(t.strings("ptx_flags")), list(waivers), _require(t),
            list(t.strings("pytest_args")), BenchSettings.read(t.sub("bench")),
        )  # fmt: skip

    @classmethod
    def from_meta(cls, data: Mapping[str, Any], where: str = "patchset.toml",
                  text: str = "") -> Settings:
        """``[validation]`` and ``[[waivers]]`` of parsed patchset.toml ``data`` alone."""
        top = Table(Path(where), text, "", _unwrap(data))
        return cls.read(top.sub("validation"), tuple(Waiver.read(w) for w in top.subs("waivers")))

    def required(self) -> tuple[str, ...]:
        """The stages open-pr (and validate's exit code) needs: ``require``, or the default."""
        if self.require is not None:
            return self.require
        return tuple(name for name, required in STAGES if required)

    def digest_view(self) -> dict[str, Any]:
        """The settings that change validation results, as plain JSON values.

        ``require`` only changes which stages open-pr needs, so it is left out, and so
        is ``bench``: it measures, it proves nothing the other stages depend on, so adding
        a benchmark does not unbind a record (the bench stage keeps its own settings)."""
        return {
            "sources": self.sources, "compare": self.compare, "tests": self.tests,
            "tests_need_gpu": self.tests_need_gpu, "test_limit": self.test_limit,
            "python": self.python, "compile": self.compile, "ptx_sources": self.ptx_sources,
            "ptx_include_dirs": self.ptx_include_dirs, "ptx_flags": self.ptx_flags,
            **({"pytest_args": self.pytest_args} if self.pytest_args else {}),
            "waivers": [{"file": w.file, "reason": w.reason, "line": w.line, "pattern": w.pattern}
                        for w in self.waivers],
        }  # fmt: skip


def _unwrap(value: Any) -> Any:
    """A tomlkit document as plain values (a parsed dict is returned as it is)."""
    return value.unwrap() if hasattr(value, "unwrap") else value


def _command(t: Table) -> list[str]:
    """``compile``: a list of words, or one string split as a shell would."""
    value = t.data.get("compile", [])
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as exc:  # e.g. an unbalanced quote
            raise t.fail("compile", f"cannot be split into words ({exc}); "
                         "balance its quotes or give it as a list") from None
        words = list(value)
    else:
        words = list(t.strings("compile"))
    if words and not all(isinstance(w, str) for w in words):
        raise t.fail("compile", "must be a list of strings")
    if value and not words[0]:
        raise t.fail("compile", "must start with a program name")
    return words


def _require(t: Table) -> tuple[str, ...] | None:
    if "require" not in t.data:
        return None
    names = t.strings("require")
    unknown = [n for n in names if n not in STAGE_NAMES]
    if unknown:
        raise t.fail("require", f"names unknown stage(s) {', '.join(map(repr, unknown))} "
                                f"(stages: {', '.join(STAGE_NAMES)})")
    return tuple(dict.fromkeys(names))


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

    @classmethod
    def read(cls, t: Table) -> TargetState:
        t.only({"current", "upstream_status", "sync", "pr"})
        status = t.string("upstream_status")
        if status is not None and status not in UpstreamStatus.__members__.values():
            raise t.fail("upstream_status", f"must be one of {', '.join(UpstreamStatus)}, "
                                            f"got {status!r}")
        sync, pr = t.sub("sync"), t.sub("pr")
        return cls(t.sha("current"), UpstreamStatus(status) if status else None,
                   SyncRecord.read(sync) if sync else None, PrRecord.read(pr) if pr else None)


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
    decisions: Mapping[str, str] = field(default_factory=dict)
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
                _requirements(top),
                _decisions(top.sub("decisions")), _history(top), waivers,
                Settings.read(top.sub("validation"), waivers), *_targets(top))


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
                raise entry.fail(key, f"must be a string, number or date, not {kind(value)}")
    return tuple(dict(e.data) for e in entries)
