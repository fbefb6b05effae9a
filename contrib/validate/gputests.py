"""Upstream tests on the GPUs that are here: the target, and regressions on archs admitted before.

A patch that widens a gate to SM120 is first asked by upstream reviewers whether it
still works where the gate already admitted (SM90 on an H200).  So the tests stage
plans one run per architecture whose GPU is present: the target arch (kind
``target``), and every arch the touched gates admitted before the patch (kind
``regression``).  Each run sees only the GPUs of its arch (``CUDA_VISIBLE_DEVICES``).

A green run proves only the kernels it launched.  flashinfer's own
``test_trtllm_allreduce.py`` never reaches the lamport kernel (it needs <= 16
tokens), so each run records the CUDA kernels its processes launched (the PyTorch
profiler's CUDA activity, from a ``sitecustomize`` that every Python process of the
run imports, spawned workers too) and every kernel the patch changes that no test
launched becomes a ``kernel-not-launched`` finding that keeps the run from passed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from contrib.analysis.callgraph import changed_helpers
from contrib.analysis.cscan import find_kernels, scan
from contrib.analysis.diffs import FileChange
from contrib.analysis.includes import is_cuda_source
from contrib.analysis.profiles import Profile
from contrib.analysis.tree import FsTree, SourceTree
from contrib.analysis.waivers import apply_waivers
from contrib.arch import Arch, parse_arch
from contrib.record import RunKind
from contrib.record.finding import ERROR, Finding
from contrib.ui import counted
from contrib.validate.buildcache import jit_folder
from contrib.validate.report import PASSED, SKIPPED, StageResult, Validation
from contrib.validate.testrun import Gpu, run_tests
from contrib.validate.testsel import Selection
from contrib.workspace.validation import Waiver

TARGET, REGRESSION = "target", "regression"
KERNEL_LOG_ENV = "CONTRIB_KERNEL_LOG"
_WORLD = re.compile(r"(?:world_size|WORLD_SIZE|tp_size|num_gpus)\W{0,4}(?:\[([\d,\s]+)\]|=\s*(\d+))")

# Imported by every Python process of a test run (spawned workers included) when
# CONTRIB_KERNEL_LOG is set: profile CUDA activity, write the kernel names at exit.
PROBE = '''\
"""contrib's kernel probe: records the CUDA kernels this process launches."""
import atexit, os

def _contrib_probe():
    folder = os.environ.get("CONTRIB_KERNEL_LOG")
    if not folder:
        return
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
        from torch.autograd import DeviceType
        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.start()
    except Exception:
        return

    def _write():
        names = set()
        try:
            prof.stop()
            names = {e.name for e in prof.events() if e.device_type == DeviceType.CUDA}
        except Exception as exc:
            names = {"<probe failed: %s>" % type(exc).__name__}
        # a file per profiled process, empty when it launched nothing: "no kernel" and
        # "no probe" must not look alike
        path = os.path.join(folder, "kernels-%d.txt" % os.getpid())
        with open(path, "w") as out:
            out.write("".join(name + "\\n" for name in sorted(names)))

    atexit.register(_write)

