"""The audit's working model: one gate, what it does to the target, and its class;
a feature's chain across the stack, and its verdict.

Decisions are values.  A gate's effect is an :class:`EffectKind` (refuses, falls
back, dispatches, ...) with a sentence beside it for people (:attr:`Decision.why`);
what a gate admits is a :class:`~contrib.analysis.archvalues.Capabilities` (whole majors,
single capabilities where the code names minors); what its code reaches is a tuple of
:class:`~contrib.analysis.reach.endpoints.Endpoint`, the calls it runs tuples of
names; its class stands on a :class:`Basis`, with :class:`Evidence` (a place, a
finding's kind, the guard) and the gates :class:`Below` it.  A gate is frozen: each
stage (finding, classing, the stack link, coverage) hands on a new one.  Code that
needs a decision asks the kind or the field, never the sentence.  Every written form
(the JSON document, the result, link and features caches) is written and read back in
one place, :mod:`contrib.audit.serial`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import NamedTuple

from contrib.analysis.archvalues import Capabilities
from contrib.analysis.gates import Form
from contrib.analysis.opening import Opens
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


Admits = Capabilities | None  # what a gate admits; None: it cannot be read


def admits_text(admits: Admits) -> str:
    """How a table and the JSON say what a gate admits: ``majors 9, 10``, ``majors 10
    and capability 12.0``, ``unknown``."""
    if admits is None:
        return "unknown"
    return admits.text()


class Basis(StrEnum):
    """What an excluding gate's class stands on (:attr:`AuditGate.basis`): code asks
    this, people read the reason beside it."""

    # the CUDA units a JIT module builds for the target (the #if and C/C++ reading)
    COMPILED_OUT = "compiled-out"  # kernels or statements compiled out, ISA or a host check
    WRITTEN_FOR = "written-for"  # nothing compiled out, but its code is named for other archs
    UNITS_READ = "units-read"  # nothing compiled out for the target
    NO_UNIT = "no-unit"  # the gate names no CUDA unit of the tree
    # what a Python gate's code reaches
    TRITON = "triton"  # a Triton kernel: compiled for the GPU it runs on
    CUTILE = "cutile"  # a cuTile kernel
    CUTE = "cute"  # a CuTe DSL kernel, by its archs
    CHECKS_ONLY = "checks-only"  # it guards only checks (asserts, raises, log lines)
    LIBRARY = "library"  # a vendor library's kernels
    CUBIN = "cubin"  # prebuilt cubins, by the archs they are made for
    HOST_REFUSAL = "host-refusal"  # the launcher of prebuilt cubins refuses in C++
    ADMITTED = "admitted"  # a JIT module whose own gate admits the target
    NAMED_FOR = "named-for"  # admits only what its code (or its callers) is named for
    UNREAD = "unread"  # what its code reaches cannot be classed
    NOTHING_REACHED = "nothing-reached"  # no kernel of any kind is reached
    # upstream's intent, and values deciding nothing themselves
    UPSTREAM_SAYS = "upstream-says"  # its comment leaves the target out on purpose
    INTENDED_VALUE = "intended-value"  # it tests a value an intentional gate makes false
    NAMES_TARGET = "names-target"  # its test names the target's family and turns it away
    # what a patch to its own test cannot open: no arch term a widening edits
    NO_ARCH_FORM = "no-arch-form"
    TESTED_BY = "tested-by"  # a returned arch value: the gates testing it decide
    BUILT_ON = "built-on"  # a returned arch value built on another one's
    # compiled (``contrib audit --compile``)
    NOT_COMPILED = "not-compiled"  # nvcc refuses a unit for the target
    NO_ENTRY = "no-entry"  # a unit compiles kernels for an admitted arch, none for the target
    EMPTY_ENTRIES = "empty-entries"  # entries compiled for the target do not do their work
    TARGET_LACKS = "target-lacks"  # a kernel needs an instruction or shared memory it lacks
    COMPILED = "compiled"  # compiled for the target with its entries whole
    HEADER_MISSING = "header-missing"  # a unit nvcc cannot see: gate-only would stand unread
    # the stack below
    SERVED_OTHERWISE = "served-otherwise"  # another backend of the call serves the target
    BELOW_HOLLOW = "below-hollow"  # the way below reaches kernels missing for the target
    BELOW_INTENT = "below-intent"  # the one way below leaves the target out on purpose
    BELOW_GATED = "below-gated"  # a gate below turns the target from kernels it can run
    BELOW_ADMITS = "below-admits"  # every gate on the way below admits the target
    BELOW_CODE = "below-code"  # no gate below: what the calls there run


Call = tuple[str, ...]  # a call chain, outermost first: ("helper", "get_x_module")


class Place(NamedTuple):
    """A line of a file: where a finding or a guard is."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Evidence:
    """One thing a class stands on: where it was seen and what was seen there.

    ``where`` is a file, a ``file:line`` or a name (``gen_x_sm100_module``); ``path``
    and ``line``: the file it is in and the line, when it is in one of the tree's (and
    on one); ``guard``: the ``#if``
    that compiled it out; ``upstream``: the upstream below where it was read (empty:
    this tree).  People read it as one line (:meth:`__str__`); code reads the fields.
    """

    where: str
    path: str = ""
    kind: str = ""  # the finding's kind ("empty-kernel"), when a finding
    says: str = ""
    guard: Place | None = None
    upstream: str = ""
    line: int = 0  # the line of ``path`` it is on, when one

    def __str__(self) -> str:
        text = self.where + (f" {self.kind}" if self.kind else "")
        text += f" (guard {self.guard})" if self.guard else ""
        text += f": {self.says}" if self.kind or self.says else ""
        return f"{self.upstream}:{text}" if self.upstream else text

    def below(self, upstream: str) -> Evidence:
        """The same evidence, read in the upstream ``upstream`` below."""
        return replace(self, upstream=upstream)

    @property
    def at(self) -> Place | None:
        """Where it stands in the tree it was read in: its guard, else its own line."""
        if self.guard is not None:
            return self.guard
        return Place(self.path, self.line) if self.path and self.line else None


