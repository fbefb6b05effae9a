"""Validate patchsets and keep their records: the engine behind ``contrib validate``.

For each patchset: apply its current version at its base on a temporary index
in the upstream cache (no checkout), run the stages of
:mod:`contrib.validate.stages` on the blobs of the base and patched commits, and
only check out a worktree if the tests stage needs one.  The run goes into the
version's ``validation.json`` (:mod:`contrib.record`), atomically, replacing the
runs of the same arch, kind and host and keeping the others; ``--out FILE``
writes it to FILE instead and leaves the workspace alone; ``--merge`` adds run
files from other machines.  Exit 1 when a stage failed or a required stage
(``[validation] require``) did not pass.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from contrib.analysis.tree import GitTree
from contrib.arch import Arch, parse_arch
from contrib.carry.series import EXPORT_ENV, apply_series, load_patches
from contrib.errors import (
    ConfigError,
    ContribError,
    PatchError,
    UpstreamUnreachable,
    UsageError,
)
from contrib.git.cache import Mirror
from contrib.git.repo import Git
from contrib.record import (
    ArchVerdict,
    Record,
    Run,
    Verdict,
    add_run,
    arch_verdicts,
    drop_runs,
    mismatch,
    read_record,
    read_run_file,
    record_json,
    run_dict,
    superseded,
    version_digest,
)
from contrib.ui import UI, StepFn, counted, shown_path
from contrib.validate import buildcache
from contrib.validate.gputests import split_runs
from contrib.validate.report import (
    Validation,
    host_facts,
    junit_xml,
    now,
    render_table,
)
from contrib.validate.stages import Inputs, run_pipeline
from contrib.workspace.model import Patchset, Workspace
from contrib.workspace.txn import atomic_write
from contrib.workspace.validation import Settings


def validate(ws: Workspace, ui: UI, targets: list[str], *, arch: str | None,
             junit: Path | None, out: Path | None = None) -> tuple[int, dict[str, Any]]:
    """Validate each target's current version; (exit code, the JSON document).

    The code is 1 when a stage failed or a required one did not pass."""
    # bad --arch (an empty one too), a bad --junit/--out: exit 2 before any work
    forced = parse_arch(arch) if arch is not None else None
    patchsets = ws.patchsets(targets)
    for path in (junit, out):
        if path is not None:
            _check_writable(ws, path, inside_ok=path is junit)
    if out is not None and len(patchsets) != 1:
        raise UsageError(f"--out writes the run of one patchset; name one UPSTREAM/NAME "
                         f"(selected: {len(patchsets)})")
    # every patchset's [validation] and arch are read before any work: a bad one is exit 2 alone
    plans = [(ps, forced or _patchset_arch(ps),
              ps.validation) for ps in patchsets]
    _check_branches(ws, patchsets)
    host = host_facts()
    validations, results = [], []
    for ps, target, settings in plans:
        ui.step(f"validating {ps.target} for {target.name} ...")
        with ui.task(f"validate {ps.target}") as task:
            validation = validate_patchset(ws, ps, target, host, settings, progress=task.step)
        validations.append(validation)
        results.append(_record(ws, ui, ps, validation, settings, out))
    if not patchsets:
        ui.info(ws.empty_message(targets))
    if junit is not None:
        atomic_write(junit, junit_xml(validations))
    code = max((r.pop("exit_code") for r in results), default=0)
    document = {"verdict": _worst(r["verdict"] for r in results), "validations": results}
    if not patchsets:
        document["message"] = ws.empty_message(targets)
    return code, document


def _check_branches(ws: Workspace, patchsets: list[Patchset]) -> None:
    """ConfigError naming ``patchset.toml:LINE`` for a target branch the upstream's cache
    lacks (as sync says it): a version validated for a line that does not exist would be
    proof for nothing.  A branch the cache lacks is fetched for first (a target added
    since the last sync); an upstream out of reach proves nothing missing."""
    for ps in patchsets:
        if not ps.targets_at:
            continue
        mirror = Mirror(ws.config.upstream(ps.upstream))
        if not mirror.path.is_dir() or mirror.git.try_rev_parse(mirror.branch_ref(ps.branch)):
            continue
        try:
            mirror.ensure(fetch_now=True)
        except UpstreamUnreachable:
            continue
        mirror.tip(ps.branch, named_at=ps.targets_at)


def _record(ws: Workspace, ui: UI, ps: Patchset, validation: Validation, settings: Settings,
            out: Path | None) -> dict[str, Any]:
    """Write the run (to the version's record, or to ``out``); print and return its verdict."""
    # the tests stage's regression runs (archs the gates admitted before) are runs of their own
    runs = [v.run() for v in split_runs(validation)]
    run = runs[0]  # the target arch's run; any further ones are regression runs
    record, where, kept = _store(ws, ps, runs, settings, out)
    verdict = next(v for v in arch_verdicts(record.runs, settings.required())
                   if v.arch == run.arch)
    for line in render_table(validation).splitlines():
        ui.info(line)
    for extra in runs[1:]:
        tests = extra.stage("tests")
        ui.info(f"  {extra.kind} run on {extra.arch}: tests {tests.status if tests else '?'}"
                f" ({tests.reason if tests else ''})")
    ui.info(_verdict_line(ps, verdict))
    for line in kept:
        ui.warn(f"{where}: {line}")
    ui.info(f"  -> {_record_shown(where, out is None)}")
    failed = verdict.verdict == Verdict.FAILED or bool(verdict.unmet)
    return {"patchset": ps.target, "base": record.base, "digest": record.digest, "arch": run.arch,
            "verdict": str(verdict.verdict), "skipped": verdict.skipped, "unmet": list(verdict.unmet),
            "required": list(settings.required()), "runs_for_arch": len(verdict.runs),
            "path": str(where), "run": run_dict(run),
            "regression_runs": [run_dict(r) for r in runs[1:]], "kept_stronger_runs": kept,
            "exit_code": 1 if failed else 0}


def _store(ws: Workspace, ps: Patchset, runs: list[Run], settings: Settings,
           out: Path | None) -> tuple[Record, Path, list[str]]:
    """Add ``runs`` to the version's record (or to a new run file ``out``); (record, where,
    a line per earlier run kept because this run has less evidence than it)."""
    version = ps.current
    fresh = Record(ps.upstream, ps.name, version.base, version_digest(version))
    record = fresh if out is not None else _bound(version.validation_path, fresh)
    kept: list[str] = []
    for run in runs:
        if out is None:
            kept += [_kept_line(ps.target, run, old, lacking)
                     for old, lacking in superseded(record, run)[1]]
        record = add_run(record, run, supersede=out is None)
    if out is not None:
        atomic_write(out, record_json(record))
        return record, out, kept
    ws.write_file(version.validation_path, record_json(record))
    return record, version.validation_path, kept


def _record_shown(where: Path, versioned: bool) -> str:
    """The record's path as the verdict line shows it: from the current folder when
    inside it, the version folder's 40 hex digits as a 12-digit glob (a line of 80
    columns keeps it whole, and a shell still opens it); ``--json`` has it whole."""
    shown = shown_path(where)
    version = where.parent.name
    if versioned and len(version) == 40 and shown.endswith(f"{version}/{where.name}"):
        shown = shown[:-len(version) - len(where.name) - 1] + f"{version[:12]}*/{where.name}"
    return shown


def _kept_line(target: str, run: Run, old: Run, lacking: list[str]) -> str:
    """Why an earlier run stays beside this one: it settled stages this run did not."""
    stages = ", ".join(f"{name} {_status(old, name)} there, {_status(run, name)} now"
                       for name in lacking)
    return (f"kept run {old.id} ({old.kind} {old.arch}, {old.finished_at}): this run has less "
            f"evidence ({stages}) and does not replace it; `contrib validate {target} "
            f"--drop {old.id}` removes it")


def _status(run: Run, name: str) -> str:
    stage = run.stage(name)
    return str(stage.status) if stage is not None else "absent"


def _verdict_line(ps: Patchset, verdict: ArchVerdict) -> str:
    line = f"verdict {ps.target} {verdict.line()}"
    if len(verdict.runs) > 1:
        line += f" across {len(verdict.runs)} runs"
    if verdict.unmet:
        line += f"; required {'stage' if len(verdict.unmet) == 1 else 'stages'} not passed: {', '.join(verdict.unmet)}"
    return line


def _bound(path: Path, fresh: Record) -> Record:
    """The version's record if it is bound to exactly this version, else ``fresh``.

    A stale, foreign, old-format or unreadable record proves nothing about this
    version: the new run replaces it.
    """
    try:
        record = read_record(path)
    except ConfigError:
        return fresh
    if record is None or mismatch(record, fresh.upstream, fresh.patchset, fresh.base,
                                  fresh.digest):
        return fresh
    return record


def _worst(verdicts: Iterable[str]) -> str:
    order = [Verdict.FAILED, Verdict.INCOMPLETE, Verdict.PASSED]
    seen = set(verdicts)
    return str(next((v for v in order if v in seen), Verdict.PASSED))


def _check_writable(ws: Workspace, path: Path, *, inside_ok: bool) -> None:
    """Refuse (exit 2) an output path that cannot be written, before any work."""
    resolved = path.resolve()
    if not inside_ok and resolved.is_relative_to(ws.root):
        raise UsageError(f"--out {path}: inside the workspace; --out leaves the workspace "
                         "alone (use `contrib validate` without --out to record the run there)")
    if resolved.is_dir():
        raise UsageError(f"{path}: is a folder; give a file path")
    try:
        resolved.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{path}: cannot create its folder: {exc.strerror or exc}") from None
    if not os.access(resolved.parent, os.W_OK | os.X_OK):
        raise UsageError(f"{path}: folder {resolved.parent} is not writable")


def drop(ws: Workspace, ui: UI, targets: list[str], ids: list[str]) -> dict[str, Any]:
    """Remove the runs ``ids`` names from the records of the targets' current versions.

    Every id must name a run of one of them (exit 2 otherwise, nothing written)."""
    short = [i for i in ids if len(i.removeprefix("run-")) < 8]
    if short:
        raise UsageError(f"--drop {short[0]}: give a run id (run-...) or at least 8 of its characters")
    changed: dict[Path, Record] = {}
    results, matched = [], set()
    for ps in ws.patchsets(targets):
        path = ps.current.validation_path
        record = read_record(path)  # a damaged record: ConfigError naming it, nothing written
        if record is None:
            continue
        left = drop_runs(record, ids)
        gone = [r.id for r in record.runs if r not in left.runs]
        matched |= {i for i in ids if any(g.removeprefix("run-").startswith(i.removeprefix("run-"))
                                          for g in gone)}
        if gone:
            changed[path] = left
            results.append({"patchset": ps.target, "path": str(path), "dropped": gone})
    unknown = [i for i in ids if i not in matched]
    if unknown:
        raise UsageError(f"--drop {unknown[0]}: no such run in the records of "
                         f"{', '.join(targets) or 'the workspace'}; nothing dropped "
                         "(`contrib status --json` lists the runs)")
    with ws.transaction() as txn:
        for path, record in changed.items():
            txn.write(path, record_json(record))
    for result in results:
        ui.info(f"{result['path']}: dropped {', '.join(result['dropped'])}")
    return {"dropped": results}


def merge(ws: Workspace, ui: UI, files: list[Path]) -> dict[str, Any]:
    """Merge run files into their versions' records, all or nothing; exit 2 on any bad one."""
    runs = [(path, read_run_file(path)) for path in files]  # any corrupt file: nothing changed
    updated: dict[Path, Record] = {}
    results = []
    for path, incoming in runs:
        version_path, current = _merge_target(ws, path, incoming, updated)
        merged = current
        for run in incoming.runs:
            merged = add_run(merged, run, supersede=False)
        added = len(merged.runs) - len(current.runs)
        updated[version_path] = merged
        results.append({"file": str(path), "patchset": incoming.target, "base": incoming.base,
                        "runs": len(incoming.runs), "added": added, "path": str(version_path)})
        ui.info(f"{path}: {added} of {counted(len(incoming.runs), 'run')} added to {version_path}"
                + ("" if added else " (already there)"))
    with ws.transaction() as txn:
        for version_path, record in updated.items():
            text = record_json(record)
            if not _holds(version_path, text):  # an idempotent re-merge writes nothing
                txn.write(version_path, text)
    return {"merged": results}


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_bytes() == text.encode("utf-8")
    except OSError:
        return False


def _merge_target(ws: Workspace, path: Path, incoming: Record,
                  updated: dict[Path, Record]) -> tuple[Path, Record]:
    """The record a run file goes into, after checking it belongs to that version exactly."""
    ps = ws.patchset(incoming.target)
    version = ps.version(incoming.base)
    if not version.dir.is_dir():
        raise ConfigError(f"{path}: records runs of {incoming.target} at {incoming.base[:12]}, "
                          f"a version the workspace does not have ({version.dir}); nothing merged")
    dig = version_digest(version)
    why = mismatch(incoming, ps.upstream, ps.name, version.base, dig)
    if why:
        raise ConfigError(f"{path}: does not belong to {incoming.target} at "
                          f"{incoming.base[:12]} as it is now ({why}); nothing merged")
    fresh = Record(ps.upstream, ps.name, version.base, dig)
    return version.validation_path, updated.get(version.validation_path) or _bound(
        version.validation_path, fresh)


def _patchset_arch(ps: Patchset) -> Arch:
    try:
        return parse_arch(ps.arch)
    except UsageError as exc:
        raise ConfigError(f"{ps.meta_path}: arch: {exc}") from None


def validate_patchset(ws: Workspace, ps: Patchset, arch: Arch, host: dict[str, object],
                      settings: Settings, *, progress: StepFn | None = None) -> Validation:
    """Apply ``ps``'s current version at its base and run every stage for ``arch``;
    ``progress`` hears each stage (and a stage's own steps, e.g. units compiled)."""
    version = ps.current
    mirror = Mirror(ws.config.upstream(ps.upstream)).ensure(fetch_now=False)
    git = mirror.git
    base = mirror.resolve(version.base)
    started = now()
    head, reason = _apply(git, base, version.patch_texts())
    with tempfile.TemporaryDirectory(prefix="contrib-validate-") as scratch, \
            _worktrees(git, (head, "patched"), (base, "base")) as (make_worktree, make_base):
        inputs = Inputs(
            arch=arch,
            before=GitTree(git, base),
            after=GitTree(git, head) if head else None,
            diff=_diff(git, base, head) if head else "",
            apply_reason=reason,
            settings=settings,
            workdir=Path(scratch),
            worktree=make_worktree,
            base_worktree=make_base,
            python=ws.config.upstream(ps.upstream).python or sys.executable,
            workspace=ws,
            patchset=ps,
            progress=progress,
        )
        stages = run_pipeline(inputs)
    ptx = next((s for s in stages if s.name == "ptx"), None)
    compute = ptx.details.get("compute") if ptx is not None else None  # compute_120f for flashinfer
    return Validation(ps.upstream, ps.name, base, arch, stages, dict(host), applied=head,
                      started=started, finished=now(), compute=compute)


def _apply(git: Git, base: str, files: list[tuple[str, bytes]]) -> tuple[str | None, str]:
    """(patched commit, reason) or (None, why it does not apply)."""
    try:
        applied = apply_series(git, base, load_patches(git, files))
    except PatchError as exc:
        return None, str(exc)
    count = len(applied)
    return applied[-1].commit, f"{counted(count, 'patch')} applied at {base[:12]} with no fuzz"


def _diff(git: Git, base: str, head: str) -> str:
    return git.run("diff", "--no-color", "--no-ext-diff", "--no-renames", base, head,
                   env=EXPORT_ENV, strip=False)


@contextmanager
def _worktrees(git: Git, *commits: tuple[str | None, str]) -> Iterator[list[_Checkout]]:
    """A lazy checkout per (commit, role), each in its slot of the build cache
    (:mod:`contrib.validate.buildcache`)."""
    with ExitStack() as stack:
        yield [_Checkout(git, commit, buildcache.slot_of(git.path, role), stack)
               for commit, role in commits]


class _Checkout:
    """A checkout of a commit's tree in its slot of contrib's cache, made on first use.

    It is kept after the run: the next validation finds the checkout and its JIT
    builds where they were, so the same content builds nothing."""

    def __init__(self, git: Git, commit: str | None, slot: str, stack: ExitStack) -> None:
        self.git, self.commit, self.slot, self.stack = git, commit, slot, stack
        self.path: Path | None = None

    def __call__(self) -> Path:
        if self.commit is None:
            raise ContribError("no patched commit to check out (apply failed)")
        if self.path is None:
            self.stack.enter_context(buildcache.locked(self.slot))
        # every call: a file the last run changed in the checkout is put back first
        self.path = buildcache.checkout(self.git, self.commit, self.slot)
        return self.path
