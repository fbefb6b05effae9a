"""The validation pipeline: apply -> syntax -> gates -> arch-guards -> ptx -> others -> tests -> bench -> requires.

Each stage returns a :class:`StageResult`: ``passed`` (it ran and found nothing
blocking), ``failed``, ``skipped`` (it had something to check and could not check
it here: no tool, no GPU, a header missing) or ``not-applicable`` (nothing to check:
the patch touches no gate, no CUDA source, declares no ``[[requires]]``), with the
reason.  A stage that did not run is never ``passed``: a failed apply skips
everything after it with that reason.  :data:`STAGES` pairs the schema's table of stages
(:data:`contrib.workspace.validation.STAGES`) with the function that runs each.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contrib.analysis import cuda_arch, diffs, gates, includes, profiles, ptx, ptxjobs, units
from contrib.analysis.diffs import FileChange
from contrib.analysis.ptx import Outcome, first_error
from contrib.analysis.pyparse import PARSE_ERRORS
from contrib.analysis.tree import SourceTree
from contrib.analysis.waivers import apply_waivers
from contrib.arch import Arch, admitted_archs, nearest_lower
from contrib.errors import ConfigError, ContribError
from contrib.record.finding import INFO, Finding
from contrib.ui import counted
from contrib.validate import bench as benchrun
from contrib.validate import gputests, others, ptxstage, syntax, testsel
from contrib.validate.report import FAILED, NOT_APPLICABLE, PASSED, SKIPPED, StageResult
from contrib.validate.testrun import PROBE, GpuSource
from contrib.workspace import validation
from contrib.workspace.validation import Settings

if TYPE_CHECKING:
    from contrib.workspace.model import Patchset, Workspace


@dataclass
class Inputs:
    """What the command hands the pipeline; the library itself does no git work."""

    arch: Arch
    before: SourceTree  # upstream at the version's base
    after: SourceTree | None  # the patched tree; None when the series did not apply
    diff: str  # unified diff base -> patched
    apply_reason: str  # why apply passed/failed, e.g. "2 patches applied at abc123 with no fuzz"
    settings: Settings = field(default_factory=Settings)
    workdir: Path | None = None  # scratch space (ptx outputs, JUnit); a temp dir if None
    worktree: Callable[[], Path] | None = None  # makes a real checkout of the patched tree
    base_worktree: Callable[[], Path] | None = None  # and of the base tree (the bench's A side)
    python: str | None = None  # interpreter for upstream tests
    gpus: GpuSource = PROBE
    workspace: Workspace | None = None  # for [[requires]]: the other upstreams' caches
    patchset: Patchset | None = None
    # Hears (n, of N, what) as work starts: each stage, and a long stage's own steps
    # (units compiled, tests run) through Context.step.  contrib.ui.Task.step fits.
    progress: Callable[[int, int, str], None] | None = None


@dataclass
class Context:
    """Inputs plus what earlier stages learned (touched gates, CUDA sources)."""

    inputs: Inputs
    changes: list[FileChange] = field(default_factory=list)
    touched: list[gates.TouchedGate] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    closure: list[str] = field(default_factory=list)
    workdir: Path = Path(".")
    done: dict[str, StageResult] = field(default_factory=dict)  # the stages run so far
    at_stake: list[units.Unit] | None = None  # the CUDA units the patch puts at stake

    def step(self, done: int, total: int, what: str) -> None:
        """Report progress (a stage, a unit compiled, a test run) when someone listens."""
        if self.inputs.progress is not None:
            self.inputs.progress(done, total, what)

    @property
    def after(self) -> SourceTree:
        """The patched tree (only stages after a passed apply ask for it)."""
        assert self.inputs.after is not None
        return self.inputs.after


def run_pipeline(inputs: Inputs) -> list[StageResult]:
    """Run every stage in order; see the module docstring for the rules."""
    with tempfile.TemporaryDirectory(prefix="contrib-validate-") as scratch:
        ctx = Context(inputs, workdir=inputs.workdir or Path(scratch))
        results: list[StageResult] = []
        for stage in STAGES:
            name = stage.name
            ctx.step(len(results) + 1, len(STAGES), name)
            if results and results[0].status != PASSED:
                results.append(
                    StageResult(name, SKIPPED, f"not run: apply failed ({results[0].reason})")
                )
                continue
            started = time.monotonic()
            try:
                result = stage.run(ctx)
            except ConfigError:
                raise  # patchset.toml says something the run shows wrong: exit 2, file:line
            except ContribError as exc:
                result = StageResult(name, FAILED, f"could not complete: {exc}")
            result.duration = time.monotonic() - started
            results.append(result)
            ctx.done[name] = result
        return results


def stage_apply(ctx: Context) -> StageResult:
    """Apply happened in the caller (git); here we record its outcome and parse the diff."""
    inputs = ctx.inputs
    if inputs.after is None:
        return StageResult("apply", FAILED, inputs.apply_reason)
    ctx.changes = diffs.parse_diff(inputs.diff)
    files = [c.path for c in ctx.changes]
    return StageResult("apply", PASSED, inputs.apply_reason, details={"changed_files": files})


def stage_syntax(ctx: Context) -> StageResult:
    """Touched Python compiles; touched C/C++/CUDA balances #if/#endif."""
    findings, checked = syntax.check_files(
        ctx.after, [c.path for c in ctx.changes if not c.deleted]
    )
    if not checked:
        return StageResult("syntax", NOT_APPLICABLE, "the patch touches no Python or C/C++/CUDA file")
    findings = apply_waivers(findings, ctx.inputs.settings.waivers)
    return _verdict(
        "syntax", findings, f"{counted(len(checked), 'touched file')} {'checks' if len(checked) == 1 else 'check'} out", {"checked": checked}
    )


