"""A patchset's PR worked out before anything is pushed or posted: the :class:`Job`.

The checks come first (the push URL can only be the fork's, never ``contrib init``'s
placeholder; the version's validation is enough, or ``--force``), then the branch: the version's patches applied on its base
as commits (``git am`` semantics, so identical input gives identical SHAs), then the
title and the body (:mod:`contrib.pr.body`) with the range-diff from the previous push
and the ``[[requires]]``.  :mod:`contrib.pr.open` pushes the branch and opens the PR.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from contrib.analysis.includes import CUDA_SUFFIXES
from contrib.arch import parse_arch
from contrib.errors import ConfigError, ContribError, NeedsAttention
from contrib.git.cache import Mirror
from contrib.git.process import ProgressFn
from contrib.git.repo import Git, Sha
from contrib.pr.body import BodyInput, CommitLine, render_body, render_title
from contrib.pr.conventions import Conventions, check_refusal, hook_refusal, read_conventions
from contrib.pr.proof import Proof, recorded
from contrib.record import Standing, Verdict, version_standing
from contrib.validate.requires import requirements
from contrib.workspace.config import Upstream, placeholders
from contrib.workspace.model import Patchset, Version, Workspace
from contrib.workspace.schema import PrRecord, UpstreamStatus
from contrib.workspace.txn import utf8

BRANCH_PREFIX = "contrib/"


@dataclass
class Job:
    """One patchset's PR, worked out before anything is pushed or posted."""

    ps: Patchset
    upstream: Upstream
    git: Git
    branch: str
    head: str  # fork-owner:contrib/<name>
    push_url: str
    tip: Sha
    commits: list[CommitLine]
    forced: bool
    title: str = ""
    body: str = ""
    validation: str = ""  # the verdict as the body's first line shows it
    actions: list[str] = field(default_factory=list)
    progress: ProgressFn | None = None  # git's push progress, for the status line
    offline: bool = False  # a dry run: no git or API call leaves the machine
    unchecked: list[str] = field(default_factory=list)  # what an offline run took on trust
    conventions: Conventions | None = None  # the upstream's template, hooks and owners

    @property
    def repo(self) -> str:
        return self.upstream.github

    @property
    def base(self) -> str:
        """The branch the PR targets: the patchset's target branch."""
        return self.ps.branch

    @property
    def version(self) -> str:
        return self.ps.current.base

    def result(self, result: str, **extra: Any) -> dict[str, Any]:
        return {"patchset": self.ps.target, "result": result, "repo": self.repo,
                "target": self.ps.branch, "base": self.base,
                "head": self.head, "branch": self.branch, "version": self.version,
                "tip": self.tip, "forced": self.forced, "validation": self.validation,
                "title": self.title,
                "commits": [asdict(c) for c in self.commits], "actions": self.actions,
                **_conventions_json(self.conventions), "exit_code": 0, **extra}


def pr_branch(ps: Patchset) -> str:
    """The fork branch a patchset's PR is pushed to: ``contrib/NAME``, and for a
    patchset carried on several branches ``contrib/NAME--BRANCH`` (one PR per line)."""
    if len(ps.branches) == 1 and not ps.targets_at:
        return BRANCH_PREFIX + ps.name
    return f"{BRANCH_PREFIX}{ps.name}--{ps.branch.replace('/', '-')}"


