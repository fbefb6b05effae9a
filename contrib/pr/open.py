"""Open or update a patchset's pull request: the engine behind ``contrib open-pr``.

For each patchset: build ``contrib/<name>`` as commits on the recorded base
(``git am`` semantics: author and date from the patches, committer = author,
so identical input gives identical SHAs; :mod:`contrib.pr.prepare`), push it to
the fork with a lease, then create or update one draft PR on the upstream.  The rules:

- no ``validation.json`` bound to this version whose required stages passed for the
  patchset's arch, or a failed arch, or a draft with no PR whose record does not prove
  it (the rule ``status`` says "held back" by, :func:`contrib.pr.prepare.holdback`) ->
  refuse, unless ``--force`` (the body says so);
- the upstream's own ``pre-commit`` hooks fail on the touched files, or a check its PR
  workflows run (:mod:`contrib.pr.checks`) fails on the tree -> refuse, unless
  ``--allow-hook-failures`` (the body says so; :mod:`contrib.pr.conventions`);
- push only to the fork, only ``refs/heads/contrib/...``, with
  ``--force-with-lease`` against what the fork had; skip when identical;
- the fork branch has commits contrib never pushed -> stop (Renovate's rule);
- the PR is found by head ``owner:contrib/<name>``, any state: open -> update,
  none -> create a draft, "already exists" or a 5xx after the create -> find
  and update (never a second PR), closed by a human -> leave it (``--reopen``
  reopens), merged -> the patchset is ``Accepted``.

``--dry-run`` runs the same steps with the recording forge
(:mod:`contrib.forge.recording`) and without pushing or writing: the calls it
records are what it prints, so the dry run cannot drift from the real run.  It is
offline: no ``git ls-remote``, fetch or push and no API call; what it could not
check it takes from ``patchset.toml`` (the PR recorded, the tip last pushed) and
says so.  A caller's recorder (the autopilot's preview) reads through its forge.
A ``github``/``fork`` left at ``contrib init``'s placeholder is refused first, dry
run or not (exit 2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from contrib.carry.versions import Event, How, add_event
from contrib.clock import now_iso
from contrib.credentials import find_token, push_env, require_token
from contrib.errors import ContribError, GitError, NeedsAttention
from contrib.forge.api import (
    Forge,
    ForgeFactory,
    ForgeUnavailable,
    PullRequest,
    PullRequestExists,
    RecordedCall,
    check_api_url,
    check_token,
)
from contrib.forge.connect import connect
from contrib.forge.recording import RecordingForge
from contrib.git.cache import Mirror
from contrib.git.process import ProgressFn
from contrib.pr.prepare import BRANCH_PREFIX, Job, prepare, refuse_placeholders
from contrib.pr.proof import Proof
from contrib.secrets import scrub
from contrib.workspace.model import Patchset, Workspace
from contrib.workspace.schema import PrRecord, UpstreamStatus


def open_pr(ws: Workspace, targets: list[str] | tuple[str, ...], *, dry_run: bool = False,
            force: bool = False, reopen: bool = False,
            github_factory: ForgeFactory | None = None,
            forge: Forge | None = None,
            progress: ProgressFn | None = None,
            proofs: Mapping[str, Proof] | None = None,
            allow_hook_failures: bool = False) -> tuple[int, list[dict[str, Any]]]:
    """Open or update the draft PR of each selected patchset.

    Returns the exit code (0 all done, 1 something needs the user, 2 bad
    input) and one JSON-able result per patchset.  Per-patchset problems are
    reported in that patchset's result; the others still run.  ``forge``: use
    this one (a caller's RecordingForge for its own dry run, say) instead of
    building one from contrib.toml and the token with ``github_factory``; a dry run
    without one is offline.  ``proofs``: drafts' proofs by target, as a caller with the
    audit's chain worked them out (the autopilot's; :func:`~contrib.pr.prepare.holdback`).
    ``allow_hook_failures``: open a PR whose upstream pre-commit hooks fail on the
    touched files (refused otherwise, as a patchset problem: exit 1).
    """
    patchsets = ws.patchsets(list(targets))
    refuse_placeholders(ws, list(dict.fromkeys(ps.upstream for ps in patchsets
                                               if not _upstreamed(ps))))
    offline = dry_run and forge is None
    token: str | None = None
    if offline:
        token, forge = _offline(ws)
    elif forge is None:
        token, forge = _forge(ws, factory=github_factory, needed=bool(patchsets))
    else:
        token = find_token(ws.config.github_api_url)
    mirrors: dict[str, Mirror] = {}
    results: list[dict[str, Any]] = []
    for ps in patchsets:
        try:
            results.append(_open_one(ws, ps, forge, token, mirrors, dry_run=dry_run, force=force,
                                     reopen=reopen, progress=progress, offline=offline,
                                     proof=(proofs or {}).get(ps.target),
                                     allow_hook_failures=allow_hook_failures))
        except ContribError as exc:
            results.append({"patchset": ps.target, "result": "error", "error": scrub(str(exc)),
                            "exit_code": exc.exit_code})
    for r in results if offline else ():
        if "unchecked" in r:
            r["unchecked"].append("whether GitHub takes the token, and lets it push to the fork"
                                  if token else "no GitHub token here: the real run needs "
                                  "GITHUB_TOKEN or GH_TOKEN, with push access to the fork")
    return max((r["exit_code"] for r in results), default=0), results


def _offline(ws: Workspace) -> tuple[str | None, RecordingForge]:
    """A dry run's (token, forge): the API URL and the token as the real run would check
    them, here (no request), and a recorder that reads nothing."""
    api_url = check_api_url(ws.config.github_api_url, f"{ws.config.path} [github] api_url")
    token = find_token(api_url)
    if token:
        check_token(token)
    return token, RecordingForge(None, api_url)


def _upstreamed(ps: Patchset) -> bool:
    """Found in its upstream with no PR of ours: nothing to push or propose."""
    return ps.upstream_status == UpstreamStatus.UPSTREAMED and ps.pr is None


def _forge(ws: Workspace, *, factory: ForgeFactory | None,
           needed: bool) -> tuple[str | None, Forge]:
    """(token, forge): GitHub itself, which needs a token."""
    api_url = ws.config.github_api_url
    token = require_token(api_url) if needed else None
    if token is None:
        return None, RecordingForge(None, api_url)  # no patchset: nothing will be asked
    return token, connect(ws.config, token, factory=factory)


def _open_one(ws: Workspace, ps: Patchset, forge: Forge, token: str | None,
              mirrors: dict[str, Mirror], *, dry_run: bool, force: bool,
              reopen: bool, progress: ProgressFn | None = None,
              offline: bool = False, proof: Proof | None = None,
              allow_hook_failures: bool = False) -> dict[str, Any]:
    if _upstreamed(ps):
        return {"patchset": ps.target, "result": "upstreamed", "target": ps.branch,
                "base": ps.branch, "exit_code": 0,
                "message": f"already in {ps.branch}: no PR is proposed for this line"}
    job = prepare(ws, ps, mirrors, force=force, offline=offline, proof=proof,
                  allow_hook_failures=allow_hook_failures)
    job.progress = progress
    if not isinstance(forge, RecordingForge):
        return _run_one(job, forge, token, dry_run=dry_run, reopen=reopen)
    outer = forge.on_call  # a dry run: the calls join the actions in order

    def note(call: RecordedCall) -> None:
        if job.offline and not call.write:
            call = replace(call, note=OFFLINE)
        job.actions.append(str(call))
        if outer is not None:
            outer(call)

    forge.on_call = note
    try:
        return _run_one(job, forge, token, dry_run=dry_run, reopen=reopen)
    finally:
        forge.on_call = outer


OFFLINE = "not read: a dry run is offline"


def _run_one(job: Job, forge: Forge, token: str | None, *, dry_run: bool,
             reopen: bool) -> dict[str, Any]:
    existing = forge.find_pr(job.repo, job.head, job.base)
    if job.offline:
        existing = existing or _recorded_pr(job)
    if existing is not None and existing.merged:
        return _merged(job, existing, dry_run)
    if existing is not None and existing.state == "closed" and not reopen:
        return _closed(job, existing, dry_run)
    fork_tip = _fork_tip(job, token, dry_run)
    expected = _lease(job, fork_tip)
    reopened = existing is not None and existing.state == "closed"
    if existing is not None and reopened:
        # GitHub cannot reopen a PR whose branch was force-pushed while closed: reopen first.
        existing = forge.reopen_pr(job.repo, existing.number)
    pushed = _push(job, token, expected, fork_tip, dry_run)
    pr, outcome = _create_or_update(job, forge, existing)
    outcome = "reopened" if reopened else outcome
    if dry_run:
        return job.result("dry-run", push=pushed, would=outcome, body=job.body,
                          pr=_pr_json(existing) if existing else None,
                          unchecked=job.unchecked)
    _record(job, pr)
    return job.result(outcome, push=pushed, pr=_pr_json(pr))


# -- the fork ------------------------------------------------------------------


def _recorded_pr(job: Job) -> PullRequest | None:
    """Offline: the PR ``patchset.toml`` records (its title and body unknown, so an
    open one would be updated), else None (one would be created)."""
    pr = job.ps.pr
    if pr is None or not pr.number:
        job.unchecked.append(f"whether {job.repo} has a PR from {job.head}: patchset.toml "
                             "records none, so one would be created")
        return None
    job.unchecked.append(f"PR #{pr.number} on GitHub: taken as patchset.toml records it "
                         f"({pr.state or 'open'}); its title and body were not compared")
    return PullRequest(number=pr.number, url=pr.url or "", state="closed" if pr.state in (
        "closed", "merged") else "open", merged=pr.state == "merged", merged_at=pr.merged_at,
        merge_commit_sha=pr.merge_commit_sha, title="", body="", head=job.head, base=job.base,
        draft=bool(pr.draft))


def _fork_tip(job: Job, token: str | None, dry_run: bool) -> str | None:
    """What the fork's contrib/<name> points at now (None: no such branch); offline,
    what contrib last pushed there."""
    ref = f"refs/heads/{job.branch}"
    if job.offline:
        pushed = (job.ps.pr or PrRecord()).pushed
        job.unchecked.append(f"the fork's {job.branch} at {job.push_url}: taken as contrib "
                             f"last pushed it ({pushed[:12] if pushed else 'absent'})")
        return pushed
    job.actions.append(f"git ls-remote {job.push_url} {ref}")
    status, out, err = job.git.try_run("ls-remote", "--", job.push_url, ref,
                                       env=push_env(job.push_url, token))
    if status != 0:
        last = (err.strip().splitlines() or ["git ls-remote failed"])[-1]
        msg = f"cannot read the fork at {job.push_url}: {last}"
        if re.search(r"could not read Username|Authentication failed|\b40[13]\b", err):
            msg = f"the fork at {job.push_url} refused the token (git: {last})"
        if dry_run:
            job.actions.append(f"(could not read the fork: {err.strip()[:200]})")
            return None
        raise NeedsAttention(scrub(msg + "; check push_url/fork in contrib.toml and the token's "
                                   "Contents: write permission on the fork"))
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if name.strip() == ref:
            return sha.strip()
    return None


def _lease(job: Job, fork_tip: str | None) -> str | None:
    """The value the push lease expects; NeedsAttention if someone else pushed there."""
    if fork_tip is None or fork_tip == job.tip:
        return fork_tip
    ours = set((job.ps.pr or PrRecord()).pushed_history)
    if fork_tip not in ours:
        raise NeedsAttention(
            f"{job.push_url} branch {job.branch} is at {fork_tip[:12]}, which contrib never "
            f"pushed (someone else committed there); contrib will not overwrite it. Move those "
            f"commits into the patchset, or delete the branch on the fork, then run again")
    return fork_tip


def _push(job: Job, token: str | None, expected: str | None, fork_tip: str | None,
          dry_run: bool) -> str:
    """Push the branch with a lease; 'unchanged' when the fork already has it."""
    dest = f"refs/heads/{job.branch}"
    assert dest.startswith("refs/heads/" + BRANCH_PREFIX)  # never anything else
    if fork_tip == job.tip:
        if dry_run:
            job.actions.append("(push skipped: the fork already has this branch)")
            return "unchanged"
        _remember_push(job)
        return "unchanged"
    job.actions.append(f"git push --force-with-lease={dest}:{expected or ''} {job.push_url} "
                       f"{job.tip[:12]}:{dest}")
    if dry_run:
        return "would push"
    try:
        progress = job.progress
        shown = None if progress is None else (
            lambda message: progress(f"push {job.branch} to {job.upstream.fork}: {message}"))
        job.git.run_reporting("push", "--porcelain", "--no-verify",
                              f"--force-with-lease={dest}:{expected or ''}", "--", job.push_url,
                              f"{job.tip}:{dest}", env=push_env(job.push_url, token),
                              progress=shown)
    except GitError as exc:
        if "stale info" in str(exc) or "rejected" in str(exc):
            raise NeedsAttention(f"{job.push_url} branch {job.branch} changed while contrib was "
                                 "pushing; nothing was overwritten. Run open-pr again") from None
        raise NeedsAttention(f"push to the fork failed: {exc}") from None
    _remember_push(job)
    return "pushed"


def _remember_push(job: Job) -> None:
    """Record the pushed tip at once: a later failure must not orphan it."""
    pr = job.ps.pr or PrRecord()
    history = pr.pushed_history + (() if job.tip in pr.pushed_history else (job.tip,))
    if pr.pushed and pr.pushed != job.tip:
        pr = replace(pr, previous=pr.pushed, previous_version=pr.version)
    if pr.pushed != job.tip:
        add_event(job.ps.meta, Event(How.PUSH, job.version, detail=f"pushed {job.tip} to "
                                     f"{job.head}"))
    job.ps.set_pr(replace(pr, head=job.head, branch=job.branch, pushed=job.tip,
                          version=job.version, pushed_history=history))
    job.ps.save_meta()


# -- the pull request ------------------------------------------------------------


def _create_or_update(job: Job, api: Forge,
                      existing: PullRequest | None) -> tuple[PullRequest, str]:
    if existing is not None:
        return _update(job, api, existing, None)
    try:
        pr = api.create_draft_pr(job.repo, head=job.head, base=job.base,
                                 title=job.title, body=job.body,
                                 maintainer_can_modify=job.upstream.maintainer_can_modify)
        return pr, "created"
    except (PullRequestExists, ForgeUnavailable) as exc:
        # The create may have landed (GitHub said "already exists", or answered 5xx
        # after making it): find that PR and update it; never open a second one.
        found = api.find_pr(job.repo, job.head, job.base)
        if found is None or found.state != "open":
            raise exc from None
        ours = found.title == job.title and found.body == job.body  # our create landed
        return _update(job, api, found, "created" if ours else None)


def _update(job: Job, api: Forge, pr: PullRequest,
            outcome: str | None) -> tuple[PullRequest, str]:
    if pr.title == job.title and pr.body == job.body:
        return pr, outcome or "unchanged"
    return api.update_pr(job.repo, pr.number, title=job.title, body=job.body), outcome or "updated"


def _pr_json(pr: PullRequest) -> dict[str, Any]:
    state = "merged" if pr.merged else pr.state
    return {"number": pr.number, "url": pr.url, "state": state, "draft": pr.draft,
            "merged_at": pr.merged_at, "merge_commit_sha": pr.merge_commit_sha}


def _record(job: Job, pr: PullRequest) -> None:
    info = _pr_json(pr)
    job.ps.set_pr(replace(job.ps.pr or PrRecord(), repo=job.repo, head=job.head,
                          number=pr.number, url=pr.url, state=info["state"], draft=pr.draft,
                          updated=now_iso(), merged_at=pr.merged_at,
                          merge_commit_sha=pr.merge_commit_sha if pr.merged else None))
    if pr.merged:
        job.ps.set_upstream_status(UpstreamStatus.ACCEPTED)
    elif pr.state == "open" and job.ps.upstream_status == UpstreamStatus.PENDING:
        job.ps.set_upstream_status(UpstreamStatus.SUBMITTED)
    job.ps.save_meta()


def _merged(job: Job, pr: PullRequest, dry_run: bool) -> dict[str, Any]:
    if not dry_run:
        _record(job, pr)
    return job.result("merged", push="skipped", pr=_pr_json(pr),
                      message=f"PR #{pr.number} was merged ({pr.merge_commit_sha or '?'}); "
                              f"{job.ps.target} is Accepted")


def _closed(job: Job, pr: PullRequest, dry_run: bool) -> dict[str, Any]:
    if not dry_run:
        _record(job, pr)
    message = (f"{pr.url} (#{pr.number}) was closed without merging; contrib leaves it closed "
               f"and pushed nothing. Run `contrib open-pr --reopen {job.ps.target}` to reopen "
               "and update it")
    return job.result("closed", push="skipped", pr=_pr_json(pr), error=message, exit_code=1)
