"""One audited gate and the names of its classes, scopes and kinds."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

NEEDS_KERNEL_WORK = "needs-kernel-work"
GATE_ONLY = "gate-only"
NOT_BUILDABLE = "not-buildable"
INTENTIONAL = "intentional"
UNKNOWN = "unknown"
CLASSES = (NEEDS_KERNEL_WORK, NOT_BUILDABLE, GATE_ONLY, INTENTIONAL, UNKNOWN)

RUNTIME, TEST, BENCHMARK, EXAMPLE = "runtime", "test", "benchmark", "example"
SCOPES = (RUNTIME, TEST, BENCHMARK, EXAMPLE)

JIT = "jit"  # supported_major_versions=[...]
PREDICATE = "predicate"  # is_sm90_supported(), _is_hopper, ...
CAPABILITY = "capability"  # get_device_capability() >= (9, 0), major == 10, ...


@dataclass
class AuditGate:
    """A gate of one tree and what the audit made of it (the JSON shape, key for key)."""

    file: str
    line: int
    function: str
    kind: str
    admits: str  # "majors 9, 10" / "unknown"
    excludes_target: bool
    text: str = ""
    effect: str = ""  # why it does or does not turn the target away
    class_: str | None = None  # set only when it excludes the target
    scope: str = RUNTIME
    evidence: list[str] = field(default_factory=list)
    reason: str = ""  # for `unknown`, and how the class was reached
    comment: str = ""  # the upstream comment at the gate, if any
    message: str = ""  # what the refusal the target meets says (its raise's message)
    units: list[str] = field(default_factory=list)  # CUDA units its function builds
    builders: list[str] = field(default_factory=list)  # same-file functions it builds through
    calls: list[str] = field(default_factory=list)  # functions the gated code calls
    reached: list[str] = field(default_factory=list)  # what can class it (analysis.reach.Target)
    index: int = 0  # ordinal among the gates of one function and parser kind
    end_line: int = 0  # last line of the gate's expression
    parser_kind: str = ""  # validate's: supported_major_versions, condition, skip-condition
    covered_by: str | None = None
    opened_by: dict[str, Any] | None = None
    closed_by: dict[str, Any] | None = None
    below: list[dict[str, Any]] = field(default_factory=list)  # gates of the upstream below

    @property
    def key(self) -> tuple[str, str, str, int]:
        """How a gate is paired across two trees: file, function, kind, ordinal."""
        return (self.file, self.function, self.parser_kind, self.index)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``class`` spelled as such)."""
        data = asdict(self)
        data["class"] = data.pop("class_")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditGate:
        """Back from :meth:`to_dict` (the result cache)."""
        values = dict(data)
        values["class_"] = values.pop("class", None)
        return cls(**values)


def admitted_majors(admits: str) -> list[int]:
    """The majors of an ``admits`` text ("majors 9, 10"); none for "unknown"."""
    return [int(m) for m in admits.removeprefix("majors ").split(", ") if m.isdigit()]


def sort_key(gate: AuditGate) -> tuple[int, int, str, int]:
    """Runtime first, then by class (excluding gates first), file and line."""
    klass = CLASSES.index(gate.class_) if gate.class_ in CLASSES else len(CLASSES)
    return (SCOPES.index(gate.scope), klass, gate.file, gate.line)
