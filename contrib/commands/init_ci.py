"""``contrib init-ci [--gpu-runner LABEL=ARCH ...] [--force]``: write the Actions workflow.

Writes ``.github/workflows/contrib.yml`` in the workspace's repository root
(atomically), rendered by :mod:`contrib.autopilot.workflow`.  A file already there is
replaced only when init-ci wrote it and nobody edited it since (its first
line carries a digest of the rest), or with ``--force``.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

from contrib import DISTRIBUTION, __version__
from contrib.arch import parse_arch
from contrib.autopilot.workflow import WORKFLOW_PATH, GpuRunner, Options, render, written_by_us
from contrib.errors import ContribError, NeedsAttention, UsageError
from contrib.git.repo import Git
from contrib.secrets import scrub
from contrib.ui import UI
from contrib.workspace.model import Workspace


def init_ci(ws: Workspace, ui: UI, *, gpu_runners: list[str], force: bool,
            install: str | None = None, cron: str | None = None,
            branch: str | None = None) -> int:
    """Write the workflow; 0 written or already current, 1 refused (someone else's file)."""
    runners = [GpuRunner.parse(text) for text in gpu_runners] or default_runners(ws)
    repo_root, current = _repository(ws)
    spec, warning = (install, "") if install else _source(ws)
    options = Options(branch=branch or current, gpu=runners, install=spec,
                      **({"cron": cron} if cron else {}), install_note=warning)
    path = repo_root / WORKFLOW_PATH
    result = _write(ws, path, render(options), force)
    ui.info(f"{path}: {result}")
    if warning:
        ui.warn(f"{path}: {warning}")
    for runner in runners:
        ui.info(f"  GPU leg {runner.label}: runs-on {runner.runs_on}, validates {runner.arch}")
    if not runners:
        ui.info("  no GPU legs: pass --gpu-runner LABEL=ARCH to validate on self-hosted GPUs")
    ui.info("  secrets: CONTRIB_FORK_TOKEN (a token of the fork's owner: Contents: write on the "
            "fork, Pull requests: write on the upstream)")
    ui.emit({"path": str(path), "result": result, "branch": options.branch,
             "gpu_runners": [{"label": r.label, "arch": r.arch, "runs_on": r.runs_on}
                             for r in runners]})
    return 0


def _write(ws: Workspace, path: Path, text: str, force: bool) -> str:
    """written | replaced | unchanged; NeedsAttention for a file init-ci did not write."""
    existing = _read(path)
    if existing == text:
        return "unchanged"
    if existing is not None and not written_by_us(existing) and not force:
        raise NeedsAttention(f"{path}: exists and was not written by contrib init-ci (or was "
                             "edited since); left as it is. Pass --force to replace it")
    ws.write_file(path, text)
    return "written" if existing is None else "replaced"


def _source(ws: Workspace) -> tuple[str, str]:
    """What the workflow installs when --install is not given, and a warning when that
    may not install: this checkout, when the workspace is contrib's own repository;
    else the contrib running now, from where pip got it (:func:`spec_for`)."""
    if (ws.root / "contrib" / "__init__.py").is_file() and (ws.root / "pyproject.toml").is_file():
        return ".", ""
    return spec_for(_direct_url())


def _direct_url() -> dict[str, Any] | None:
    """Where pip got the running contrib: its PEP 610 ``direct_url.json``; None when it
    came from an index.  A contrib imported from a source folder (not installed under
    site-packages) counts as a local folder."""
    for dist in metadata.distributions(name=DISTRIBUTION):
        try:
            text = dist.read_text("direct_url.json")
            data = json.loads(text) if text else None
        except (ValueError, OSError):
            data = None
        if isinstance(data, dict):
            return data
    here = Path(__file__).resolve().parents[1]
    installed = any(part in ("site-packages", "dist-packages") for part in here.parts)
    return None if installed else {"url": here.parent.as_uri()}


def spec_for(direct: dict[str, Any] | None) -> tuple[str, str]:
    """(pip requirement, warning) that installs in CI the contrib running here.

    Installed from a git URL: that URL at the same commit, which any runner can
    fetch.  From an index: ``contrib-toolkit==VERSION`` from the same index.  From a
    local folder or file (an editable checkout): nothing a runner can reach, so
    ``contrib-toolkit==VERSION`` with a warning that it installs only once that
    version is on the runner's index, and how to name another source."""
    pinned = f"{DISTRIBUTION}=={__version__}"
    if direct is None:
        return pinned, ""
    url, vcs = str(direct.get("url", "")), direct.get("vcs_info")
    credentials = "@" in url.removeprefix("https://").split("/", 1)[0]  # never into a workflow
    if isinstance(vcs, dict) and vcs.get("vcs") == "git" and url.startswith("https://") \
            and not credentials:
        commit = str(vcs.get("commit_id", ""))
        if commit and all(c in "0123456789abcdef" for c in commit) and "'" not in url:
            return f"{DISTRIBUTION} @ git+{url}@{commit}", ""
    return pinned, (f"contrib runs here from {scrub(url) or 'a local folder'}, which a runner cannot "
                    f"reach; the workflow installs {pinned}, which works only once that version "
                    "is on the runner's package index: else re-run init-ci with --install "
                    f"'{DISTRIBUTION} @ git+https://github.com/OWNER/contrib@TAG'")


def default_runners(ws: Workspace) -> list[GpuRunner]:
    """One leg per target arch of the workspace's patchsets (label = arch without suffix)."""
    runners: dict[str, GpuRunner] = {}
    for ps in ws.patchsets():
        try:
            arch = parse_arch(ps.arch)
        except ContribError:
            continue  # validate reports a bad arch; the workflow just leaves it out
        label = arch.name.rstrip("af")
        runners.setdefault(label, GpuRunner(label, arch.name))
    return sorted(runners.values(), key=lambda r: r.label)


def _repository(ws: Workspace) -> tuple[Path, str]:
    """(workspace root, current branch); ``main`` when it is not (yet) a git repository.

    GitHub reads workflows only from the repository root, and contrib writes
    only inside the workspace: a workspace in a subfolder is refused.
    """
    for folder in (ws.root, *ws.root.parents):
        if (folder / ".git").exists():
            if folder != ws.root:
                raise UsageError(f"{ws.root}: the workspace is a subfolder of the repository "
                                 f"{folder}; the workflow runs contrib at the repository root, "
                                 "so make the workspace the repository root")
            status, out, _ = Git(folder).try_run("symbolic-ref", "--quiet", "--short", "HEAD")
            return folder, out.strip() if status == 0 and out.strip() else "main"
    return ws.root, "main"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise NeedsAttention(f"{path}: cannot read it ({exc}); move it away or pass "
                             "--force") from None
