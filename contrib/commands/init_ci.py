"""``contrib init-ci [--gpu-runner LABEL=ARCH ...] [--force]``: write the Actions workflow.

Writes ``.github/workflows/contrib.yml`` in the workspace's repository root
(atomically), rendered by :mod:`contrib.autopilot.workflow`.  A file already there is
replaced only when init-ci wrote it and nobody edited it since (its first
line carries a digest of the rest), or with ``--force``.
"""

from __future__ import annotations

from pathlib import Path

from contrib import DISTRIBUTION, __version__
from contrib.arch import parse_arch
from contrib.autopilot.workflow import WORKFLOW_PATH, GpuRunner, Options, render, written_by_us
from contrib.errors import ContribError, NeedsAttention, UsageError
from contrib.git.repo import Git
from contrib.ui import UI
from contrib.workspace.model import Workspace


def init_ci(ws: Workspace, ui: UI, *, gpu_runners: list[str], force: bool,
            install: str | None = None, cron: str | None = None,
            branch: str | None = None) -> int:
    """Write the workflow; 0 written or already current, 1 refused (someone else's file)."""
    runners = [GpuRunner.parse(text) for text in gpu_runners] or default_runners(ws)
    repo_root, current = _repository(ws)
    options = Options(branch=branch or current, gpu=runners, install=install or _source(ws),
                      **({"cron": cron} if cron else {}))
    path = repo_root / WORKFLOW_PATH
    result = _write(ws, path, render(options), force)
    ui.info(f"{path}: {result}")
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


def _source(ws: Workspace) -> str:
    """What the workflow installs when --install is not given: this checkout, when the
    workspace is contrib's own repository; elsewhere the release running now, by its
    distribution name, so the workflow runs what wrote it."""
    if (ws.root / "contrib" / "__init__.py").is_file() and (ws.root / "pyproject.toml").is_file():
        return "."
    return f"{DISTRIBUTION}=={__version__}"


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
