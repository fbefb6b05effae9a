"""``contrib.toml`` -> typed, validated objects, read through :class:`~contrib.workspace.table.Table`.

Every problem names the file and line and says what to do; unknown keys are
errors (a typo like ``brnach`` must not be silently ignored).
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from contrib.arch import EXAMPLES, parse_arch
from contrib.errors import ConfigError, UsageError
from contrib.workspace.layout import CONFIG_NAME
from contrib.workspace.table import Table, parse_toml

DEFAULT_API_URL = "https://api.github.com"
# Upstream keys and patchset names: they become folder names, so one pattern for
# both, matched with fullmatch (``$`` would let a trailing newline through).
NAME_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}"
NAME_RULE = ("letters, digits, '.', '-', '_', not starting with '.' or '-', at most 100 "
             "characters")
NAME_RE = re.compile(NAME_PATTERN)
REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
BRANCH_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./+-]{0,250}")
TARGET_RE = re.compile(f"{NAME_PATTERN}/{NAME_PATTERN}(?:@{BRANCH_RE.pattern})?")  # UPSTREAM/NAME[@BRANCH]

_UPSTREAM_KEYS = frozenset({"url", "branch", "github", "fork", "push_url",
                            "maintainer_can_modify", "python", "package", "settings_class"})
# The class whose fields are a Python server's settings (sglang's): what `contrib audit`
# and `why` read its features from.
DEFAULT_SETTINGS_CLASS = "ServerArgs"
DEFAULT_KEEP_VERSIONS = 5
# The owners `contrib init` writes where it cannot know the real one: `doctor` fails them.
PLACEHOLDER_OWNERS = ("your-user", "upstream-owner")
PR_POLICIES = ("update", "create", "never")
DEFAULT_DASHBOARD_TITLE = "contrib dashboard"
DEFAULT_MAX_OPEN_DRAFTS = 2  # per upstream: a maintainer reviews two drafts, not ten


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
    package: str = ""  # its Python package's name, when its pyproject cannot tell
    settings_class: str = DEFAULT_SETTINGS_CLASS  # the dataclass of its server's settings

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
    audit_arch: tuple[str, ...] = ()  # archs the dashboard audits every upstream for
    enable: tuple[str, ...] = ()  # archs each run drafts `contrib enable` patchsets for
    max_open_drafts: int = DEFAULT_MAX_OPEN_DRAFTS  # draft PRs of its drafts open per upstream


@dataclass(frozen=True)
class Config:
    """A parsed workspace configuration."""

    path: Path
    upstreams: dict[str, Upstream] = field(default_factory=dict)
    github_api_url: str = DEFAULT_API_URL
    autopilot: Autopilot = field(default_factory=Autopilot)
    keep_versions: int | None = DEFAULT_KEEP_VERSIONS  # None: keep every version folder
    arch: str = ""  # [defaults] arch: the --arch of every command that takes one

    def upstream(self, name: str) -> Upstream:
        """The upstream called ``name``, or a ConfigError listing the known ones (and
        the one meant, when ``name`` is a typo of it)."""
        try:
            return self.upstreams[name]
        except KeyError:
            known = ", ".join(sorted(self.upstreams)) or "none"
            raise ConfigError(
                f"{self.path}: no upstream {name!r}{did_you_mean(name, self.upstreams)} "
                f"(known: {known}); add an [upstreams.{name}] table with a url") from None

    def default_arch(self, given: str | None, command: str) -> str:
        """``--arch`` as given, else ``[defaults] arch``; a UsageError naming both when
        neither says."""
        if given is not None:
            return given
        if self.arch:
            return self.arch
        raise UsageError(f"contrib {command}: give --arch (e.g. --arch sm_120a), or set a "
                         f'default in {self.path}: [defaults] arch = "sm_120a"')


@dataclass(frozen=True)
class Placeholder:
    """``github`` or ``fork`` of an upstream still holding the owner ``contrib init``
    wrote where it could not know the real one (``your-user/sglang``): a push there
    goes to a stranger's repository, or nowhere."""

    upstream: str
    key: str  # "github" or "fork"
    value: str
    where: str  # "contrib.toml:LINE" (the file alone when the line is not found)

    @property
    def wanted(self) -> str:
        return "your fork on GitHub" if self.key == "fork" else "the repository PRs target"

    def message(self) -> str:
        """One line: where, what, and what to set."""
        return (f'{self.where}: [upstreams.{self.upstream}] {self.key} = "{self.value}" is the '
                f"placeholder contrib init wrote: set it to {self.wanted} (OWNER/NAME)")


