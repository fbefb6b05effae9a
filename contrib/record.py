"""validation.json: what ``contrib validate`` checked, bound to exactly what it checked.

This module is the one owner of the format; everything else passes its objects.

API (stable)::

    StageStatus   StrEnum passed | failed | skipped | not-applicable
    Verdict       StrEnum passed | incomplete | failed | not-validated
    RunKind       StrEnum target | regression
    Gpu, Host, Stage, Run, Record              frozen dataclasses (the schema)
    digest(upstream, patchset, base, series, patches, settings) -> "sha256:..."
    version_digest(version, settings) -> "sha256:..."    (a patchset.Version)
    read_record(path) -> Record | None     None when absent; ConfigError (file, JSON path)
    read_run_file(path) -> Record          a --out file: a record with >= 1 run; ConfigError
    record_json(record) -> str             the one writer (scrubbed); --out files too
    combine(runs) -> dict[stage name, StageStatus]   merge rule across runs of one arch
    verdict_of(stages) -> Verdict;  unmet(stages, require) -> required stages not passed
    mismatch(record, upstream, patchset, base, digest) -> "" or what differs
    ArchVerdict, arch_verdicts(record, require) -> list[ArchVerdict]
    Standing, standing(path, upstream, patchset, base, digest, require) -> Standing
        whether a version is validated: verdicts per arch, or "not validated" and why
    add_run(record, run, replace_same_host=...) -> Record

Schema 2 (``"schema": 2``)::

    {"schema": 2, "upstream", "patchset", "base": <40-hex>, "digest": "sha256:<64-hex>",
     "runs": [{"id", "kind": "target"|"regression", "arch", "cuda_arch", "compute",
               "host": {"hostname", "python", "platform", "nvcc", "nvcc_path",
                        "nvidia_smi", "gpus": [{"name", "compute_capability"}], ...},
               "contrib_version", "started_at", "finished_at", "applied",
               "stages": [{"name", "status", "reason", "duration_s", "counts",
                           "findings": [...], "details": {...}}]}]}

A run file (``contrib validate --out FILE``) has the same format: a record holding
the runs made by that invocation, so ``--merge`` is a union of records.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contrib.errors import ConfigError
from contrib.secrets import scrub
from contrib.validate import ERROR, INFO, Finding

if TYPE_CHECKING:
    from contrib.patchset import Version
    from contrib.validate.settings import Settings

SCHEMA = 2
_SHA = re.compile(r"^[0-9a-f]{40}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ARCH = re.compile(r"^sm_\d{2,3}[af]?$")
_COMPUTE = re.compile(r"^compute_\d{2,3}[af]?$")
_STAGE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
_RERUN = "re-run `contrib validate`"


class StageStatus(StrEnum):
    """What one stage of one run did."""

    PASSED = "passed"  # it ran and found nothing blocking
    FAILED = "failed"
    SKIPPED = "skipped"  # it had something to check and could not check it here
    NOT_APPLICABLE = "not-applicable"  # nothing to check (e.g. no [[requires]] declared)


class Verdict(StrEnum):
    """A version's verdict for one architecture."""

    PASSED = "passed"  # every stage ran and passed (not-applicable ones aside)
    INCOMPLETE = "incomplete"  # nothing failed, something was skipped
    FAILED = "failed"
    NOT_VALIDATED = "not-validated"  # no record bound to exactly this version


class RunKind(StrEnum):
    """A run for the patchset's target arch, or a regression run for an arch admitted before."""

    TARGET = "target"
    REGRESSION = "regression"


# -- the schema ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi names it."""

    name: str
    compute_capability: str  # "12.0"