def prepare(ws: Workspace, ps: Patchset, mirrors: dict[str, Mirror], *, force: bool,
            offline: bool = False, proof: Proof | None = None,
            allow_hook_failures: bool = False) -> Job:
    """``ps``'s PR worked out: the config and the validation checked, the branch built in
    the upstream's cache (``mirrors``, one per upstream, shared by the run), title and body.
    ``offline`` (a dry run): the cache is neither made nor fetched.  ``proof``: a draft's,
    as a caller with the audit's chain worked it out (:func:`holdback`).  The upstream's
    pre-commit hooks run on the touched files; NeedsAttention when one fails, unless
    ``allow_hook_failures`` (the body says so)."""
    upstream = ws.config.upstream(ps.upstream)
    push_url = _check_config(ws, upstream)
    version = ps.current
    validation, problem = _check_validation(ps, version, force, proof)
    forced = bool(problem)
    if upstream.name not in mirrors:
        mirrors[upstream.name] = _mirror(upstream, offline)
    mirror = mirrors[upstream.name]
    try:
        mirror.resolve(version.base, allow_fetch=not offline)  # else fetches once if lacking it
    except ContribError:
        if not offline:
            raise
        raise NeedsAttention(f"the cache of {upstream.name} lacks the base {version.base[:12]}, "
                             "and a dry run does not fetch: run `contrib status` (which "
                             "fetches) first") from None
    commits, tip = _build(mirror.git, version)
    branch = pr_branch(ps)
    job = Job(ps, upstream, mirror.git, branch, f"{upstream.fork.split('/')[0]}:{branch}",
              push_url, tip, commits, forced=forced, offline=offline)
    job.validation = validation.summary()
    job.conventions = _conventions(ps, mirror.git, version.base, tip, offline=offline,
                                   allowed=allow_hook_failures, tests=_tests_run(validation))
    job.title = render_title(ps.title, ps.target)
    job.body = render_body(BodyInput(
        target=ps.target, version=version.base, base_branch=ps.branch,
        other_lines=tuple(b for b in ps.branches if b != ps.branch),
        summary=ps.summary, commits=commits, validation=validation,
        forced=forced, problem=problem, range_diff=_range_diff(job), requires=_requires(ws, ps),
        previous_version=_previous(job)[1], proof=recorded(ps, validation),
        conventions=job.conventions,
        kernel=tuple(p for p in job.conventions.touched if p.lower().endswith(CUDA_SUFFIXES))))
    return job


def _conventions(ps: Patchset, git: Git, base: str, tip: Sha, *, offline: bool,
                 allowed: bool, tests: list[str]) -> Conventions:
    """The upstream's conventions at the version, its hooks run on the touched files and
    its PR checks on the tree; NeedsAttention when a hook or a check fails, unless
    ``allowed``."""
    conventions = read_conventions(git, base, tip, offline=offline, tests=tests)
    hooks, checks = conventions.hooks, conventions.checks
    if hooks is not None and hooks.failed and not allowed:
        raise NeedsAttention(f"{hook_refusal(hooks)}; fix the patches (run "
                             f"`{hooks.command()}` in a checkout of the branch), or pass "
                             "--allow-hook-failures to open the PR anyway (the body will say so)")
    if checks is not None and checks.failed and not allowed:
        raise NeedsAttention(f"{check_refusal(checks)}; fix the patches (run the command in a "
                             "checkout of the branch), or pass --allow-hook-failures (it "
                             "covers the PR checks too) to open the PR anyway (the body will "
                             "say so)")
    return replace(conventions, hook_failures_allowed=allowed)


def _tests_run(validation: Standing) -> list[str]:
    """The upstream test files the validation's tests stages selected."""
    runs = validation.record.runs if validation.record is not None else ()
    named = [str(t).split("::")[0] for r in runs if (s := r.stage("tests")) is not None
             for t in (s.details.get("selected") or []) if isinstance(t, str)]
    return list(dict.fromkeys(named))


def _conventions_json(conventions: Conventions | None) -> dict[str, Any]:
    """The hooks run and the template filled, for ``--json``."""
    if conventions is None:
        return {}
    return {"hooks": conventions.hooks.as_json() if conventions.hooks else None,
            "checks": conventions.checks.as_json() if conventions.checks else None,
            "template": conventions.template.path if conventions.template else None,
            "codeowners": conventions.owners.path if conventions.owners else None,
            "collected": [{"test": c.test, "how": str(c.how), "workflow": c.workflow,
                           "via": c.via, "named": c.named} for c in conventions.collected]}


def _mirror(upstream: Upstream, offline: bool) -> Mirror:
    """The upstream's cache, made on first use unless ``offline``."""
    mirror = Mirror(upstream)
    if offline and not mirror.path.is_dir():
        raise NeedsAttention(f"no cache of upstream {upstream.name} yet, and a dry run does not "
                             "clone: run `contrib status` (which clones it) first")
    return mirror.ensure(fetch_now=False)


