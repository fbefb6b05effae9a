"""``contrib new UPSTREAM NAME (--base REV (--patch FILE... | --commits A..B --repo PATH)
| --from-pr N | --from-branch URL BRANCH)``."""

from __future__ import annotations

import re
from pathlib import Path

import tomlkit

from contrib.arch import parse_arch
from contrib.carry import ranges
from contrib.carry.dep3 import Forward, Kind, Origin, Stamp, signoff_at, stamped, vendor
from contrib.carry.series import MailPatch, apply_series, export_series, split_mail
from contrib.carry.versions import Event, How, add_event, stage_version
from contrib.clock import now_iso
from contrib.errors import PatchError, UsageError
from contrib.git.cache import Mirror
from contrib.git.repo import Git, Sha
from contrib.secrets import scrub
from contrib.ui import UI, counted
from contrib.workspace.layout import META_NAME
from contrib.workspace.model import Workspace, check_name
from contrib.workspace.schema import UpstreamStatus


def new(ws: Workspace, ui: UI, upstream: str, name: str, base: str | None, *,
        patches: list[Path], commits: str | None, repo: Path | None,
        title: str | None, arch: str | None, from_pr: str | None = None,
        from_branch: tuple[str, str] | None = None, squash: bool = False) -> int:
    """Create patchsets/UPSTREAM/NAME with one version at BASE (or the PR's merge base)."""
    check_name(upstream, "upstream name")
    check_name(name)
    config = ws.config.upstream(upstream)
    target = ws.root / "patchsets" / upstream / name
    if target.exists():
        raise UsageError(f"{target}: patchset {upstream}/{name} already exists; choose another "
                         "name, or use `contrib sync` to move it")
    _check_source(base, patches, commits, from_pr, from_branch)
    arch = arch or ws.config.arch or "sm_120a"
    parse_arch(arch)
    mirror = Mirror(config).ensure(fetch_now=bool(from_pr or from_branch), progress=ui.progress)
    git = mirror.git
    if squash and not (from_pr or from_branch):
        raise UsageError("--squash goes with --from-pr or --from-branch")
    base_sha, raw, source = _gather(mirror, base, patches, commits, repo, from_pr, from_branch,
                                    squash)
    mails = [split_mail(git, label, data) for label, data in raw]
    applied = apply_series(git, base_sha, mails)
    at = now_iso()
    origin, forwarded = _origin(mirror, from_pr, from_branch)
    exported = stamped(git, base_sha, export_series(git, base_sha, applied[-1].commit), Stamp(
        at[:10], forwarded, origin or vendor(f"{upstream}/{name}"),
        signoff_at(git, ws.root, base_sha, upstream)))
    meta = _meta(title or mails[0].subject, mails, arch, base_sha)
    add_event(meta, Event(How.NEW, base_sha, at=at,
                          detail=source or counted(len(exported), "patch")))
    with ws.transaction() as txn:
        stage_version(txn, target, base_sha, exported)
        txn.write(target / META_NAME, tomlkit.dumps(meta))
    ui.info(f"created {upstream}/{name}: {counted(len(exported), 'patch')} at {base_sha[:12]} "
            f"({source or base})")
    for filename, _ in exported:
        ui.info(f"  {filename}")
    ui.emit({"patchset": f"{upstream}/{name}", "base": base_sha,
             "patches": [n for n, _ in exported], **({"source": source} if source else {})})
    return 0


def _origin(mirror: Mirror, from_pr: str | None, from_branch: tuple[str, str] | None
            ) -> tuple[Origin | None, str]:
    """(Origin, Forwarded) of patches taken from an upstream PR (that PR: it is upstream's
    already) or a fork's branch; (None, "no") for patches made here."""
    if from_pr:
        number = ranges.pr_number(mirror, from_pr)
        repo = mirror.upstream.github
        url = f"https://github.com/{repo}/pull/{number}" if repo else \
            f"PR #{number} of {scrub(mirror.upstream.url)}"
        return Origin(Kind.UPSTREAM, url), url if repo else Forward.YES
    if from_branch:
        url, branch = from_branch
        return Origin(Kind.OTHER, f"{scrub(url)} (branch {branch})"), Forward.NO
    return None, Forward.NO


