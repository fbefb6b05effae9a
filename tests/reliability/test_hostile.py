"""A corpus of hostile input: each is refused with one clear line, exit 2, no damage.

For every case: exit 2 (bad input), a message naming the file/object at fault,
no traceback, the existing patchset byte-identical, and nothing written outside
the workspace's private state and the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from testing.audit import FIGURES
from testing.crash import snapshot
from testing.gitutil import Repo
from testing.workspace import Result, Workspace, make_patch


@dataclass
class World:
    ws: Workspace
    upstream: Repo
    tmp: Path
    good: str  # text of a good patch adding pkg/new.py
    base: str

    def patch_file(self, name: str, data: bytes | str) -> str:
        path = self.tmp / "inputs" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return str(path)

    def new(self, name: str, *patches: str, base: str = "main") -> Result:
        flags = [part for p in patches for part in ("--patch", p)]
        return self.ws.run("new", "proj", name, "--base", base, *flags)

    @property
    def version(self) -> Path:
        return self.ws.root / "patchsets" / "proj" / "keep" / self.base


def _mutate(old: str, new: str, name: str) -> Callable[[World], Result]:
    def case(w: World) -> Result:
        assert old in w.good, old
        return w.new("bad", w.patch_file(name, w.good.replace(old, new)))
    return case


def _raw(name: str, data: bytes | str) -> Callable[[World], Result]:
    return lambda w: w.new("bad", w.patch_file(name, data))


def _series(text: str | bytes) -> Callable[[World], Result]:
    def case(w: World) -> Result:
        (w.version / "series").write_bytes(text if isinstance(text, bytes) else text.encode())
        return w.ws.run("status", "--no-fetch")
    return case


def _config(text: str) -> Callable[[World], Result]:
    def case(w: World) -> Result:
        (w.ws.root / "contrib.toml").write_text(text)
        return w.ws.run("status", "--no-fetch")
    return case


def _meta(old: str, new: str) -> Callable[[World], Result]:
    def case(w: World) -> Result:
        meta = w.ws.root / "patchsets" / "proj" / "keep" / "patchset.toml"
        text = meta.read_text()
        # Without ``old``: a top-level line first (the file ends in [[history]] tables).
        meta.write_text(text.replace(old, new) if old else new + text)
        return w.ws.run("status", "--no-fetch")
    return case


def _args(*args: str) -> Callable[[World], Result]:
    return lambda w: w.ws.run(*args)


def _symlink_out(w: World) -> Result:
    text = (w.good.replace("new file mode 100644", "new file mode 120000")
            .replace("+NEW = 1", "+../../../etc/passwd"))
    return w.new("bad", w.patch_file("symlink.patch", text))


def _not_sha_dir(w: World) -> Result:
    (w.version.parent / "v1").mkdir()
    return w.ws.run("status", "--no-fetch")


CASES: dict[str, tuple[Callable[[World], Result], str]] = {
    "not a patch": (_raw("hello.patch", "hello world\n"), "hello.patch"),
    "empty file": (_raw("empty.patch", b""), "empty.patch"),
    "only headers": (lambda w: w.new("bad", w.patch_file("hdr.patch", w.good.split("\n---\n")[0])),
                     "hdr.patch"),
    "truncated hunk": (lambda w: w.new("bad", w.patch_file("trunc.patch",
                                                           w.good.split("+NEW2")[0])),
                       "trunc.patch"),
    "wrong line counts": (_mutate("@@ -0,0 +1,2 @@", "@@ -0,0 +1,7 @@", "counts.patch"),
                          "counts.patch"),
    "garbage hunk header": (_mutate("@@ -0,0 +1,2 @@", "@@ -x,y +z @@", "hdr2.patch"),
                            "hdr2.patch"),
    "dotdot path": (_mutate("pkg/new.py", "../outside.py", "dotdot.patch"), "dotdot.patch"),
    "absolute path": (_mutate("b/pkg/new.py", "/etc/new.py", "abs.patch"), "abs.patch"),
    "into .git": (_mutate("pkg/new.py", ".git/hooks/post-checkout", "hook.patch"), "hook.patch"),
    "symlink outside": (_symlink_out, "symlink.patch"),
    "NUL bytes": (_raw("nul.patch", b"From: a\x00b\n"), "nul.patch"),
    "no author": (_mutate("From: Upstream Dev", "X-Nobody: none", "noauthor.patch"),
                  "noauthor.patch"),
    "does not apply": (_mutate("pkg/new.py", "pkg/core.py", "noapply.patch"), "noapply.patch"),
    "missing patch file": (lambda w: w.new("bad", str(w.tmp / "nope.patch")), "nope.patch"),
    "patch is a folder": (lambda w: w.new("bad", str(w.tmp)), "is a folder"),
    "invalid name": (lambda w: w.new("Bad/Name", w.patch_file("ok.patch", w.good)),
                     "invalid patchset name"),
    "name with dots only": (lambda w: w.new("..", w.patch_file("ok.patch", w.good)),
                            "invalid patchset name"),
    "existing name": (lambda w: w.new("keep", w.patch_file("ok.patch", w.good)),
                      "already exists"),
    "unknown upstream": (lambda w: w.ws.run("new", "nope", "x", "--base", "main", "--patch",
                                            w.patch_file("ok.patch", w.good)),
                         "no upstream 'nope'"),
    "unknown rev": (lambda w: w.new("bad", w.patch_file("ok.patch", w.good), base="v404"),
                    "unknown revision 'v404'"),
    "both sources": (lambda w: w.ws.run("new", "proj", "x", "--base", "main", "--patch",
                                        w.patch_file("ok.patch", w.good), "--commits", "a..b"),
                     "give one of --patch"),
    "commits without repo": (lambda w: w.ws.run("new", "proj", "x", "--base", "main",
                                                "--commits", "a..b"), "--repo PATH"),
    "series names missing file": (_series("0001-keep.patch\nghost.patch\n"), "ghost.patch"),
    "series duplicate": (_series("0001-keep.patch\n0001-keep.patch\n"), "listed twice"),
    "series empty": (_series("# nothing\n\n"), "empty series"),
    "series with path": (_series("../0001-keep.patch\n"), "not a plain patch file name"),
    "series with options": (_series("0001-keep.patch -p1\n"), "not a plain patch file name"),
    "series not utf-8": (_series(b"\xff\xfe0001\n"), "not UTF-8"),
    "version dir not a sha": (_not_sha_dir, "v1"),
    "bad TOML": (_config("[upstreams.proj\n"), "contrib.toml:1"),
    "unknown key": (_config("[upstreams.proj]\nurl = '.'\ncolour = 1\n"), "unknown key 'colour'"),
    "missing url": (_config("[upstreams.proj]\n"), "url is required"),
    "bad meta TOML": (_meta("", "title = \n"), "patchset.toml"),
    "unknown meta key": (_meta("", "flavour = 'x'\n"), "unknown key 'flavour'"),
    "current not a sha": (_meta("current = \"", "current = \"zz"), "current must be"),
    "unknown target": (_args("status", "--no-fetch", "ghost/x"), "unknown target 'ghost/x'"),
    "unknown option": (_args("status", "--frobnicate"), "--frobnicate"),
    # sync / validate / open-pr
    "arch sm_12": (_args("validate", "--arch", "sm_12", "proj/keep"),
                   "unknown GPU architecture 'sm_12'"),
    "arch gfx90a": (_args("validate", "--arch", "gfx90a"), "unknown GPU architecture 'gfx90a'"),
    "arch sm_120x": (_args("validate", "--arch", "sm_120x"), "unknown GPU architecture 'sm_120x'"),
    "arch empty": (_args("validate", "--arch", "", "proj/keep"), "unknown GPU architecture ''"),
    "arch sm_80a": (_args("validate", "--arch", "sm_80a"), "'a' targets start at sm_90a"),
    "new with arch nonsense": (lambda w: w.ws.run("new", "proj", "bad", "--base", "main",
                                                  "--arch", "sm_999", "--patch",
                                                  w.patch_file("ok.patch", w.good)),
                               "unknown GPU architecture 'sm_999'"),
    "meta arch nonsense": (lambda w: (_meta("arch = \"sm_120a\"", "arch = \"hopper\"")(w),
                                      w.ws.run("validate", "proj/keep"))[1],
                           "patchset.toml: arch: unknown GPU architecture 'hopper'"),
    "sync --to unknown rev": (_args("sync", "--to", "v404"), "unknown revision 'v404'"),
    "sync --to with --continue": (_args("sync", "--to", "main", "--continue"),
                                  "--to cannot be combined"),
    "sync --continue and --abort": (_args("sync", "--continue", "--abort"),
                                    "either --continue or --abort"),
    "sync --continue nothing pending": (_args("sync", "--continue", "proj/keep"),
                                        "--continue: no conflict is pending"),
    "sync --abort nothing pending": (_args("sync", "--abort"), "--abort: no conflict is pending"),
    "sync unknown upstream": (_args("sync", "ghost"), "unknown target 'ghost'"),
    "sync unknown patchset": (_args("sync", "proj/ghost"), "no patchset 'ghost'"),
    "validate unknown target": (_args("validate", "ghost/x"), "unknown target 'ghost/x'"),
    "open-pr unknown target": (_args("open-pr", "proj/ghost"), "no patchset 'ghost'"),
    "open-pr fork is upstream": (lambda w: (_config(
        f"[upstreams.proj]\nurl = '{w.upstream.path}'\ngithub = 'o/proj'\nfork = 'o/proj'\n")(w),
        w.ws.run("open-pr", "--dry-run", "proj/keep"))[1], "fork is the upstream itself"),
    "open-pr without validation": (_args("open-pr", "proj/keep"),
                                   "validation.json: not validated (no validation.json; run `contrib validate proj/keep`"),
    "sync --commit outside git": (_args("sync", "--commit"), "--commit needs the workspace"),
    "validate junit into a folder": (lambda w: w.ws.run("validate", "--arch", "sm_120a",
                                                        "--junit", str(w.tmp)),
                                     "--junit"),
    # the edit loop
    "edit unknown target": (_args("edit", "proj/ghost"), "no patchset 'ghost'"),
    "edit with --path and --repo": (lambda w: w.ws.run("edit", "proj/keep", "--path", "a",
                                                       "--repo", "b"), "not both"),
    "edit --repo not a clone": (lambda w: w.ws.run("edit", "proj/keep", "--repo",
                                                   str(w.ws.root / "patchsets")),
                                "not a git repository"),
    "refresh with no edit": (_args("refresh", "proj/keep"), "no edit is open"),
    "refresh a clone without the branch": (lambda w: w.ws.run("refresh", "proj/keep", "--repo",
                                                              str(w.upstream.path)),
                                           "no branch contrib/keep"),
    "diff unknown version": (_args("diff", "proj/keep", "zzzz"), "'zzzz' names no version"),
    "log upstream only": (_args("log", "proj"), "name one patchset as UPSTREAM/NAME"),
    "new --from-pr garbage": (_args("new", "proj", "bad", "--from-pr", "seven"),
                              "give a PR number or a pull request URL"),
    "new --from-pr with --base": (_args("new", "proj", "bad", "--from-pr", "7", "--base", "main"),
                                  "drop --base"),
    "new --from-pr missing": (_args("new", "proj", "bad", "--from-pr", "404"), "PR #404"),
    "new --from-branch option-like": (lambda w: w.ws.run("new", "proj", "bad", "--from-branch",
                                                         str(w.upstream.path), "--upload-pack=x"),
                                      "is not a branch name"),
}
# Cases where the user must act rather than fix their input: exit 1.
ATTENTION = {"open-pr without validation"}


@pytest.fixture
def world(workspace: Workspace, upstream: Repo, tmp_path: Path) -> World:
    patch = make_patch(upstream, tmp_path, {"pkg/new.py": "NEW = 1\nNEW2 = 2\n"}, "add new")[0]
    keep = make_patch(upstream, tmp_path, {"pkg/keep.py": "K = 1\n"}, "keep", name="keep")[0]
    assert workspace.run("new", "proj", "keep", "--base", "main", "--patch", str(keep)).code == 0
    return World(workspace, upstream, tmp_path, patch.read_text(), upstream.head())


@pytest.mark.parametrize("label", list(CASES))
def test_hostile_input_is_refused_cleanly(world: World, label: str) -> None:
    action, expected = CASES[label]
    keep_dir = world.ws.root / "patchsets" / "proj" / "keep"
    patch_before = {p: b for p, b in snapshot(keep_dir).items() if p.endswith(".patch")}
    outside_before = sorted(p.name for p in world.tmp.iterdir())
    result = action(world)
    assert result.code == (1 if label in ATTENTION else 2), (label, result.code, result.err)
    assert expected in result.err, (label, result.err)
    assert "Traceback" not in result.err + result.out
    assert len(result.err.strip().splitlines()) <= 8, result.err
    assert not (world.ws.root / "patchsets" / "proj" / "bad").exists()
    # The cases edit contrib.toml, patchset.toml or series on purpose; the
    # patches themselves are never touched by a refused command.
    assert {p: b for p, b in snapshot(keep_dir).items() if p.endswith(".patch")} == patch_before
    assert sorted(p.name for p in world.tmp.iterdir()) in (outside_before,
                                                           sorted([*outside_before, "inputs"]))
    FIGURES[f"hostile inputs rejected cleanly (exit {result.code})"] += 1


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30