def stage_gates(ctx: Context) -> StageResult:
    """Architecture gates the patch touches, before and after; fail if one rejects the target."""
    arch = ctx.inputs.arch
    trees = (gates.tree_eval(ctx.inputs.before), gates.tree_eval(ctx.after))
    for change in ctx.changes:
        if not change.path.endswith(".py") or change.deleted:
            continue
        before = ctx.inputs.before.read_text(change.old_path) if change.old_path else None
        try:
            ctx.touched += gates.touched_gates(change.path, before, ctx.after.read_text(change.path) or "",
                                               change.touched, trees)
        except PARSE_ERRORS:  # hostile nesting too (MemoryError, RecursionError)
            continue  # the syntax stage reports it
    details = {"gates": [g.to_dict(arch) for g in ctx.touched]}
    if not ctx.touched:
        return StageResult(
            "gates", NOT_APPLICABLE, "the patch touches no architecture gate in Python",
            details=details,
        )
    findings = apply_waivers(gates.gate_findings(ctx.touched, arch), ctx.inputs.settings.waivers)
    return _verdict(
        "gates", findings, f"{counted(len(ctx.touched), 'touched gate')} {'admits' if len(ctx.touched) == 1 else 'admit'} {arch.name}", details
    )


def stage_arch_guards(ctx: Context) -> StageResult:
    """Evaluate __CUDA_ARCH__ guards in the sources the touched gates compile."""
    settings, arch, tree = ctx.inputs.settings, ctx.inputs.arch, ctx.after
    findings, sources = _resolve_sources(ctx)
    if not sources and findings:  # a gate names sources the tree lacks: not checked
        return StageResult("arch-guards", SKIPPED, "the CUDA sources the touched gates name "
                           "are not in the tree", findings)
    if not sources:
        return StageResult("arch-guards", NOT_APPLICABLE, "no touched gate names CUDA sources "
                           "and patchset.toml lists none (validation.sources)", findings)
    majors = {m for g in ctx.touched for m in g.majors_before} | set(settings.compare)
    compared = [a for a in admitted_archs(majors) if a.cuda_arch != arch.cuda_arch]
    resolver = includes.IncludeResolver(tree)
    closure = includes.include_closure(tree, sources, resolver)
    ctx.sources, ctx.closure = sources, closure.files
    details: dict[str, Any] = {"sources": sources, "files": closure.files,
                               "unresolved_includes": [f"{a}: {b}" for a, b in closure.unresolved]}
    if not compared:
        return StageResult("arch-guards", SKIPPED, f"no architecture other than {arch.name} was admitted "
                           "before the patch to compare with (set validation.compare)", findings, details=details)
    texts = {p: tree.read_text(p) or "" for p in closure.files}
    analysis = cuda_arch.analyze(texts, sources, arch, compared, resolver, settings.waivers)
    details["compared"] = [a.name for a in analysis.compared]
    findings += analysis.findings
    summary = f"{counted(len(closure.files), 'file')}: {arch.name} compiles what {', '.join(details['compared'])} compile"
    return _verdict("arch-guards", findings, summary, details)


