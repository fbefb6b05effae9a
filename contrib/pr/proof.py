"""Whether a drafted opening is proven here: what the autopilot may propose upstream.

A draft (``contrib enable``'s, ``upstream_status = "Draft"``) is proven for its arch
when every stage that can prove the target's kernels passed in a run for that
arch: the ``gates`` stage (each touched gate admits the target) and the ``ptx``
stage on every unit the chain builds.  "Nothing failed" is not proof: a skipped
``ptx`` (nvcc or a header missing here) says nothing about the kernels.

What the chain reaches below its gates counts too (the audit's ``reached``
targets and ``units`` per gate, handed in as :class:`ChainGate`, since this
layer does not read the audit):

* prebuilt cubins a function of the chain fetches (flashinfer's trtllm-gen GEMM
  kernels, fetched by ``gen_trtllm_gen_gemm_module``): "runs prebuilt SM100 cubins",
  the majors the audit read for them, unless those name the target;
* a unit ``ptx`` compiled with no kernel of its own launches kernels built
  elsewhere (flashinfer's trtllm-gen runner loads prebuilt SM100 cubins);
* a JIT module whose own nvcc flags name other majors (``compute_100a``), an
  op built ahead of time (``torch.ops.NS.op``), a vendor library's kernels, a
  Triton or CuTe kernel compiled on the GPU at run time: no stage here builds
  them, and contrib does not read their binaries' arch lists;
* ``ptx`` not-applicable is proof only where the chain reaches no device code at
  all: every reached target only checks, and no gate builds a unit.

Nor is a draft proven that may change what the upstream already ships: the
``others`` stage must have passed (every unit at stake compiles as before for
the other archs the upstream builds, each touched gate decides them as
before) or had nothing to compare (not-applicable).

The result is values, not a verdict string: the stages that passed, those
skipped with their reasons, why it is held back, and whether a GPU of the
target ran it; and, for the PR body, the chain as ``contrib enable`` recorded it
(``[decisions]``, in order, with what the ``gates`` stage read of each gate before
and after the patch) and the units the ``ptx`` stage compiled below it.  Those
come from the record and ``patchset.toml`` only, so a hand-run ``open-pr`` and the
autopilot write the same body.  The dashboard, ``status`` and the PR body say them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contrib.arch import Arch, parse_arch
from contrib.errors import ContribError
from contrib.record import Run, Stage, StageStatus, Standing
from contrib.workspace.model import Patchset
from contrib.workspace.schema import Decided, GateAt

if TYPE_CHECKING:  # `contrib status` reads proofs without a chain: no source analysis loads
    from contrib.analysis.reach.endpoints import Endpoint


@dataclass(frozen=True)
class ChainGate:
    """What the audit says of one gate of a draft's chain."""

    at: GateAt  # where the gate is, at the version's base
    kind: str  # the audit's kind: jit, predicate, capability
    units: tuple[str, ...] = ()  # the CUDA units its function builds
    reached: tuple[Endpoint, ...] = ()  # what the audit says its code reaches


@dataclass(frozen=True)
class Opened:
    """One gate of the chain: its ``[decisions]`` entry, and what the ``gates`` stage
    read of it (the same file and function) before and after the patch."""

    label: str  # its ``[decisions]`` key: "file:line function" at the version's base
    at: GateAt | None = None  # the gate it names (None: a note's key)
    before: tuple[int, ...] | None = None  # majors admitted before; None: a new gate
    after: tuple[int, ...] | None = None  # None: not a literal contrib reads
    read: bool = False  # the gates stage read it
    left: bool = False  # ``enable`` left it as it is (its decision's ``done``)
    why: str = ""  # why it was left as it is


@dataclass(frozen=True)
class Built:
    """One CUDA unit below the chain, as the ``ptx`` stage compiled it."""

    path: str
    why: str  # "built by gen_norm_module", "changed", ...
    ok: bool
    entries: int
    kernels: tuple[str, ...] = ()


@dataclass
class Proof:
    """What a draft's record proves for its arch, and what it does not."""

    arch: str
    passed: list[str] = field(default_factory=list)  # "ptx: 1 kernel entry in 1 unit ..."
    skipped: list[str] = field(default_factory=list)  # "tests: no upstream test ..."
    failed: list[str] = field(default_factory=list)  # "tests: 2 failed ..."
    held: list[str] = field(default_factory=list)  # why it is not proposed
    gpu: bool = False  # a GPU of the target's major ran its tests or benchmark
    chain: list[Opened] = field(default_factory=list)  # [decisions], in order
    built: list[Built] = field(default_factory=list)  # the ptx stage's units
    compute: str = ""  # what the ptx stage compiled for: "compute_120a"
    ptx: Stage | None = None  # the ptx stage as the best run has it
    others: Stage | None = None  # the others stage (other archs unchanged) as the best run has it

    @property
    def validated(self) -> bool:
        """A run for the arch is in the record."""
        return bool(self.passed or self.skipped or self.failed)

    @property
    def proven(self) -> bool:
        return not self.held

    def why(self) -> str:
        """The hold-back reasons in one line."""
        return "; ".join(self.held)

    def to_dict(self) -> dict[str, Any]:
        return {"arch": self.arch, "proven": self.proven, "held": self.held,
                "passed": self.passed, "skipped": self.skipped, "gpu": self.gpu}


