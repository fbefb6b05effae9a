"""Running the git program: its environment, one spawn, streamed progress, the -v trace.

:mod:`contrib.git.repo` builds every repository operation on these, and long
commands without a repository (clone, fetch) run here directly.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from contrib.errors import GitError, GitTimeout
from contrib.killpoints import reached
from contrib.secrets import scrub

if TYPE_CHECKING:
    from pathlib import Path

# Variables a caller may legitimately set for git; everything else GIT_* is dropped.
_KEEP_GIT_ENV = {
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSL_CAINFO",
    "GIT_SSL_NO_VERIFY",
    "GIT_ASKPASS",
    "GIT_HTTP_LOW_SPEED_LIMIT",
    "GIT_HTTP_LOW_SPEED_TIME",
    "GIT_ALLOW_PROTOCOL",
    "GIT_CONFIG_GLOBAL",
    "GIT_HTTP_PROXY_AUTHMETHOD",
    "GIT_TRACE",
    "GIT_CURL_VERBOSE",
}


# ``git -c`` passed through the environment (git >= 2.31), as pre-commit keeps it: a
# caller's GIT_CONFIG_COUNT with its GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n pairs.
_CONFIG_ENTRY = re.compile(r"GIT_CONFIG_(COUNT|KEY_\d+|VALUE_\d+)")


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a git child: caller's GIT_* stripped, no prompts."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_") or k in _KEEP_GIT_ENV or _CONFIG_ENTRY.fullmatch(k)
    }
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    env.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    if extra:
        env.update(extra)
    return env


def git_reason(stderr: str) -> str:
    """git's verdict on one line: its first ``fatal:``/``error:`` message, without the
    "Cloning into ..." chatter and the access-rights hints around it."""
    found = re.search(r"(?:fatal|error): (.+)", stderr)
    return (found[1] if found else (stderr.splitlines() or ["git failed"])[0]).strip()


def describe(args: Sequence[str]) -> str:
    """``ARGS`` as one scrubbed line, cut at 300 characters."""
    shown = " ".join(str(a) for a in args)
    return scrub(shown if len(shown) < 300 else shown[:300] + " ...")


ProgressFn = Callable[[str], None]
"""Receives each of git's progress messages ("Receiving objects:  45% (...)")."""

_trace: Callable[[str], None] | None = None


def trace_commands(callback: Callable[[str], None] | None) -> None:
    """Show every git command contrib runs (``-v``) through ``callback``, scrubbed."""
    global _trace
    _trace = callback


def announce(args: Sequence[str], cwd: Path | str | None) -> None:
    """Show ``git ARGS`` on the -v trace, if one is set (each git process passes here)."""
    reached(f"git-{_subcommand(args)}")
    if _trace is not None:
        where = f"-C {cwd} " if cwd is not None else ""
        _trace(f"git {where}{describe(args)}")


def _subcommand(args: Sequence[str]) -> str:
    """``fetch`` of ``-C PATH fetch --prune``: the first word not an option or its value."""
    words = iter(args)
    for word in words:
        if word in ("-C", "-c"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return ""


def spawn(args: list[str], *, cwd: Path | str, env: Mapping[str, str] | None,
           input: bytes | str | None, timeout: float | None) -> tuple[int, bytes, bytes]:
    """Run ``git ARGS`` in ``cwd``; (status, stdout, stderr).  GitError only when git
    itself is missing or the command outlives ``timeout``."""
    announce(args, cwd)
    if isinstance(input, str):
        input = input.encode("utf-8", errors="surrogateescape")
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, env=clean_env(env), input=input,
                              stdin=subprocess.DEVNULL if input is None else None,
                              capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise GitError(NO_GIT) from None
    except subprocess.TimeoutExpired:
        raise GitTimeout(f"`git {describe(args)}` in {cwd} took longer than {timeout:g}s; "
                       "stopped it", reason=f"timed out after {timeout:g}s") from None
    return proc.returncode, proc.stdout, proc.stderr


MIN_GIT = (2, 32)  # `git apply --3way` tries the 3-way merge first from 2.32 on
NO_GIT = f"git is not installed or not on PATH: install git >= {MIN_GIT[0]}.{MIN_GIT[1]}"


def stream(args: list[str], *, cwd: Path | None, env: Mapping[str, str] | None,
           progress: ProgressFn | None, keep_stdout: bool = True) -> tuple[int, bytes, str]:
    """Run ``git ARGS`` reading its stderr as it comes: (status, stdout, the last of
    stderr, scrubbed).  git writes progress to stderr, redrawing a line with ``\\r``;
    each message goes to ``progress`` so the caller can show it on its status line.
    Without ``keep_stdout`` git's stdout goes to the null device (and b"" is returned)."""
    announce(args, cwd)
    if not keep_stdout:
        status, kept = _streamed(args, cwd, env, progress, subprocess.DEVNULL)
        return status, b"", scrub("\n".join(kept)).strip()
    import tempfile  # only a command whose output is read needs it

    with tempfile.TemporaryFile() as out:
        status, kept = _streamed(args, cwd, env, progress, out.fileno())
        out.seek(0)
        return status, out.read(), scrub("\n".join(kept)).strip()


def _streamed(args: list[str], cwd: Path | None, env: Mapping[str, str] | None,
              progress: ProgressFn | None, stdout: int) -> tuple[int, list[str]]:
    try:
        proc = subprocess.Popen(["git", *args], cwd=cwd, env=clean_env(env),
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise GitError(NO_GIT) from None
    with proc:
        assert proc.stderr is not None
        kept = read_progress(proc.stderr.fileno(), progress)
    return proc.returncode, kept


def read_progress(fd: int, progress: ProgressFn | None) -> list[str]:
    """Feed ``progress`` from git's stderr as it comes; return its last 50 messages."""
    kept: list[str] = []
    pending = b""
    while chunk := os.read(fd, 65536):
        *messages, pending = re.split(rb"[\r\n]", pending + chunk)
        for raw in messages:
            message = raw.decode("utf-8", errors="replace").strip()
            if message:
                kept = [*kept[-49:], message]
                if progress is not None:
                    progress(scrub(message))
    if pending.strip():
        kept.append(pending.decode("utf-8", errors="replace").strip())
    return kept


def fetch(path: str, remote: str, *, progress: ProgressFn | None) -> None:
    """Fetch ``remote`` (branches and tags) into the repository at ``path``, passing on
    git's progress; GitError when git fails."""
    run_long(["-C", path, "fetch", "--prune", "--tags", "--force"], [remote],
             progress=progress, what=f"fetch {remote}")


def run_long(args: list[str], tail: list[str], *, progress: ProgressFn | None,
             what: str) -> None:
    """Run a long git command outside a repository (clone, fetch -C), handing each of
    its progress messages to ``progress``."""
    argv = [*args, *(["--progress"] if progress else []), *tail]
    status, _, err = stream(argv, cwd=None, env=None, progress=progress, keep_stdout=False)
    if status != 0:
        raise GitError(f"git {scrub(what)} failed: {err}", reason=git_reason(err))
