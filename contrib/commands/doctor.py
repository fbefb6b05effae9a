"""``contrib doctor``: what this machine and workspace lack, before anything fails.

One line per check, with the fix when it fails: git, nvcc, cuobjdump, the headers
flashinfer's units need (spdlog, CUTLASS, tvm/ffi, curand; only where flashinfer is
carried), GPUs, ``github``/``fork`` left at ``contrib init``'s placeholder, the GitHub
token (present, the host reachable at all, accepted, its scopes, push access to each fork),
each upstream reachable, the upstream caches (``git fsck --connectivity-only``
and their size), and the workspace (conflicts waiting, edits not refreshed).
Exit 0 when every check passes, 1 otherwise.  Nothing is changed.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from contrib.errors import ContribError, GitError, GitTimeout
from contrib.git.process import MIN_GIT
from contrib.git.repo import enclosing_repo, run_git
from contrib.ui import UI, counted

if TYPE_CHECKING:
    from contrib.forge.api import Forge, ForgeFactory
    from contrib.workspace.config import Config
    from contrib.workspace.model import Workspace

OK, FAIL, SKIP = "ok", "FAIL", "skip"
_MIN = ".".join(map(str, MIN_GIT))
REMOTE_TIMEOUT_S = 20.0
FSCK_TIMEOUT_S = 600.0
# Classic tokens need one of these to push branches and open PRs (fine-grained
# tokens send no X-OAuth-Scopes: their access is checked per fork instead).
PUSH_SCOPES = ("repo", "public_repo")


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    status: str  # ok, FAIL or skip (nothing to check)
    detail: str
    fix: str = ""


def doctor(ws: Workspace | None, ui: UI, *, forge_factory: ForgeFactory | None = None) -> int:
    """Run every check, print one line each (or the JSON document); 0 all pass, else 1."""
    checks: list[Check] = []
    for check in _all_checks(ws, forge_factory):
        checks.append(check)
        _show(ui, check)
    failed = [c for c in checks if c.status == FAIL]
    ui.info(f"\n{len(failed)} of {len(checks)} checks failed" if failed else
            f"\nall {len(checks)} checks passed")
    ui.emit({"ok": not failed, "checks": [asdict(c) for c in checks]})
    return 1 if failed else 0


def _show(ui: UI, check: Check) -> None:
    ui.info(f"{check.status:4}  {check.name:18}  {check.detail}"
            + (f"  -> {check.fix}" if check.fix else ""))


def _all_checks(ws: Workspace | None, factory: ForgeFactory | None) -> Iterator[Check]:
    yield check_git()
    # flashinfer's headers matter only where flashinfer is carried (or no workspace says)
    yield from check_cuda(headers=ws is None or _carries_flashinfer(ws.config))
    yield check_gpus(ws)
    if ws is None:
        yield Check("workspace", SKIP, "not in a workspace (no contrib.toml here or above): "
                    "the token, upstream, cache and workspace checks need one")
        return
    yield from check_placeholders(ws.config)
    yield from check_token(ws.config, factory)
    for upstream in ws.config.upstreams.values():
        yield check_reachable(upstream.name, upstream.url, upstream.branch)
    yield from check_caches(ws.config)
    yield from check_conflicts(ws)
    yield from check_edits(ws)
    yield check_versions(ws)


# -- tools ---------------------------------------------------------------------------


def check_git() -> Check:
    """git is installed and new enough."""
    try:
        out = run_git(["--version"], timeout=REMOTE_TIMEOUT_S)
    except ContribError as exc:
        return Check("git", FAIL, str(exc), f"install git >= {_MIN}")
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    version = tuple(int(n) for n in found.groups("0")) if found else (0, 0, 0)
    shown = ".".join(map(str, version))
    if version[:2] < MIN_GIT:
        return Check("git", FAIL, f"git {shown} is older than {_MIN}, whose `apply --3way` "
                     "tries the 3-way merge first (sync relies on it)",
                     f"install git >= {_MIN} (e.g. from git-scm.com or your distribution's "
                     "backports)")
    return Check("git", OK, f"git {shown}")


def _carries_flashinfer(config: Config) -> bool:
    return any(u.name == "flashinfer" or u.github.endswith("/flashinfer")
               for u in config.upstreams.values())


def check_cuda(*, headers: bool = True) -> Iterator[Check]:
    """nvcc (and its version) and cuobjdump, found the way validate finds them; with
    ``headers``, the headers flashinfer's units need."""
    from contrib.analysis.ptx import find_nvcc, nvcc_version

    nvcc = find_nvcc()
    if nvcc is None:
        yield Check("nvcc", FAIL, "not on PATH nor in /usr/local/cuda/bin",
                    "install the CUDA toolkit (12.8+ for sm_120a) and put its bin/ on PATH; "
                    "without it validate's ptx stage is skipped")
        yield Check("cuobjdump", SKIP, "no CUDA toolkit")
        return
    where = "" if shutil.which("nvcc") == nvcc else " (not on PATH)"
    yield Check("nvcc", OK, f"{nvcc}{where}: {nvcc_version(nvcc) or 'version unknown'}")
    beside = Path(nvcc).parent / "cuobjdump"
    cuobjdump = str(beside) if os.access(beside, os.X_OK) else shutil.which("cuobjdump")
    if cuobjdump is None:
        yield Check("cuobjdump", FAIL, f"not next to {nvcc} nor on PATH",
                    "install the CUDA toolkit's binary utilities (cuda-cuobjdump); the ptx "
                    "stage's SASS check needs it")
    else:
        yield Check("cuobjdump", OK, cuobjdump)
    if headers:
        yield check_headers(nvcc)


