"""The upstream's own PR checks: the scripts of its tree its PR workflows run, run here.

Beside its tests and hooks, an upstream's CI runs checks of its own on a PR
(flashinfer's ``pr-api-doc-checks.yml`` runs ``python scripts/check_pr_api_diff.py``
and ``scripts/check_pr_document.py``).  They are read from the workflows at the patched
tip (:func:`contrib.pr.collected.step_texts`: the ``pull_request`` workflows, the
reusable ones they call, matrix and inputs put in), never listed per upstream.  A check
is a command of a ``run:`` step that starts a script of the tree (``python X.py``,
``python -m`` a module of the tree, ``bash X.sh``, ``./X.sh``), and neither a test
runner (pytest, unittest: :mod:`contrib.pr.collected` says whether those reach a test)
nor an install, a download or a build (pip, uv, conda, apt-get, cmake, docker,
setup.py, nvidia-smi, curl, wget, sudo, on its line or in the script).  A check of a job on the upstream's own
runners (``runs-on`` not one of GitHub's hosted ``ubuntu-*``, ``windows-*``,
``macos-*``: sglang's GPU machines) is listed and not run: what it needs of that
machine cannot be told.  So is one whose job, before it, runs an action other than
checkout, setup and cache (``download-artifact``), tests or a build: it reads what they
leave (reports, a wheel), which is not here.

Each runs in the hooks' checkout of the patched tree (HEAD and files at the tip), with
the step's ``env:``, offline (:data:`contrib.pr.hooks.OFFLINE_ENV`) and ``python`` being
the interpreter contrib runs on, for at most a minute.  A check that exits 0 passed (the
``::warning`` annotations it printed for GitHub counted beside it); one
that exits otherwise failed, unless what it said shows it could not run here: a module
not installed, the network refused, no GPU.  A command that needs what only CI has (a secret,
``$GITHUB_OUTPUT``) is not run, and says which.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from contrib.git.process import clean_env
from contrib.git.repo import Git
from contrib.pr.collected import CommandText, starts_tests, step_texts
from contrib.pr.hooks import OFFLINE_ENV, SLOT, checkout
from contrib.secrets import scrub
from contrib.validate import buildcache

TIMEOUT = 60.0
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_PYTHON = re.compile(r"python(?:3(?:\.\d+)?)?")
_SHELL = ("bash", "sh")
_KEYWORDS = {"if", "then", "else", "elif", "while", "until", "do", "!", "time", "exec",
             "command", "{", "}", "(", ")"}
_SEPARATORS = {";", "&&", "||", "|", "&", "|&", ";;", "(", ")"}
_INSTALLS = re.compile(r"(?:^|[\s;&|(\"'\[,])(?:pip3?|uv|conda|mamba|apt-get|apt|cmake|docker|"
                       r"nvidia-smi|curl|wget|sudo)(?:[\s\"',\]]|$)|setup\.py|"
                       r"-m\s+(?:pip|build)\b")
_MISSING = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_NETWORK = re.compile(r"127\.0\.0\.1:9\b|ProxyError|Could not resolve host|Network is "
                      r"unreachable|Temporary failure in name resolution|URLError|"
                      r"ConnectionError|ConnectionRefusedError|Max retries exceeded|"
                      r"couldn't connect to|OfflineModeIsEnabled|LocalEntryNotFoundError")
_GPU = re.compile(r"No CUDA GPUs are available|Found no NVIDIA driver|CUDA driver version|"
                  r"libcuda\.so|nvidia-smi: command not found|no CUDA-capable device")
_BUILDS = re.compile(r"(?:^|[\s;&|(])(?:cmake|docker|cargo|make|ninja)\s|setup\.py|-m\s+build\b")
_SETUP = re.compile(r"actions/(?:checkout|setup-[\w-]+|cache)@")  # a job's usual first steps
_HOSTED = re.compile(r"(?:ubuntu|windows|macos)-[\w.-]+")  # GitHub's own runners


class CheckStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "not run"  # needs CI, the network, a module not installed, or took too long


@dataclass(frozen=True)
class PrCheck:
    """A command of a PR workflow that runs a script of the tree."""

    workflow: str
    argv: tuple[str, ...]  # the step's variables and the PR's commits put in
    cwd: str  # the folder of the tree it runs in
    env: tuple[tuple[str, str], ...]
    needs: str = ""  # what it needs and contrib lacks (CI context, a runner): not run

    def command(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class CheckResult:
    check: PrCheck
    status: CheckStatus
    detail: str = ""  # exit code and last lines, or why it did not run


@dataclass(frozen=True)
class Checks:
    """The PR checks of the workflows at the tip, run on the patched tree."""

    results: tuple[CheckResult, ...]

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.status == CheckStatus.FAILED)

    def as_json(self) -> list[dict[str, Any]]:
        return [{"command": r.check.command(), "workflow": r.check.workflow,
                 "cwd": r.check.cwd, "status": str(r.status), "detail": r.detail}
                for r in self.results]


def find_checks(git: Git, base: str, tip: str, workspace: str = "") -> list[PrCheck]:
    """The checks the PR workflows at ``tip`` run, for a PR from ``base`` to ``tip``."""
    files = set(git.ls_tree_paths(tip))
    context = {"github.event.pull_request.base.sha": base,
               "github.event.pull_request.head.sha": tip, "github.workspace": workspace}
    found: dict[tuple[tuple[str, ...], str], PrCheck] = {}  # one per command, first workflow
    for text in step_texts(git, tip, files):
        for check in _commands(text, files, context):
            seen = found.get((check.argv, check.cwd))
            if (seen is None or seen.needs and not check.needs) and not _installs_or_tests(
                    git, tip, check, files):
                found[check.argv, check.cwd] = check
    return list(found.values())


def run_checks(git: Git, base: str, tip: str, *, timeout: float = TIMEOUT) -> Checks | None:
    """The PR checks at ``tip`` run in the hooks' checkout; None when there are none."""
    slot = buildcache.slot_of(git.path, SLOT)
    tree = buildcache.builds_dir() / slot / "src"
    checks = find_checks(git, base, tip, str(tree))
    if not checks:
        return None
    env = _environment()
    with buildcache.locked(slot):
        why = ""
        if any(not c.needs for c in checks):
            why = checkout(git, tree, base, tip, {k: v for k, v in env.items()
                                                  if k in OFFLINE_ENV}, head=tip)
        results = [_run(c, tree, env, timeout, why) for c in checks]
    return Checks(tuple(results))