def _check_source(base: str | None, patches: list[Path], commits: str | None,
                  from_pr: str | None, from_branch: tuple[str, str] | None) -> None:
    """Exactly one source of patches, and --base where the source does not imply one."""
    if sum(map(bool, (patches, commits, from_pr, from_branch))) != 1:
        raise UsageError("give one of --patch FILE..., --commits A..B --repo PATH, "
                         "--from-pr N or --from-branch URL BRANCH")
    if base is None and patches:
        raise UsageError("--base REV is needed with --patch (--commits A..B takes A)")
    if base is not None and (from_pr or from_branch):
        raise UsageError("--base: the base of --from-pr/--from-branch is its merge base with "
                         "the upstream branch; drop --base")


def _gather(mirror: Mirror, base: str | None, patches: list[Path], commits: str | None,
            repo: Path | None, from_pr: str | None, from_branch: tuple[str, str] | None,
            squash: bool = False) -> tuple[Sha, list[tuple[str, bytes]], str]:
    """(base, the patches as (label, mbox bytes), where they came from) for one source."""
    found = (ranges.from_branch(mirror, *from_branch, squash=squash) if from_branch else
             ranges.from_pr(mirror, from_pr, squash=squash) if from_pr else None)
    if found is not None:
        exported = export_series(mirror.git, found.base, found.tip)
        return found.base, [(f"{found.source}:{n}", data) for n, data in exported], found.source
    if base is None:  # --commits A..B: the patches are B's commits on top of A
        assert commits is not None
        base = _range_start(commits, repo)
    base_sha = mirror.resolve(base)
    return base_sha, _read_commits(commits, repo) if commits else _read_files(patches), ""


def _range_start(commits: str, repo: Path | None) -> str:
    """A of ``--commits A..B``, as a commit id the upstream's cache can resolve."""
    if repo is None:
        raise UsageError("--commits A..B needs --repo PATH (the local clone holding them)")
    start = commits.partition("..")[0]
    if ".." not in commits or not start:
        raise UsageError(f"--commits {commits!r}: give a range A..B (A is the base)")
    return str(Git(repo).rev_parse(start))


def _meta(title: str, mails: list[MailPatch], arch: str, base: str) -> tomlkit.TOMLDocument:
    doc = tomlkit.document()
    doc["title"] = title
    summary = "\n\n".join(part for m in mails if (part := without_boilerplate(m.message)))
    doc["summary"] = tomlkit.string(summary + "\n", multiline=True) if "\n" in summary else summary
    doc["arch"] = arch
    doc["current"] = base
    doc["upstream_status"] = str(UpstreamStatus.PENDING)
    doc["created"] = now_iso()
    return doc


def _read_files(paths: list[Path]) -> list[tuple[str, bytes]]:
    out = []
    for path in paths:
        try:
            out.append((str(path), path.read_bytes()))
        except FileNotFoundError:
            raise PatchError(f"{path}: no such patch file") from None
        except IsADirectoryError:
            raise PatchError(f"{path}: is a folder, not a patch file") from None
        except OSError as exc:
            raise PatchError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return out


def _read_commits(commits: str, repo: Path | None) -> list[tuple[str, bytes]]:
    if repo is None:
        raise UsageError("--commits A..B needs --repo PATH (the local clone holding them)")
    if ".." not in commits:
        raise UsageError(f"--commits {commits!r}: give a range A..B")
    local = Git(repo)
    start, _, end = commits.partition("..")
    a, b = local.rev_parse(start or "HEAD"), local.rev_parse(end or "HEAD")
    if local.count(f"{a}..{b}") == 0:
        raise UsageError(f"--commits {commits}: no commits in that range in {repo}")
    return [(f"{repo}:{n}", data) for n, data in export_series(local, a, b)]


# What an upstream's PR template and its bots put into a squashed commit message:
# not what the patchset does.
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_CHECKBOX = re.compile(r"^\s*[-*]\s*\[[ xX]\]")
_HEADING = re.compile(r"^\s*#{1,6}\s*(?P<title>.*?)\s*#*\s*$")
_BOILERPLATE = re.compile(r"checklist|summary by|review process|generated|"
                          r"accuracy tests?|benchmarking and profiling", re.I)


def without_boilerplate(message: str) -> str:
    """A commit message without PR-template boilerplate: HTML comments, checklists,
    and the sections a template or a bot writes (Checklist, "Summary by CodeRabbit")."""
    kept: list[str] = []
    skipping = False
    for line in _COMMENT.sub("", message).splitlines():
        heading = _HEADING.match(line)
        if heading:
            skipping = bool(_BOILERPLATE.search(heading["title"]))
        if skipping or _CHECKBOX.match(line):
            continue
        kept.append(line.rstrip())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