def check_headers(nvcc: str) -> Check:
    """The headers flashinfer's units include beyond its tree (spdlog, CUTLASS, tvm/ffi,
    curand), looked for where validate's PTX stage looks: without them it is skipped."""
    import sys

    from contrib.analysis.headers import PROBES, cure
    from contrib.analysis.profiles import FLASHINFER, installed_includes

    toolkit = Path(nvcc).resolve().parent.parent
    dirs = [*installed_includes(FLASHINFER, sys.executable), toolkit / "include",
            *toolkit.glob("targets/*/include")]
    missing = [h for h in PROBES if not any((d / h).is_file() for d in dirs)]
    if not missing:
        return Check("headers", OK, f"{', '.join(PROBES)} found")
    return Check("headers", FAIL, f"nvcc would not find {', '.join(missing)}",
                 f"install {cure(missing)}; without them validate skips the ptx stage of "
                 "flashinfer patchsets and audit --compile compiles fewer units")


def check_gpus(ws: Workspace | None) -> Check:
    """GPUs and their compute capabilities, against the archs the patchsets target."""
    from contrib.validate.testrun import probe_gpus

    gpus = probe_gpus()
    if gpus is None:
        return Check("gpus", FAIL, "nvidia-smi not found", "install the NVIDIA driver on a GPU "
                     "machine; here validate's tests stage is skipped")
    if not gpus:
        return Check("gpus", FAIL, "nvidia-smi sees no GPU", "check the driver "
                     "(`nvidia-smi` should list the GPUs); here validate's tests stage is skipped")
    found = ", ".join(f"{g.name} ({g.capability})" for g in gpus)
    missing = sorted(_wanted_capabilities(ws) - {g.capability for g in gpus})
    if missing:
        return Check("gpus", FAIL, f"{found}; no GPU of compute capability "
                     f"{', '.join(missing)} that patchsets here target",
                     "run `contrib validate` for those on a machine with one (here their tests "
                     "stage is skipped)")
    return Check("gpus", OK, found)


def _wanted_capabilities(ws: Workspace | None) -> set[str]:
    from contrib.arch import parse_arch

    wanted = set()
    for ps in ws.all_patchsets() if ws is not None else []:
        try:
            wanted.add(parse_arch(ps.arch).capability)
        except ContribError:
            continue  # validate reports a bad arch itself
    return wanted


# -- GitHub --------------------------------------------------------------------------