def _environment() -> dict[str, str]:
    """A clean offline environment whose ``python`` is contrib's interpreter."""
    env = {k: v for k, v in clean_env().items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + (":" + env["PATH"] if env.get("PATH") else "")
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "LC_ALL": "C.UTF-8"})
    return env | OFFLINE_ENV


def _commands(text: CommandText, files: set[str],
              context: dict[str, str]) -> Iterator[PrCheck]:
    """The checks of one step: each command that starts a script of the tree."""
    env = dict(text.env)
    where = text.dirs[0] if text.dirs else ""
    for line in text.text.replace("\\\n", " ").splitlines():
        if line.lstrip().startswith("#") or starts_tests(line):
            continue
        exprs: list[str] = []
        line = _EXPR.sub(partial(_put, context=context, exprs=exprs), line)
        try:
            tokens = list(shlex.shlex(line, posix=True, punctuation_chars=True))
        except ValueError:  # an unclosed quote: a heredoc's text, say
            continue
        if tokens[:1] == ["cd"] and len(tokens) == 2:
            moved = str(PurePosixPath(where) / tokens[1]).removeprefix("./")
            where = "" if moved == "." else moved
            continue
        for words in _segments(tokens):
            check = _check(words, where, files, env, context, exprs, text.workflow)
            if check is not None and not check.needs and not _hosted(text.runner):
                check = replace(check, needs=f"the upstream's own runner `{text.runner}` "
                                "(a job not on GitHub's hosted runners)")
            if check is not None and not check.needs and (before := _prepared_by(text)):
                check = replace(check, needs=f"what `{before}` leaves (an earlier step of "
                                "its job)")
            if check is not None:
                yield check


def _prepared_by(text: CommandText) -> str:
    """The first earlier step of the job whose output a later step may read: an action
    other than checkout, setup and cache (``download-artifact``), or a command that runs
    tests or builds; "" when there is none."""
    for step in text.earlier:
        if step.startswith("uses: "):
            if not _SETUP.match(step[6:]):
                return step[6:]
            continue
        lines = [line.strip() for line in step.splitlines()
                 if line.strip() and not line.lstrip().startswith("#")]
        found = next((line for line in lines if starts_tests(line) or _BUILDS.search(line)), "")
        if found:
            return found[:80]
    return ""


def _hosted(runner: str) -> bool:
    """Whether a job runs on GitHub's hosted runners (a check there needs no hardware of
    the upstream's own), or names none."""
    return not runner or all(_HOSTED.fullmatch(label) for label in runner.split())


def _put(found: re.Match[str], *, context: dict[str, str], exprs: list[str]) -> str:
    """An expression's value where the PR gives it, else a placeholder word."""
    expr = found[1]
    if context.get(expr):
        return context[expr]
    exprs.append(expr)
    return f"__CIEXPR{len(exprs) - 1}__"


def _segments(tokens: list[str]) -> Iterator[list[str]]:
    """The simple commands of a tokenized line: split at separators, redirections and
    their targets dropped, leading keywords and ``VAR=value`` kept out."""
    words: list[str] = []
    skip = False
    for token in [*tokens, ";"]:
        if skip:
            skip = False
        elif token in _SEPARATORS:
            if words:
                yield words
            words = []
        elif token.startswith((">", "<")) or re.fullmatch(r"\d[<>]+&?", token):
            skip = not token.endswith("&")
        elif not words and token in _KEYWORDS:
            continue
        else:
            words.append(token)


