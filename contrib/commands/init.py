"""``contrib init [DIR] [--upstream NAME[=URL]]... [--arch ARCH]``: a new workspace.

Writes ``contrib.toml`` (the known upstreams, flashinfer and sglang, by name, or
any other as ``NAME=URL``; ``[defaults] arch``, the GPU every ``--arch`` means when
not given: ``sm_120a``, the RTX PRO 6000, unless ``--arch`` says), a ``.gitignore``
that keeps ``.contrib/`` out, an empty ``patchsets/``, and makes the folder a git
repository (autopilot commits there; pruned versions stay in its history).  It refuses to overwrite a
``contrib.toml`` that is already there.
"""

from __future__ import annotations

import re
from pathlib import Path

from contrib.arch import parse_arch
from contrib.errors import UsageError
from contrib.git.repo import Git
from contrib.ui import UI
from contrib.workspace.config import PLACEHOLDER_OWNERS, load_config
from contrib.workspace.layout import CONFIG_NAME, STATE_DIR
from contrib.workspace.txn import atomic_write

# The upstreams contrib was built for: `--upstream flashinfer` needs no URL.
KNOWN = {
    "flashinfer": ("https://github.com/flashinfer-ai/flashinfer.git", "flashinfer-ai/flashinfer"),
    "sglang": ("https://github.com/sgl-project/sglang.git", "sgl-project/sglang"),
}
# The GPU contrib is for: the RTX PRO 6000 (GB10 is sm_121a).
DEFAULT_ARCH = "sm_120a"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_GITHUB = re.compile(r"github\.com[/:](?P<repo>[^/]+/[^/]+?)(?:\.git)?/?$")


def parse_upstream(text: str) -> tuple[str, str, str]:
    """``NAME`` (a known upstream) or ``NAME=URL``: (name, url, GitHub owner/name or "")."""
    name, _, url = text.partition("=")
    name, url = name.strip(), url.strip()
    if not _NAME.match(name):
        raise UsageError(f"--upstream {text!r}: NAME must be letters, digits, '.', '_' or '-' "
                         "(e.g. --upstream vllm=https://github.com/vllm-project/vllm.git)")
    if not url:
        if name not in KNOWN:
            raise UsageError(f"--upstream {name}: not a known upstream ({', '.join(KNOWN)}); "
                             f"give its URL: --upstream {name}=URL")
        return name, *KNOWN[name]
    match = _GITHUB.search(url)
    if match:
        return name, url, match["repo"]
    # a mirror of a known upstream (a local path, another host): PRs still go to GitHub's
    return name, url, KNOWN[name][1] if name in KNOWN else ""


def config_text(upstreams: list[tuple[str, str, str]], arch: str = DEFAULT_ARCH) -> str:
    """contrib.toml for ``upstreams`` and the default ``arch`` (see docs/workspace.md)."""
    lines = ["# A contrib workspace (docs/workspace.md). Set `fork` to your own fork",
             "# before `contrib open-pr`.", "", "[github]", 'api_url = "https://api.github.com"',
             "", "[defaults]", "# The GPU `why`, `audit`, `enable` and `new` mean without --arch; "
             "change it here",
             "# (e.g. sm_121a for GB10; any spelling: sm121, 121, 12.1).", f'arch = "{arch}"']
    upstream_owner, your_user = PLACEHOLDER_OWNERS[1], PLACEHOLDER_OWNERS[0]
    for name, url, github in upstreams:
        owner_name = github or f"{upstream_owner}/{name}"
        lines += ["", f"[upstreams.{name}]", f'url = "{url}"', 'branch = "main"',
                  f'github = "{owner_name}"', f'fork = "{your_user}/{owner_name.split("/")[-1]}"']
    return "\n".join(lines) + "\n"


def init(directory: Path, ui: UI, upstreams: list[str], arch: str = DEFAULT_ARCH) -> int:
    """Make ``directory`` a workspace; 2 when it already is one."""
    chosen = [parse_upstream(text) for text in upstreams or list(KNOWN)]
    try:
        target = parse_arch(arch).name
    except UsageError as exc:
        raise UsageError(f"--arch: {exc}") from None
    if len({name for name, _, _ in chosen}) < len(chosen):
        raise UsageError("--upstream: a name is given twice")
    config = directory / CONFIG_NAME
    if config.exists():
        raise UsageError(f"{config}: already a workspace; edit contrib.toml to add an upstream")
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory}: not a folder")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "patchsets").mkdir(exist_ok=True)
    _ignore_state(directory / ".gitignore")
    atomic_write(config, config_text(chosen, target))
    load_config(directory)  # what was written reads back, or this is a bug
    made = not (directory / ".git").exists()
    if made:
        Git.init(directory)
    ui.info(f"workspace {directory}: {', '.join(name for name, _, _ in chosen)}"
            f"{'; git initialised' if made else ''}")
    ui.info(f"next: set `fork` in {config}, then "
            f"contrib -C {directory} new {chosen[0][0]}/NAME --from-pr N")
    ui.emit({"workspace": str(directory), "config": str(config), "git_init": made, "arch": target,
             "upstreams": [{"name": n, "url": u, "github": g} for n, u, g in chosen]})
    return 0


def _ignore_state(path: Path) -> None:
    """``.contrib/`` in ``.gitignore`` (added to one that exists, once)."""
    line = f"/{STATE_DIR}/"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if line not in text.splitlines():
        atomic_write(path, text + ("" if not text or text.endswith("\n") else "\n") + line + "\n")