def _check_validation(ps: Patchset, version: Version, force: bool,
                      proof: Proof | None) -> tuple[Standing, str]:
    """(the version's standing, why it is held back or ""); NeedsAttention unless --force."""
    standing = version_standing(version)
    held = holdback(ps, standing, proof)
    if held.held and not force:
        raise NeedsAttention(
            f"{version.validation_path}: {held.sentence()}; run `contrib validate {ps.target}` "
            f"until {'its record proves the kernels' if held.proof else 'its required stages pass'}"
            ", or pass --force to open the PR anyway (the body will say so)")
    return standing, held.sentence()


def unproposed_draft(ps: Patchset) -> bool:
    """A draft (``contrib enable``'s) with no PR yet: open-pr would propose it upstream."""
    return ps.upstream_status == UpstreamStatus.DRAFT and not (ps.pr is not None and ps.pr.number)


@dataclass(frozen=True)
class Holdback:
    """Whether open-pr would propose a version, and why not: the one rule ``status``,
    ``open-pr`` (a dry run too) and the autopilot read.

    ``gap``: the record's (no record bound to the version, no run for the patchset's
    arch, a required stage not passed, a failed arch: :func:`validation_problem`).
    ``proof``: for a draft with no PR, what its record proves (:mod:`contrib.pr.proof`,
    the autopilot's rule for proposals); None for any other patchset.  A draft is held
    by its proof's reasons when it has a run to judge, else by the gap; any other
    patchset by the gap alone."""

    gap: str = ""
    proof: Proof | None = None

    @property
    def held(self) -> tuple[str, ...]:
        """The reasons, in order; empty when open-pr takes the version."""
        if self.proof is not None and self.proof.validated and self.proof.held:
            return tuple(self.proof.held)
        return (self.gap,) if self.gap else ()

    def sentence(self) -> str:
        """The reasons in one line, as status and open-pr print them ("" for none)."""
        if not self.held:
            return ""
        prefix = "held back from a draft PR: " if self.proof is not None else ""
        return prefix + "; ".join(self.held)


def holdback(ps: Patchset, standing: Standing, proof: Proof | None = None) -> Holdback:
    """The :class:`Holdback` of ``ps``'s current version.  ``proof``: a draft's as a
    caller with the audit's chain worked it out (the autopilot); else its record's, which
    cannot tell a ``ptx`` stage with nothing to build from a chain that builds nothing."""
    gap = validation_problem(ps, standing)
    if not unproposed_draft(ps):
        return Holdback(gap)
    return Holdback(gap, proof if proof is not None else recorded(ps, standing))


def validation_problem(ps: Patchset, standing: Standing) -> str:
    """Why open-pr would not take this version ("" when it would): no record bound to
    it, no run for the patchset's arch, a required stage not passed, or a failed arch."""
    if standing.record is None:
        return f"not validated ({standing.reason})"
    try:
        arch = parse_arch(ps.arch).name
    except ContribError:
        arch = ps.arch
    target = standing.for_arch(arch)
    if target is None:
        return f"no run for {arch} (runs for {', '.join(standing.record.archs())})"
    if target.unmet:
        return f"{target.line()}; required {'stage' if len(target.unmet) == 1 else 'stages'} not passed: {', '.join(target.unmet)}"
    failed = [v.line() for v in standing.verdicts if v.verdict == Verdict.FAILED]
    return f"failed: {'; '.join(failed)}" if failed else ""


def refuse_placeholders(ws: Workspace, upstreams: list[str]) -> None:
    """A ConfigError (exit 2, one line: the file, line, key and what to set) when an
    upstream's ``github`` or ``fork`` is ``contrib init``'s placeholder, the value
    ``contrib doctor`` fails (:func:`~contrib.workspace.config.placeholders`)."""
    for name in upstreams:
        found = placeholders(ws.config, name)
        if found:
            raise ConfigError(found[0].message())