def prove(standing: Standing, arch: Arch, chain: Sequence[ChainGate] | None,
          decisions: Mapping[str, Decided] | None = None) -> Proof:
    """The proof of one version for ``arch``; ``chain``: None when no audit was at hand;
    ``decisions``: the patchset's ``[decisions]``, the gates ``enable`` opened."""
    proof = Proof(arch.name)
    verdict = standing.for_arch(arch.name)
    if verdict is None:
        proof.chain = opened(decisions or {}, None)
        proof.held.append(f"not validated for {arch.name}" if standing.bound
                          else f"not validated ({standing.reason})")
        return proof
    stages = _stages(proof, verdict.stages, verdict.runs)
    proof.gpu = any(_ran(r, name) and g.compute_capability.split(".")[0] == str(arch.major)
                    for r in verdict.runs for g in r.host.gpus for name in _ON_GPU)
    proof.chain = opened(decisions or {}, stages.get("gates"))
    _compiled(proof, stages.get("ptx"))
    _gates(proof, verdict.stages.get("gates"), stages.get("gates"))
    _ptx(proof, verdict.stages.get("ptx"), stages.get("ptx"), chain)
    proof.others = stages.get("others")
    _others(proof, verdict.stages.get("others"), proof.others)
    if chain is not None:
        proof.held += below(chain, arch)
    proof.held = list(dict.fromkeys(proof.held))
    return proof


def recorded(ps: Patchset, standing: Standing) -> Proof | None:
    """What ``ps``'s record proves for its arch, with the chain its ``[decisions]`` name:
    the record and patchset.toml only, so the autopilot's PR body is a hand-run
    ``open-pr``'s.  None when the arch is not one contrib knows."""
    try:
        arch = parse_arch(ps.arch)
    except ContribError:
        return None
    return prove(standing, arch, None, ps.info.decisions)


def _stages(proof: Proof, combined: Mapping[str, StageStatus],
            runs: Sequence[Run]) -> dict[str, Stage | None]:
    """Each stage as the best run has it; its reason under passed, skipped or failed."""
    stages = {name: _last(runs, name) for name in combined}
    for name, status in combined.items():
        stage = stages[name]
        reason = stage.reason if stage is not None else ""
        if status == StageStatus.PASSED:
            proof.passed.append(f"{name}: {reason}")
        elif status == StageStatus.SKIPPED:
            proof.skipped.append(f"{name}: {reason}")
        elif status == StageStatus.FAILED:
            proof.failed.append(f"{name}: {reason}")
            proof.held.append(f"{name} failed: {reason}")
    return stages


_ON_GPU = ("tests", "bench")  # the stages that run the patch on the host's GPUs


def _ran(run: Run, name: str) -> bool:
    stage = run.stage(name)
    return stage is not None and stage.status in (StageStatus.PASSED, StageStatus.FAILED)


def opened(decisions: Mapping[str, Decided], gates: Stage | None) -> list[Opened]:
    """The chain ``enable`` recorded, each gate with the ``gates`` stage's reading of it
    (the same file and function; the nearest line where a function holds several)."""
    read = [g for g in (gates.details.get("gates") or []) if isinstance(g, Mapping)] \
        if gates is not None else []
    out = []
    for label, decision in decisions.items():
        at = decision.at
        if decision.left:
            out.append(Opened(label, at, left=True, why=decision.why))
            continue
        same = [g for g in read if at is not None and g.get("file") == at.path
                and g.get("function") == at.function and isinstance(g.get("line"), int)]
        if at is None or not same:
            out.append(Opened(label, at))
            continue
        near = min(same, key=lambda g: abs(int(g["line"]) - at.line))
        out.append(Opened(label, at, _majors(near.get("majors_before")),
                          _majors(near.get("majors_after")), read=True))
    return out


def _majors(value: object) -> tuple[int, ...] | None:
    return tuple(int(m) for m in value) if isinstance(value, list) else None


def _compiled(proof: Proof, ptx: Stage | None) -> None:
    """The units the ptx stage compiled, or meant to."""
    proof.ptx = ptx
    if ptx is None:
        return
    proof.compute = str(ptx.details.get("compute") or "")
    proof.built = [Built(str(u.get("path")), str(u.get("why") or ""), bool(u.get("ok")),
                         int(u.get("entries") or 0), tuple(str(k) for k in u.get("kernels") or ()))
                   for u in _units(ptx.details)]


