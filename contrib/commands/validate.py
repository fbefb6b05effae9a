"""``contrib validate [TARGET...] [--arch ARCH] [--junit FILE] [--json]``.

For each patchset: apply its current version at its base on a temporary index
in the upstream cache (no checkout), run the stages of
:mod:`contrib.validate.stages` on the blobs of the base and patched commits, and
only check out a worktree if the tests stage needs one.  The result goes to
``validation.json`` in the version folder, atomically; exit 1 if any failed.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contrib.arch import Arch, parse_arch
from contrib.errors import ConfigError, ContribError, PatchError, UsageError
from contrib.git import Git
from contrib.mirror import Mirror
from contrib.patchset import Patchset, Workspace
from contrib.rebase import load_patches
from contrib.series import EXPORT_ENV, apply_series
from contrib.txn import atomic_write
from contrib.ui import UI, StepFn
from contrib.validate.report import (
    FAILED,
    PASSED,
    SKIPPED,
    StageResult,
    Validation,
    host_facts,
    junit_xml,
    now,
    render_table,
)
from contrib.validate.stages import Inputs, Settings, run_pipeline
from contrib.validate.tree import GitTree


def validate(ws: Workspace, ui: UI, targets: list[str], *, arch: str | None,
             junit: Path | None) -> int:
    """Validate each target's current version; 0 when none failed, 1 otherwise."""
    # bad --arch (an empty one too): exit 2 before any work
    forced = parse_arch(arch) if arch is not None else None
    patchsets = ws.patchsets(targets)
    host = host_facts()
    validations: list[Validation] = []
    for ps in patchsets:
        target = forced or _patchset_arch(ps)
        ui.step(f"validating {ps.target} for {target.name} ...")
        with ui.task(f"validate {ps.target}") as task:
            validation = validate_patchset(ws, ps, target, host, progress=task.step)
        ws.write_file(ps.current.validation_path, validation.to_json())
        validations.append(validation)
        for line in render_table(validation).splitlines():
            ui.info(line)
        ui.info(f"  -> {ps.current.validation_path}")
    if not patchsets:
        ui.info("no patchsets to validate: create one with `contrib new`")
    if junit is not None:
        atomic_write(junit, junit_xml(validations))
    failed = [v for v in validations if v.verdict == FAILED]
    ui.emit({"overall": FAILED if failed else PASSED,
             "validations": [v.to_dict() for v in validations]})
    return 1 if failed else 0


def _patchset_arch(ps: Patchset) -> Arch:
    try:
        return parse_arch(ps.arch)
    except UsageError as exc:
        raise ConfigError(f"{ps.meta_path}: arch: {exc}") from None


def validate_patchset(ws: Workspace, ps: Patchset, arch: Arch, host: dict[str, object], *,
                      progress: StepFn | None = None) -> Validation:
    """Apply ``ps``'s current version at its base and run every stage for ``arch``;
    ``progress`` hears each stage (and a stage's own steps, e.g. units compiled)."""
    settings = Settings.from_meta(ps.meta, str(ps.meta_path))
    version = ps.current
    mirror = Mirror(ws.config.upstream(ps.upstream)).ensure(fetch_now=False)
    git = mirror.git
    base = mirror.resolve(version.base)
    started = now()
    head, reason = _apply(git, base, version.patch_texts())
    with tempfile.TemporaryDirectory(prefix="contrib-validate-") as scratch, \
            _worktrees(git, head, Path(scratch)) as make_worktree:  # fmt: skip
        inputs = Inputs(
            arch=arch,
            before=GitTree(git, base),
            after=GitTree(git, head) if head else None,
            diff=_diff(git, base, head) if head else "",
            apply_reason=reason,
            settings=settings,
            workdir=Path(scratch),
            worktree=make_worktree,
            python=sys.executable,
            requires=lambda ctx: requires_stage(ws, ps, git, head or base),
            progress=progress,
        )
        stages = run_pipeline(inputs)
    return Validation(ps.upstream, ps.name, base, arch, stages, dict(host), applied=head,
                      started=started, finished=now())


def _apply(git: Git, base: str, files: list[tuple[str, bytes]]) -> tuple[str | None, str]:
    """(patched commit, reason) or (None, why it does not apply)."""
    try:
        applied = apply_series(git, base, load_patches(git, files))
    except PatchError as exc:
        return None, str(exc)
    count = len(applied)
    return applied[-1].commit, f"{count} patch(es) applied at {base[:12]} with no fuzz"


def _diff(git: Git, base: str, head: str) -> str:
    return git.run("diff", "--no-color", "--no-ext-diff", "--no-renames", base, head,
                   env=EXPORT_ENV, strip=False)


@contextmanager
def _worktrees(git: Git, head: str | None, scratch: Path) -> Iterator[_LazyWorktree]:
    lazy = _LazyWorktree(git, head, scratch / "worktree")
    try:
        yield lazy
    finally:
        lazy.remove()


class _LazyWorktree:
    """A detached worktree of the patched commit, made on first use, removed after."""

    def __init__(self, git: Git, head: str | None, path: Path) -> None:
        self.git, self.head, self.path = git, head, path
        self.made = False

    def __call__(self) -> Path:
        if self.head is None:
            raise ContribError("no patched commit to check out (apply failed)")
        if not self.made:
            self.git.run("worktree", "add", "--detach", "--force", str(self.path), self.head)
            self.made = True
        return self.path

    def remove(self) -> None:
        if self.made:
            self.git.try_run("worktree", "remove", "--force", str(self.path))
            shutil.rmtree(self.path, ignore_errors=True)
            self.git.try_run("worktree", "prune")


def requires_stage(ws: Workspace, ps: Patchset, git: Git, head: str) -> StageResult:
    """The lead's cross-project check as a stage: every [[requires]] must be satisfied."""
    from contrib.requires import check, requirements

    if not requirements(ps):
        return StageResult("requires", SKIPPED, "no [[requires]] declared in patchset.toml")
    outcomes = check(ws, ps, lambda path: git.read_blob(head, path))
    details = {"requirements": [o.to_dict() for o in outcomes]}
    statuses = {o.status for o in outcomes}
    text = "; ".join(o.message for o in outcomes)
    if "failed" in statuses:
        return StageResult("requires", FAILED, text, details=details)
    if statuses == {"satisfied"}:
        return StageResult("requires", PASSED, text, details=details)
    return StageResult("requires", SKIPPED, text, details=details)

