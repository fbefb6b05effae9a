"""Commit ranges that become patchsets: a PR, a fork branch, an edited branch.

Each source is fetched into the upstream cache under ``refs/contrib/...``
(never ``refs/heads`` or ``refs/remotes``, which belong to the upstream), so
its commits can be checked and exported with the same plumbing as everything
else.  A range must be a straight line of commits on an upstream commit: a
merge in it (unless ``--squash`` makes the whole change one commit), or nothing
in it, is refused with the reason (exit 2) before anything is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contrib.errors import GitError, UsageError
from contrib.git.cache import Mirror
from contrib.git.repo import Git, Identity, Sha
from contrib.secrets import scrub

_PR_URL = re.compile(r"^https?://[^/]+/([^/]+/[^/]+)/pulls?/(\d+)/?(?:[#?].*)?$")


@dataclass(frozen=True)
class Range:
    """``base..tip`` in the upstream cache, and where it came from (for people)."""

    base: Sha
    tip: Sha
    source: str


def pr_number(mirror: Mirror, pr: str) -> int:
    """``7``, ``#7`` or a PR URL of this upstream, as a number; UsageError otherwise."""
    if re.fullmatch(r"#?\d+", pr.strip()):
        return int(pr.strip().lstrip("#"))
    match = _PR_URL.match(pr.strip())
    if not match:
        raise UsageError(f"--from-pr {pr!r}: give a PR number or a pull request URL")
    repo = mirror.upstream.github
    if repo and match[1].lower() != repo.lower():
        raise UsageError(f"--from-pr {pr}: that PR is on {match[1]}, but upstream "
                         f"{mirror.upstream.name} is {repo} (github in contrib.toml)")
    return int(match[2])


def from_pr(mirror: Mirror, pr: str, *, squash: bool = False) -> Range:
    """The commits of upstream PR ``pr`` (``refs/pull/N/head``) on their merge base
    (one commit of the PR's whole change with ``squash``)."""
    number = pr_number(mirror, pr)
    ref = f"refs/contrib/pull/{number}"
    _fetch(mirror.git, mirror.upstream.url, f"refs/pull/{number}/head", ref,
           f"PR #{number} of upstream {mirror.upstream.name}")
    return on_upstream(mirror, ref, f"PR #{number}", squash=squash)


def from_branch(mirror: Mirror, url: str, branch: str, *, squash: bool = False) -> Range:
    """The commits of ``branch`` of the repository at ``url`` on their merge base."""
    if not branch or branch.startswith("-") or ".." in branch:
        raise UsageError(f"--from-branch: {branch!r} is not a branch name")
    safe = re.sub(r"[^A-Za-z0-9._/-]", "-", branch)
    ref = f"refs/contrib/branch/{safe}"
    _fetch(mirror.git, url, f"refs/heads/{branch}", ref, f"branch {branch} of {scrub(url)}")
    return on_upstream(mirror, ref, f"branch {branch} of {scrub(url)}", squash=squash)


def _fetch(git: Git, url: str, remote_ref: str, local_ref: str, what: str) -> None:
    try:
        git.run("fetch", "--no-tags", "--no-write-fetch-head", "--", url,
                f"+{remote_ref}:{local_ref}")
    except GitError as exc:
        raise UsageError(f"cannot fetch {what}: {exc.reason}") from None


def on_upstream(mirror: Mirror, ref: str, source: str, *, squash: bool = False) -> Range:
    """``ref``'s commits on the upstream branch: from their merge base to ``ref``."""
    git = mirror.git
    tip = git.rev_parse(ref)
    upstream_tip = mirror.tip()
    status, out, _ = git.try_run("merge-base", tip, upstream_tip)
    if status != 0 or not out.strip():
        raise UsageError(f"{source} shares no history with {mirror.upstream.name}'s "
                         f"{mirror.upstream.branch}; nothing to take")
    return checked(git, Range(Sha(out.strip()), tip, source), squash=squash)


def checked(git: Git, found: Range, *, squash: bool = False) -> Range:
    """``found`` itself, after refusing an empty range or one with merge commits (with
    ``squash``, a range holding merges becomes one commit: its whole change)."""
    where = f"{found.source} ({found.base[:12]}..{found.tip[:12]})"
    if git.count(f"{found.base}..{found.tip}") == 0:
        raise UsageError(f"{where}: no commits on top of the upstream; nothing to take")
    merges = git.run("rev-list", "--min-parents=2", f"{found.base}..{found.tip}").split()
    if merges and squash:
        return squashed(git, found)
    if merges:
        info = git.commit_info(merges[0])
        raise UsageError(f"{where}: contains merge commit {merges[0][:12]} "
                         f"{info.subject!r}; a patchset is a straight series: add --squash "
                         "to take its whole change as one patch, or rebase the branch onto "
                         "the upstream (git rebase) and try again")
    return found


def squashed(git: Git, found: Range) -> Range:
    """One commit on ``found.base`` holding ``found.tip``'s tree: the merges' and the
    commits' change as one patch, authored as the tip was, its message listing them."""
    subjects = git.run("log", "--no-merges", "--reverse", "--format=%s",
                       f"{found.base}..{found.tip}").splitlines()
    info = git.commit_info(found.tip)
    first = subjects[0] if subjects else info.subject
    body = "\n".join(f"- {s}" for s in subjects)
    message = f"{first}\n\n{found.source}, squashed ({len(subjects)} commits):\n{body}\n"
    tip = git.commit_tree(git.tree_of(found.tip), [found.base], message,
                          Identity(info.author_name, info.author_email, info.author_date))
    return Range(found.base, tip, f"{found.source} (squashed)")