_contrib_probe()
'''


@dataclass(frozen=True)
class GpuSlot:
    """One GPU from ``nvidia-smi``: its index (for CUDA_VISIBLE_DEVICES), name, capability."""

    index: int
    name: str
    capability: str  # "9.0"


@dataclass
class PlannedRun:
    """One test run to make: which arch, why, on which GPUs (none: cannot run here)."""

    kind: str  # TARGET or REGRESSION
    arch: Arch
    gpus: list[GpuSlot] = field(default_factory=list)

    @property
    def visible(self) -> str:
        """The CUDA_VISIBLE_DEVICES value for this run."""
        return ",".join(str(g.index) for g in self.gpus)


def probe_slots(smi: str | None = None) -> list[GpuSlot] | None:
    """GPUs with their indices from nvidia-smi; None when there is no nvidia-smi."""
    smi = smi or shutil.which("nvidia-smi")
    if smi is None:
        return None
    query = "--query-gpu=index,name,compute_cap"
    try:
        done = subprocess.run([smi, query, "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return []
    return _parse_slots(done.stdout)


def _parse_slots(text: str) -> list[GpuSlot]:
    slots = []
    for number, row in enumerate(line for line in text.splitlines() if line.strip()):
        cells = [c.strip() for c in row.split(",")]
        if len(cells) >= 3 and cells[0].isdigit():
            slots.append(GpuSlot(int(cells[0]), ",".join(cells[1:-1]), cells[-1]))
        elif len(cells) >= 2:  # an older layout without the index column
            slots.append(GpuSlot(number, ",".join(cells[:-1]), cells[-1]))
    return slots


def plan_runs(target: Arch, admitted_before: Iterable[Arch], slots: list[GpuSlot] | None) -> list[PlannedRun]:
    """The target run, then one regression run per earlier-admitted arch whose GPU is here."""
    slots = slots or []
    runs = [PlannedRun(TARGET, target, [s for s in slots if s.capability == target.capability])]
    seen = {target.capability}
    for arch in admitted_before:
        mine = [s for s in slots if s.capability == arch.capability]
        if mine and arch.capability not in seen:
            seen.add(arch.capability)
            runs.append(PlannedRun(REGRESSION, arch, mine))
    return runs


def world_sizes(tree: SourceTree, tests: Iterable[str]) -> dict[str, int]:
    """The most GPUs each test file asks for (``world_size``/``WORLD_SIZE`` literals), when it says."""
    wanted: dict[str, int] = {}
    for test in tests:
        sizes = []
        for listed, single in _WORLD.findall(tree.read_text(test.split("::")[0]) or ""):
            sizes += [int(n) for n in re.findall(r"\d+", listed or single)]
        if sizes:
            wanted[test] = max(sizes)
    return wanted


def gpu_shortfall(wanted: Mapping[str, int], have: int) -> list[str]:
    """One line per test that asks for more GPUs than the run has."""
    return [f"{test} asks for up to {n} GPUs, {have} here: those cases skip"
            for test, n in sorted(wanted.items()) if n > have]


def fewest_gpus(tree: SourceTree, test: str) -> int | None:
    """The fewest GPUs any case of a test file asks for (its smallest world size), when it says."""
    sizes = [int(n) for listed, single in _WORLD.findall(tree.read_text(test.split("::")[0]) or "")
             for n in re.findall(r"\d+", listed or single)]
    return min(sizes) if sizes else None


def not_started(tree: SourceTree, tests: list[str], plan: PlannedRun) -> StageResult | None:
    """A skipped result when every selected test file asks for more GPUs than ``plan`` has.

    Then no case could run: the run is not started, so nothing is checked out or built."""
    have = len(plan.gpus)
    wanted = {t: fewest_gpus(tree, t) for t in tests}
    if not plan.gpus or not tests or any(n is None or n <= have for n in wanted.values()):
        return None
    asks = ", ".join(f"{t} ({n})" for t, n in wanted.items())
    details = {"kind": plan.kind, "arch": plan.arch.name, "selected": tests,
               "gpus": [f"{g.index}: {g.name} ({g.capability})" for g in plan.gpus],
               "too_few_gpus": [f"{t} asks for at least {n} GPUs, {have} here" for t, n in wanted.items()]}
    return StageResult("tests", SKIPPED, f"not started: every selected test file asks for more "
                       f"GPUs than the {have} of {plan.arch.name} here ({asks}); nothing built",
                       details=details)


def install_probe(folder: Path) -> tuple[Path, Path]:
    """Write the probe's sitecustomize.py under ``folder``; (its folder, the log folder)."""
    site, log = folder / "probe", folder / "kernels"
    site.mkdir(parents=True, exist_ok=True)
    log.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(PROBE, encoding="utf-8")
    return site, log


def launched_kernels(log: Path) -> list[str] | None:
    """Every kernel name the probe wrote, over all processes of the run.

    None when no process was profiled (no PyTorch profiler in the test
    interpreter): then nobody can tell which kernels ran.
    """
    files = sorted(log.glob("kernels-*.txt"))
    if not files:
        return None
    names: set[str] = set()
    for file in files:
        names.update(n for n in file.read_text(encoding="utf-8", errors="replace").splitlines() if n)
    return sorted(names)


@dataclass(frozen=True)
class Via:
    """The changed ``__device__`` helper through which the patch reaches a kernel."""

    name: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.name} ({self.file}:{self.line})"


@dataclass(frozen=True)
class ChangedKernel:
    """A ``__global__`` kernel the patch touches: its definition, a guard inside it, or a helper it calls."""

    name: str
    file: str
    line: int
    via: Via | None = None  # the helper, when the kernel's own lines are unchanged


@dataclass
class Traced:
    """The kernels at stake, and one line per changed helper saying which kernels it reaches."""

    kernels: list[ChangedKernel] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)


def changed_kernels(tree: SourceTree, changes: Iterable[FileChange]) -> list[ChangedKernel]:
    """Kernels whose span holds a touched line, then every kernel a changed helper reaches."""
    return trace_changes(tree, changes).kernels


def trace_changes(tree: SourceTree, changes: Iterable[FileChange]) -> Traced:
    """Kernels whose span (``__global__`` line to the line after its last statement) holds a
    touched line, and, through :mod:`.callgraph`, every kernel calling a changed helper."""
    changes = list(changes)
    traced = Traced()
    for change in changes:
        if change.deleted or not is_cuda_source(change.path):
            continue
        text = tree.read_text(change.path)
        if text is None:
            continue
        for kernel in find_kernels(scan(change.path, text)):
            end = max(kernel.body_lines, default=kernel.line) + 2  # the closing #endif and brace
            if change.touched & set(range(kernel.line, end + 1)):
                traced.kernels.append(ChangedKernel(kernel.name, change.path, kernel.line))
    for reach in changed_helpers(tree, changes):
        via = Via(reach.helper.name, reach.helper.file, reach.helper.line)
        traced.kernels += [ChangedKernel(k.name, k.file, k.line, via) for k in reach.kernels]
        callers = sorted({k.name for k in reach.kernels})
        traced.helpers.append(f"helper {via}: called by {_few(callers)}" if callers else
                              f"helper {via}: no __global__ caller found in the tree")
    return traced


def _few(names: list[str], shown: int = 3) -> str:
    """``a, b, c and 4 more``."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def launched(kernel: str, names: Iterable[str]) -> bool:
    """Whether ``kernel`` (a bare name) is among the profiler's (demangled) kernel names."""
    pattern = re.compile(rf"(?:^|[\s:*&]){re.escape(kernel)}\s*[<(]|^{re.escape(kernel)}$")
    return any(pattern.search(name) for name in names)


def coverage_findings(changed: Iterable[ChangedKernel], names: list[str] | None, arch: Arch) -> list[Finding]:
    """A ``kernel-not-launched`` error for each changed kernel no test of this run launched,
    and one for each changed helper none of whose kernels a test launched."""
    findings, seen = [], set()
    probe = "the kernel probe saw no test process (no PyTorch profiler?), so nothing shows"
    why = "no selected test launched it" if names is not None else f"{probe} it ran"
    why_any = "no selected test launched any of them" if names is not None else f"{probe} one ran"
    by_helper: dict[Via, list[str]] = {}
    for kernel in changed:
        if kernel.via is not None:
            by_helper.setdefault(kernel.via, []).append(kernel.name)
            continue
        if kernel.name in seen or (names is not None and launched(kernel.name, names)):
            continue
        seen.add(kernel.name)
        findings.append(Finding("kernel-not-launched", ERROR, kernel.file, kernel.line,
                                f"the patch changes kernel {kernel.name}, and {why} on {arch.name}: "
                                "the tests say nothing about it"))
    for via, kernels in by_helper.items():
        if names is not None and any(launched(k, names) for k in kernels):
            continue  # one launched caller covers the helper
        callers = sorted(set(kernels))
        findings.append(Finding("kernel-not-launched", ERROR, via.file, via.line,
                                f"the patch changes helper {via.name}, called by {'kernel' if len(callers) == 1 else 'kernels'} {_few(callers)}, "
                                f"and {why_any} on {arch.name}: the tests say nothing about it"))
    return findings


def _about(finding: Finding, changed: Iterable[ChangedKernel]) -> str:
    """What a ``kernel-not-launched`` finding is about, from the changed kernel at its
    place: the kernel, or a caller of the helper (its ``file:line`` if none is there)."""
    for kernel in changed:
        if kernel.via is None and (kernel.file, kernel.line) == (finding.file, finding.line):
            return kernel.name
        if kernel.via is not None and (kernel.via.file, kernel.via.line) == (finding.file,
                                                                              finding.line):
            return f"a caller of helper {kernel.via.name}"
    return finding.location


@dataclass
class RunSetup:
    """What every planned run of one tests stage shares."""

    python: str
    worktree: Path
    selection: Selection
    workdir: Path
    profile: Profile
    changed: list[ChangedKernel]
    waivers: list[Waiver]
    need_gpu: bool = True
    pytest_args: tuple[str, ...] = ()
    helpers: list[str] = field(default_factory=list)  # Traced.helpers


def run_planned(setup: RunSetup, plan: PlannedRun) -> StageResult:
    """Run the selected tests for one planned run; the result carries its GPUs and kernels."""
    started = time.monotonic()
    result = _run_planned(setup, plan)
    result.duration = time.monotonic() - started
    return result


def _run_planned(setup: RunSetup, plan: PlannedRun) -> StageResult:
    arch, name = plan.arch, f"{plan.kind}-{plan.arch.name}"
    details: dict[str, Any] = {"kind": plan.kind, "arch": arch.name, "compute": setup.profile.compute(arch),
                               "selected": setup.selection.tests,
                               "gpus": [f"{g.index}: {g.name} ({g.capability})" for g in plan.gpus]}
    if setup.need_gpu and not plan.gpus:
        return StageResult("tests", SKIPPED, f"no GPU of compute capability {arch.capability} "
                           f"({arch.name}) here", details=details)
    site, log = install_probe(setup.workdir / name)
    env = {KERNEL_LOG_ENV: str(log), **setup.profile.arch_env(arch)}
    if plan.gpus:
        env["CUDA_VISIBLE_DEVICES"] = plan.visible
    if setup.profile.jit_cache_env:  # content-keyed where the worktree is: a re-run builds nothing
        env[setup.profile.jit_cache_env] = str(jit_folder(setup.worktree, setup.profile.arch_env(arch),
                                                          setup.python, setup.workdir / name / "jit-cache"))
    short = gpu_shortfall(world_sizes(FsTree(setup.worktree), setup.selection.tests), len(plan.gpus))
    run = run_tests(setup.python, setup.worktree, setup.selection, setup.workdir / f"{name}.xml", arch,
                    need_gpu=False, env=env, path_first=[str(site)], args=setup.pytest_args)
    names = launched_kernels(log)
    details.update({"counts": run.counts, "cases": run.cases, "command": run.command,
                    "python": setup.python, "env": env, "launched_kernels": names,
                    "changed_kernels": sorted({k.name for k in setup.changed})})
    if setup.helpers:
        details["changed_helpers"] = setup.helpers
    if short:
        details["too_few_gpus"] = short
    findings = apply_waivers(coverage_findings(setup.changed, names, arch), setup.waivers) \
        if run.counts.get("total") else []
    status = _status(run.status, run.reason, findings, short, names is not None, setup.changed)
    return StageResult("tests", *status, findings, details=details)


def _status(status: str, reason: str, findings: list[Finding], short: list[str],
            probed: bool, changed: Iterable[ChangedKernel]) -> tuple[str, str]:
    unproven = [f for f in findings if f.blocking]
    if short:
        reason += f"; {counted(len(short), 'test file')} {'asks' if len(short) == 1 else 'ask'} for more GPUs than this run has"
    if status == PASSED and unproven:
        names = ", ".join(_about(f, changed) for f in unproven[:4]) + (
            " ..." if len(unproven) > 4 else "")
        seen = "no test launched" if probed else "the kernel probe could not see whether the tests launched"
        return SKIPPED, f"{reason}, but {seen} {counted(len(unproven), 'kernel')} the patch changes: {names}"
    return status, reason


REGRESSIONS = "regression_runs"  # details key: StageResults of the regression runs, popped by split_runs


def split_runs(validation: Validation) -> list[Validation]:
    """The target run and, for each arch a stage made regression runs for, a run of its own.

    A regression run records the stages that say something about an arch the
    gate admitted before: apply, and the tests and bench that ran on that arch's GPUs.
    """
    by_arch: dict[str, list[StageResult]] = {}
    for stage in validation.stages:
        for result in stage.details.pop(REGRESSIONS, []):
            by_arch.setdefault(result.details["arch"], []).append(result)
    apply = [s for s in validation.stages if s.name == "apply"]
    runs = [validation]
    for name, results in by_arch.items():
        compute = next((r.details["compute"] for r in results if r.details.get("compute")), None)
        runs.append(replace(validation, arch=parse_arch(name), stages=[*apply, *results],
                            kind=RunKind.REGRESSION, compute=compute))
    return runs


def slots_of(gpus: list[Gpu] | None) -> list[GpuSlot] | None:
    """GpuSlots for GPUs handed in without indices (numbered in order)."""
    return None if gpus is None else [GpuSlot(i, g.name, g.capability) for i, g in enumerate(gpus)]