def _resolve_sources(ctx: Context) -> tuple[list[Finding], list[str]]:
    findings, sources = [], []
    tree = ctx.after
    for gate in ctx.touched:
        for name in gate.sources:
            paths = includes.find_units(tree, [name])
            if not paths:
                findings.append(Finding("missing-source", INFO, gate.after.file, gate.after.line,
                                        f"{gate.after.function} names {name!r}, not found in the tree"))
            sources += [p for p in paths if p not in sources]
    extra = ctx.inputs.settings.sources + [
        c.path for c in ctx.changes if includes.is_cuda_source(c.path)
    ]
    for path in extra:
        if tree.exists(path) and path not in sources:
            sources.append(path)
    return findings, sources


def stage_ptx(ctx: Context) -> StageResult:
    """Compile every unit at stake to PTX as the upstream builds it; flag entries that are just ``ret;``."""
    if ctx.inputs.settings.compile:
        return _ptx_command(ctx)
    request = _ptx_request(ctx, ctx.after)
    return ptxstage.check(replace(request, reference=_reference(ctx)))


def _ptx_request(ctx: Context, tree: SourceTree,
                 lines: dict[str, tuple[str, int]] | None = None) -> ptxjobs.PtxRequest:
    """The units at stake in the patched tree, to be compiled from ``tree`` with the
    flags and folders its build and the touched gates' functions in it pass; ``lines``:
    where each kernel is (default: in the touched gates' sources)."""
    settings = ctx.inputs.settings
    if ctx.at_stake is None:  # the ptx and others stages compile the same units
        gate_sources = [(g.after.function, name) for g in ctx.touched for name in g.sources]
        ctx.at_stake = units.units_at_stake(ctx.after, gate_sources, [c.path for c in ctx.changes
                                                                      if not c.deleted],
                                            settings.ptx_sources)
    found = list(ctx.at_stake)
    gates = [(g.after.file, name) for g in ctx.touched for name in g.builders or [g.after.function]]
    return ptxjobs.PtxRequest(tree, ctx.inputs.arch, found, profiles.profile_for(tree),
                              settings.python or ctx.inputs.python,
                              units.gate_flags(tree, gates) + settings.ptx_flags,
                              settings.ptx_include_dirs, settings.waivers, ctx.workdir,
                              _kernel_lines(ctx) if lines is None else lines, progress=ctx.step,
                              tree_dirs=units.gate_include_dirs(tree, gates))


