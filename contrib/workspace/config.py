"""``contrib.toml`` -> typed, validated objects.

Every problem names the file and line and says what to do; unknown keys are
errors (a typo like ``brnach`` must not be silently ignored).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrib.errors import ConfigError
from contrib.workspace.layout import CONFIG_NAME as CONFIG_NAME

DEFAULT_API_URL = "https://api.github.com"
# Upstream keys and patchset names: they become folder names, so one pattern for
# both, matched with fullmatch (``$`` would let a trailing newline through).
NAME_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}"
NAME_RULE = ("letters, digits, '.', '-', '_', not starting with '.' or '-', at most 100 "
             "characters")
NAME_RE = re.compile(NAME_PATTERN)
REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
BRANCH_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./+-]{0,250}")

_UPSTREAM_KEYS = {
    "url": str,
    "branch": str,
    "github": str,
    "fork": str,
    "push_url": str,
    "maintainer_can_modify": bool,
    "python": str,
}
_GITHUB_KEYS = {"api_url": str}
_AUTOPILOT_KEYS = {"repo": str, "prs": str, "dashboard_title": str}
PR_POLICIES = ("update", "create", "never")
DEFAULT_DASHBOARD_TITLE = "contrib dashboard"


@dataclass(frozen=True)
class Upstream:
    """One upstream project this workspace carries patches for."""

    name: str
    url: str
    branch: str = "main"
    github: str = ""
    fork: str = ""
    push_url: str = ""
    maintainer_can_modify: bool = True
    python: str = ""

    def fork_push_url(self) -> str:
        """Where PR branches are pushed: ``push_url`` or the fork's GitHub URL."""
        if self.push_url:
            return self.push_url
        return f"https://github.com/{self.fork}.git" if self.fork else ""


@dataclass(frozen=True)
class Autopilot:
    """``[autopilot]``: where the dashboard lives and what autopilot does with PRs."""

    repo: str = ""  # owner/name of the workspace's own GitHub repository
    prs: str = "update"  # one of PR_POLICIES
    dashboard_title: str = DEFAULT_DASHBOARD_TITLE


@dataclass(frozen=True)
class Config:
    """A parsed workspace configuration."""

    path: Path
    upstreams: dict[str, Upstream] = field(default_factory=dict)
    github_api_url: str = DEFAULT_API_URL
    autopilot: Autopilot = field(default_factory=Autopilot)

    def upstream(self, name: str) -> Upstream:
        """The upstream called ``name``, or a ConfigError listing the known ones."""
        try:
            return self.upstreams[name]
        except KeyError:
            known = ", ".join(sorted(self.upstreams)) or "none"
            raise ConfigError(
                f"{self.path}: no upstream {name!r} (known: {known}); "
                f"add an [upstreams.{name}] table with a url") from None


def valid_name(name: str) -> bool:
    """Whether ``name`` is a valid upstream key or patchset name."""
    return NAME_RE.fullmatch(name) is not None


def line_of(text: str, table: str, key: str | None = None) -> int:
    """1-based line of ``key`` inside ``[table]`` (or of the header), 0 if not found."""
    current = ""
    header = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+")
    for number, line in enumerate(text.splitlines(), 1):
        match = header.match(line)
        if match:
            current = match.group(1).replace('"', "").replace(" ", "")
            if key is None and current == table:
                return number
            continue
        if key is not None and current == table and re.match(
                rf"^\s*\"?{re.escape(key)}\"?\s*=", line):
            return number
    return 0


def parse_toml(path: Path) -> tuple[str, dict[str, Any]]:
    """Read and parse a TOML file; ConfigError with file:line on any problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return text, parse_toml_text(path, text)


def parse_toml_text(path: Path, text: str) -> dict[str, Any]:
    """``text`` (of ``path``) as plain values; ConfigError with file:line:column if it is
    not TOML.  tomllib: reading needs no round-trip document (tomlkit, ten times slower,
    is for writing)."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        where = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        at = f":{where[1]}:{where[2]}" if where else ""
        raise ConfigError(f"{path}{at}: invalid TOML: {message}") from None


def check_keys(path: Path, text: str, table: str, data: dict[str, Any],
               allowed: Mapping[str, type]) -> None:
    """Reject unknown keys and wrongly-typed values in one table."""
    for key, value in data.items():
        where = f"{path}:{line_of(text, table, key)}"
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {key!r} in [{table}] "
                              f"(allowed: {', '.join(sorted(allowed))})")
        expected = allowed[key]
        if not isinstance(value, expected):
            raise ConfigError(f"{where}: [{table}] {key} must be a {expected.__name__}, "
                              f"not {type(value).__name__}")


