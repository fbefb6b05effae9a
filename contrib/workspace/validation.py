"""``[validation]``, ``[validation.bench]``, ``[[waivers]]`` and ``[[requires]]`` of
``patchset.toml``: what ``contrib validate`` runs and what it may accept.

Part of the schema (:mod:`contrib.workspace.schema` reads the whole file and
holds the other tables): every value is checked for type and range when the file
is read, through :class:`~contrib.workspace.table.Table`; a failure names
``file:line`` and what to write instead.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from contrib.errors import ConfigError
from contrib.workspace.config import NAME_PATTERN, TARGET_RE
from contrib.workspace.table import Table

# -- [[requires]] -------------------------------------------------------------------

@dataclass(frozen=True)
class Requirement:
    """One ``[[requires]]`` entry: a fix another upstream must contain.  A draft's
    requirement (``contrib enable --requires``) names only ``patchset``: the fix exists
    as that patchset until upstream takes it, so no commit can contain it yet."""

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
                  t.string("commit", "", pattern=re.compile(r"[0-9A-Za-z._/-]+"),
                           hint="a commit or tag") or "",
                  t.string("patchset", "", pattern=TARGET_RE, hint="UPSTREAM/NAME") or "",
                  t.string("pin_file", "") or "", t.string("pin_package", "") or "",
                  t.string("tag_format", "v{version}") or "", t.string("reason", "") or "")
        if not req.commit and not req.patchset:
            raise t.fail("commit", "is required (the fix that must be present), unless "
                                   "patchset names the patchset carrying it")
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
        if not self.commit:
            return f"{self.upstream} patchset {self.patchset}"
        what = f"{self.upstream} commit {self.commit[:12]}"
        if self.patchset:
            what += f" (or patchset {self.patchset})"
        return what


def read_requirements(top: Table) -> tuple[Requirement, ...]:
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
    ("others", False), ("tests", False), ("bench", False), ("requires", False),
)
STAGE_NAMES = tuple(name for name, _ in STAGES)
_VALIDATION_KEYS = frozenset({
    "python", "tests", "compile", "sources", "compare", "tests_need_gpu", "test_limit",
    "ptx_sources", "ptx_include_dirs", "ptx_flags", "require", "pytest_args", "bench",
})
_BENCH_KEYS = frozenset({"command", "metrics", "better", "repeat", "threshold", "needs_gpu",
                         "baseline", "timeout", "gpus", "deadline"})
_DAY = 86_400  # the longest a run of the command, or the whole stage, may be given (seconds)
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
    gpus: int | None = None  # GPUs one run needs; None: read from the bench script
    deadline: int = 3600  # seconds for the whole stage, every planned run together

    @classmethod
    def read(cls, t: Table | None) -> BenchSettings | None:
        if t is None:
            return None
        t.only(_BENCH_KEYS)
        command = _bench_command(t, "command")
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
        baseline = _bench_command(t, "baseline") if "baseline" in t.data else None
        needs_gpu = t.boolean("needs_gpu", True)
        where = {k: t.at(k) for k in ("command", "metrics", "baseline", "gpus")}
        return cls(command, tuple(dict.fromkeys(metrics)), better, repeat, float(threshold),
                   True if needs_gpu is None else needs_gpu, baseline,
                   _seconds(t, "timeout", 600), where, _gpus(t), _seconds(t, "deadline", 3600))

    def to_dict(self) -> dict[str, Any]:
        """The settings as the stage records them (the line positions left out)."""
        return {"command": self.command, "metrics": list(self.metrics), "better": self.better,
                "repeat": self.repeat, "threshold": self.threshold, "needs_gpu": self.needs_gpu,
                "baseline": self.baseline, "timeout": self.timeout,
                **({"gpus": self.gpus} if self.gpus is not None else {}), "deadline": self.deadline}


def _bench_command(t: Table, key: str) -> str:
    """A bench command: a string a shell could split into words, the first a program."""
    value = t.need_string(key)
    try:
        words = shlex.split(value)
    except ValueError as exc:  # an unbalanced quote, a trailing backslash
        raise t.fail(key, f"cannot be split into words ({exc}); balance its quotes") from None
    if not words or not words[0].strip():
        raise t.fail(key, "must start with a program name, e.g. \"{python} bench.py --json\"")
    return value


def _seconds(t: Table, key: str, default: int) -> int:
    value = t.integer(key, default, low=1) or default
    if value > _DAY:
        raise t.fail(key, f"must be at most {_DAY} seconds (a day), got {value}")
    return value


def _gpus(t: Table) -> int | None:
    value = t.integer("gpus", None, low=1)
    if value is not None and value > 1024:
        raise t.fail("gpus", f"must be at most 1024 (GPUs one run of the command needs), got {value}")
    return value


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
        )

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
        }


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
        raise t.fail("require", f"names unknown {'stage' if len(unknown) == 1 else 'stages'} {', '.join(map(repr, unknown))} "
                                f"(stages: {', '.join(STAGE_NAMES)})")
    return tuple(dict.fromkeys(names))
