"""Helpers shared by the sync tests: make a patchset, read its state back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomlkit

from testing.gitutil import Repo, git
from testing.workspace import SAMPLE, Workspace

# The sync tests patch f3 of the sample upstream's pkg/core.py.
CORE = SAMPLE["pkg/core.py"]
F3_PATCH = CORE.replace("    return 3\n", "    return 33\n")


def add_patchset(ws: Workspace, repo: Repo, tmp_path: Path, name: str,
                 commits: list[tuple[str, dict[str, str | None]]],
                 author: str = "Patch Author") -> str:
    """Commit ``commits`` on a side branch of ``repo``, `contrib new` them; returns the base."""
    base = repo.head()
    git(repo.path, "checkout", "-q", "-b", f"side-{name}")
    who, repo.who = repo.who, author
    for message, files in commits:
        repo.commit(message, files)
    repo.who = who
    out = tmp_path / f"patches-{name}"
    paths = repo.format_patch(f"{base}..HEAD", out)
    git(repo.path, "checkout", "-q", "main")
    git(repo.path, "branch", "-q", "-D", f"side-{name}")
    result = ws.run("new", "proj", name, "--base", base, *[a for p in paths
                                                           for a in ("--patch", str(p))])
    assert result.code == 0, result.err
    return base


def meta(ws: Workspace, name: str) -> dict[str, Any]:
    text = (ws.root / "patchsets" / "proj" / name / "patchset.toml").read_text()
    return tomlkit.parse(text).unwrap()


def version_dir(ws: Workspace, name: str, sha: str) -> Path:
    return ws.root / "patchsets" / "proj" / name / sha


def series(ws: Workspace, name: str, sha: str) -> list[str]:
    return (version_dir(ws, name, sha) / "series").read_text().split()


def applied_file(repo: Repo, ws: Workspace, name: str, sha: str, path: str,
                 tmp_path: Path) -> str:
    """``path`` after `git am` of the version at ``sha`` on a fresh clone of ``repo``."""
    clone = tmp_path / f"check-{name}-{sha[:8]}"
    git(tmp_path, "clone", "-q", str(repo.path), str(clone))
    git(clone, "checkout", "-q", sha)
    folder = version_dir(ws, name, sha)
    patches = [str(folder / n) for n in series(ws, name, sha)]
    git(clone, "am", "-q", *patches, env={
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})
    return (clone / path).read_text()


def sync_json(ws: Workspace, *args: str) -> tuple[int, dict[str, Any]]:
    """Run `contrib sync --json ARGS`; (exit code, the one result of a single patchset)."""
    result = ws.run("sync", "--json", *args)
    doc = result.json
    assert isinstance(doc, dict), result.out
    assert "results" in doc, (result.out, result.err)
    results = doc["results"]
    assert isinstance(results, list)
    return result.code, results[0] if len(results) == 1 else {"all": results}


def commit_workspace(ws: Workspace) -> None:
    """Make the workspace folder a git repository holding its current files (for --commit)."""
    git(ws.root, "init", "-q")
    git(ws.root, "add", "-A")
    git(ws.root, "commit", "-qm", "workspace", env={
        "GIT_AUTHOR_NAME": "w", "GIT_AUTHOR_EMAIL": "w@e", "GIT_COMMITTER_NAME": "w",
        "GIT_COMMITTER_EMAIL": "w@e"})


# -- editing a patchset as a branch --------------------------------------------

USER = {"GIT_AUTHOR_NAME": "Edit User", "GIT_AUTHOR_EMAIL": "edit@example.com",
        "GIT_AUTHOR_DATE": "1700100000 +0000", "GIT_COMMITTER_NAME": "Edit User",
        "GIT_COMMITTER_EMAIL": "edit@example.com", "GIT_COMMITTER_DATE": "1700100000 +0000"}
F3_F5 = F3_PATCH.replace("    return 5\n", "    return 55\n")



def commit_in(path: Path, message: str, files: dict[str, str], *args: str) -> None:
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", *args, "-m", message, env=USER)


# The landed-detection scenes: a helper the patch adds after f3, as upstream's squash
# may bring it (reworded in review, at the same place).
HELPER = ('def scaled(values, factor):\n'
          '    """Scale every value by factor."""\n'
          '    if factor == 0:\n'
          '        raise ValueError("factor must not be zero")\n'
          '    out = []\n'
          '    for value in values:\n'
          '        out.append(value * factor)\n'
          '    return out\n\n\n')
AFTER_F3 = "def f4():\n"
OURS = CORE.replace(AFTER_F3, HELPER + AFTER_F3)
REVIEWED = OURS.replace('"factor must not be zero"', '"factor is zero: nothing to scale"')


# Two JIT specs with the same gate line, as flashinfer's jit/comm.py has them: a patch
# widening one must not read as landed when upstream widens the other.
TWIN_GATES = ('def gen_mixed_comm_module():\n'
         '    flags = nvcc_flags(\n'
         '        supported_major_versions=[9, 10]\n'
         '    ) + ["-rdc=true"]\n'
         '    return spec("mixed", flags)\n'
         '\n\n'
         'def gen_trtllm_comm_module():\n'
         '    flags = nvcc_flags(\n'
         '        supported_major_versions=[9, 10]\n'
         '    )\n'
         '    return spec("trtllm", flags)\n')