def load_config(root: Path) -> Config:
    """Load ``root/contrib.toml``."""
    path = root / CONFIG_NAME
    text, doc = parse_toml(path)
    for key in doc:
        if key not in ("github", "upstreams", "autopilot"):
            raise ConfigError(f"{path}:{line_of(text, key) or line_of(text, '', key)}: "
                              f"unknown key or table {key!r} (allowed: [github], "
                              "[upstreams.NAME], [autopilot])")
    github = doc.get("github", {})
    if not isinstance(github, dict):
        raise ConfigError(f"{path}: [github] must be a table")
    check_keys(path, text, "github", github, _GITHUB_KEYS)
    api_url = str(github.get("api_url", DEFAULT_API_URL)).rstrip("/")
    if not re.match(r"^https?://", api_url):
        raise ConfigError(f"{path}:{line_of(text, 'github', 'api_url')}: [github] api_url "
                          f"must be an http(s) URL, got {api_url!r}")
    tables = doc.get("upstreams", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: 'upstreams' must be tables like [upstreams.flashinfer]")
    upstreams = {name: _upstream(path, text, name, data) for name, data in tables.items()}
    return Config(path=path, upstreams=upstreams, github_api_url=api_url,
                  autopilot=_autopilot(path, text, doc.get("autopilot", {})))


def _autopilot(path: Path, text: str, data: Any) -> Autopilot:
    """``[autopilot]``: repo OWNER/NAME, prs one of PR_POLICIES, dashboard_title."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:{line_of(text, '', 'autopilot')}: 'autopilot' must be a "
                          "table: [autopilot]")
    check_keys(path, text, "autopilot", data, _AUTOPILOT_KEYS)
    repo, prs = str(data.get("repo", "")), str(data.get("prs", "update"))
    if repo and not REPO_RE.match(repo):
        raise ConfigError(f"{path}:{line_of(text, 'autopilot', 'repo')}: [autopilot] repo must "
                          f"be OWNER/NAME of the workspace's GitHub repository, got {repo!r}")
    if prs not in PR_POLICIES:
        raise ConfigError(f"{path}:{line_of(text, 'autopilot', 'prs')}: [autopilot] prs must be "
                          f"one of {', '.join(map(repr, PR_POLICIES))}, got {prs!r}")
    title = str(data.get("dashboard_title", DEFAULT_DASHBOARD_TITLE)).strip()
    if not title:
        raise ConfigError(f"{path}:{line_of(text, 'autopilot', 'dashboard_title')}: "
                          "[autopilot] dashboard_title must not be empty")
    return Autopilot(repo=repo, prs=prs, dashboard_title=title)


def _upstream(path: Path, text: str, name: str, data: Any) -> Upstream:
    table = f"upstreams.{name}"
    where = f"{path}:{line_of(text, table)}"
    if not valid_name(name):
        raise ConfigError(f"{where}: upstream name {name!r} is invalid: use {NAME_RULE}")
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: [{table}] must be a table")
    check_keys(path, text, table, data, _UPSTREAM_KEYS)
    if not data.get("url"):
        raise ConfigError(f"{where}: [{table}] has no url: set url = \"https://...git\" "
                          "or a local path")
    for key in ("github", "fork"):
        value = data.get(key, "")
        if value and not REPO_RE.fullmatch(value):
            raise ConfigError(f"{path}:{line_of(text, table, key)}: [{table}] {key} must be "
                              f"OWNER/NAME, got {value!r}")
    for key in ("url", "push_url", "python"):
        value = str(data.get(key, ""))
        if any(ord(c) < 32 or c == "\x7f" for c in value):
            raise ConfigError(f"{path}:{line_of(text, table, key)}: [{table}] {key} holds a "
                              f"control character ({value!r}); write it on one line")
    branch = data.get("branch", "main")
    if not BRANCH_RE.fullmatch(branch) or ".." in branch or branch.endswith((".lock", "/")):
        raise ConfigError(f"{path}:{line_of(text, table, 'branch')}: [{table}] branch must be "
                          f"a git branch name (like main or release/v1), got {branch!r}")
    url = str(data["url"])
    if "://" not in url and not re.match(r"^[\w.-]+@[\w.-]+:", url):
        # A local path: relative paths are relative to the workspace.
        url = str((path.parent / url).resolve())
    return Upstream(name=name, url=url, branch=branch,
                    github=str(data.get("github", "")), fork=str(data.get("fork", "")),
                    push_url=str(data.get("push_url", "")),
                    maintainer_can_modify=bool(data.get("maintainer_can_modify", True)),
                    python=str(data.get("python", "")))
