"""``contrib new UPSTREAM NAME --base REV (--patch FILE... | --commits A..B --repo PATH)``."""

from __future__ import annotations

from pathlib import Path

import tomlkit

from contrib.arch import parse_arch
from contrib.clock import now_iso
from contrib.errors import PatchError, UsageError
from contrib.git import Git
from contrib.meta import UpstreamStatus
from contrib.mirror import Mirror
from contrib.patchset import SERIES_NAME, Workspace, check_name
from contrib.series import MailPatch, apply_series, export_series, series_file, split_mail
from contrib.ui import UI


def new(ws: Workspace, ui: UI, upstream: str, name: str, base: str, *,
        patches: list[Path], commits: str | None, repo: Path | None,
        title: str | None, arch: str) -> int:
    """Create patchsets/UPSTREAM/NAME with one version at BASE."""
    check_name(upstream, "upstream name")
    check_name(name)
    config = ws.config.upstream(upstream)
    target = ws.root / "patchsets" / upstream / name
    if target.exists():
        raise UsageError(f"{target}: patchset {upstream}/{name} already exists; choose another "
                         "name, or use `contrib sync` to move it")
    if bool(patches) == bool(commits):
        raise UsageError("give either --patch FILE... or --commits A..B --repo PATH")
    parse_arch(arch)
    mirror = Mirror(config).ensure(fetch_now=False, progress=ui.progress)
    base_sha = mirror.resolve(base)
    git = mirror.git
    raw = _read_commits(commits, repo) if commits else _read_files(patches)
    mails = [split_mail(git, label, data) for label, data in raw]
    applied = apply_series(git, base_sha, mails)
    exported = export_series(git, base_sha, applied[-1].commit)
    files: dict[str, bytes | str] = dict(exported)
    files[SERIES_NAME] = series_file([n for n, _ in exported])
    meta = _meta(title or mails[0].subject, mails, arch, base_sha)
    with ws.transaction() as txn:
        txn.write_dir(target / base_sha, files)
        txn.write(target / "patchset.toml", tomlkit.dumps(meta))
    ui.info(f"created {upstream}/{name}: {len(exported)} patch(es) at {base_sha[:12]} "
            f"({base})")
    for filename, _ in exported:
        ui.info(f"  {filename}")
    ui.emit({"patchset": f"{upstream}/{name}", "base": base_sha,
             "patches": [n for n, _ in exported]})
    return 0


def _meta(title: str, mails: list[MailPatch], arch: str, base: str) -> tomlkit.TOMLDocument:
    doc = tomlkit.document()
    doc["title"] = title
    summary = "\n\n".join(m.message.strip() for m in mails)
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