def is_placeholder(value: str) -> bool:
    """Whether an ``OWNER/NAME`` is one ``contrib init`` wrote for an owner it could not know."""
    return value.split("/")[0] in PLACEHOLDER_OWNERS


def placeholders(config: Config, upstream: str | None = None) -> list[Placeholder]:
    """The ``github``/``fork`` values (of ``upstream``, else of every upstream) that are
    :data:`PLACEHOLDER_OWNERS`' (what ``doctor`` fails and ``open-pr`` refuses)."""
    text = config.path.read_text(encoding="utf-8") if config.path.is_file() else ""
    found = []
    for up in config.upstreams.values():
        if upstream is not None and up.name != upstream:
            continue
        for key in ("github", "fork"):
            value = getattr(up, key)
            if not is_placeholder(value):
                continue
            line = next((n for n, row in enumerate(text.splitlines(), 1)
                         if re.match(rf'\s*{key}\s*=\s*"{re.escape(value)}"', row)), 0)
            found.append(Placeholder(up.name, key, value,
                                     f"{config.path}:{line}" if line else str(config.path)))
    return found


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``; did you mean 'flashinfer'?`` when ``name`` is close to one of ``known``
    (difflib, as git and pip suggest a command), else empty."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def valid_name(name: str) -> bool:
    """Whether ``name`` is a valid upstream key or patchset name."""
    return NAME_RE.fullmatch(name) is not None


def load_config(root: Path) -> Config:
    """Load ``root/contrib.toml``."""
    path = root / CONFIG_NAME
    text, doc = parse_toml(path)
    top = Table(path, text, "", doc)
    top.only({"github", "upstreams", "autopilot", "versions", "defaults"})
    github = top.sub("github") or Table(path, text, "github", {})
    github.only({"api_url"})
    api_url = (github.string("api_url", DEFAULT_API_URL) or DEFAULT_API_URL).rstrip("/")
    if not re.match(r"^https?://", api_url):
        raise github.fail("api_url", f"must be an http(s) URL, got {api_url!r}")
    tables = top.sub("upstreams")
    upstreams = {} if tables is None else {
        name: _upstream(tables, str(name)) for name in tables.data}
    autopilot = top.sub("autopilot") or Table(path, text, "autopilot", {})
    return Config(path=path, upstreams=upstreams, github_api_url=api_url,
                  autopilot=_autopilot(autopilot),
                  keep_versions=_keep(top.sub("versions") or Table(path, text, "versions", {})),
                  arch=_default_arch(top.sub("defaults") or Table(path, text, "defaults", {})))


def _default_arch(t: Table) -> str:
    """``[defaults] arch``: the GPU architecture a command without ``--arch`` takes."""
    t.only({"arch"})
    text = t.string("arch", "") or ""
    if not text:
        return ""
    try:
        return parse_arch(text).name
    except UsageError:
        raise t.fail("arch", f"holds {text!r}, which is not a GPU architecture "
                     f"(e.g. {EXAMPLES})") from None


def _keep(t: Table) -> int | None:
    """``[versions] keep``: how many unprotected version folders each patchset keeps in
    the working tree (``"all"``: every one; pruning is then off)."""
    t.only({"keep"})
    value = t.data.get("keep", DEFAULT_KEEP_VERSIONS)
    if value == "all":
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 100_000:
        raise t.fail("keep", f'must be a number of versions (0 or more) or "all", got {value!r}')
    return value