def _check_config(ws: Workspace, upstream: Upstream) -> str:
    """The push URL, after making sure PRs and pushes can only go where they should."""
    where = f"{ws.config.path} [upstreams.{upstream.name}]"
    refuse_placeholders(ws, [upstream.name])
    if not upstream.github or not upstream.fork:
        raise ConfigError(f"{where}: open-pr needs github = \"OWNER/NAME\" (the repository PRs "
                          "target) and fork = \"YOU/NAME\" (where branches are pushed)")
    if upstream.fork.lower() == upstream.github.lower():
        raise ConfigError(f"{where}: fork is the upstream itself ({upstream.fork}); contrib "
                          "pushes only to a fork: set fork to your fork's OWNER/NAME")
    push_url = upstream.fork_push_url()
    if "://" not in push_url and not re.match(r"^[\w.-]+@[\w.-]+:", push_url):
        push_url = str((ws.root / push_url).resolve())  # a local path, relative to the workspace
    parts = urlsplit(push_url)
    if parts.username or parts.password:
        raise ConfigError(f"{where}: push_url carries credentials; remove them (contrib takes "
                          "the token from GITHUB_TOKEN and never puts it in a URL)")
    norm = push_url.lower().rstrip("/").removesuffix(".git")
    if norm == upstream.url.lower().rstrip("/").removesuffix(".git") or norm.endswith(
            "/" + upstream.github.lower()):
        raise ConfigError(f"{where}: push_url {push_url} is the upstream; contrib pushes only "
                          "to the fork: point push_url at your fork")
    return push_url


def _build(git: Git, version: Version) -> tuple[list[CommitLine], Sha]:
    """The PR branch: the version's patches applied on its base, as commits, their
    messages without the DEP-3 fields the patch files keep for contrib (a PR URL in the
    PR's own commits would only say where they are; a sign-off stays)."""
    # the carry engine (unidiff) loads when a branch is built: `status` reads holdback()
    from contrib.carry.dep3 import without_fields
    from contrib.carry.series import apply_series, split_mail

    mails = without_fields(git, [split_mail(git, name, raw)
                                 for name, raw in version.patch_texts()])
    applied = apply_series(git, version.base, mails)
    lines = [CommitLine(a.commit, a.name, utf8(a.patch.subject), utf8(a.patch.author.name))
             for a in applied]
    return lines, applied[-1].commit


def _previous(job: Job) -> tuple[str | None, str | None]:
    """(tip, version) of the push the range-diff compares with."""
    pr = job.ps.pr or PrRecord()
    if pr.pushed and pr.pushed != job.tip:
        return pr.pushed, pr.version
    return (pr.previous, pr.previous_version) if pr.previous else (None, None)


def _range_diff(job: Job) -> str | None:
    """``git range-diff`` from the previously pushed version to this one, if known."""
    old_tip, old_version = _previous(job)
    if not old_tip or not old_version or old_tip == job.tip:
        return None
    if job.git.try_rev_parse(old_tip) is None:
        # Not in this cache: rebuild it from the old version folder (same SHAs).
        old = job.ps.version(str(old_version))
        try:
            _, rebuilt = _build(job.git, old)
        except ContribError:
            return None
        if rebuilt != old_tip:
            return None
    from contrib.carry.rangediff import range_diff

    return range_diff(job.git, str(old_version), old_tip, job.version, job.tip)


def _requires(ws: Workspace, ps: Patchset) -> list[str]:
    """The ``[[requires]]`` of the patchset, with links to the fix and our backport PR."""
    out = []
    for req in requirements(ps):
        upstream = ws.config.upstreams.get(req.upstream)
        if not req.commit:  # a draft's requirement: the fix is only our patchset so far
            text = f"{req.upstream}: our patchset `{req.patchset}`{_pr_link(ws, req.patchset)}"
        else:
            commit = f"`{req.commit[:12]}`"
            if upstream is not None and upstream.github:
                commit = f"[{commit}](https://github.com/{upstream.github}/commit/{req.commit})"
            text = f"{req.upstream} commit {commit}"
            if req.patchset:
                text += f" (or our patchset `{req.patchset}`{_pr_link(ws, req.patchset)})"
        if req.reason:
            text += f": {req.reason}"
        out.append(text)
    return out


def _pr_link(ws: Workspace, target: str) -> str:
    try:
        pr = ws.patchset(target).pr
        url = pr.url if pr else None
    except ContribError:
        return ""
    return f", {url}" if url else ""