@dataclass(frozen=True)
class Host:
    """Where a run ran.  ``extra`` keeps further facts a newer contrib records."""

    hostname: str
    python: str = ""
    platform: str = ""
    nvcc: str | None = None
    nvcc_path: str | None = None
    nvidia_smi: bool = False
    gpus: tuple[Gpu, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """``vm, 2x NVIDIA H200 (sm 9.0), nvcc release 13.0``."""
        bits = [self.hostname or "unknown host"]
        labels: dict[str, int] = {}
        for gpu in self.gpus:
            label = f"{gpu.name} (sm {gpu.compute_capability})"
            labels[label] = labels.get(label, 0) + 1
        bits += [f"{n}x {label}" if n > 1 else label for label, n in labels.items()]
        if not self.gpus:
            bits.append("no GPU" if self.nvidia_smi else "no GPU (no nvidia-smi)")
        if self.nvcc:
            bits.append(f"nvcc {self.nvcc}")
        return ", ".join(bits)


@dataclass(frozen=True)
class Stage:
    """One stage of one run."""

    name: str
    status: StageStatus
    reason: str
    duration_s: float = 0.0
    counts: Mapping[str, int] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Run:
    """One ``contrib validate`` of one version for one arch on one host."""

    id: str
    kind: RunKind
    arch: str  # sm_120a
    cuda_arch: int  # __CUDA_ARCH__ of the device pass, 1200
    compute: str  # the virtual arch as the upstream builds it: compute_120a or compute_120f
    host: Host
    contrib_version: str
    started_at: str
    finished_at: str
    stages: tuple[Stage, ...]
    applied: str | None = None  # the patched commit, when the series applied

    def stage(self, name: str) -> Stage | None:
        """This run's stage called ``name``."""
        return next((s for s in self.stages if s.name == name), None)


@dataclass(frozen=True)
class Record:
    """validation.json: every run of one version, and what that version was."""

    upstream: str
    patchset: str
    base: str
    digest: str
    runs: tuple[Run, ...] = ()

    @property
    def target(self) -> str:
        return f"{self.upstream}/{self.patchset}"

    def archs(self) -> list[str]:
        """Archs with a run, in first-run order."""
        return list(dict.fromkeys(r.arch for r in self.runs))


# -- the digest ---------------------------------------------------------------------------


def digest(upstream: str, patchset: str, base: str, series: Sequence[str],
           patches: Sequence[bytes], settings: Settings) -> str:
    """sha256 over what a record validated: names, base, series, patch bytes, settings."""
    head = {"upstream": upstream, "patchset": patchset, "base": base, "series": list(series),
            "settings": settings.digest_view()}
    h = hashlib.sha256(b"contrib-validation-2\0")
    h.update(json.dumps(head, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    for name, data in zip(series, patches, strict=True):
        h.update(b"\0%d\0%s\0" % (len(data), name.encode("utf-8")))
        h.update(data)
    return "sha256:" + h.hexdigest()


def version_digest(version: Version, settings: Settings) -> str:
    """The digest of a version as it is on disk now (PatchError if its series is broken)."""
    ps = version.patchset
    texts = version.patch_texts()
    return digest(ps.upstream, ps.name, version.base, [n for n, _ in texts],
                  [b for _, b in texts], settings)


# -- the reader ---------------------------------------------------------------------------


class _Json:
    """A JSON value and its path (``$.runs[0].stages[2].status``), for one-line errors."""

    def __init__(self, file: Path, value: Any, path: str = "$") -> None:
        self.file, self.value, self.path = file, value, path

    def fail(self, what: str) -> ConfigError:
        return ConfigError(f"{self.file}: {self.path}: {what}; {_RERUN}")

    def key(self, name: str, required: bool = True) -> _Json:
        obj = self.obj()
        if name not in obj and required:
            raise _Json(self.file, None, f"{self.path}.{name}").fail("missing")
        return _Json(self.file, obj.get(name), f"{self.path}.{name}")

    def obj(self) -> dict[str, Any]:
        if not isinstance(self.value, dict):
            raise self.fail(f"expected an object, got {_kind(self.value)}")
        return self.value

    def items(self) -> list[_Json]:
        if not isinstance(self.value, list):
            raise self.fail(f"expected a list, got {_kind(self.value)}")
        return [_Json(self.file, v, f"{self.path}[{i}]") for i, v in enumerate(self.value)]

    def text(self, pattern: re.Pattern[str] | None = None, optional: bool = False) -> Any:
        if optional and self.value is None:
            return None
        if not isinstance(self.value, str):
            raise self.fail(f"expected a string, got {_kind(self.value)}")
        if pattern is not None and not pattern.fullmatch(self.value):
            raise self.fail(f"{self.value[:60]!r} is not of the form {pattern.pattern}")
        return self.value

    def integer(self, low: int = 0, high: int = 10**12) -> int:
        v = self.value
        if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
            raise self.fail(f"expected an integer in [{low}, {high}], got {_kind(v)}")
        return v

    def number(self) -> float:
        v = self.value
        if not isinstance(v, int | float) or isinstance(v, bool) or not 0 <= v < 10**9:
            raise self.fail(f"expected a non-negative number, got {_kind(v)}")
        return float(v)

    def boolean(self) -> bool:
        if not isinstance(self.value, bool):
            raise self.fail(f"expected true or false, got {_kind(self.value)}")
        return self.value

    def enum(self, kind: type[StrEnum]) -> Any:
        text = self.text()
        try:
            return kind(text)
        except ValueError:
            raise self.fail(f"{text[:40]!r} is not one of {', '.join(kind)}") from None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _load(path: Path) -> _Json:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{path}: not valid JSON ({str(exc)[:80]}); {_RERUN}") from None
    return _Json(path, data)


def _schema(doc: _Json) -> None:
    schema = doc.key("schema").value
    if isinstance(schema, int) and not isinstance(schema, bool) and schema < SCHEMA:
        raise OldFormat(f"{doc.file}: old format (schema {schema}); {_RERUN}")
    if schema != SCHEMA:
        raise doc.key("schema").fail(f"expected {SCHEMA}, got {schema!r}")


class OldFormat(ConfigError):
    """A validation.json from before records were bound by a digest."""


def _header(doc: _Json) -> tuple[str, str, str, str]:
    doc.obj()
    _schema(doc)
    from contrib.config import NAME_RE

    names = tuple(doc.key(k).text(NAME_RE) for k in ("upstream", "patchset"))
    return names[0], names[1], doc.key("base").text(_SHA), doc.key("digest").text(_DIGEST)


def read_record(path: Path) -> Record | None:
    """validation.json as a Record; None when there is none; ConfigError naming what is wrong."""
    if not path.exists() and not path.is_symlink():
        return None
    doc = _load(path)
    upstream, patchset, base, dig = _header(doc)
    runs = tuple(_run(item) for item in doc.key("runs").items())
    ids = [r.id for r in runs]
    if len(set(ids)) != len(ids):
        raise doc.key("runs").fail("two runs share one id")
    return Record(upstream, patchset, base, dig, runs)


def read_run_file(path: Path) -> Record:
    """A file ``contrib validate --out`` wrote (a record of its runs); ConfigError if bad."""
    record = read_record(path)
    if record is None:
        raise ConfigError(f"{path}: no such file")
    if not record.runs:
        raise ConfigError(f"{path}: $.runs: empty; nothing to merge")
    return record


def _run(doc: _Json) -> Run:
    doc.obj()
    stages = tuple(_stage(s) for s in doc.key("stages").items())
    return Run(
        id=doc.key("id").text(re.compile(r"^[A-Za-z0-9._:-]{1,100}$")),
        kind=doc.key("kind").enum(RunKind), arch=doc.key("arch").text(_ARCH),
        cuda_arch=doc.key("cuda_arch").integer(100, 9990), compute=doc.key("compute").text(_COMPUTE),
        host=_host(doc.key("host")), contrib_version=doc.key("contrib_version").text(),
        started_at=doc.key("started_at").text(), finished_at=doc.key("finished_at").text(),
        stages=stages, applied=doc.key("applied", required=False).text(_SHA, optional=True),
    )  # fmt: skip


_HOST_KEYS = {"hostname", "python", "platform", "nvcc", "nvcc_path", "nvidia_smi", "gpus"}


def _host(doc: _Json) -> Host:
    obj = doc.obj()
    gpus = tuple(Gpu(g.key("name").text(), g.key("compute_capability").text(
        re.compile(r"^\d{1,2}\.\d$"))) for g in doc.key("gpus").items())
    return Host(
        hostname=doc.key("hostname").text(), python=doc.key("python").text(),
        platform=doc.key("platform").text(), nvcc=doc.key("nvcc").text(optional=True),
        nvcc_path=doc.key("nvcc_path").text(optional=True),
        nvidia_smi=doc.key("nvidia_smi").boolean(), gpus=gpus,
        extra={k: v for k, v in obj.items() if k not in _HOST_KEYS},
    )  # fmt: skip


def _stage(doc: _Json) -> Stage:
    doc.obj()
    counts = {k: doc.key("counts").key(k).integer() for k in doc.key("counts").obj()}
    details = doc.key("details", required=False)
    return Stage(
        name=doc.key("name").text(_STAGE), status=doc.key("status").enum(StageStatus),
        reason=doc.key("reason").text(), duration_s=doc.key("duration_s").number(),
        counts=counts, findings=tuple(_finding(f) for f in doc.key("findings").items()),
        details=details.obj() if details.value is not None else {},
    )  # fmt: skip


def _finding(doc: _Json) -> Finding:
    severity = doc.key("severity").text()
    if severity not in (ERROR, INFO):
        raise doc.key("severity").fail(f"expected {ERROR!r} or {INFO!r}")
    return Finding(
        kind=doc.key("kind").text(), severity=severity, file=doc.key("file").text(),
        line=doc.key("line").integer(0, 10**9), message=doc.key("message").text(),
        guard=doc.key("guard", required=False).text(optional=True),
        waived=doc.key("waived", required=False).text(optional=True),
    )  # fmt: skip


# -- the writer ---------------------------------------------------------------------------


def _host_dict(host: Host) -> dict[str, Any]:
    return {"hostname": host.hostname, "python": host.python, "platform": host.platform,
            "nvcc": host.nvcc, "nvcc_path": host.nvcc_path, "nvidia_smi": host.nvidia_smi,
            "gpus": [{"name": g.name, "compute_capability": g.compute_capability}
                     for g in host.gpus], **host.extra}  # fmt: skip


def stage_dict(stage: Stage) -> dict[str, Any]:
    """One stage as validation.json (and ``--json``) holds it."""
    return {"name": stage.name, "status": str(stage.status), "reason": stage.reason,
            "duration_s": round(stage.duration_s, 3), "counts": dict(stage.counts),
            "findings": [f.to_dict() for f in stage.findings], "details": dict(stage.details)}


def run_dict(run: Run) -> dict[str, Any]:
    """One run as validation.json holds it."""
    return {"id": run.id, "kind": str(run.kind), "arch": run.arch, "cuda_arch": run.cuda_arch,
            "compute": run.compute, "host": _host_dict(run.host),
            "contrib_version": run.contrib_version, "started_at": run.started_at,
            "finished_at": run.finished_at, "applied": run.applied,
            "stages": [stage_dict(s) for s in run.stages]}  # fmt: skip


def _head(upstream: str, patchset: str, base: str, dig: str) -> dict[str, Any]:
    return {"schema": SCHEMA, "upstream": upstream, "patchset": patchset, "base": base,
            "digest": dig}


def _text(data: dict[str, Any]) -> str:
    return scrub(json.dumps(data, indent=2, ensure_ascii=False)) + "\n"


def record_json(record: Record) -> str:
    """validation.json text (scrubbed: no token ever reaches a file)."""
    return _text({**_head(record.upstream, record.patchset, record.base, record.digest),
                  "runs": [run_dict(r) for r in record.runs]})


# -- verdicts -----------------------------------------------------------------------------


def combine(runs: Iterable[Run]) -> dict[str, StageStatus]:
    """Each stage's status across runs of one arch.

    A stage passed where some run passed it and none failed it; it failed where
    any run failed it; it is not-applicable only where every run said so; else skipped.
    """
    seen: dict[str, set[StageStatus]] = {}
    for run in runs:
        for stage in run.stages:
            seen.setdefault(stage.name, set()).add(stage.status)
    out = {}
    for name, statuses in seen.items():
        if StageStatus.FAILED in statuses:
            out[name] = StageStatus.FAILED
        elif StageStatus.PASSED in statuses:
            out[name] = StageStatus.PASSED
        elif statuses == {StageStatus.NOT_APPLICABLE}:
            out[name] = StageStatus.NOT_APPLICABLE
        else:
            out[name] = StageStatus.SKIPPED
    return out


@dataclass(frozen=True)
class ArchVerdict:
    """The verdict of one arch across its runs, and what open-pr needs of it."""

    arch: str
    verdict: Verdict
    stages: Mapping[str, StageStatus]
    runs: tuple[Run, ...]
    unmet: tuple[str, ...] = ()  # required stages that did not pass (failed, skipped, absent)
    waived: int = 0

    @property
    def skipped(self) -> list[str]:
        return [n for n, s in self.stages.items() if s == StageStatus.SKIPPED]

    @property
    def failed(self) -> list[str]:
        return [n for n, s in self.stages.items() if s == StageStatus.FAILED]

    def line(self) -> str:
        """``sm_120a: incomplete (skipped: tests)`` -- the verdict as it is."""
        notes = []
        if self.failed:
            notes.append("failed: " + ", ".join(self.failed))
        if self.skipped:
            notes.append("skipped: " + ", ".join(self.skipped))
        if self.waived:
            notes.append(f"{self.waived} finding(s) waived")
        return f"{self.arch}: {self.verdict}" + (f" ({'; '.join(notes)})" if notes else "")


def verdict_of(stages: Mapping[str, StageStatus]) -> Verdict:
    """failed if any stage failed; incomplete if any was skipped; else passed."""
    if not stages:
        return Verdict.INCOMPLETE
    values = set(stages.values())
    if StageStatus.FAILED in values:
        return Verdict.FAILED
    return Verdict.INCOMPLETE if StageStatus.SKIPPED in values else Verdict.PASSED


def unmet(stages: Mapping[str, StageStatus], require: Iterable[str]) -> tuple[str, ...]:
    """Required stages that did not pass (not-applicable counts as nothing to do)."""
    ok = (StageStatus.PASSED, StageStatus.NOT_APPLICABLE)
    return tuple(n for n in require if stages.get(n) not in ok)


def arch_verdicts(runs: Iterable[Run], require: Iterable[str]) -> list[ArchVerdict]:
    """One ArchVerdict per arch of ``runs``, in first-run order."""
    runs, require = list(runs), tuple(require)
    out = []
    for arch in dict.fromkeys(r.arch for r in runs):
        mine = tuple(r for r in runs if r.arch == arch)
        stages = combine(mine)
        waived = sum(1 for r in mine for s in r.stages for f in s.findings if f.waived is not None)
        out.append(ArchVerdict(arch, verdict_of(stages), stages, mine, unmet(stages, require),
                               waived))
    return out


@dataclass(frozen=True)
class Standing:
    """Whether a version is validated, as status and open-pr need to know it."""

    record: Record | None  # None when not validated
    reason: str  # why not validated ("" when it is bound)
    verdicts: tuple[ArchVerdict, ...] = ()

    @property
    def bound(self) -> bool:
        return self.record is not None

    def for_arch(self, arch: str) -> ArchVerdict | None:
        return next((v for v in self.verdicts if v.arch == arch), None)

    def summary(self) -> str:
        """``sm_120a: incomplete (skipped: tests); sm_90a: passed`` or ``not validated (why)``."""
        if self.record is None:
            return f"not validated ({self.reason})"
        return "; ".join(v.line() for v in self.verdicts) or "not validated (no runs)"


def mismatch(record: Record, upstream: str, patchset: str, base: str,
             dig: str) -> str:
    """What differs between a record and the version it is checked against ("" if bound)."""
    if (record.upstream, record.patchset) != (upstream, patchset):
        return f"foreign: recorded for {record.upstream}/{record.patchset}"
    if record.base != base:
        return f"foreign: recorded for base {record.base[:12]}, this version is {base[:12]}"
    if record.digest != dig:
        return ("stale: the series, a patch or the [validation] settings changed since it "
                "was validated")
    return ""


def standing(path: Path, upstream: str, patchset: str, base: str, dig: str,
             require: Iterable[str]) -> Standing:
    """Read ``path`` and check it is bound to this version; never raises for its content."""
    try:
        record = read_record(path)
    except OldFormat:
        return Standing(None, f"old format; {_RERUN}")
    except ConfigError as exc:
        return Standing(None, str(exc))
    if record is None:
        return Standing(None, f"no {path.name}; run `contrib validate {upstream}/{patchset}`")
    why = mismatch(record, upstream, patchset, base, dig)
    if why:
        return Standing(None, f"{why}; {_RERUN}")
    if not record.runs:
        return Standing(None, f"{path}: no runs; {_RERUN}")
    return Standing(record, "", tuple(arch_verdicts(record.runs, require)))


def add_run(record: Record, run: Run, *, replace_same_host: bool) -> Record:
    """``record`` with ``run`` added; idempotent for a run already there (same id).

    With ``replace_same_host`` (a fresh validate in the workspace) the runs of the
    same arch, kind and hostname are dropped first: they are superseded.
    """
    if any(r.id == run.id for r in record.runs):
        return record
    keep = [r for r in record.runs if not (replace_same_host and r.arch == run.arch
                                           and r.kind == run.kind
                                           and r.host.hostname == run.host.hostname)]
    return replace(record, runs=(*keep, run))