def stage_others(ctx: Context) -> StageResult:
    """The units at stake at base and patched, and the touched gates, on every other arch
    the upstream builds for; see :mod:`.others`."""
    ptx_stage = ctx.done.get("ptx")
    held = ptx_stage.reason if ptx_stage is not None and ptx_stage.status == SKIPPED and \
        ptx_stage.details.get("missing_headers") else ""
    changed = [c.path for c in ctx.changes if not c.deleted and includes.is_cuda_source(c.path)]
    patched = _ptx_request(ctx, ctx.after, {})
    patched.workdir = ctx.workdir / "others-patched"
    patched.kernel_lines = _kernel_lines(ctx, changed + [u.path for u in patched.units])
    base = replace(_ptx_request(ctx, ctx.inputs.before, {}), workdir=ctx.workdir / "others-base")
    return others.check(others.OthersRequest(ctx.inputs.arch, base, patched, ctx.touched,
                                             list(ctx.inputs.settings.compare), held))


def _reference(ctx: Context) -> Arch | None:
    """The arch admitted before that the target is compared with: the nearest below it
    (the lowest above it where none is below), as the arch-guards stage compares."""
    arch = ctx.inputs.arch
    majors = {m for g in ctx.touched for m in g.majors_before} | set(ctx.inputs.settings.compare)
    compared = [a for a in admitted_archs(majors) if a.cuda_arch != arch.cuda_arch]
    return nearest_lower(arch, compared) or (compared[0] if compared else None)


