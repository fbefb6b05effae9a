"""The audit's working model: one gate, what it does to the target, and its class.

Decisions are values.  A gate's effect is an :class:`EffectKind` (refuses, falls
back, dispatches, ...) with a sentence beside it for people (:attr:`Decision.why`);
what a gate admits is a set of majors; what its code reaches is a tuple of
:class:`~contrib.analysis.reach.endpoints.Endpoint`.  Code that needs a decision
asks the kind, never the sentence.  The JSON document and the result cache are
written and read back in one place, :mod:`contrib.audit.serial`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from contrib.analysis.gates import Form
from contrib.analysis.reach.endpoints import Endpoint


class GateClass(StrEnum):
    """What lifting an excluding gate takes."""

    NEEDS_KERNEL_WORK = "needs-kernel-work"
    NOT_BUILDABLE = "not-buildable"
    GATE_ONLY = "gate-only"
    INTENTIONAL = "intentional"
    UNKNOWN = "unknown"


NEEDS_KERNEL_WORK = GateClass.NEEDS_KERNEL_WORK
NOT_BUILDABLE = GateClass.NOT_BUILDABLE
GATE_ONLY = GateClass.GATE_ONLY
INTENTIONAL = GateClass.INTENTIONAL
UNKNOWN = GateClass.UNKNOWN
CLASSES = tuple(GateClass)  # in this order in tables and counts


class Scope(StrEnum):
    """Where a gate's code runs: in the package, or in its tests, benchmarks or examples."""

    RUNTIME = "runtime"
    TEST = "test"
    BENCHMARK = "benchmark"
    EXAMPLE = "example"


RUNTIME, TEST, BENCHMARK, EXAMPLE = Scope.RUNTIME, Scope.TEST, Scope.BENCHMARK, Scope.EXAMPLE
SCOPES = tuple(Scope)


class GateKind(StrEnum):
    """How a gate names the GPU (a table column; the parser's own form is :class:`Form`)."""

    JIT = "jit"  # supported_major_versions=[...]
    PREDICATE = "predicate"  # is_sm90_supported(), _is_hopper, ...
    CAPABILITY = "capability"  # get_device_capability() >= (9, 0), major == 10, ...


JIT, PREDICATE, CAPABILITY = GateKind.JIT, GateKind.PREDICATE, GateKind.CAPABILITY


class EffectKind(StrEnum):
    """What a gate does to the target (:mod:`contrib.audit.finding.effect` decides it)."""

    # -- it excludes the target --
    OMITTED = "omitted"  # a JIT list or capability decorator without its major
    REFUSED = "refused"  # `if cond: raise` / `pytest.skip()` on the target
    SKIPPED = "skipped"  # `skipif(cond)` true on the target
    ASSERT_FAILS = "assert-fails"
    BRANCH_REFUSES = "branch-refuses"  # the elif the target takes raises or exits
    ELSE_REFUSES = "else-refuses"  # the else the target takes raises or exits
    ONLY_SAYS = "only-says"  # the branch the target takes only prints; the work is in the else
    FALLS_BACK = "falls-back"  # another branch, the generic path, serves the target
    VALUE_FALLS_BACK = "value-falls-back"  # a value false on the target, true on newer archs
    SKIPS_CODE = "skips-code"  # the target skips the body and has no other branch
    # -- it does not --
    LISTED = "listed"  # a JIT list or capability decorator with its major
    UNREAD = "unread"  # what it admits cannot be read
    ELSEWHERE = "elsewhere"  # an enclosing `if` sends the target elsewhere
    RUNS = "runs"  # a skip the target passes
    ASSERT_HOLDS = "assert-holds"
    TAKES_BRANCH = "takes-branch"
    EARLIER_BRANCH = "earlier-branch"  # an earlier branch of its chain serves the target
    ELIF = "elif"  # an elif of an arch chain, judged at the chain's first `if`
    CHOOSES = "chooses"  # chooses between paths; another branch serves the target
    EARLY_EXIT = "early-exit"  # the target takes the code after an early exit
    VALUE = "value"  # a value, not a branch (false or undecided on the target)
    VALUE_TRUE = "value-true"  # a value true on the target
    PREDICATE_VALUE = "predicate-value"  # an arch predicate's own definition: no decision

    @property
    def excludes(self) -> bool:
        """Whether the target is turned away (refused, or kept on a generic path)."""
        return self in _EXCLUDING

    @property
    def refuses(self) -> bool:
        """The target gets an error or a skip there, not a slower path."""
        return self.excludes and self not in _FALLING_BACK

    @property
    def stops(self) -> bool:
        """Running the gate's statement may end its block on the target: it raises,
        asserts, exits or skips (so what follows a call of its function is behind it)."""
        return self in _STOPPING

    @property
    def not_taken(self) -> bool:
        """An ``if`` on the arch whose body the target does not run."""
        return self in _NOT_TAKEN