@dataclass(frozen=True)
class Blame:
    """The commit that flipped a gate between two commits (``opened_by``/``closed_by``)."""

    sha: str
    subject: str
    pr: int | None = None


@dataclass(frozen=True)
class Below:
    """A gate of the upstream below that an upper gate's code reaches, and the way there."""

    upstream: str
    tag: str
    commit: str
    file: str
    line: int
    function: str
    admits: Admits
    excludes_target: bool
    class_: GateClass | None
    effect: str  # what it does to the target, as the lower audit says it
    calls: str  # the lower upstream's function this tree's code calls
    via: Call  # from this tree's code to the lower gate's function


@dataclass(frozen=True)
class Mismatch:
    """A gate admitting the target whose code reaches a lower gate refusing it: the
    target crashes there."""

    file: str
    line: int
    function: str
    below: Below  # the first refusing gate below
    message: str


@dataclass(frozen=True)
class AuditGate:
    """A gate of one tree and what the audit made of it.

    A stage hands on a new value (:func:`dataclasses.replace`), never changes the one
    it was given: finding makes it, classing sets ``class_``, ``reason``,
    ``evidence`` and ``units``, the stack link ``below`` (and a class from below),
    coverage ``covered_by``, ``opened_by`` and ``closed_by``."""

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
    evidence: tuple[Evidence, ...] = ()
    reason: str = ""  # for `unknown`, and how the class was reached
    comment: str = ""  # the upstream comment at the gate, if any
    message: str = ""  # what the refusal the target meets says (its raise's message)
    units: tuple[str, ...] = ()  # CUDA units its function builds
    builders: tuple[str, ...] = ()  # same-file functions it builds through
    calls: tuple[Call, ...] = ()  # call chains the gated code runs (to read)
    reached: tuple[Endpoint, ...] = ()  # what can class it
    index: int = 0  # ordinal among the gates of one function and parser form
    end_line: int = 0  # last line of the gate's expression
    parser_kind: Form | str = ""  # the gate parser's form (empty for a gate made by hand)
    covered_by: str | None = None
    opened_by: Blame | None = None
    closed_by: Blame | None = None
    below: tuple[Below, ...] = ()  # gates of the upstream below
    basis: Basis | None = None  # what its class stands on (None: no class)
    # how its own test opens to the target (contrib.analysis.opening; None: not read,
    # a gate that does not exclude it or one made by hand)
    opens: Opens | None = None

    @property
    def key(self) -> tuple[str, str, str, int]:
        """How a gate is paired across two trees: file, function, parser form, ordinal."""
        return (self.file, self.function, str(self.parser_kind), self.index)

    @property
    def name(self) -> str:
        """Its function's own name (``forward`` of ``Layer.forward``)."""
        return self.function.rsplit(".", 1)[-1]

    def admits_major(self, major: int) -> bool | None:
        """Whether it admits any capability of ``major`` (None: what it admits cannot
        be read); :meth:`admits_arch` asks for one architecture, minor included."""
        return None if self.admits is None else major in self.admits.majors

    def admits_arch(self, major: int, minor: int) -> bool | None:
        """Whether it admits the capability ``major.minor`` (None: cannot be read)."""
        return None if self.admits is None else self.admits.admits(major, minor)

    def returns_decision(self) -> bool:
        """Whether the gate is the value its own function returns (a decision function:
        the gates testing its calls decide)."""
        return self.effect.returned != "" and self.effect.returned == self.name

    def classed(self, class_: GateClass | None, basis: Basis | None, reason: str,
                evidence: tuple[Evidence, ...] | None = None) -> AuditGate:
        """This gate with its class, what it stands on, the reason in words and (when
        given) its evidence.  ``gate-only`` says a patch to this gate opens it, which
        ``contrib enable`` drafts by the form of its test (:attr:`opens`, the rule both
        take): a runtime test naming the target's family that turns it away all the
        same is upstream's refusal by name (``intentional``; a test's skip naming it
        changes no behaviour of the library, and upstream drops such skips as it opens
        the code: flashinfer's openings at f3e036d94, 7b83d0c54, c857f095a), and one
        with no arch term an edit
        widens tests a value decided elsewhere (``unknown``, until that value's source
        classes it); the reading that found no kernel work stays in the reason."""
        if class_ == GateClass.GATE_ONLY and self.opens is Opens.NAMES_TARGET \
                and self.scope == RUNTIME:
            class_, basis = GateClass.INTENTIONAL, Basis.NAMES_TARGET
            reason = ("its test names the target's family and turns it away: upstream's "
                      "refusal of the target, which a person drops, not a gate a patch "
                      f"widens (no kernel work read: {reason})")
        elif class_ == GateClass.GATE_ONLY and self.opens is Opens.NO_FORM:
            class_, basis = GateClass.UNKNOWN, Basis.NO_ARCH_FORM
            reason = ("its test holds no arch term a patch widens (a value decided "
                      f"elsewhere, or a form no edit opens); no kernel work read: {reason}")
        return replace(self, class_=class_, basis=basis, reason=reason,
                       evidence=self.evidence if evidence is None else evidence)


def sort_key(gate: AuditGate) -> tuple[int, int, str, int]:
    """Runtime first, then by class (excluding gates first), file and line."""
    klass = CLASSES.index(gate.class_) if gate.class_ in CLASSES else len(CLASSES)
    return (SCOPES.index(gate.scope), klass, gate.file, gate.line)


# -- features: what a user turns on, and what it comes to on the target -------------------
