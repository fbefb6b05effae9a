"""The one reader of validation.json (and of ``--out`` run files).

Every field is checked for type and range; a failure is a :class:`ConfigError`
naming the file and the JSON path (``$.runs[0].stages[2].status``), exit 2.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from pathlib import Path
from typing import Any

from contrib.errors import ConfigError
from contrib.record.finding import ERROR, INFO, Finding
from contrib.record.schema import (
    _ARCH,
    _COMPUTE,
    _DIGEST,
    _RERUN,
    _SHA,
    _STAGE,
    HOST_KEYS,
    SCHEMA,
    Gpu,
    Host,
    Record,
    Run,
    RunKind,
    Stage,
    StageStatus,
)


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
    from contrib.workspace.config import NAME_RE

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
    )


def _host(doc: _Json) -> Host:
    obj = doc.obj()
    gpus = tuple(Gpu(g.key("name").text(), g.key("compute_capability").text(
        re.compile(r"^\d{1,2}\.\d$"))) for g in doc.key("gpus").items())
    return Host(
        hostname=doc.key("hostname").text(), python=doc.key("python").text(),
        platform=doc.key("platform").text(), nvcc=doc.key("nvcc").text(optional=True),
        nvcc_path=doc.key("nvcc_path").text(optional=True),
        nvidia_smi=doc.key("nvidia_smi").boolean(), gpus=gpus,
        extra={k: v for k, v in obj.items() if k not in HOST_KEYS},
        driver=doc.key("driver", required=False).text(optional=True),
    )


def _stage(doc: _Json) -> Stage:
    doc.obj()
    counts = {k: doc.key("counts").key(k).integer() for k in doc.key("counts").obj()}
    details = doc.key("details", required=False)
    return Stage(
        name=doc.key("name").text(_STAGE), status=doc.key("status").enum(StageStatus),
        reason=doc.key("reason").text(), duration_s=doc.key("duration_s").number(),
        counts=counts, findings=tuple(_finding(f) for f in doc.key("findings").items()),
        details=details.obj() if details.value is not None else {},
    )


def _finding(doc: _Json) -> Finding:
    severity = doc.key("severity").text()
    if severity not in (ERROR, INFO):
        raise doc.key("severity").fail(f"expected {ERROR!r} or {INFO!r}")
    return Finding(
        kind=doc.key("kind").text(), severity=severity, file=doc.key("file").text(),
        line=doc.key("line").integer(0, 10**9), message=doc.key("message").text(),
        guard=doc.key("guard", required=False).text(optional=True),
        waived=doc.key("waived", required=False).text(optional=True),
    )