def _check(words: list[str], where: str, files: set[str], env: dict[str, str],
           context: dict[str, str], exprs: list[str], workflow: str) -> PrCheck | None:
    while words and re.fullmatch(r"\w+=.*", words[0]):  # VAR=value python x.py
        name, _, value = words.pop(0).partition("=")
        env = env | {name: value}
    if _script(words, where, files) is None:
        return None
    known: dict[str, str] = {}
    lacks: dict[str, str] = {}  # a variable whose value needs CI: what it needs
    for name, value in env.items():
        unknown = [m[1] for m in _EXPR.finditer(value) if not context.get(m[1])]
        if unknown:
            lacks[name] = f"${{{{ {unknown[0]} }}}}"
        else:
            known[name] = _EXPR.sub(lambda m: context[m[1]], value)
    argv, needs = [], []

    def var(found: re.Match[str]) -> str:
        name = found[1] or found[2]
        if name in known:
            return known[name]
        needs.append(lacks.get(name, f"${name}"))
        return found[0]

    for word in words:
        word = _VAR.sub(var, word)
        for n, expr in enumerate(exprs):
            if f"__CIEXPR{n}__" in word:
                needs.append(f"${{{{ {expr} }}}}")
                word = word.replace(f"__CIEXPR{n}__", f"${{{{ {expr} }}}}")
        argv.append(word)
    return PrCheck(workflow, tuple(argv), where, tuple(sorted(known.items())),
                   f"CI context {needs[0]}" if needs else "")


def _script(words: list[str], where: str, files: set[str]) -> str | None:
    """The tree's file a simple command starts, if any."""
    if not words:
        return None
    head, rest = PurePosixPath(words[0]).name, words[1:]
    if _PYTHON.fullmatch(head) or head in _SHELL:
        args = [w for w in rest if not w.startswith("-") or w == "-m"]
        if head not in _SHELL and args[:1] == ["-m"] and len(args) > 1:
            module = args[1].replace(".", "/")
            return _in_tree(f"{module}.py", where, files) or _in_tree(
                f"{module}/__main__.py", where, files)
        return _in_tree(args[0], where, files) if args and args[0] != "-m" else None
    return _in_tree(words[0], where, files) if words[0].endswith((".py", ".sh")) else None


def _in_tree(name: str, where: str, files: set[str]) -> str | None:
    for base in dict.fromkeys((where, "")):
        path = str(PurePosixPath(base) / name.removeprefix("./")).removeprefix("./")
        if path in files:
            return path
    return None


def _installs_or_tests(git: Git, tip: str, check: PrCheck, files: set[str]) -> bool:
    """Whether a check installs, builds or runs tests: not a check contrib runs."""
    if _INSTALLS.search(check.command()):
        return True
    script = _script(list(check.argv), check.cwd, files)
    data = git.read_blob(tip, script) if script else None
    text = data.decode("utf-8", "replace") if data is not None else ""
    if re.search(r"pytest|unittest", text):  # a test runner, as collected reads one
        return True
    return any(_INSTALLS.search(line) for line in text.splitlines()
               if not line.lstrip().startswith("#"))


def _run(check: PrCheck, tree: Path, env: dict[str, str], timeout: float,
         why: str) -> CheckResult:
    if check.needs:
        return CheckResult(check, CheckStatus.NOT_RUN, f"needs {check.needs}")
    if why:
        return CheckResult(check, CheckStatus.NOT_RUN, why)
    argv = list(check.argv)
    if _PYTHON.fullmatch(PurePosixPath(argv[0]).name):
        argv[0] = sys.executable
    try:
        proc = subprocess.run(argv, cwd=tree / check.cwd, env=env | dict(check.env),
                              capture_output=True, text=True, errors="replace",
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return CheckResult(check, CheckStatus.NOT_RUN, f"stopped after {timeout:.0f}s")
    except OSError as exc:
        return CheckResult(check, CheckStatus.NOT_RUN, f"could not start ({exc.strerror})")
    said = scrub(proc.stdout + proc.stderr)
    if proc.returncode == 0:
        return CheckResult(check, CheckStatus.PASSED, _warnings(said))
    missing = _MISSING.search(said)
    if missing:
        return CheckResult(check, CheckStatus.NOT_RUN,
                           f"module {missing[1]} is not installed here")
    if _GPU.search(said):
        return CheckResult(check, CheckStatus.NOT_RUN, "needs a GPU, and found none here")
    if _NETWORK.search(said):
        return CheckResult(check, CheckStatus.NOT_RUN, "needs the network; contrib runs the "
                           "checks offline")
    last = " / ".join(line.strip() for line in said.strip().splitlines()[-3:])
    return CheckResult(check, CheckStatus.FAILED, f"exit code {proc.returncode}"
                       + (f": {last[-300:]}" if last else ""))


def _warnings(said: str) -> str:
    """The ``::warning`` annotations (GitHub Actions' workflow commands) a passed check
    printed: how many, and the first one's message."""
    found = [line.split("::", 2)[-1].strip() for line in said.splitlines()
             if line.startswith("::warning")]
    if not found:
        return ""
    return f"{len(found)} warning{'s' if len(found) > 1 else ''}: {found[0][:160]}"