_EXCLUDING = frozenset({EffectKind.OMITTED, EffectKind.REFUSED, EffectKind.SKIPPED,
                        EffectKind.ASSERT_FAILS, EffectKind.BRANCH_REFUSES,
                        EffectKind.ELSE_REFUSES, EffectKind.ONLY_SAYS, EffectKind.FALLS_BACK,
                        EffectKind.VALUE_FALLS_BACK, EffectKind.SKIPS_CODE})
_FALLING_BACK = frozenset({EffectKind.FALLS_BACK, EffectKind.VALUE_FALLS_BACK})
_STOPPING = frozenset({EffectKind.REFUSED, EffectKind.SKIPPED, EffectKind.ASSERT_FAILS,
                       EffectKind.BRANCH_REFUSES, EffectKind.ELSE_REFUSES})
_NOT_TAKEN = frozenset({EffectKind.CHOOSES, EffectKind.EARLIER_BRANCH, EffectKind.ELIF,
                        EffectKind.EARLY_EXIT, EffectKind.SKIPS_CODE, EffectKind.FALLS_BACK,
                        EffectKind.BRANCH_REFUSES, EffectKind.ELSE_REFUSES})


@dataclass(frozen=True)
class Decision:
    """A gate's effect on the target: the kind decides; ``why`` says it to people.
    ``flag``: the attribute a flag effect sets (``self.use_fp8``); ``returned``: the
    function whose returned value the gate is, when that value excludes the target."""

    kind: EffectKind
    why: str
    flag: str = ""
    returned: str = ""

    @property
    def excludes(self) -> bool:
        return self.kind.excludes

    def self_flag(self) -> str | None:
        """The attribute of ``self`` a flag effect sets, when it is one (``use_fp8``)."""
        attr = self.flag.removeprefix("self.")
        return attr if self.flag.startswith("self.") and attr.isidentifier() else None


NO_DECISION = Decision(EffectKind.UNREAD, "")

Step = Callable[[int, int, str], None]  # progress: done, of how many, what


Admits = frozenset[int] | None  # the majors a gate admits; None: it cannot be read


def admits_text(admits: Admits) -> str:
    """How a table and the JSON say what a gate admits: ``majors 9, 10``, ``unknown``."""
    if admits is None:
        return "unknown"
    return "majors " + (", ".join(map(str, sorted(admits))) or "none")


@dataclass
class AuditGate:
    """A gate of one tree and what the audit made of it."""

    file: str
    line: int
    function: str
    kind: GateKind
    admits: Admits
    excludes_target: bool
    text: str = ""
    effect: Decision = NO_DECISION  # why it does or does not turn the target away
    class_: GateClass | None = None  # set only when it excludes the target
    scope: Scope = RUNTIME
    evidence: list[str] = field(default_factory=list)
    reason: str = ""  # for `unknown`, and how the class was reached
    comment: str = ""  # the upstream comment at the gate, if any
    message: str = ""  # what the refusal the target meets says (its raise's message)
    units: list[str] = field(default_factory=list)  # CUDA units its function builds
    builders: list[str] = field(default_factory=list)  # same-file functions it builds through
    calls: list[str] = field(default_factory=list)  # call chains the gated code runs (to read)
    reached: tuple[Endpoint, ...] = ()  # what can class it
    index: int = 0  # ordinal among the gates of one function and parser form
    end_line: int = 0  # last line of the gate's expression
    parser_kind: Form | str = ""  # the gate parser's form (empty for a gate made by hand)
    covered_by: str | None = None
    opened_by: dict[str, Any] | None = None
    closed_by: dict[str, Any] | None = None
    below: list[dict[str, Any]] = field(default_factory=list)  # gates of the upstream below

    @property
    def key(self) -> tuple[str, str, str, int]:
        """How a gate is paired across two trees: file, function, parser form, ordinal."""
        return (self.file, self.function, str(self.parser_kind), self.index)

    @property
    def name(self) -> str:
        """Its function's own name (``forward`` of ``Layer.forward``)."""
        return self.function.rsplit(".", 1)[-1]

    def admits_major(self, major: int) -> bool | None:
        """Whether it admits ``major`` (None: what it admits cannot be read)."""
        return None if self.admits is None else major in self.admits

    def returns_decision(self) -> bool:
        """Whether the gate is the value its own function returns (a decision function:
        the gates testing its calls decide)."""
        return self.effect.returned != "" and self.effect.returned == self.name


def sort_key(gate: AuditGate) -> tuple[int, int, str, int]:
    """Runtime first, then by class (excluding gates first), file and line."""
    klass = CLASSES.index(gate.class_) if gate.class_ in CLASSES else len(CLASSES)
    return (SCOPES.index(gate.scope), klass, gate.file, gate.line)
