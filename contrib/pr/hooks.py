"""The upstream's own ``pre-commit`` hooks, run on the files a patchset touches.

A contributor's ``git commit`` runs them and the upstream's CI runs them again on the
PR (flashinfer: clang-format, ruff, mypy, whitespace fixers; sglang: isort, black,
codespell and a dozen ``repo: local`` checks), so a PR that fails them is sent back.
They are read from ``.pre-commit-config.yaml`` at the patched tip and run by the
``pre-commit`` package itself, never re-implemented: in a worktree of the upstream's
cache kept in contrib's build cache, with the patch staged over the base (HEAD at the
base, the index and files at the tip: what ``git commit`` would see), as
``pre-commit run --files`` on the touched files.  Every environment the hooks install
lives in contrib's cache (``PRE_COMMIT_HOME`` and the caches pip, virtualenv and npm
write), never in the user's.

Each repository of the config runs on its own, so one that cannot be installed leaves
the others' results standing.  Offline (a dry run), the network is closed to pre-commit
(a dead proxy, git's remote transports refused, pip without an index): a hook whose
repository or environment is not in the cache yet is *not run*, with pre-commit's own
reason, and never counted as failed.  A hook whose program is missing here is not run
either.  A hook that exits non-zero, or changes a file (a formatter), failed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from contrib.errors import ContribError
from contrib.git.cache import cache_root
from contrib.git.process import clean_env
from contrib.git.repo import Git
from contrib.secrets import scrub
from contrib.validate import buildcache

CONFIG = ".pre-commit-config.yaml"
SLOT = "hooks"  # the build cache's slot of the checkout (the PR checks reuse it)
TIMEOUT = 900.0  # one repository's hooks; mypy over a big package takes minutes
_DEAD = "http://127.0.0.1:9"  # the discard port: a connection is refused at once
OFFLINE_ENV = {"GIT_ALLOW_PROTOCOL": "file", "PIP_NO_INDEX": "1", "npm_config_offline": "true",
               "CARGO_NET_OFFLINE": "true", "GOPROXY": "off", "NO_PROXY": "", "no_proxy": "",
               **{k: _DEAD for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                                     "https_proxy", "all_proxy")}}


class HookStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # no touched file is of its kind
    NOT_RUN = "not run"  # could not be installed or started here: not a failure


@dataclass(frozen=True)
class HookResult:
    """One hook's outcome on the touched files."""

    id: str
    name: str
    repo: str
    status: HookStatus
    detail: str = ""  # exit code, files changed, or why it did not run


@dataclass(frozen=True)
class Hooks:
    """The hooks of the config at the tip, run on the files the patchset touches."""

    config: str
    files: tuple[str, ...]
    results: tuple[HookResult, ...]

    @property
    def failed(self) -> tuple[HookResult, ...]:
        return tuple(r for r in self.results if r.status == HookStatus.FAILED)

    @property
    def not_run(self) -> tuple[HookResult, ...]:
        return tuple(r for r in self.results if r.status == HookStatus.NOT_RUN)

    def command(self) -> str:
        """What a reviewer runs to see the same."""
        return "pre-commit run --files " + " ".join(self.files)

    def counts(self) -> dict[HookStatus, int]:
        return {s: n for s in HookStatus if (n := sum(r.status == s for r in self.results))}

    def as_json(self) -> dict[str, Any]:
        return {"config": self.config, "files": list(self.files), "command": self.command(),
                "results": [{"id": r.id, "name": r.name, "repo": r.repo,
                             "status": str(r.status), "detail": r.detail}
                            for r in self.results]}