def check_token(config: Config, factory: ForgeFactory | None) -> Iterator[Check]:
    """The token: present, accepted by GET /user, its scopes, push access to each fork."""
    from contrib.credentials import find_token
    from contrib.forge.connect import connect

    token = find_token(config.github_api_url)
    if token is None:
        yield Check("token", FAIL, "no GitHub token", "set GITHUB_TOKEN or GH_TOKEN, or log in "
                    "with `gh auth login` (open-pr and status's PR columns need it)")
        return
    offline = unreachable(config.github_api_url)
    if offline:  # no retries, and no blame on the token: it was never asked about
        yield Check("token", FAIL, f"no network: GitHub could not be reached at "
                    f"{config.github_api_url} ({offline}); the token was not checked",
                    "check the network or proxy, then run `contrib doctor` again")
        return
    try:
        forge = connect(config, token, factory=factory)
        user = forge.current_user()
    except ContribError as exc:
        yield Check("token", FAIL, f"{config.github_api_url} refused it: {exc}",
                    "create a new token (GitHub > Settings > Developer settings) and set "
                    "GITHUB_TOKEN to it")
        return
    yield Check("token", OK, f"accepted by {config.github_api_url} as {user.login}")
    yield _scopes(user.scopes)
    from contrib.workspace.config import is_placeholder

    for upstream in config.upstreams.values():
        if upstream.fork and not is_placeholder(upstream.fork):
            yield _push_access(forge, upstream.fork)


CONNECT_TIMEOUT_S = 5.0
_PROXIES = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")


