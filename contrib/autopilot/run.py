"""One autopilot run: the engine behind ``contrib autopilot``.

One run of the whole loop, under the workspace lock:

1. fetch each upstream once and carry every selected patchset (as ``sync``);
2. validate every current version without a validation made for it, with
   every stage that can run here;
3. PRs by ``[autopilot] prs``: ``update`` the PR of each patchset whose PR is
   behind its validated version, ``create`` also opens a draft for one that
   has none, ``never`` leaves PRs alone; a patchset found upstreamed gets one
   comment on its still-open PR naming the landing commit(s);
4. commit what changed under ``patchsets/`` as ONE commit listing each
   patchset's result, and with ``--push`` push it (never forced);
5. update the dashboard issue (:mod:`contrib.autopilot.dashboard`).

Every step is idempotent, so a run killed anywhere is finished by the next
one: a version without validation is validated, a PR behind its version is
updated, the uncommitted changes are committed, an unpushed commit is pushed.
``--dry-run`` runs the loop on a scratch copy of the workspace, with
recording forges (reads go to GitHub, writes are recorded) and open-pr's own
dry run: nothing is written to the workspace, the fork or GitHub; the files it
would commit and the writes it would make are listed.

Exit 0 when nothing needs a person, 1 when something does (a conflict, a
failed validation, a PR closed by a human, a GitHub or push failure), 2 on
bad config.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from contrib.autopilot import dashboard, drafts, proposals
from contrib.autopilot import pr as autopilot_pr
from contrib.autopilot.forges import Forges
from contrib.autopilot.state import Need, Outcome, Run, validation_view
from contrib.carry import syncstate
from contrib.carry.report import CONFLICT, ERROR, UPSTREAMED
from contrib.carry.sync import carry
from contrib.credentials import find_token
from contrib.errors import ContribError, UsageError
from contrib.forge.api import ForgeFactory
from contrib.git.cache import Mirror
from contrib.git.wsrepo import WorkspaceRepo
from contrib.record import version_standing
from contrib.secrets import register_secret, scrub
from contrib.ui import UI
from contrib.validate.run import validate
from contrib.workspace.layout import STATE_DIR
from contrib.workspace.model import Patchset, Workspace

WORKSPACE_TOKEN = "CONTRIB_WORKSPACE_TOKEN"


def autopilot(ws: Workspace, ui: UI, targets: list[str], *, push: bool, dry_run: bool,
              fetch: bool, gpu_missing: list[str],
              forge_factory: ForgeFactory | None = None) -> tuple[list[Outcome], Run]:
    """Run the loop once for the selected patchsets: what it found and did."""
    repo = None if dry_run else WorkspaceRepo.find(ws.root)
    if push and repo is not None:
        repo.remote_url()  # bad setup: exit 2 before any work
    api_url = ws.config.github_api_url
    forges = Forges(api_url, find_token(api_url), workspace_token(),
                                 forge_factory, dry_run)
    run = Run(dry_run=dry_run, policy=ws.config.autopilot.prs,
              gpu_missing=check_gpu_labels(gpu_missing), forges=forges, fetch=fetch)
    with _scratch(ws, dry_run) as work:
        if not targets:
            drafts.draft_all(work, run)
        outcomes = _loop(work, ui, targets, run)
        if repo is not None:
            _commit(work, repo, outcomes, run, push)
        else:
            run.would_commit = _would_commit(ws, work, outcomes)
            run.push = "would push" if push and run.would_commit else None
        dashboard.update(work, outcomes, run)
    return outcomes, run


def workspace_token() -> str | None:
    """CONTRIB_WORKSPACE_TOKEN: the token for the workspace's own repository.  The
    dashboard falls back to the GitHub token of the PRs; the push, to git's own
    credentials."""
    token = os.environ.get(WORKSPACE_TOKEN, "").strip() or None
    register_secret(token)
    return token


def _loop(ws: Workspace, ui: UI, targets: list[str], run: Run) -> list[Outcome]:
    patchsets = ws.patchsets(targets)
    outcomes = {ps.target: Outcome(ps.target) for ps in patchsets}
    for upstream in sorted({ps.upstream for ps in patchsets}):
        group = [ps for ps in patchsets if ps.upstream == upstream]
        _sync(ws, ui, group, outcomes, run)
    waiting = []  # drafts with no PR: proposed only when proven, in order, a few at a time
    for ps in patchsets:
        outcome = outcomes[ps.target]
        if outcome.syncable:
            ui.step(f"validating {ps.target} ...")
            _validate(ws, ws.patchset(ps.target), outcome)  # sync rewrote patchset.toml
            current = ws.patchset(ps.target)
            if proposals.is_candidate(ws, current, outcome):
                waiting.append((current, outcome))
            else:
                autopilot_pr.pr_step(ws, current, outcome, run)
    proposals.propose(ws, run, waiting, outcomes)
    return [outcomes[ps.target] for ps in patchsets]


def _sync(ws: Workspace, ui: UI, group: list[Patchset], outcomes: dict[str, Outcome],
          run: Run) -> None:
    """Carry one upstream's patchsets; an unreachable upstream fails only its own."""
    try:
        if run.fetch:
            ui.step(f"fetching {group[0].upstream} ...")
            run.fetched.add(group[0].upstream)
        mirror = Mirror(ws.config.upstream(group[0].upstream)).ensure(
            fetch_now=run.fetch, progress=ui.progress)
        pending = syncstate.load_state(ws.state_dir)
        waiting = [ps for ps in group if _still_broken(ps, mirror.tip(ps.branch), pending)]
        for ps in waiting:
            _report_recorded_conflict(ws, ps, outcomes[ps.target])
        reports = carry(ws, ui, [ps for ps in group if ps not in waiting], fetch=False,
                        state=pending)
    except ContribError as exc:
        for ps in group:
            outcomes[ps.target].fail("sync", scrub(str(exc)))
        return
    for report in reports:
        outcome = outcomes[report.patchset]
        outcome.sync = report.as_dict()
        outcome.act("sync", report.result, version=report.version, commits=report.commits)
        if report.result == CONFLICT and report.conflict:
            ps = next(p for p in group if p.target == report.patchset)
            outcome.needs.append(Need.conflict(ws, report.patchset, _conflict_info(ps, report)))
        elif report.result == ERROR:
            outcome.needs.append(Need("error", f"{report.patchset}: sync: {report.error}",
                                      {"patchset": report.patchset}))


