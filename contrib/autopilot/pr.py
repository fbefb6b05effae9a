"""autopilot's PR step: keep each patchset's PR at its validated version, by policy.

``[autopilot] prs``:

- ``update`` (default): a patchset with a PR gets it updated (branch pushed to
  the fork, title and body rewritten) when open-pr would change anything;
- ``create``: also opens a draft PR for a validated patchset that has none;
- ``never``: PRs are left alone (the dashboard still shows them).

Whether open-pr would change anything is asked of open-pr itself, as a dry
run: a PR already current costs reads only, never a write.  A PR closed by a
human stays closed and is reported; a merged one is reported.  A patchset
found upstreamed gets ONE comment on its still-open PR naming the landing
commit(s); the comment carries a hidden marker, and the PR's comments are
read before writing, so no run (nor a re-run after a lost answer) comments
twice.
"""

from __future__ import annotations

from typing import Any

from contrib.autopilot.state import Need, Outcome, Run
from contrib.carry.report import UPSTREAMED
from contrib.errors import ContribError
from contrib.forge.api import Forge, ForgeUnavailable, PullRequest
from contrib.forge.recording import RecordingForge
from contrib.pr.open import open_pr
from contrib.pr.prepare import holdback, pr_branch
from contrib.pr.proof import Proof
from contrib.record import Verdict, version_standing
from contrib.secrets import scrub
from contrib.workspace.model import Patchset, Workspace

LANDED_MARKER = "<!-- contrib:landed patchset={target} -->"


def pr_step(ws: Workspace, ps: Patchset, outcome: Outcome, run: Run,
            proof: Proof | None = None) -> None:
    """Bring ``ps``'s PR to where the policy wants it; record what was done.  ``proof``:
    a draft's, as the proposals worked it out with the audit's chain."""
    if run.policy == "never" or not outcome.syncable:
        return
    upstream = ws.config.upstream(ps.upstream)
    if not upstream.github or not upstream.fork:
        outcome.act("pr", "skipped", reason="no github/fork in contrib.toml")
        return
    forge = run.forges.upstream(ws)
    if forge is None:
        if run.policy == "create" or (ps.pr is not None and ps.pr.number):
            outcome.fail("pr", "no GitHub token for the PRs: set GITHUB_TOKEN or GH_TOKEN (in "
                         "the workflow: the CONTRIB_FORK_TOKEN secret)", kind="github")
        else:
            outcome.act("pr", "skipped", reason="no GitHub token to look for a PR")
        return
    try:
        _pr_step(ws, ps, forge, outcome, run, proof)
    except ContribError as exc:
        outcome.fail("pr", scrub(str(exc)), kind="github")


def _pr_step(ws: Workspace, ps: Patchset, forge: Forge, outcome: Outcome, run: Run,
             proof: Proof | None) -> None:
    upstream = ws.config.upstream(ps.upstream)
    head = f"{upstream.fork.split('/')[0]}:{pr_branch(ps)}"
    pr = _existing(forge, upstream.github, head, ps.branch, ps)
    if pr is not None:
        outcome.pr = {"number": pr.number, "url": pr.url, "state": _state(pr),
                      "draft": pr.draft, "head_sha": pr.head_sha}
    if outcome.sync and outcome.sync["result"] == UPSTREAMED:
        if pr is not None and pr.state == "open":
            _comment_landing(forge, upstream.github, pr, ps, outcome)
        return
    if pr is not None and pr.merged:
        outcome.act("pr", "merged", number=pr.number)
    elif pr is not None and pr.state == "closed":
        outcome.act("pr", "closed", number=pr.number)
        outcome.needs.append(_closed_need(ps, pr))
    elif pr is None and run.policy != "create":
        outcome.act("pr", "none", reason="policy update: no PR to update")
    else:
        _open_or_update(ws, ps, forge, outcome, run, proof)


def _existing(forge: Forge, repo: str, head: str, base: str, ps: Patchset) -> PullRequest | None:
    """The patchset's PR: the one recorded in patchset.toml, else found by its head."""
    recorded = ps.pr
    if recorded is not None and recorded.number and recorded.repo in (None, repo):
        pr = forge.get_pr(repo, recorded.number)
        if pr.head == head:
            return pr
    return forge.find_pr(repo, head, base)


def _state(pr: PullRequest) -> str:
    return "merged" if pr.merged else pr.state


def _closed_need(ps: Patchset, pr: PullRequest) -> Need:
    return Need("pr-closed", f"{ps.target}: PR #{pr.number} ({pr.url}) was closed by a human; "
                f"autopilot leaves it closed. Reopen it with `contrib open-pr --reopen "
                f"{ps.target}`, or mark the patchset Denied", {"patchset": ps.target,
                                                               "pr": pr.url})