def unreachable(api_url: str) -> str:
    """Why the API's host cannot be reached (a name that does not resolve, a refused or
    timed-out connection), or empty: one TCP connection, no retries.  Behind a proxy
    the proxy decides, so nothing is probed."""
    import socket
    from urllib.parse import urlsplit

    if any(os.environ.get(name) for name in _PROXIES):
        return ""
    parts = urlsplit(api_url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # `host:abc`: the API check that follows names the bad URL
        return ""
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except socket.gaierror:
        return f"{host} does not resolve"
    except TimeoutError:
        return f"{host}:{port} did not answer within {CONNECT_TIMEOUT_S:g}s"
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"
    return ""


def check_placeholders(config: Config) -> Iterator[Check]:
    """``github``/``fork`` still holding the owner ``contrib init`` wrote for one it
    could not know (``your-user/flashinfer``): open-pr would push to a stranger
    (:func:`~contrib.workspace.config.placeholders`, the test open-pr refuses by)."""
    from contrib.workspace.config import placeholders

    for found in placeholders(config):
        yield Check(f"{found.key} {found.upstream}", FAIL, f'{found.where}: {found.key} = '
                    f'"{found.value}" is the placeholder contrib init wrote',
                    f"set it to {found.wanted} (OWNER/NAME)")


def _scopes(scopes: tuple[str, ...] | None) -> Check:
    if scopes is None:
        return Check("token scopes", OK, "fine-grained token: access is per repository "
                     "(push access checked below)")
    shown = ", ".join(scopes) or "none"
    if not set(scopes) & set(PUSH_SCOPES):
        return Check("token scopes", FAIL, f"scopes: {shown}; pushing to a fork and opening "
                     "PRs need repo (or public_repo)", "create a token with the repo scope "
                     "(public_repo is enough for public repositories)")
    return Check("token scopes", OK, f"scopes: {shown}")


def _push_access(forge: Forge, fork: str) -> Check:
    name = f"push to {fork}"
    try:
        allowed = forge.can_push(fork)
    except ContribError as exc:
        return Check(name, FAIL, f"cannot read {fork}: {exc}",
                     f"create the fork ({fork}) on GitHub, or fix fork in contrib.toml")
    if not allowed:
        return Check(name, FAIL, f"the token may not push to {fork}",
                     "give the token write access to the fork, or set fork in contrib.toml "
                     "to a fork you own")
    return Check(name, OK, "the token may push there")


# -- upstreams and caches --------------------------------------------------------------


def check_reachable(name: str, url: str, branch: str) -> Check:
    """``git ls-remote`` of the upstream's branch, bounded in time."""
    label = f"upstream {name}"
    try:
        out = run_git(["ls-remote", "--heads", "--", url, f"refs/heads/{branch}"],
                      timeout=REMOTE_TIMEOUT_S)
    except GitTimeout:
        return Check(label, FAIL, f"{url} did not answer within {REMOTE_TIMEOUT_S:g}s",
                     "check the network or proxy; --no-fetch works from the cache")
    except GitError as exc:
        return Check(label, FAIL, f"{url}: {exc.reason}", "fix url in contrib.toml, or the "
                     "network or credentials for it")
    if not out.strip():
        return Check(label, FAIL, f"{url} has no branch {branch!r}",
                     "fix branch in contrib.toml")
    return Check(label, OK, f"{url} ({branch} at {out.split()[0][:12]})")


def check_caches(config: Config) -> Iterator[Check]:
    """Each cached upstream: ``git fsck --connectivity-only`` and its size."""
    from contrib.git.cache import cache_path

    for upstream in config.upstreams.values():
        path = cache_path(upstream)
        label = f"cache {upstream.name}"
        if not path.is_dir():
            yield Check(label, OK, f"not cached yet ({path}); the first sync or status clones it")
            continue
        size = _size(path)
        try:
            run_git(["-C", str(path), "fsck", "--connectivity-only", "--no-progress"],
                    timeout=FSCK_TIMEOUT_S)
        except GitError as exc:
            yield Check(label, FAIL, f"{path} ({size}) is damaged: {exc.reason}",
                        f"remove {path}; the next sync clones it again (nothing of yours is "
                        "kept there)")
            continue
        yield Check(label, OK, f"{path}: {size}, connected")


def _size(path: Path) -> str:
    total = float(sum(entry.stat().st_size for entry in _files(path)))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if total < 1024 or unit == "GiB":
            return f"{total:.0f} {unit}" if unit == "B" else f"{total:.1f} {unit}"
        total /= 1024
    raise AssertionError("unreachable")


def _files(path: Path) -> Iterator[os.DirEntry[str]]:
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            yield from _files(Path(entry.path))
        elif entry.is_file(follow_symlinks=False):
            yield entry


# -- the workspace ---------------------------------------------------------------------


def check_conflicts(ws: Workspace) -> Iterator[Check]:
    """Conflicts `contrib sync` left to resolve."""
    from contrib.carry import syncstate

    pending = syncstate.load_state(ws.state_dir)
    if not pending:
        yield Check("conflicts", OK, "none waiting")
    for target, item in sorted(pending.items()):
        yield Check(f"conflict {target}", FAIL, f"waiting in {item.worktree}",
                    f"resolve it, then `contrib sync --continue {target}` (or `--abort`)")


_EDIT_STATES = {
    "changed": "has commits not taken back yet",
    "stale": "was made before the patchset moved on",
    "missing": "is gone",
}


def check_edits(ws: Workspace) -> Iterator[Check]:
    """Patchsets opened with `contrib edit` whose branch was not taken back by `refresh`."""
    from contrib.carry.edits import EditState, open_edits

    waiting = [(edit, state) for edit, state in open_edits(ws)
               if state is not EditState.REFRESHED]
    if not waiting:
        yield Check("edits", OK, "none waiting to be refreshed")
    for edit, state in waiting:
        yield Check(f"edit {edit.patchset}", FAIL, f"branch {edit.branch} in {edit.where} "
                    f"{_EDIT_STATES[state.value]}", _edit_fix(edit.patchset, state))


def _edit_fix(target: str, state: object) -> str:
    from contrib.carry.edits import EditState

    if state is EditState.CHANGED:
        return f"`contrib refresh {target}` takes the new commits as a version"
    if state is EditState.STALE:
        return f"the patchset moved on since: `contrib edit {target} --force` starts again"
    return f"the branch is gone: `contrib edit {target}` makes it again"


def _in_repository(root: Path) -> bool:
    """Whether ``root`` lies in a git repository (one ``contrib init`` made, say)."""
    return enclosing_repo(root) is not None


def check_versions(ws: Workspace) -> Check:
    """Whether old version folders can leave the working tree (the retention rule)."""
    from contrib.carry.retention import WorkspaceHistory

    keep = ws.config.keep_versions
    if keep is None:
        return Check("versions", OK, 'keep = "all": every version folder stays')
    if WorkspaceHistory.find(ws.root) is None and _in_repository(ws.root):
        return Check("versions", OK, "every version folder stays until the workspace's first "
                     "commit (sync --commit and autopilot make one)")
    if WorkspaceHistory.find(ws.root) is None:
        return Check("versions", SKIP, "every version folder stays: the workspace is not a git "
                     "repository with a commit, which would keep the history of the ones "
                     "pruned", "git init, commit the workspace (autopilot and sync --commit "
                     "commit each run)")
    return Check("versions", OK, f"the last {counted(keep, 'other version')} per patchset stay, with the "
                 "current, pushed, GPU-validated and release ones; older ones live in git "
                 "history")