def _still_broken(ps: Patchset, tip: str, pending: dict[str, syncstate.Pending]) -> bool:
    """A conflict recorded by an earlier run (on a CI runner, whose worktree is gone)
    for this version at this very tip: carrying again would find it again and only
    rewrite its timestamp, so the recorded one is reported as it is."""
    last = ps.sync
    return (ps.target not in pending and last is not None and last.result == CONFLICT
            and last.target == tip and last.base == ps.current.base)


def _report_recorded_conflict(ws: Workspace, ps: Patchset, outcome: Outcome) -> None:
    last = ps.sync
    info = dict(last.details.conflict or {}) if last is not None else {}
    note = ("recorded by an earlier run; upstream has not moved since. `contrib sync "
            f"{ps.target}` prepares the worktree to resolve it")
    outcome.sync = {"patchset": ps.target, "result": CONFLICT, "base": ps.current.base,
                    "target": last.target if last else None, "conflict": info,
                    "notes": [note]}
    outcome.act("sync", CONFLICT, note="recorded earlier; upstream unchanged")
    outcome.needs.append(Need.conflict(ws, ps.target, info))


def _conflict_info(ps: Patchset, report: Any) -> dict[str, Any]:
    """The conflict as sync reported it; a conflict still pending from an earlier run
    is reported by sha only, so its subject and files come from patchset.toml."""
    info = dict(report.conflict)
    recorded = dict(ps.sync.details.conflict or {}) if ps.sync is not None else {}
    if not (info.get("commit") or {}).get("subject"):
        info["commit"] = {**(recorded.get("commit") or {}), **(info.get("commit") or {})}
    return info