def _last(runs: Sequence[Run], name: str) -> Stage | None:
    """The stage as the best run has it: a passed one over a skipped one."""
    found = [s for r in runs if (s := r.stage(name)) is not None]
    order = (StageStatus.FAILED, StageStatus.PASSED, StageStatus.SKIPPED,
             StageStatus.NOT_APPLICABLE)
    return min(found, key=lambda s: order.index(s.status), default=None)


def _gates(proof: Proof, status: StageStatus | None, stage: Stage | None) -> None:
    if status is None or stage is None:
        proof.held.append("no gates stage in the record")
    elif status != StageStatus.PASSED and status != StageStatus.FAILED:
        proof.held.append(f"gates {status}: {stage.reason}")


def _ptx(proof: Proof, status: StageStatus | None, stage: Stage | None,
         chain: Sequence[ChainGate] | None) -> None:
    if status is None or stage is None:
        proof.held.append("no ptx stage in the record")
    elif status == StageStatus.SKIPPED:
        proof.held.append(f"ptx skipped: {stage.reason}")
    elif status == StageStatus.NOT_APPLICABLE:
        if chain is None:
            proof.held.append("ptx built nothing, and no audit of the chain shows that it "
                              "reaches no device code")
        else:
            proof.held += [f"ptx built nothing, yet the chain builds {unit}"
                           for unit in dict.fromkeys(u for g in chain for u in g.units)]
    elif status == StageStatus.PASSED:
        proof.held += kernel_less(stage.details)
        built = {str(u.get("path")) for u in _units(stage.details)}
        proof.held += [f"ptx did not build {unit}, which the chain builds"
                       for unit in dict.fromkeys(u for g in chain or () for u in g.units)
                       if unit not in built]


def _others(proof: Proof, status: StageStatus | None, stage: Stage | None) -> None:
    """Held unless the ``others`` stage passed or had nothing to compare (a failed one
    is held already, with its reason)."""
    if status is None or stage is None:
        proof.held.append("no others stage in the record (whether other archs change is "
                          "not shown): run contrib validate again")
    elif status == StageStatus.SKIPPED:
        proof.held.append(f"others skipped: {stage.reason}")


def _units(details: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    units = details.get("units")
    return [u for u in units if isinstance(u, Mapping)] if isinstance(units, list) else []


def kernel_less(details: Mapping[str, Any]) -> list[str]:
    """The JIT modules whose every unit compiled to no kernel entry: they launch kernels
    built elsewhere (prebuilt cubins, a library), which compiling here cannot prove.

    A unit's module is its ``builder`` key (the JIT function that builds it, "" for
    none).  A record written before that key existed cannot say which units a module
    builds: it proves nothing here, and is validated again."""
    units = _units(details)
    if any("builder" not in unit for unit in units):
        return ["the ptx record does not say which JIT module built each unit (it predates "
                "that): run contrib validate again"]
    modules: dict[str, list[Mapping[str, Any]]] = {}
    for unit in units:
        builder = unit.get("builder")
        if isinstance(builder, str) and builder:
            modules.setdefault(builder, []).append(unit)
    return [f"{name} compiles to no kernel of its own ({', '.join(str(u.get('path')) for u in units)}): "
            "it runs kernels built elsewhere (prebuilt cubins or a library), whose arch list "
            "contrib does not read"
            for name, units in modules.items()
            if all(u.get("ok") and not u.get("entries") for u in units)]


def below(chain: Sequence[ChainGate], arch: Arch) -> list[str]:
    """What the chain reaches that no stage here builds, one reason each."""
    out = []
    for gate in chain:
        for target in gate.reached:
            if target.kind == "checks":
                continue
            why = _unbuilt(target, arch)
            if why:
                out.append(why)
    return out


def _unbuilt(target: Endpoint, arch: Arch) -> str:
    where = f"{target.name} ({target.path})" if target.path else target.name
    if target.kind == "jit":
        if target.majors and arch.major not in target.majors:
            built = "/".join(f"SM{m}0" for m in target.majors)
            return f"runs {where}, built with nvcc flags for {built} only"
        return ""
    if target.kind == "cubin":
        if target.majors and arch.major in target.majors:
            return ""  # their arch list, as the audit read it, names the target
        made = "/".join(f"SM{m}0" for m in target.majors)
        if made:
            return f"runs prebuilt {made} cubins, fetched by {where}: none made for {arch.name}"
        return f"runs prebuilt cubins, fetched by {where}, whose arch list contrib does not read"
    if target.kind == "aot":
        return f"runs the ahead-of-time built op {target.name}, whose binaries' arch list " \
               "contrib does not read"
    if target.kind == "lib":
        return f"runs the kernels of {where}, whose binaries' arch list contrib does not read"
    if target.kind in ("triton", "cute", "cutile"):
        kind = {"triton": "Triton", "cute": "CuTe DSL", "cutile": "cuTile"}[target.kind]
        return f"runs the {kind} kernel {where}, compiled on the GPU at run time: no stage " \
               "here builds it"
    return f"reaches {target.kind} code {where}, which no stage here builds"