def _ptx_command(ctx: Context) -> StageResult:
    """Run patchset.toml's ``validation.compile`` in a worktree; read every .ptx it writes."""
    arch, command = ctx.inputs.arch, ctx.inputs.settings.compile
    if shutil.which(command[0]) is None:
        return StageResult(
            "ptx", SKIPPED, f"{command[0]} (from validation.compile) not found on PATH"
        )
    if ctx.inputs.worktree is None:
        return StageResult(
            "ptx", SKIPPED, "validation.compile needs a worktree, and none is available"
        )
    out = ctx.workdir / "ptx-out"
    out.mkdir(parents=True, exist_ok=True)
    subst = {"{compute}": arch.compute, "{arch}": arch.name, "{out}": str(out)}
    args = [_substitute(a, subst) for a in command]
    try:
        done = subprocess.run(
            args, cwd=ctx.inputs.worktree(), capture_output=True, text=True, timeout=1800
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return StageResult("ptx", FAILED, f"validation.compile could not run: {exc}")
    files = sorted(out.rglob("*.ptx"))
    outcomes = [ptx.parsed(str(f.relative_to(out)), f.read_text(encoding="utf-8", errors="replace"),
                           args) for f in files]
    if done.returncode != 0:
        error = (done.stderr or done.stdout).strip()
        outcomes.append(Outcome(" ".join(args), False, missing_header=ptx.missing_header(error),
                                error=error[-2000:], first_error=first_error(error), command=args))
    if not outcomes:
        return StageResult(
            "ptx", FAILED, f"validation.compile wrote no .ptx file under {{out}} ({out})"
        )
    details = {"compute": arch.compute, "units": [o.unit for o in outcomes],
               "entries": sum(len(o.entries) for o in outcomes), "cached": 0,
               "commands": [" ".join(args)]}
    # Every unit the command built is the patchset's own claim: a failure fails the stage.
    return ptxstage.judge(arch, _kernel_lines(ctx), ctx.inputs.settings.waivers, outcomes,
                          details, {o.unit for o in outcomes})


def _substitute(text: str, values: Mapping[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def _kernel_lines(ctx: Context, more: Sequence[str] = ()) -> dict[str, tuple[str, int]]:
    """Where each kernel of the touched gates' sources (and of ``more``) is defined."""
    from contrib.analysis.cscan import find_kernels, scan

    found: dict[str, tuple[str, int]] = {}
    for path in dict.fromkeys([*ctx.closure, *more]):
        for kernel in find_kernels(scan(path, ctx.after.read_text(path) or "")):
            found.setdefault(kernel.name, (path, kernel.line))
    return found


def stage_tests(ctx: Context) -> StageResult:
    """Run the selected upstream tests on the GPUs here: the target arch, and regressions.

    See :mod:`contrib.validate.gputests`: one run per arch whose GPU is present
    (the target, and each arch a touched gate admitted before); the target run is
    this stage, the regression runs travel in its details to be recorded apart.
    """
    inputs, settings = ctx.inputs, ctx.inputs.settings
    selection = testsel.select_tests(ctx.after, ctx.changes, settings.tests, settings.test_limit)
    details: dict[str, Any] = {"selected": selection.tests, "why": selection.reasons,
                               "changed_modules": selection.modules, "changed_functions": selection.functions}
    if selection.truncated:
        details["not_selected_over_limit"] = selection.truncated
    if not selection.tests:
        return StageResult("tests", SKIPPED, "no upstream test references the changed code", details=details)
    python = settings.python or inputs.python
    if python is None or inputs.worktree is None:
        return StageResult("tests", SKIPPED, "no interpreter or worktree to run upstream tests", details=details)
    plans = _plans(ctx)
    profile = profiles.profile_for(ctx.after)
    held = [gputests.not_started(ctx.after, selection.tests, p) for p in plans]
    runnable = [p for p, h in zip(plans, held, strict=True)
                if (p.gpus or not settings.tests_need_gpu) and h is None]
    worktree = inputs.worktree() if runnable else ctx.workdir  # no checkout when nothing can run
    if runnable:
        details["worktree_links"] = profiles.prepare_worktree(profile, worktree, python)
    traced = gputests.trace_changes(ctx.after, ctx.changes)
    setup = gputests.RunSetup(python, worktree, selection, ctx.workdir, profile, traced.kernels,
                              settings.waivers, settings.tests_need_gpu, tuple(settings.pytest_args),
                              traced.helpers)
    results = []
    for done, plan in enumerate(plans):
        ctx.step(done, len(plans), f"tests: run {done + 1} of {len(plans)} "
                 f"({len(selection.tests)} test files)")
        results.append(held[done] or gputests.run_planned(setup, plan))
    target, regressions = results[0], results[1:]
    target.details = {**details, **target.details, gputests.REGRESSIONS: regressions}
    if regressions:
        target.reason += "; " + "; ".join(f"regression run on {r.details['arch']}: {r.status} ({r.reason})"
                                          for r in regressions)
    return target


def _plans(ctx: Context) -> list[gputests.PlannedRun]:
    """The target run and a regression run per earlier-admitted arch whose GPU is here."""
    inputs = ctx.inputs
    slots = gputests.probe_slots() if inputs.gpus is PROBE else gputests.slots_of(inputs.gpus)
    before = {m for g in ctx.touched for m in g.majors_before} - {inputs.arch.major}
    return gputests.plan_runs(inputs.arch, admitted_archs(before), slots)


def stage_bench(ctx: Context) -> StageResult:
    """Time base against patched in interleaved pairs on each planned run; see :mod:`.bench`."""
    inputs, bench = ctx.inputs, ctx.inputs.settings.bench
    if bench is None:
        return StageResult("bench", NOT_APPLICABLE, "no [validation.bench] in patchset.toml")
    python = inputs.settings.python or inputs.python
    if python is None or inputs.worktree is None:
        return StageResult("bench", SKIPPED, "no interpreter or worktree to run the bench")
    plans = _plans(ctx) if bench.needs_gpu else _plans(ctx)[:1]
    profile = profiles.profile_for(ctx.after)
    base = _prepared(inputs.base_worktree, profile, python) if inputs.base_worktree else None
    patchset_dir = inputs.patchset.dir if inputs.patchset is not None else None
    setup = benchrun.BenchSetup(bench, python, base, _prepared(inputs.worktree, profile, python),
                                profile, ctx.workdir, patchset_dir,
                                deadline=time.monotonic() + bench.deadline)
    words = benchrun.command_words(setup, bench.command, inputs.arch)
    setup.gpus = benchrun.needed_gpus(bench, words, _script_reader(ctx, patchset_dir))
    results = []
    for done, plan in enumerate(plans):
        ctx.step(done, len(plans), f"bench: run {done + 1} of {len(plans)} ({plan.arch.name})")
        results.append(benchrun.run_planned(setup, plan))
    target, regressions = results[0], results[1:]
    target.details[gputests.REGRESSIONS] = regressions
    if regressions:
        target.reason += "; " + "; ".join(f"regression run on {r.details['arch']}: {r.status} "
                                          f"({r.reason})" for r in regressions)
    return target


def _script_reader(ctx: Context, patchset_dir: Path | None) -> Callable[[str], str | None]:
    """Read a script the bench command names: a file of the patchset, or of the patched tree."""
    def read(word: str) -> str | None:
        path = Path(word)
        inside = patchset_dir is not None and path.is_absolute() and path.is_relative_to(patchset_dir)
        if inside and path.is_file():
            try:
                return path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return None
        return None if path.is_absolute() or ctx.after is None else ctx.after.read_text(word)
    return read


def _prepared(make: Callable[[], Path], profile: profiles.Profile, python: str) -> Callable[[], Path]:
    """``make``, then the checkout made importable as the upstream's editable install is
    (once: a later call only has ``make`` put back what a run changed)."""
    ready: set[Path] = set()

    def prepared() -> Path:
        tree = make()
        if tree not in ready:
            profiles.prepare_worktree(profile, tree, python)
            ready.add(tree)
        return tree
    return prepared


def stage_requires(ctx: Context) -> StageResult:
    """Every ``[[requires]]`` of the patchset holds against the patched tree and the caches."""
    from contrib.validate.requires import check, requirements

    ws, ps = ctx.inputs.workspace, ctx.inputs.patchset
    if ws is None or ps is None or not requirements(ps):
        return StageResult("requires", NOT_APPLICABLE, "no [[requires]] declared in patchset.toml")

    def read_patched(path: str) -> bytes | None:
        text = ctx.after.read_text(path)
        return None if text is None else text.encode("utf-8")

    outcomes = check(ws, ps, read_patched)
    details = {"requirements": [o.to_dict() for o in outcomes]}
    statuses = {o.status for o in outcomes}
    text = "; ".join(o.message for o in outcomes)
    if "failed" in statuses:
        return StageResult("requires", FAILED, text, details=details)
    if statuses == {"satisfied"}:
        return StageResult("requires", PASSED, text, details=details)
    return StageResult("requires", SKIPPED, text, details=details)


def _verdict(name: str, findings: list[Finding], ok: str, details: dict[str, Any]) -> StageResult:
    blocking = [f for f in findings if f.blocking]
    if blocking:
        where = ", ".join(f.location for f in blocking[:5]) + (" ..." if len(blocking) > 5 else "")
        return StageResult(
            name, FAILED, f"{counted(len(blocking), 'error')} at {where}", findings, details=details
        )
    waived = sum(1 for f in findings if f.waived is not None)
    return StageResult(
        name, PASSED, ok + (f" ({waived} waived)" if waived else ""), findings, details=details
    )


@dataclass(frozen=True)
class StageDef:
    """One stage: its name, whether open-pr needs it by default, and what runs it."""

    name: str
    required: bool
    run: Callable[[Context], StageResult]


_RUNS: dict[str, Callable[[Context], StageResult]] = {
    "apply": stage_apply, "syntax": stage_syntax, "gates": stage_gates,
    "arch-guards": stage_arch_guards, "ptx": stage_ptx, "tests": stage_tests,
    "bench": stage_bench, "requires": stage_requires, "others": stage_others,
}
STAGES = tuple(StageDef(name, required, _RUNS[name]) for name, required in validation.STAGES)
ORDER = tuple(stage.name for stage in STAGES)
