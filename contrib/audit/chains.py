"""A feature's chain across the stack and its verdict, as values: what a user turns
on (:class:`Feature`), each link of its chain (:class:`Link`), the verdict it comes
to (:class:`Chain`), and where the upstream below admits what it refuses
(:class:`Fix`).  The gates' own values are :mod:`contrib.audit.model`'s."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from contrib.analysis.jittarget import JitTarget
from contrib.audit.model import Evidence, GateClass

_BACKEND = "backend"  # the keyword an API feature's choice is passed by


class FeatureKind(StrEnum):
    """How a user turns a feature on."""

    FLAG = "flag"  # a server argument: --enable-x, --x=value
    API = "api"  # a public function of the package: pkg.fn, pkg.fn:backend=value
    ENV = "env"  # an environment variable the server reads: SGLANG_X=1, SGLANG_X=value


@dataclass(frozen=True)
class Feature:
    """One feature: its name as a user writes it, and what the code reads.

    ``attr``: the settings' attribute (``enable_flashinfer_allreduce_fusion``), the
    API's dotted name (``flashinfer.comm.trtllm_allreduce_fusion``) or the environment
    variable (``SGLANG_ENABLE_JIT_DEEPGEMM``); ``value``: the choice (``trtllm_mla``, a
    ``backend=`` value, a string the variable is compared with), or "" for a flag, a
    plain API or a variable set to 1.  ``listed``: the feature table follows it (a
    function only its module names, ``flashinfer.prefill.fmha_v2_prefill_deepseek``, is
    ``contrib why``'s to follow, not the table's).  ``default``: the choice (or the
    flag, true) a setting holds when the user names none (``--kv-cache-dtype=auto``)."""

    kind: FeatureKind
    name: str
    attr: str
    value: str = ""
    file: str = ""
    line: int = 0
    listed: bool = True
    default: bool = False  # what the setting holds when the user says nothing

    @property
    def keys(self) -> tuple[tuple[str, str], ...]:
        """What an API feature's call passes by keyword (``backend="cublaslt"``)."""
        return ((_BACKEND, self.value),) if self.kind == FeatureKind.API and self.value else ()


class Verdict(StrEnum):
    """What a feature comes to on the target (in this order in tables: worst first)."""

    CRASH = "crash"
    NEEDS_KERNEL_WORK = "needs-kernel-work"
    UNKNOWN = "unknown"
    GATE_ONLY = "gate-only"
    ON = "on"


VERDICTS = tuple(Verdict)


class Role(StrEnum):
    """What a link of a chain is."""

    READ = "read"  # where the tree reads the feature's setting
    GATE = "gate"  # a gate of the tree on the way
    CALL = "call"  # a call into the upstream below
    BELOW = "below"  # a gate of the upstream below, on the way
    BEHIND = "behind"  # a gate below one that turned the target away: opened with it
    SHIPS = "ships"  # the prebuilt object a call ends in, and its image for the target
    BUILDS = "builds"  # the target a JIT module is built for, and whether the GPU runs it


GATE_ROLES = (Role.GATE, Role.BELOW, Role.BEHIND)


@dataclass(frozen=True)
class Link:
    """One link: where (upstream, commit, file, line, function), what it admits, its
    effect and class when it is a gate, and why, for people; a JIT build's target is
    ``builds`` (where it is chosen is the link's place)."""

    role: Role
    upstream: str
    commit: str
    file: str
    line: int
    function: str
    admits: str = ""
    excludes: bool = False
    refuses: bool = False
    class_: GateClass | None = None
    why: str = ""
    evidence: tuple[Evidence, ...] = ()  # the guards, kernels or ops behind its class (a few)
    builds: JitTarget | None = None  # a BUILDS link's reading

    @property
    def spot(self) -> str:
        """``FILE:FUNCTION``, as ``contrib enable`` takes it."""
        return f"{self.file}:{self.function.rsplit('.', 1)[-1]}"


@dataclass(frozen=True)
class Fix:
    """Where the upstream below first admits the target at a gate its pinned version
    refuses: the release (``tag``) and the commit that opened it, with its subject and
    PR (``#3903``, or "" when the subject names none)."""

    upstream: str
    tag: str
    commit: str
    subject: str
    pr: str

    @property
    def step(self) -> str:
        """The next step, in words."""
        pr = f", {self.upstream}{self.pr}" if self.pr else ""
        return (f"bump the pin to {self.upstream} {self.tag}, the first release that admits "
                f"the target there (opened by {self.commit[:9]}{pr}: {self.subject})")


@dataclass(frozen=True)
class Chain:
    """A feature's links in the order the code runs them, and its verdict.  ``where``:
    the link that decided it, in a few words (``refused by flashinfer v0.5.3
    flashinfer/jit/comm.py:60 gen_trtllm_comm_module``); ``fix``: for a crash, the
    release of the upstream below that admits the target there, if one does."""

    feature: Feature
    links: tuple[Link, ...] = ()
    verdict: Verdict = Verdict.UNKNOWN
    reason: str = ""
    where: str = ""
    fix: Fix | None = None

    @property
    def gated(self) -> bool:
        """Whether any gate stands on the way (a chain with none is not worth a row)."""
        return any(link.role in GATE_ROLES for link in self.links)