def _autopilot(t: Table) -> Autopilot:
    """``[autopilot]``: repo OWNER/NAME, prs one of PR_POLICIES, dashboard_title,
    audit_arch and enable (GPU architectures, e.g. ``["sm_120a"]``), max_open_drafts (0 or
    more)."""
    t.only({"repo", "prs", "dashboard_title", "audit_arch", "enable", "max_open_drafts"})
    repo = t.string("repo", "", pattern=REPO_RE,
                    hint="OWNER/NAME of the workspace's GitHub repository") or ""
    prs = t.string("prs", "update") or ""
    if prs not in PR_POLICIES:
        raise t.fail("prs", f"must be one of {', '.join(map(repr, PR_POLICIES))}, got {prs!r}")
    title = (t.string("dashboard_title", DEFAULT_DASHBOARD_TITLE) or "").strip()
    if not title:
        raise t.fail("dashboard_title", "must not be empty")
    ceiling = t.integer("max_open_drafts", DEFAULT_MAX_OPEN_DRAFTS)
    return Autopilot(repo=repo, prs=prs, dashboard_title=title, audit_arch=_archs(t),
                     enable=_archs(t, "enable"),
                     max_open_drafts=DEFAULT_MAX_OPEN_DRAFTS if ceiling is None else ceiling)


def _archs(t: Table, key: str = "audit_arch") -> tuple[str, ...]:
    """``audit_arch`` (or ``enable``): each parsed (``sm_120a``), given once."""
    names = []
    for text in t.strings(key):
        try:
            name = parse_arch(text).name
        except UsageError:
            raise t.fail(key, f"holds {text!r}, which is not a GPU architecture "
                         f"(e.g. {EXAMPLES})") from None
        if name in names:
            raise t.fail(key, f"names {name} twice")
        names.append(name)
    return tuple(names)


def _upstream(tables: Table, name: str) -> Upstream:
    if not valid_name(name):
        raise ConfigError(f"{tables.path}:{tables.line(name)}: upstream name {name!r} is "
                          f"invalid: use {NAME_RULE}")
    t = tables.sub(name)
    assert t is not None  # name is one of tables' keys
    t.only(_UPSTREAM_KEYS)
    url = t.string("url")
    if not url:
        raise t.fail("url", 'is required: set url = "https://...git" or a local path')
    github = t.string("github", "", pattern=REPO_RE, hint="OWNER/NAME") or ""
    fork = t.string("fork", "", pattern=REPO_RE, hint="OWNER/NAME") or ""
    for key in ("url", "push_url", "python", "package"):
        value = t.string(key, "") or ""
        if any(ord(c) < 32 or c == "\x7f" for c in value):
            raise t.fail(key, f"holds a control character ({value!r}); write it on one line")
    branch = t.string("branch", "main") or ""
    if not BRANCH_RE.fullmatch(branch) or ".." in branch or branch.endswith((".lock", "/")):
        raise t.fail("branch", f"must be a git branch name (like main or release/v1), "
                               f"got {branch!r}")
    if "://" not in url and not re.match(r"^[\w.-]+@[\w.-]+:", url):
        # A local path: relative paths are relative to the workspace.
        url = str((t.path.parent / url).resolve())
    modify = t.boolean("maintainer_can_modify", True)
    settings = t.string("settings_class", DEFAULT_SETTINGS_CLASS) or ""
    if not settings.isidentifier() or keyword.iskeyword(settings):
        raise t.fail("settings_class", f"must be a Python class name (like "
                                       f"{DEFAULT_SETTINGS_CLASS}), got {settings!r}")
    return Upstream(name=name, url=url, branch=branch, github=github, fork=fork,
                    push_url=t.string("push_url", "") or "",
                    maintainer_can_modify=True if modify is None else modify,
                    python=t.string("python", "") or "",
                    package=t.string("package", "") or "", settings_class=settings)
