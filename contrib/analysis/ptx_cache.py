"""Compile units to PTX in parallel, each once: a cache keyed by what the PTX depends on.

A unit's PTX depends on its text, the text of every file its ``#include``
closure reaches in the tree, the flags, the virtual architecture, the include
folders outside the tree, and nvcc's version.  The key is the sha256 of those;
the cache (under contrib's cache folder, never the workspace) keeps each unit's
entries and empty entries, so re-validating an unchanged version compiles
nothing and editing a header recompiles only the units that include it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from contrib.analysis import ptx, ptxneeds
from contrib.analysis.includes import IncludeResolver, include_closure
from contrib.analysis.ptx import Outcome
from contrib.analysis.tree import SourceTree


@dataclass
class Job:
    """One unit to compile: where it is on disk and the exact command's inputs."""

    unit: str  # repo path
    source: Path  # materialized file
    compute: str  # compute_120f
    include_dirs: list[Path]
    flags: list[str]
    key: str = ""
    cuobjdump: str | None = None  # where it exists: also assemble and read the SASS


def cache_dir() -> Path:
    """``<contrib cache>/ptx``."""
    from contrib.git.cache import cache_root

    return cache_root() / "ptx"


def unit_key(tree: SourceTree, unit: str, compute: str, flags: Sequence[str],
             outside: Sequence[Path], nvcc_version: str, sass: bool = False,
             tree_dirs: Sequence[str] = ()) -> str:
    """sha256 over the unit's include closure (paths and texts), flags, arch, outside dirs, nvcc.

    ``sass``: whether the SASS is checked too (a result without it is not reused where it is).
    ``tree_dirs``: tree folders the build adds to the include path (they widen the closure).
    """
    # 2: an entry that does no work, or reaches an arch-disabled MMA, counts as empty;
    # 3: what each entry needs of the target (instructions, shared memory, ptxas -v)
    h = hashlib.sha256(b"contrib-ptx-3\0")
    # Folders outside the tree (an installed package's headers) count by path and
    # modification time: reinstalling the package changes them.
    head = {"unit": unit, "compute": compute, "flags": list(flags), "sass": sass,
            "outside": [f"{p}@{_mtime(p)}" for p in outside], "nvcc": nvcc_version}
    if tree_dirs:
        head["tree_dirs"] = list(tree_dirs)
    h.update(json.dumps(head, sort_keys=True).encode())
    for path in sorted(include_closure(tree, [unit], IncludeResolver(tree, extra=tree_dirs)).files):
        data = (tree.read_text(path) or "").encode("utf-8", errors="replace")
        h.update(b"\0%s\0%d\0" % (path.encode(), len(data)))
        h.update(data)
    return h.hexdigest()


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def compile_all(nvcc: str, jobs: list[Job], out_dir: Path, workers: int | None = None,
                progress: Callable[[int, int, str], None] | None = None) -> list[Outcome]:
    """Each job from the cache or compiled (in parallel, one nvcc per core); results in job order.
    ``progress`` hears (units done, of N, the unit) as compiles finish."""
    store = cache_dir()
    results: dict[int, Outcome] = {}
    todo = []
    for index, job in enumerate(jobs):
        hit = _load(store, job.key) if job.key else None
        if hit is not None:
            results[index] = hit
        else:
            todo.append(index)
    workers = workers or max(1, min(len(todo), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        done = pool.map(lambda i: _compile(nvcc, jobs[i], out_dir), todo)
        for index, outcome in zip(todo, done, strict=True):
            results[index] = outcome
            if progress is not None:
                progress(len(results), len(jobs), f"ptx: compiled {jobs[index].unit}")
            if jobs[index].key and (outcome.ok or not outcome.missing_header):
                _save(store, jobs[index].key, outcome)
    return [results[i] for i in range(len(jobs))]


def compile_for(nvcc: str, jobs: list[Job], computes: dict[str, str],
                out_dir: Path) -> dict[str, Outcome]:
    """Units of ``jobs`` compiled again for another virtual architecture (unit -> compute):
    the reference an empty or missing entry is judged against.  The cache key is the
    job's (content, flags, arch, nvcc) with the other arch; the SASS is not checked."""
    twins = [replace(job, compute=computes[job.unit], cuobjdump=None,
                     key=hashlib.sha256(f"{job.key}\0{computes[job.unit]}".encode()).hexdigest()
                     if job.key else "")
             for job in jobs if job.unit in computes]
    outcomes = compile_all(nvcc, twins, out_dir) if twins else []
    return {job.unit: outcome for job, outcome in zip(twins, outcomes, strict=True)}


def empty_everywhere(outcome: Outcome, reference: Outcome | None) -> list[str]:
    """Entries of ``outcome`` that are empty in ``reference`` too (a kernel the compiler
    optimised to nothing on every arch: not the target's loss)."""
    if reference is None or not reference.ok:
        return []
    also = set(reference.empty)
    return [entry for entry in outcome.empty if entry in also]


def _compile(nvcc: str, job: Job, out_dir: Path) -> Outcome:
    started = time.monotonic()
    keep = out_dir / f"{Path(job.unit).name}.{hashlib.sha256(job.unit.encode()).hexdigest()[:8]}.ptx"
    outcome = ptx.compile_ptx(nvcc, job.source, job.compute, job.include_dirs, out_dir,
                              job.flags, keep=keep if job.cuobjdump else None,
                              unit=job.unit)
    if outcome.ok and job.cuobjdump:
        outcome.exit_only = _sass(nvcc, job.cuobjdump, keep, job.compute, outcome)
        outcome.sass_checked = True
        keep.unlink(missing_ok=True)
    outcome.seconds = round(time.monotonic() - started, 2)
    return outcome


def _sass(nvcc: str, cuobjdump: str, ptx_file: Path, compute: str, outcome: Outcome) -> list[str]:
    """Assemble the PTX for the matching real arch (``ptxas -v``: each kernel's registers,
    shared memory and spills, and its refusals, into ``outcome``) and list EXIT-only
    functions."""
    cubin = ptx_file.with_suffix(".cubin")
    ptxas = Path(nvcc).with_name("ptxas")
    real = compute.replace("compute_", "sm_")
    try:
        done = subprocess.run([str(ptxas), "-v", f"-arch={real}", str(ptx_file), "-o", str(cubin)],
                              capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.SubprocessError):
        return []
    said = done.stdout + done.stderr
    outcome.resources = ptxneeds.resources(said)
    outcome.over_shared = ptxneeds.over_shared(said)
    if "not supported on .target" in said:
        try:
            text = ptx_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        outcome.refused = ptxneeds.refused(said, ptxneeds.read_module(text).lines)
    found = sass_exit_only(cuobjdump, cubin) if done.returncode == 0 else []
    cubin.unlink(missing_ok=True)
    return found


def _path(store: Path, key: str) -> Path:
    return store / key[:2] / f"{key}.json"


def _load(store: Path, key: str) -> Outcome | None:
    data = read_cached(key, store)
    try:
        return Outcome(**{**data, "cached": True}) if data is not None else None
    except TypeError:
        return None  # a record of another shape: compile again


def read_cached(key: str, store: Path | None = None) -> dict[str, Any] | None:
    """The JSON object the cache holds under ``key`` (None: absent, unreadable, or
    behind a symlink).  Other readers of a unit's compile (the ``others`` stage's
    fingerprints) keep their records here too, under keys of their own."""
    store = store or cache_dir()
    try:
        path = _path(store, key)
        if _through_link(store, path):
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None  # absent or unreadable: compile again
    return data if isinstance(data, dict) else None


def _through_link(store: Path, path: Path) -> bool:
    """Whether ``path`` (in the store) is, or lies beneath, a symlink below the store's
    parent: the cache is never read or written through one."""
    here = store.parent
    for part in path.relative_to(store.parent).parts:
        here = here / part
        if here.is_symlink():
            return True
    return False


def _save(store: Path, key: str, outcome: Outcome) -> None:
    write_cached(key, {**asdict(outcome), "cached": False}, store)


def write_cached(key: str, data: Mapping[str, Any], store: Path | None = None) -> None:
    """Keep ``data`` (JSON) under ``key``; a cache that cannot be written only costs a
    compile next time, and nothing is written through a symlink."""
    store = store or cache_dir()
    target = _path(store, key)
    if _through_link(store, target):
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False, suffix=".tmp",
                                         encoding="utf-8") as tmp:
            json.dump(dict(data), tmp)
        os.replace(tmp.name, target)
    except OSError:
        pass


def nvcc_identity(nvcc: str) -> str:
    """nvcc's version line plus its path (two toolkits, two keys)."""
    return f"{ptx.nvcc_version(nvcc) or 'unknown'} at {nvcc}"


def sass_exit_only(cuobjdump: str, cubin: Path) -> list[str]:
    """Functions in a cubin whose SASS is only ``EXIT`` (and ``BRA`` to itself / NOPs)."""
    try:
        done = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True,
                              timeout=600)
    except (OSError, subprocess.SubprocessError):
        return []
    return exit_only_functions(done.stdout)


def exit_only_functions(sass: str) -> list[str]:
    """From ``cuobjdump -sass`` text: the functions whose instructions are only EXIT/BRA/NOP."""
    found: list[str] = []
    name: str | None = None
    ops: list[str] = []
    for line in sass.splitlines() + ["Function : <end>"]:
        header = re.match(r"\s*Function\s*:\s*(\S+)", line)
        if header:
            if name is not None and ops and set(ops) <= {"EXIT", "BRA", "NOP"} and "EXIT" in ops:
                found.append(name)
            name, ops = header.group(1), []
            continue
        op = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if op and name is not None:
            ops.append(op.group(1).split(".")[0])
    return found