def run_hooks(git: Git, base: str, tip: str, *, offline: bool) -> Hooks | None:
    """The upstream's hooks on the files ``base..tip`` adds or changes; None when the tip
    has no pre-commit config."""
    text = git.read_blob(tip, CONFIG)
    if text is None:
        return None
    files = tuple(git.run("diff", "--name-only", "--no-renames", "--diff-filter=d", "-z",
                          base, tip, strip=False).split("\0")[:-1])
    config, repos = _read(text)
    if config is None:
        why = f"{CONFIG} at {tip[:12]} is not a config pre-commit reads"
        return Hooks(CONFIG, files, (HookResult("*", "*", "*", HookStatus.NOT_RUN, why),))
    if not files:
        return Hooks(CONFIG, files, ())
    slot = buildcache.slot_of(git.path, SLOT)
    with buildcache.locked(slot):
        folder = buildcache.builds_dir() / slot
        env = _environment(offline)
        why = checkout(git, folder / "src", base, tip, env)
        results: list[HookResult] = []
        for n, repo in enumerate(repos):
            if why:
                results += _unrun(repo, config, why)
                continue
            single = {**{k: v for k, v in config.items() if k != "repos"}, "repos": [repo]}
            path = folder / f"config-{n}.json"  # YAML reads JSON: one repository's config
            path.write_text(json.dumps(single), encoding="utf-8")
            results += _run_repo(folder / "src", path, repo, config, files, env, offline)
    return Hooks(CONFIG, files, tuple(results))


def _read(text: bytes) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the config, its repositories), or (None, []) when it is no mapping with a list of
    repositories (pre-commit itself says what is wrong: :func:`_why_not`)."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return None, []
    repos = config.get("repos") if isinstance(config, dict) else None
    if not isinstance(repos, list) or not all(isinstance(r, dict) for r in repos):
        return None, []
    return config, repos


def _environment(offline: bool) -> dict[str, str]:
    """pre-commit's environment: its store and every cache its installers write in
    contrib's cache; the network closed when ``offline``."""
    home = cache_root() / "pre-commit"
    # git's children (pre-commit clones each hook repository) get contrib's git
    # environment: a caller's GIT_DIR/GIT_INDEX_FILE dropped, GIT_SSH and the CA kept,
    # and no credential prompt on the terminal (stdin is closed, the tty is not).
    env = {k: v for k, v in clean_env().items()
           if not k.startswith("PRE_COMMIT") and k not in ("SKIP", "VIRTUAL_ENV")}
    env.update({"PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never",
                "PIP_CACHE_DIR": str(home / "pip"), "npm_config_cache": str(home / "npm"),
                "VIRTUALENV_OVERRIDE_APP_DATA": str(home / "virtualenv"),
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "LC_ALL": "C.UTF-8"})
    return env | (OFFLINE_ENV if offline else {})


def checkout(git: Git, path: Path, base: str, tip: str, env: dict[str, str], *,
             head: str = "") -> str:
    """Bring the hooks' worktree to the tip with HEAD at the base (or ``head``); "" or
    why it cannot be (offline, a partial cache that lacks the tree's files)."""
    git_env = {k: v for k, v in env.items() if k in OFFLINE_ENV}
    if not (path / ".git").is_file():
        # -f takes the place of one registered and deleted; never `worktree prune`: it
        # would forget the worktree of a moved workspace (an edit, a conflict) that
        # contrib has not repaired yet (contrib.git.worktree.repair)
        status, _, err = git.try_run("worktree", "add", "-f", "--detach", "--no-checkout",
                                     str(path), tip, env=git_env)
        if status != 0:
            return f"no worktree of the cache ({err.strip().splitlines()[-1:]})"
    tree = Git(path)
    for args in (("checkout", "-q", "-f", "--detach", tip), ("clean", "-q", "-f", "-d"),
                 ("reset", "-q", "--soft", head or base)):
        status, _, err = tree.try_run(*args, env=git_env)
        if status != 0:
            last = (err.strip().splitlines() or ["git failed"])[-1]
            return f"the tree at {tip[:12]} could not be checked out here ({last})"
    return ""


def _hook_ids(repo: dict[str, Any], config: dict[str, Any]) -> list[tuple[str, str]]:
    """(id, name) of the repository's hooks that ``git commit`` runs, as the config names
    them (a remote hook's own defaults are in its repository, unread offline)."""
    out = []
    for hook in repo.get("hooks") or []:
        if not isinstance(hook, dict) or "id" not in hook:
            continue
        stages = hook.get("stages") or config.get("default_stages")
        if stages and not {"pre-commit", "commit"} & set(stages):
            continue
        out.append((str(hook["id"]), str(hook.get("name") or hook["id"])))
    return out