def _validate(ws: Workspace, ps: Patchset, outcome: Outcome) -> None:
    """Validate the current version unless its record is bound to it and has a run for
    the patchset's arch (``contrib validate`` itself, silenced: this run reports it)."""
    if outcome.sync and outcome.sync["result"] == UPSTREAMED:
        return
    standing = version_standing(ps.current)
    if standing.bound and standing.for_arch(ps.arch) is not None:
        outcome.act("validate", "up to date", verdict=standing.summary())
    else:
        try:
            validate(ws, _Silent(), [ps.selector], arch=None, junit=None)  # its document is unused
        except ContribError as exc:
            outcome.fail("validate", scrub(str(exc)))
            return
        standing = version_standing(ws.patchset(ps.target).current)
        outcome.act("validate", standing.summary())
    view = validation_view(ps.target, standing)
    outcome.validation = view.to_dict()
    if view.verdict == "failed":
        outcome.needs.append(Need.failed_validation(view))


class _Silent(UI):
    """A UI that prints nothing: validate's own table and JSON stay out of this run's."""

    def __init__(self) -> None:
        super().__init__(json_mode=True)

    def emit(self, document: Any) -> None:
        return None


def _commit(ws: Workspace, repo: WorkspaceRepo, outcomes: list[Outcome], run: Run,
            push: bool) -> None:
    """One commit of every change under the selected patchsets' folders; then the push."""
    folders = sorted({ws.folder_of(o.patchset) for o in outcomes})
    if len(outcomes) == 1:
        message = f"autopilot: {outcomes[0].patchset}: {outcomes[0].summary()}\n"
    else:
        message = f"autopilot: {len(outcomes)} patchsets\n\n" + "".join(
            f"- {o.patchset}: {o.summary()}\n" for o in outcomes)
    try:
        run.commit = repo.commit(folders, message)
        if push:
            run.push = repo.push(run.forges.workspace_token)
    except ContribError as exc:
        run.push = "failed"
        run.problems.append(Need("push", scrub(str(exc))))


@contextmanager
def _scratch(ws: Workspace, dry_run: bool) -> Iterator[Workspace]:
    """The workspace itself, or for a dry run a throw-away copy of it (without the
    repository and contrib's private state, but with the pending conflicts' record)."""
    if not dry_run:
        yield ws
        return
    with tempfile.TemporaryDirectory(prefix="contrib-dry-run-") as tmp:
        copy = Path(tmp) / "ws"
        shutil.copytree(ws.root, copy, symlinks=True, ignore=_private(ws.root))
        state = syncstate.state_path(ws.state_dir)
        if state.is_file():
            (copy / STATE_DIR).mkdir(exist_ok=True)
            shutil.copy2(state, syncstate.state_path(copy / STATE_DIR))
        scratch = Workspace(copy)
        # The copy reads the real workspace's configuration: a relative upstream url
        # (the demo's "../upstream") is relative to the workspace, not to the copy.
        scratch.config = replace(ws.config, path=scratch.config.path)
        yield scratch


def _private(root: Path) -> Any:
    def ignore(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if n in (".git", STATE_DIR)] if Path(folder) == root else []
    return ignore


def _would_commit(ws: Workspace, copy: Workspace, outcomes: list[Outcome]) -> list[str]:
    """The files a real run would commit: those the dry run changed in its copy."""
    changed = []
    for outcome in outcomes:
        mine, theirs = (w.folder_of(outcome.patchset) for w in (ws, copy))
        names = {p.relative_to(theirs) for p in theirs.rglob("*") if p.is_file()} | {
            p.relative_to(mine) for p in mine.rglob("*") if p.is_file()}
        folder = mine.relative_to(ws.root).as_posix()
        changed += [f"{folder}/{n}" for n in sorted(names)
                    if not (mine / n).is_file() or not (theirs / n).is_file()
                    or (mine / n).read_bytes() != (theirs / n).read_bytes()]
    return changed


def check_gpu_labels(labels: list[str]) -> list[str]:
    """--gpu-missing values: runner labels as the workflow names them."""
    from contrib.autopilot.workflow import LABEL_RE

    for label in labels:
        if not LABEL_RE.match(label):
            raise UsageError(f"--gpu-missing {label!r}: not a runner label")
    return labels
