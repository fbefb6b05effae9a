"""A second hostile corpus, for the parts 0.4 added: selectors and targets, retention,
the pruned-version copies and a moved workspace's state.

Refused cases: exit 2, one line naming the file or object, no traceback, the
patches untouched, nothing written outside the workspace.  Kept cases: the
command succeeds and the user's file or state is still there, byte for byte.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from testing.audit import FIGURES
from testing.crash import snapshot
from testing.gitutil import Repo, git
from testing.synchelp import commit_workspace
from testing.workspace import Result, Workspace, make_patch

IDENTITY = {"GIT_AUTHOR_NAME": "w", "GIT_AUTHOR_EMAIL": "w@e", "GIT_COMMITTER_NAME": "w",
            "GIT_COMMITTER_EMAIL": "w@e"}


@dataclass
class World:
    ws: Workspace
    upstream: Repo
    tmp: Path
    first: str  # the first version's base, pruned by `carried`

    @property
    def folder(self) -> Path:
        return self.ws.root / "patchsets" / "proj" / "keep"

    @property
    def meta(self) -> Path:
        return self.folder / "patchset.toml"

    def targets(self, *branches: str, extra: str = "") -> None:
        listed = ", ".join(f'"{b}"' for b in branches)
        self.meta.write_text(f"targets = [{listed}]\n" + self.meta.read_text() + extra)

    def carried(self, times: int = 2, *args: str) -> None:
        """keep = 0, then ``times`` upstream commits each synced (``args``: ``--commit``):
        the first version is pruned unless something holds it."""
        self.ws.write_config("\n[versions]\nkeep = 0\n")
        git(self.ws.root, "commit", "-qm", "keep 0", "--", "contrib.toml", env=IDENTITY)
        for i in range(times):
            self.upstream.commit(f"docs: {i}", {f"docs/h{i}.md": f"{i}\n"})
            done = self.ws.run("sync", *args)
            assert done.code == 0, done.err

    def state(self) -> Path:
        return self.ws.root / ".contrib"


def _status(*args: str) -> Callable[[World], Result]:
    return lambda w: w.ws.run("status", "--no-fetch", *args)


def _two(*branches: str, extra: str = "",
         then: tuple[str, ...] = ("status", "--no-fetch")) -> Callable[[World], Result]:
    def case(w: World) -> Result:
        w.targets(*branches, extra=extra)
        return w.ws.run(*then)
    return case


def _ghost(make: Callable[[Path], None]) -> Callable[[World], Result]:
    def case(w: World) -> Result:
        folder = w.folder.parent / "ghost"
        folder.mkdir()
        make(folder)
        return w.ws.run("status", "--no-fetch")
    return case


def _pruned_link(rel: str) -> Callable[[World], Result]:
    def case(w: World) -> Result:
        w.carried(2, "--commit")
        outside = w.tmp / "outside"
        outside.mkdir()
        link = w.state() / rel.replace("FIRST", w.first)
        shutil.rmtree(w.state() / "pruned", ignore_errors=True)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(outside, target_is_directory=True)
        result = w.ws.run("log", "proj/keep")
        assert list(outside.iterdir()) == [], "written through the link"
        outside.rmdir()
        return result
    return case


def _foreign_state(w: World) -> Result:
    state = w.state() / "sync-state.json"
    state.parent.mkdir(exist_ok=True)
    sha = "a" * 40
    state.write_text('{"version": 1, "pending": {"proj/keep": {"patchset": "proj/keep", '
                     f'"base": "{sha}", "target": "{sha}", "breaking": "{sha}", "head": "{sha}", '
                     '"index": 0, "patch": "0001-x.patch", "reason": "conflict", '
                     '"folder": "/somewhere/else/entirely"}}}\n')
    return w.ws.run("sync", "--no-fetch")


REFUSED: dict[str, tuple[Callable[[World], Result], str]] = {
    "UP//": (_status("proj//"), "proj//"),
    "UP/@BRANCH": (_status("proj/@main"), "proj/@main"),
    "UP@BRANCH": (_status("proj@main"), "proj@main"),
    "UP/NAME@": (_status("proj/keep@"), "after the @"),
    "UP/NAME@..": (_status("proj/keep@a..b"), "after the @"),
    "UP/NAME/@BRANCH": (_status("proj/keep/@main"), "proj/keep/@main"),
    "UP//NAME": (_status("proj//keep"), "proj//keep"),
    "UP/NAME//": (_status("proj/keep//"), "proj/keep//"),
    "unknown target branch": (_two("main", "release-1", then=("status", "--no-fetch",
                                                              "proj/keep@nope")), "nope"),
    "dangling patchset.toml": (_ghost(lambda f: (f / "patchset.toml").symlink_to(f / "x")),
                               "ghost/patchset.toml"),
    "patchset.toml a folder": (_ghost(lambda f: (f / "patchset.toml").mkdir()),
                               "ghost/patchset.toml"),
    "patchset.toml a link to a folder": (
        _ghost(lambda f: (f / "patchset.toml").symlink_to(f.parent, target_is_directory=True)),
        "ghost/patchset.toml"),
    "status: branch upstream lacks": (_two("main", "release-9", then=("status",)),
                                      "patchset.toml:1"),
    "validate: branch upstream lacks": (_two("main", "release-9", then=("validate",)),
                                        "patchset.toml:1"),
    "sync: branch upstream lacks": (_two("release-9", "main", then=("sync",)),
                                    "patchset.toml:1"),
    "a branch twice": (_two("main", "main"), "twice"),
    "a branch with ..": (_two("main", "re..lease"), "targets"),
    "blank target title": (_two("main", "release-1", extra='\n[target.release-1]\ntitle = " "\n'),
                           "title"),
    "target title not a string": (
        _two("main", "release-1", extra="\n[target.release-1]\ntitle = 5\n"), "title"),
    "state of a branch not a target": (
        _two("main", "release-1", extra='\n[target.release-2]\ntitle = "x"\n'), "release-2"),
    "state of the first target as a table": (
        _two("main", "release-1", extra='\n[target.main]\ntitle = "x"\n'), "main"),
    "edit of two targets without @": (_two("main", "release-1", then=("edit", "proj/keep")),
                                      "proj/keep@release-1"),
    "edit of a branch not a target": (_two("main", "release-1", then=("edit", "proj/keep@x")),
                                      "proj/keep@x"),
    "pruned cache a symlink": (_pruned_link("pruned"), "symlink"),
    "pruned patchset folder a symlink": (_pruned_link("pruned/proj--keep"), "symlink"),
    "pruned version copy a symlink": (_pruned_link("pruned/proj--keep/FIRST"), "symlink"),
    "conflict folder elsewhere": (_foreign_state, "sync-state.json"),
    "version folder not a sha": (lambda w: (w.folder / "notes").mkdir() or w.ws.run(
        "status", "--no-fetch"), "notes"),
}


def _ignored(w: World) -> Path:
    (w.ws.root / ".gitignore").write_text("*.local\n")
    git(w.ws.root, "add", ".gitignore")
    git(w.ws.root, "commit", "-qm", "ignore", env=IDENTITY)
    path = w.folder / w.first / "mine.local"
    path.write_text("notes no commit holds\n")
    return path


def _untracked(w: World) -> Path:
    path = w.folder / w.first / "NOTES"
    path.write_text("not added\n")
    return path


def _edited(w: World) -> Path:
    [patch] = sorted((w.folder / w.first).glob("*.patch"))
    patch.write_text(patch.read_text() + "\n")
    return patch


def _nested(w: World) -> Path:
    path = w.folder / w.first / "deep" / "er" / "notes.txt"
    path.parent.mkdir(parents=True)
    path.write_text("nested\n")
    return path


KEPT: dict[str, Callable[[World], Path]] = {
    "an ignored file in an old version": _ignored,
    "an untracked file in an old version": _untracked,
    "an edited patch in an old version": _edited,
    "a nested untracked file in an old version": _nested,
}


@pytest.fixture
def world(workspace: Workspace, upstream: Repo, tmp_path: Path) -> World:
    keep = make_patch(upstream, tmp_path, {"pkg/keep.py": "K = 1\n"}, "keep", name="keep")[0]
    assert workspace.run("new", "proj", "keep", "--base", "main", "--patch", str(keep)).code == 0
    git(upstream.path, "branch", "release-1")
    commit_workspace(workspace)
    return World(workspace, upstream, tmp_path, upstream.head())


@pytest.mark.parametrize("label", list(REFUSED))
def test_hostile_input_to_the_new_parts_is_refused_cleanly(world: World, label: str) -> None:
    action, expected = REFUSED[label]
    patches = {p: b for p, b in snapshot(world.folder).items() if p.endswith(".patch")}
    outside = sorted(p.name for p in world.tmp.iterdir())
    result = action(world)
    assert result.code == 2, (label, result.code, result.out, result.err)
    assert expected in result.err, (label, result.err)
    assert "Traceback" not in result.err + result.out
    assert len(result.err.strip().splitlines()) <= 8, result.err
    if label not in ("pruned cache a symlink", "pruned patchset folder a symlink",
                     "pruned version copy a symlink"):  # those carried new versions first
        assert {p: b for p, b in snapshot(world.folder).items()
                if p.endswith(".patch")} == patches
    assert sorted(p.name for p in world.tmp.iterdir()) == outside
    FIGURES["hostile inputs to 0.4's parts rejected cleanly (exit 2)"] += 1


@pytest.mark.parametrize("label", list(KEPT))
def test_a_users_file_in_an_old_version_is_never_pruned(world: World, label: str) -> None:
    git(world.ws.root, "commit", "-qm", "start", "--allow-empty", env=IDENTITY)
    path = KEPT[label](world)
    before = path.read_bytes()
    world.carried(3)  # no --commit: HEAD holds the old folder, the user's change does not
    assert path.read_bytes() == before, label
    log = world.ws.run("log", "proj/keep")
    assert log.code == 0 and "Traceback" not in log.err
    FIGURES["user files kept by retention"] += 1


def test_the_second_corpus_is_large_enough() -> None:
    assert len(REFUSED) + len(KEPT) >= 30