def _unrun(repo: dict[str, Any], config: dict[str, Any], why: str) -> list[HookResult]:
    url = str(repo.get("repo", ""))
    return [HookResult(i, name, url, HookStatus.NOT_RUN, why) for i, name in _hook_ids(repo,
                                                                                        config)]


def _run_repo(tree: Path, config_path: Path, repo: dict[str, Any], config: dict[str, Any],
              files: tuple[str, ...], env: dict[str, str], offline: bool) -> list[HookResult]:
    argv = [sys.executable, "-m", "pre_commit", "run", "--color", "never", "--verbose",
            "--config", str(config_path), "--files", *files]
    try:
        proc = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True,
                              errors="replace", timeout=TIMEOUT, stdin=subprocess.DEVNULL,
                              check=False)
    except subprocess.TimeoutExpired:
        return _unrun(repo, config, f"stopped after {TIMEOUT:.0f}s")
    except OSError as exc:
        raise ContribError(f"cannot start pre-commit ({exc}): reinstall contrib, which "
                           "depends on it") from None
    url = str(repo.get("repo", ""))
    out = scrub(proc.stdout)  # a clone's error may name a URL with its credentials
    results = parse_output(out, url)
    if results or proc.returncode == 0:
        return results
    where = scrub(f"{url} {repo.get('rev', '')}".strip())
    return _unrun(repo, config, _why_not(out + scrub(proc.stderr), where, offline))


_STATUS = re.compile(r"^(?P<name>.*?)\.*(?P<nofiles>\(no files to check\))?"
                     r"(?P<status>Passed|Failed|Skipped)$")
_MISSING = re.compile(r"^Executable `(.+)` not found")


def parse_output(out: str, repo: str) -> list[HookResult]:
    """The hooks in ``pre-commit run --verbose`` output: each status line is followed by
    ``- hook id: ID``, then the exit code, ``- files were modified by this hook`` and
    the hook's own output."""
    lines = out.splitlines()
    results = []
    for i, line in enumerate(lines):
        hook_id = line.removeprefix("- hook id: ") if line.startswith("- hook id: ") else None
        status = _STATUS.match(lines[i - 1]) if hook_id and i else None
        if status is None or hook_id is None:
            continue
        notes, said = _notes(lines[i + 1:])
        kind = HookStatus(status["status"].lower())
        missing = _MISSING.match(said)
        if kind == HookStatus.FAILED and missing:  # pre-commit's word for an absent program
            kind, notes = HookStatus.NOT_RUN, [f"`{missing[1]}` is not installed here"]
        elif kind == HookStatus.FAILED and said:
            notes.append(said[:160])
        results.append(HookResult(hook_id, status["name"].strip(), repo, kind, "; ".join(notes)))
    return results


def _notes(rest: list[str]) -> tuple[list[str], str]:
    """(the ``- exit code``/``- files were modified`` notes, the first line the hook said)."""
    notes = []
    for n, line in enumerate(rest):
        if line.startswith("- hook id: ") or _STATUS.match(line) and not line.startswith("- "):
            break
        if line.startswith("- exit code: ") or line == "- files were modified by this hook":
            notes.append(line[2:])
        elif line.strip() and not line.startswith("- duration: "):
            return notes, line.strip()
        if n > 4:
            break
    return notes, ""


def _why_not(out: str, where: str, offline: bool) -> str:
    """Why pre-commit ran none of a repository's hooks, in one line: its config is not
    one it reads, or the hooks' environment could not be installed (``where``: the
    repository and its rev), which offline means the network was needed."""
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    error = next((line for line in lines if "error has occurred" in line), "")
    detail = next((line for line in reversed(lines) if line.startswith(("fatal:", "ERROR:",
                                                                        "error:"))), "")
    if re.search(r"Invalid(Config|Manifest)Error", error):
        return f"pre-commit does not read the config ({error[:200]})"
    said = (detail or error or "pre-commit failed")[:200]
    if offline:
        return f"installing {where} needs the network, and a dry run is offline ({said})"
    return f"installing {where} failed ({said})"
