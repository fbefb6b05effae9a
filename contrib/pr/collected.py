"""Whether the upstream's CI on a PR runs a test: read from its workflows at the commit.

A test a patchset adds is worth little to a maintainer if their CI never runs it.  The
workflows that run on ``pull_request`` (and the reusable workflows they call, with the
inputs they pass and each job's matrix values put in for ``${{ inputs.X }}`` and
``${{ matrix.X }}``) say what runs: each step's ``run:`` text, and the scripts of the
tree that text names, followed a few levels down (flashinfer's PR workflow runs
``scripts/task_run_unit_tests.sh``, which runs ``scripts/unit_test_runner.py``, which
collects ``tests/``).  A test is:

- ``run``: a pytest or unittest command line names it or a folder that holds it;
- ``by-script``: a script the workflows run names a folder that holds it, and that
  script decides what it runs (sglang's ``test/run_suite.py`` reads ``registered/``
  and runs a file only if it registers itself in a suite the workflow asks for);
- ``not-found``: nothing the PR workflows run names it or a folder above it.

Paths count only with a slash in them (``tests/``, ``./scripts/x.sh``) or as a script's
file name, so prose in a workflow is not read as a path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any

import yaml

from contrib.git.repo import Git

WORKFLOWS = ".github/workflows"
_DEPTH = 3  # scripts that run scripts
_MAX_SCRIPTS = 60
_EXPR = re.compile(r"\$\{\{\s*(matrix|inputs)\.([\w-]+)\s*\}\}")
_TOKEN = re.compile(r"[\w.*?/-]+")
# a test runner started on the line: pytest, python -m pytest, python -m unittest
_RUNNER = re.compile(r"(?:^|[\s;&|(\"'])(?:py\.test|pytest)(?:\s|$)|-m\s+(?:pytest|unittest)\b")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where built: 10x faster
_QUOTED = re.compile(r"[\"']([\w.-]+)[\"']")


class Collection(StrEnum):
    RUN = "run"
    BY_SCRIPT = "by-script"
    NOT_FOUND = "not-found"


@dataclass(frozen=True)
class Collected:
    """One test and how the PR workflows reach it."""

    test: str
    how: Collection
    workflow: str = ""  # the workflow file that runs it
    via: str = ""  # the script, or the command line, that names it
    named: str = ""  # the path it names: the test or a folder holding it


@dataclass(frozen=True)
class CommandText:
    """A command text CI runs: a step's ``run:``, or a script's content."""

    workflow: str
    source: str  # the workflow, or the script's path
    text: str
    dirs: tuple[str, ...]  # folders its relative paths start from
    env: tuple[tuple[str, str], ...] = ()  # a step's: the workflow's, job's and step's env
    runner: str = ""  # a step's: its job's ``runs-on``
    earlier: tuple[str, ...] = ()  # a step's: its job's steps before it (``uses: X``, or run text)


def is_test(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def starts_tests(line: str) -> bool:
    """Whether a command line starts a test runner (pytest, ``python -m unittest``)."""
    return bool(_RUNNER.search(line))


def collected(git: Git, rev: str, tests: Sequence[str]) -> list[Collected]:
    """How the PR workflows at ``rev`` reach each of ``tests``."""
    if not tests:
        return []
    files = set(git.ls_tree_paths(rev))
    folders = {str(p) for f in files for p in PurePosixPath(f).parents if str(p) != "."}
    texts = list(_texts(git, rev, files))
    return [_collect(test, texts, files, folders) for test in tests if test in files]


def _collect(test: str, texts: list[CommandText], files: set[str], folders: set[str]) -> Collected:
    found: Collected | None = None
    for text in texts:
        script = text.source != text.workflow
        runs_tests = script and bool(re.search(r"pytest|unittest", text.text))
        for line in text.text.splitlines():
            if line.lstrip().startswith("#"):
                continue
            command = bool(_RUNNER.search(line))
            if not (command or runs_tests):
                continue
            for path in _paths(line, text.dirs, files, folders, quoted=script):
                if test != path and not test.startswith(path + "/"):
                    continue
                if command:
                    return Collected(test, Collection.RUN, text.workflow,
                                     text.source if script else line.strip()[:120], path)
                found = found or Collected(test, Collection.BY_SCRIPT, text.workflow,
                                           text.source, path)
    return found or Collected(test, Collection.NOT_FOUND)


def _paths(line: str, dirs: tuple[str, ...], files: set[str], folders: set[str], *,
           quoted: bool) -> Iterator[str]:
    """The tree's files and folders a line names, relative to one of ``dirs``: a token
    with a slash, or (``quoted``: a script's line) a quoted name beside the script
    (sglang's ``os.path.join(script_dir, "registered")``)."""
    tokens = [t for t in _TOKEN.findall(line) if "/" in t]
    if quoted:
        tokens += [f"{dirs[0]}/{t}" if dirs[0] else t for t in _QUOTED.findall(line)]
    for token in tokens:
        parts = []
        for part in token.split("/"):
            if "*" in part or "?" in part:
                break
            parts.append(part)
        name = "/".join(p for p in parts if p not in ("", "."))
        for base in dirs:
            path = str(PurePosixPath(base) / name) if base else name
            if name and (path in files or path in folders):
                yield path
                break


def step_texts(git: Git, rev: str, files: set[str]) -> Iterator[CommandText]:
    """Each ``run:`` step of the PR workflows at ``rev``, with its environment."""
    for path, workflow, inputs in _pr_workflows(git, rev, files):
        env = _env(workflow, {}, inputs)
        for job in (workflow.get("jobs") or {}).values():
            if isinstance(job, dict):
                yield from _job_texts(path, job, inputs, env)


def _texts(git: Git, rev: str, files: set[str]) -> Iterator[CommandText]:
    """Every command text of the PR workflows, then of the scripts they name."""
    queue = [(t, 0) for t in step_texts(git, rev, files)]
    seen: set[str] = set()
    by_name: dict[str, list[str]] = {}
    for f in files:
        by_name.setdefault(PurePosixPath(f).name, []).append(f)
    while queue:
        text, depth = queue.pop(0)
        yield text
        if depth >= _DEPTH or len(seen) >= _MAX_SCRIPTS:
            continue
        for script in _scripts(text, files, by_name):
            if script in seen:
                continue
            seen.add(script)
            data = git.read_blob(rev, script)
            if data is not None:
                folder = str(PurePosixPath(script).parent).removeprefix(".")
                queue.append((CommandText(text.workflow, script, data.decode("utf-8", "replace"),
                                    tuple(dict.fromkeys((folder, "", *text.dirs)))), depth + 1))


def _scripts(text: CommandText, files: set[str], by_name: dict[str, list[str]]) -> Iterator[str]:
    """The tree's scripts a text names: by path, or by a file name only one file has."""
    for token in _TOKEN.findall(text.text):
        if not token.endswith((".sh", ".py")):
            continue
        name = token.removeprefix("./")
        for base in text.dirs:
            path = str(PurePosixPath(base) / name) if base else name
            if path in files:
                yield path
                break
        else:
            same = by_name.get(PurePosixPath(name).name, [])
            if len(same) == 1:
                yield same[0]


def _pr_workflows(git: Git, rev: str,
                  files: set[str]) -> Iterator[tuple[str, dict[str, Any], dict[str, list[str]]]]:
    """(path, workflow, inputs) of each workflow a PR runs, and each reusable one they
    call with what they pass it."""
    for path in sorted(f for f in files if f.startswith(WORKFLOWS + "/")
                       and f.endswith((".yml", ".yaml")) and f.count("/") == 2):
        workflow = _load(git, rev, path)
        if workflow is None or not _on_pull_request(workflow):
            continue
        yield path, workflow, {}
        for job in (workflow.get("jobs") or {}).values():
            uses = job.get("uses") if isinstance(job, dict) else None
            if isinstance(uses, str) and uses.startswith("./"):
                called = _load(git, rev, uses[2:])
                if called is not None:
                    matrix = _matrix(job)
                    inputs = {k: _expand(str(v), matrix, {})
                              for k, v in (job.get("with") or {}).items()}
                    yield uses[2:], called, {k: v.split() for k, v in inputs.items()}


def _load(git: Git, rev: str, path: str) -> dict[str, Any] | None:
    data = git.read_blob(rev, path)
    try:
        loaded = yaml.load(data, Loader=_LOADER) if data is not None else None
    except yaml.YAMLError:
        return None
    return loaded if isinstance(loaded, dict) else None


def _on_pull_request(workflow: dict[Any, Any]) -> bool:
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    names = [on] if isinstance(on, str) else list(on or [])
    return any(n in ("pull_request", "pull_request_target") for n in names)


def _matrix(job: dict[str, Any]) -> dict[str, list[str]]:
    """A job's matrix values by key (an expression matrix adds none)."""
    matrix = (job.get("strategy") or {}).get("matrix")
    out: dict[str, list[str]] = {}
    if not isinstance(matrix, dict):
        return out
    for key, values in matrix.items():
        if key in ("include", "exclude"):
            continue
        if isinstance(values, list):
            out.setdefault(str(key), []).extend(str(v) for v in values)
    for entry in matrix.get("include") or []:
        for key, value in (entry.items() if isinstance(entry, dict) else ()):
            out.setdefault(str(key), []).append(str(value))
    return out


def _expand(text: str, matrix: dict[str, list[str]], inputs: dict[str, list[str]]) -> str:
    """Each ``${{ matrix.X }}`` and ``${{ inputs.X }}`` as its values, space-separated."""
    def values(found: re.Match[str]) -> str:
        table = matrix if found[1] == "matrix" else inputs
        return " ".join(table.get(found[2], [])) or found[0]

    return _EXPR.sub(values, text)


def _env(holder: dict[str, Any], matrix: dict[str, list[str]],
         inputs: dict[str, list[str]]) -> dict[str, str]:
    """A workflow's, job's or step's ``env:``, matrix and inputs put in."""
    env = holder.get("env")
    return ({str(k): _expand(str(v), matrix, inputs) for k, v in env.items()}
            if isinstance(env, dict) else {})


def _job_texts(workflow: str, job: dict[str, Any], inputs: dict[str, list[str]],
               env: dict[str, str]) -> list[CommandText]:
    matrix = _matrix(job)
    env = env | _env(job, matrix, inputs)
    runs_on = job.get("runs-on") or ""
    runner = _expand(" ".join(map(str, runs_on)) if isinstance(runs_on, list) else str(runs_on),
                     matrix, inputs)
    default = ((job.get("defaults") or {}).get("run") or {}).get("working-directory", "")
    out: list[CommandText] = []
    earlier: list[str] = []
    for step in job.get("steps") or []:
        if isinstance(step, dict) and isinstance(step.get("uses"), str):
            earlier.append(f"uses: {step['uses']}")
        if isinstance(step, dict) and isinstance(step.get("run"), str):
            where = str(step.get("working-directory") or default or "")
            where = _expand(where, matrix, inputs).strip("./") if where else ""
            out.append(CommandText(workflow, workflow, _expand(step["run"], matrix, inputs),
                             tuple(dict.fromkeys((where, ""))),
                             tuple((env | _env(step, matrix, inputs)).items()), runner,
                             tuple(earlier)))
            earlier.append(out[-1].text)
    return out
