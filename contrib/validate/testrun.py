"""Running the selected upstream tests on the GPUs here: which GPUs, pytest, its JUnit.

The selection itself (which test files exercise a change) is
:mod:`contrib.validate.testsel`; this module starts pytest with the validation
interpreter and reads back what ran.
"""


from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Literal
from xml.etree import ElementTree

from contrib.arch import Arch
from contrib.validate.testsel import Selection


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi reports it."""

    name: str
    capability: str  # "12.0"


class Probe(Enum):
    """Where the GPUs come from when a caller names none: ask this machine (nvidia-smi)."""

    PROBE = "probe"


PROBE = Probe.PROBE
GpuSource = list[Gpu] | None | Literal[Probe.PROBE]  # the GPUs, None for none, or PROBE


def gpus_of(source: GpuSource) -> list[Gpu] | None:
    """The GPUs ``source`` stands for: probed on this machine for PROBE."""
    return probe_gpus() if source is PROBE else source


def probe_gpus() -> list[Gpu] | None:
    """GPUs from ``nvidia-smi --query-gpu=name,compute_cap``; None without nvidia-smi."""
    rows = _query_gpus("name,compute_cap")
    if rows is None:
        return None
    gpus = []
    for row in rows:
        name, _, cap = row.rpartition(",")
        if name.strip():
            gpus.append(Gpu(name.strip(), cap.strip()))
    return gpus


def probe_driver() -> str | None:
    """The NVIDIA driver version (``nvidia-smi --query-gpu=driver_version``), the first
    GPU's (one host runs one driver); None without nvidia-smi or a GPU."""
    rows = [row.strip() for row in _query_gpus("driver_version") or [] if row.strip()]
    return rows[0] if rows else None


def _query_gpus(fields: str) -> list[str] | None:
    """``nvidia-smi --query-gpu=FIELDS``'s rows (CSV, no header); None without
    nvidia-smi (or when it cannot start), [] when it fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.splitlines() if done.returncode == 0 else []


@dataclass
class TestRun:
    """What happened when we ran (or could not run) the selected tests."""

    status: str  # passed / failed / skipped
    reason: str
    counts: dict[str, int] = field(default_factory=dict)
    cases: list[dict[str, str]] = field(default_factory=list)
    command: list[str] = field(default_factory=list)


def gpu_problem(arch: Arch, gpus: list[Gpu] | None) -> str | None:
    """Why the tests cannot run on this host's GPUs for ``arch``, or None if they can."""
    if gpus is None:
        return f"no GPU here (nvidia-smi not found); the tests need a {arch.capability} GPU ({arch.name})"
    if not any(g.capability == arch.capability for g in gpus):
        seen = ", ".join(f"{g.name} {g.capability}" for g in gpus) or "none"
        return f"no GPU of compute capability {arch.capability} ({arch.name}) here (found: {seen})"
    return None


def run_tests(
    python: str, worktree: Path, selection: Selection, junit: Path, arch: Arch, *,
    need_gpu: bool = True, gpus: GpuSource = PROBE, timeout: float = 1800,
    env: Mapping[str, str] | None = None, path_first: Iterable[str] = (), args: Iterable[str] = (),
) -> TestRun:
    """Run the selected tests with ``python -m pytest --junitxml`` in ``worktree``.

    Skipped (never passed) when nothing is selected, no GPU of the target
    architecture is present (``need_gpu``), the interpreter cannot import the
    upstream package, or pytest ran no test.
    """
    if not selection.tests:
        return TestRun("skipped", "no upstream test references the changed code")
    if need_gpu:
        problem = gpu_problem(arch, gpus_of(gpus))
        if problem:
            return TestRun("skipped", problem)
    env = {**os.environ, **(env or {})}
    roots = [str(worktree / r) for r in selection.import_roots] or [str(worktree)]
    env["PYTHONPATH"] = os.pathsep.join([*path_first, *roots, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for package in selection.packages:
        problem = _import_problem(python, package, worktree, env)
        if problem:
            return TestRun("skipped", problem)
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
               *args, *selection.tests]
    try:
        done = subprocess.run(
            command, cwd=worktree, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return TestRun("failed", f"pytest timed out after {timeout:.0f}s", command=command)
    except OSError as exc:
        return TestRun("skipped", f"cannot run {python}: {exc}", command=command)
    return _outcome(done.returncode, (done.stdout + done.stderr)[-1500:], junit, command)


def _import_problem(python: str, package: str, cwd: Path, env: dict[str, str]) -> str | None:
    try:
        done = subprocess.run([python, "-c", f"import {package}"], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run {python}: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"{python} cannot import {package}: {last}"
    return None


def _outcome(rc: int, tail: str, junit: Path, command: list[str]) -> TestRun:
    cases = read_junit(junit)
    counts = {
        k: sum(1 for c in cases if c["status"] == k)
        for k in ("passed", "failed", "error", "skipped")
    }
    counts["total"] = len(cases)
    ran = counts["passed"] + counts["failed"] + counts["error"]
    if rc in (0, 1) and ran == 0 or rc == 5:
        return TestRun(
            "skipped", f"pytest ran no test ({counts['skipped']} skipped)", counts, cases, command
        )
    if rc == 0:
        return TestRun(
            "passed",
            f"{counts['passed']} passed, {counts['skipped']} skipped",
            counts,
            cases,
            command,
        )
    bad = [c["name"] for c in cases if c["status"] in ("failed", "error")]
    if rc == 1 and bad:
        return TestRun(
            "failed", f"{len(bad)} of {ran} failed: {', '.join(bad[:5])}", counts, cases, command
        )
    return TestRun(
        "failed",
        f"pytest exited {rc}: {tail.strip().splitlines()[-1:] or ''}",
        counts,
        cases,
        command,
    )


def read_junit(path: Path) -> list[dict[str, str]]:
    """Test cases from a JUnit XML file: name, classname, status, message, time."""
    if not path.is_file():
        return []
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError:
        return []
    cases = []
    for case in root.iter("testcase"):
        status, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            child = case.find(tag)
            if child is not None:
                status = {"failure": "failed"}.get(tag, tag)
                message = child.get("message", "") or (child.text or "")[:500]
                break
        name = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
        cases.append(
            {"name": name, "status": status, "message": message, "time": case.get("time", "0")}
        )
    return cases