def _open_or_update(ws: Workspace, ps: Patchset, forge: Forge, outcome: Outcome,
                    run: Run, proof: Proof | None) -> None:
    """Ask open-pr (as a dry run, on a recorder) whether anything would change; only
    then run it.  A dry run of autopilot hands open-pr its own recorder, which
    collects the writes it lists."""
    standing = version_standing(ps.current)
    if any(v.verdict == Verdict.FAILED for v in standing.verdicts):
        outcome.act("pr", "not updated", reason="validation failed")
        return
    gap = holdback(ps, standing, proof).sentence()  # open-pr's own rule, status's too
    if gap:
        # open-pr would refuse: a required stage has not passed yet; the GPU legs
        # of the workflow may bring it.  Not a person's job (yet): the dashboard says it.
        outcome.act("pr", "waiting", reason=gap)
        return
    recorder = forge if isinstance(forge, RecordingForge) else RecordingForge(forge)
    proofs = {ps.target: proof} if proof is not None else None
    _, (preview,) = open_pr(ws, [ps.selector], dry_run=True, forge=recorder, proofs=proofs)
    if preview["result"] == "error":
        outcome.fail("pr", preview["error"], kind="github")
        return
    if not _would_change(preview) and _recorded(ps, outcome.pr):
        outcome.act("pr", "unchanged", number=(outcome.pr or {}).get("number"))
        return
    if run.dry_run:
        would = {"created": "create", "reopened": "reopen"}.get(preview.get("would") or "",
                                                                "update")
        outcome.act("pr", f"would {would}", calls=preview["actions"])
        return
    code, (result,) = open_pr(ws, [ps.selector], forge=forge, proofs=proofs)
    if result["result"] == "error":
        outcome.fail("pr", result["error"], kind="github")
        return
    pr = result.get("pr") or {}
    outcome.pr = {**{k: pr.get(k) for k in ("number", "url", "state", "draft")},
                  "head_sha": result.get("tip")}
    outcome.act("pr", result["result"], number=pr.get("number"), push=result.get("push"))


def _would_change(preview: dict[str, Any]) -> bool:
    """Whether an open-pr dry run found anything to push or to write."""
    return preview.get("would") != "unchanged" or preview.get("push") != "unchanged"


def _recorded(ps: Patchset, pr: dict[str, Any] | None) -> bool:
    """Whether patchset.toml already records this PR at this version: a run killed
    after GitHub made or updated the PR, before recording it, left it unrecorded
    (open-pr then records it, with no write to GitHub)."""
    recorded = ps.pr
    return pr is not None and recorded is not None and recorded.number == pr["number"] and \
        recorded.state == pr["state"] and recorded.version == ps.current.base


# -- the landing comment -----------------------------------------------------------

def _comment_landing(forge: Forge, repo: str, pr: PullRequest, ps: Patchset,
                     outcome: Outcome) -> None:
    """One comment naming where the change landed; never a second one."""
    marker = LANDED_MARKER.format(target=ps.target)
    if _has_comment(forge, repo, pr.number, marker):
        outcome.act("comment", "already there", number=pr.number)
        return
    body = landing_comment(ps, marker)
    try:
        forge.create_comment(repo, pr.number, body)
    except ForgeUnavailable:
        # The comment may have landed before the answer was lost: look before retrying.
        if not _has_comment(forge, repo, pr.number, marker):
            forge.create_comment(repo, pr.number, body)
    outcome.act("comment", "would comment" if isinstance(forge, RecordingForge) else "commented",
                number=pr.number)


def _has_comment(forge: Forge, repo: str, number: int, marker: str) -> bool:
    return any(marker in c.body for c in forge.list_comments(repo, number))


def landing_comment(ps: Patchset, marker: str) -> str:
    """The comment text: each landing commit with sha, subject and upstream PR number."""
    landed = ps.sync.details.upstreamed if ps.sync is not None else ()
    lines = []
    for one in landed:
        pr = f" (#{one.pr})" if one.pr and f"#{one.pr}" not in (one.subject or "") else ""
        what = f"`{one.sha[:12]}` {one.subject or ''}{pr}" if one.sha else \
            "already in the upstream branch (no shared history to bisect)"
        lines.append(f"- `{one.patch}`: {what}")
    listing = "\n".join(lines) or "- every patch of the series"
    return (f"{marker}\ncontrib found every change of this PR upstream, so the patchset "
            f"`{ps.target}` is no longer carried:\n\n{listing}\n\nThis PR can be closed.")
