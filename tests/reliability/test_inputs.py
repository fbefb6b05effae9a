"""Untrusted inputs of every class, each refused with one line and nothing changed.

Classes: names, hand-edited patchset.toml tables, contrib's own state files
under .contrib/, paths through symlinks (folders, chains of links, a link in a
GIT binary patch), environment variables, and the file system (read-only
folders, names too long).  For every case: exit 1 or 2, exactly one line on
stderr, no traceback, the workspace byte-identical, nothing written outside
the workspace and the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testing.audit import FIGURES
from testing.crash import snapshot
from testing.gitutil import Repo, git
from testing.workspace import Workspace, make_patch


def _permission_bits_bite() -> bool:
    """Whether a read-only folder stops this process (root with CAP_DAC_OVERRIDE: no)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ro"
        folder.mkdir(mode=0o555)
        try:
            (folder / "probe").write_text("x")
        except PermissionError:
            return True
        finally:
            folder.chmod(0o755)
        return False


BITS_BITE = _permission_bits_bite()


@dataclass
class World:
    """A workspace with one patchset proj/keep, an outside folder, and patch inputs."""

    ws: Workspace
    upstream: Repo
    tmp: Path
    good: str  # a good patch adding pkg/new.py
    base: str
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    @property
    def keep(self) -> Path:
        return self.ws.root / "patchsets" / "proj" / "keep"

    @property
    def meta(self) -> Path:
        return self.keep / "patchset.toml"

    @property
    def outside(self) -> Path:
        return self.tmp / "outside"

    def patch_file(self, name: str, data: bytes | str) -> str:
        path = self.tmp / "inputs" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return str(path)


@pytest.fixture
def world(workspace: Workspace, upstream: Repo, tmp_path: Path) -> World:
    patch = make_patch(upstream, tmp_path, {"pkg/new.py": "NEW = 1\n"}, "add new")[0]
    keep = make_patch(upstream, tmp_path, {"pkg/keep.py": "K = 1\n"}, "keep", name="keep")[0]
    assert workspace.run("new", "proj", "keep", "--base", "main", "--patch", str(keep)).code == 0
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "precious.txt").write_text("mine\n")
    return World(workspace, upstream, tmp_path, patch.read_text(), upstream.head())


Case = Callable[[World], tuple[str, ...]]  # prepares the input, returns the command


def _meta(old: str, new: str, *args: str) -> Case:
    def case(w: World) -> tuple[str, ...]:
        text = w.meta.read_text()
        assert old in text, old
        # Without ``old``: a table goes at the end, a top-level key first (the file
        # ends in [[history]] tables, which would take a key written after them).
        added = text + new if new.startswith("[") else new + text
        w.meta.write_text(text.replace(old, new) if old else added)
        return args or ("status", "--no-fetch")
    return case


def _state(name: str, data: object, *args: str) -> Case:
    def case(w: World) -> tuple[str, ...]:
        folder = w.ws.root / ".contrib" / ("txn" if name.endswith(".plan") else "")
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / (name.replace(".plan", ".json"))
        target.write_text(data if isinstance(data, str) else json.dumps(data))
        return args or ("status", "--no-fetch")
    return case


def _env(name: str, value: str, *args: str) -> Case:
    def case(w: World) -> tuple[str, ...]:
        os.environ[name] = value  # restored by the test's monkeypatch
        return args or ("status", "--no-fetch")
    return case


def _config(extra: str) -> Case:
    def case(w: World) -> tuple[str, ...]:
        config = w.ws.root / "contrib.toml"
        config.write_text(config.read_text() + extra)
        return ("status", "--no-fetch")
    return case


def _args(*args: str) -> Case:
    return lambda w: args


def _new(name: str, *patches: Callable[[World], str]) -> Case:
    def case(w: World) -> tuple[str, ...]:
        flags = [part for p in patches for part in ("--patch", p(w))]
        return ("new", "proj", name, "--base", "main", *flags)
    return case


def _good(w: World) -> str:
    return w.patch_file("ok.patch", w.good)


def _version_link(w: World) -> tuple[str, ...]:
    """The current version folder replaced by a symlink to a folder outside."""
    version = w.keep / w.base
    copy = w.outside / "version"
    version.rename(copy)
    version.symlink_to(copy, target_is_directory=True)
    return ("validate", "proj/keep")


def _patchset_link(w: World) -> tuple[str, ...]:
    moved = w.outside / "keep"
    w.keep.rename(moved)
    w.keep.symlink_to(moved, target_is_directory=True)
    return ("sync", "--no-fetch", "proj/keep")


def _cache_link(w: World) -> tuple[str, ...]:
    """The cache's upstreams/ folder moved outside and replaced by a symlink to it."""
    upstreams = Path(os.environ["CONTRIB_CACHE"]) / "upstreams"
    upstreams.rename(w.outside / "upstreams")
    upstreams.symlink_to(w.outside / "upstreams", target_is_directory=True)
    return ("status", "--no-fetch")


def _conflicts_link(w: World) -> tuple[str, ...]:
    """Upstream breaks the patch, and .contrib/conflicts/ leads outside."""
    w.upstream.commit("upstream keep", {"pkg/keep.py": "K = 2\n"})
    (w.outside / "conflicts").mkdir()
    (w.ws.root / ".contrib" / "conflicts").symlink_to(w.outside / "conflicts")
    return ("sync", "--json")


def _patch_file_link(w: World) -> tuple[str, ...]:
    """A patch file of the version replaced by a symlink to a file outside."""
    [name] = (w.keep / w.base / "series").read_text().split()
    patch = w.keep / w.base / name
    (w.outside / name).write_bytes(patch.read_bytes())
    patch.unlink()
    patch.symlink_to(w.outside / name)
    return ("open-pr", "--dry-run", "--force")


def _link_patch(links: list[tuple[str, str]]) -> str:
    """A format-patch adding each (path, target) as a symlink."""
    diffs = []
    for path, target in links:
        diffs.append(f"diff --git a/{path} b/{path}\nnew file mode 120000\n"
                     f"index 0000000..1111111\n--- /dev/null\n+++ b/{path}\n"
                     f"@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n")
    return ("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
            "From: A U Thor <a@example.com>\nDate: Tue, 14 Nov 2023 22:13:20 +0000\n"
            "Subject: [PATCH] links\n\n---\n" + "".join(diffs) + "--\n2.40.0\n")


def _chain(w: World) -> str:
    return w.patch_file("chain.patch", _link_patch([("d1/link", ".."),
                                                    ("d1/d2/l2", "../link/..")]))


def _chain_first(w: World) -> str:
    return w.patch_file("c1.patch", _link_patch([("d1/link", "..")]))


def _chain_second(w: World) -> str:
    return w.patch_file("c2.patch", _link_patch([("d1/d2/l2", "../link/../x")]))


def _binary_link(w: World) -> str:
    """A symlink to /etc/passwd written as a GIT binary patch (no text to check)."""
    repo = w.upstream.path
    attributes = w.tmp / "inputs" / "attributes"
    attributes.parent.mkdir(exist_ok=True)
    attributes.write_text("* binary\n")
    git(repo, "checkout", "-q", "-b", "side-binary")
    (repo / "passwd").write_bytes(b"/etc/passwd")  # a link's blob is its target
    w.upstream.commit("add a link")
    out = git(repo, "-c", f"core.attributesFile={attributes}", "format-patch", "--binary",
              "--full-index", "--stdout", "HEAD~1..HEAD")
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "side-binary")
    assert "GIT binary patch" in out and "new file mode 100644" in out
    out = out.replace("new file mode 100644", "new file mode 120000")
    return w.patch_file("binary-link.patch", out + "\n")


def _cache_file(below: bool) -> Case:
    def case(w: World) -> tuple[str, ...]:
        path = w.tmp / "inputs" / "cachefile"
        path.parent.mkdir(exist_ok=True)
        path.write_text("not a folder\n")
        return _env("CONTRIB_CACHE", str(path / "sub" if below else path), "status")(w)
    return case


def _read_only(path_of: Callable[[World], Path], *args: str) -> Case:
    def case(w: World) -> tuple[str, ...]:
        path = path_of(w)
        path.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode
        path.chmod(0o555)
        w.cleanups.append(lambda: path.chmod(mode))
        return args
    return case


def _moved_keep(w: World) -> Path:
    """The patchset's folder, after upstream moved on (so sync has a version to write)."""
    w.upstream.commit("move on", {"docs/more.md": "more\n"})
    return w.keep


def _cache_dir(w: World) -> Path:
    return Path(os.environ["CONTRIB_CACHE"])


SHA = "0" * 40
CASES: dict[str, tuple[Case, str]] = {
    # names: one pattern, fullmatch (a trailing newline is not a name)
    "patchset name with newline": (_new("foo\n", _good), "invalid patchset name 'foo\\n'"),
    "patchset name too long": (_new("n" * 300, _good), "at most 100 characters"),
    "patchset name starts with a dot": (_new(".x", _good), "invalid patchset name '.x'"),
    "upstream key with newline": (_config('[upstreams."minifer\\n"]\nurl = "."\n'),
                                  "upstream name 'minifer\\n' is invalid"),
    "upstream key too long": (_config(f"[upstreams.{'u' * 101}]\nurl = '.'\n"),
                              "at most 100 characters"),
    "target with newline": (_args("status", "--no-fetch", "proj/keep\n"),
                            "invalid patchset name 'keep\\n'"),
    "target upstream with space": (_args("sync", "pr oj"), "invalid upstream name 'pr oj'"),
    "--continue target with newline": (_args("sync", "--continue", "proj/keep\n"),
                                       "invalid patchset name 'keep\\n'"),
    # patchset.toml: every table typed
    "[sync] result wrongly typed": (_meta("", f"[sync]\nresult = 3\nfrom = '{SHA}'\n"),
                                    "sync.result must be a string"),
    "[sync] result unknown": (_meta("", f"[sync]\nresult = 'moved'\nfrom = '{SHA}'\n", "sync",
                                    "--no-fetch"), "sync.result must be one of"),
    "[sync] from not a sha": (_meta("", "[sync]\nresult = 'rebased'\nfrom = 'zz'\n"),
                              "sync.from must be a 40-hex commit"),
    "[sync] commits negative": (_meta("", f"[sync]\nresult = 'rebased'\nfrom = '{SHA}'\n"
                                          "commits = -1\n"), "must be an integer >= 0"),
    "[sync.details] upstreamed not tables": (_meta("", f"[sync]\nresult = 'upstreamed'\n"
                                                       f"from = '{SHA}'\n[sync.details]\n"
                                                       "upstreamed = [1, 2]\n"),
                                             "must be a table"),
    "[sync] a string": (_meta("", "sync = 'yesterday'\n"), "must be a table"),
    "[pr] number a string": (_meta("", "[pr]\nnumber = '5'\n", "open-pr", "--dry-run"),
                             "pr.number must be an integer"),
    "[pr] pushed_history holds a number": (_meta("", "[pr]\npushed_history = [1]\n"),
                                           "pr.pushed_history must be a list of strings"),
    "[pr] state unknown": (_meta("", "[pr]\nstate = 'maybe'\n"), "pr.state must be one of"),
    "[pr] unknown key": (_meta("", "[pr]\nnumbr = 5\n"), "unknown key 'numbr' in [pr]"),
    "[[requires]] tag_format broken": (_meta("", "[[requires]]\nupstream = 'proj'\n"
                                                 f"commit = '{SHA}'\ntag_format = 'v{{x}}'\n"),
                                       "tag_format must contain {version}"),
    "[[requires]] upstream a number": (_meta("", "[[requires]]\nupstream = 1\ncommit = 'a'\n"),
                                       "requires.upstream must be a string"),
    "[[waivers]] misspelt key": (_meta("", "[[waivers]]\nfile = 'a.cu'\nreason = 'ok'\n"
                                           "line = 3\npatern = 'x'\n"),
                                 "unknown key 'patern' in [waivers]"),
    "[[waivers]] line zero": (_meta("", "[[waivers]]\nfile = 'a.cu'\nreason = 'ok'\nline = 0\n"),
                              "waivers.line must be an integer >= 1"),
    "[[waivers]] bad pattern": (_meta("", "[[waivers]]\nfile = 'a.cu'\nreason = 'ok'\n"
                                          "pattern = '('\n"), "is not a regular expression"),
    "[decisions] value a number": (_meta("", "[decisions]\nwhy = 1\n"),
                                   "decisions.why must be a string"),
    "upstream_status unknown": (_meta('upstream_status = "Pending"',
                                      'upstream_status = "Merged"'),
                                "upstream_status must be one of"),
    "arch a list": (_meta('arch = "sm_120a"', 'arch = ["sm_120a"]'), "arch must be a string"),
    # .contrib state: checked before use, never trusted
    "sync-state a list": (_state("sync-state.json", [1, 2], "sync", "--continue"),
                          "must be a JSON object, not list"),
    "sync-state unknown key": (_state("sync-state.json", {"state_version": 1, "pending": {},
                                                          "extra": 1}, "sync", "--abort"),
                               "only state_version and a 'pending' object"),
    "sync-state wrong types": (_state("sync-state.json", {"state_version": 1, "pending": {
        "proj/keep": {"patchset": "proj/keep", "index": "zero"}}}, "sync", "--no-fetch"),
        "pending['proj/keep'].base must be a str"),
    "sync-state folder elsewhere": (lambda w: _state("sync-state.json", {
        "state_version": 1, "pending": {"proj/keep": {
            "patchset": "proj/keep", "base": SHA, "target": SHA, "breaking": SHA, "head": SHA,
            "index": 0, "patch": "0001-keep.patch", "reason": "conflict",
            "folder": str(w.outside), "files": []}}}, "sync", "--abort")(w),
        "inconsistent values"),
    "sync-state landed not a sha": (lambda w: _state("sync-state.json", {
        "state_version": 1, "pending": {"proj/keep": {
            "patchset": "proj/keep", "base": SHA, "target": SHA, "breaking": SHA, "head": SHA,
            "index": 0, "patch": "0001-keep.patch", "reason": "conflict",
            "folder": str(w.ws.root / ".contrib" / "conflicts" / "proj--keep"), "files": [],
            "landed": {"0002-x.patch": "HEAD~1"}}}}, "sync", "--abort")(w),
        "inconsistent values"),
    "sync-state not JSON": (_state("sync-state.json", "{", "sync", "--no-fetch"), "unreadable"),
    "txn plan a list": (_state("x.plan", [1]), "not a version-1 transaction plan"),
    "txn plan target outside": (lambda w: _state("x.plan", {"version": 1, "ops": [
        {"kind": "file", "staged": str(w.ws.root / ".contrib" / "txn" / "x" / "f"),
         "target": str(w.outside / "precious.txt")}]})(w), "outside"),
    "txn plan unknown kind": (lambda w: _state("x.plan", {"version": 1, "ops": [
        {"kind": "rm", "staged": "a", "target": "b"}]})(w), "ops[0] must be"),
    # paths: nothing written through a symlink, no patch that links outside
    "version folder is a symlink": (_version_link, "is a symlink"),
    "patchset folder is a symlink": (_patchset_link, "is a symlink"),
    "cache folder is a symlink": (_cache_link, "is a symlink"),
    "conflicts folder is a symlink": (_conflicts_link, "is a symlink"),
    "patch file is a symlink": (_patch_file_link, "is a symlink"),
    "symlink chain": (_new("bad", _chain), "leads outside the repository"),
    "symlink chain over two patches": (_new("bad", _chain_first, _chain_second),
                                       "leads outside the repository"),
    "symlink in a GIT binary patch": (_new("bad", _binary_link), "leads outside the repository"),
    # environment
    "CONTRIB_LOCK_TIMEOUT=nan": (_env("CONTRIB_LOCK_TIMEOUT", "nan"), "CONTRIB_LOCK_TIMEOUT"),
    "CONTRIB_LOCK_TIMEOUT=-1": (_env("CONTRIB_LOCK_TIMEOUT", "-1"), "CONTRIB_LOCK_TIMEOUT"),
    "CONTRIB_LOCK_TIMEOUT=inf": (_env("CONTRIB_LOCK_TIMEOUT", "inf"), "CONTRIB_LOCK_TIMEOUT"),
    "SOURCE_DATE_EPOCH=abc": (_env("SOURCE_DATE_EPOCH", "abc", "sync", "--no-fetch"),
                              "SOURCE_DATE_EPOCH='abc'"),
    "SOURCE_DATE_EPOCH far out": (_env("SOURCE_DATE_EPOCH", "9" * 30, "sync", "--no-fetch"),
                                  "SOURCE_DATE_EPOCH"),
    "SOURCE_DATE_EPOCH negative": (_env("SOURCE_DATE_EPOCH", "-5"), "SOURCE_DATE_EPOCH"),
    "CONTRIB_CACHE is a file": (_cache_file(below=False), "not a folder"),
    "CONTRIB_CACHE below a file": (_cache_file(below=True), "is below"),
    # the file system
    "patch path name too long": (_new("ok", lambda w: str(w.tmp / ("p" * 300))), "cannot read"),
}
# Needs the permission bits to bite: root ignores them.
READ_ONLY: dict[str, tuple[Case, str]] = {
    # a writer (status reads without the lock, so it has nothing to refuse)
    "read-only workspace": (_read_only(lambda w: w.ws.root / ".contrib", "sync", "--no-fetch"),
                            "cannot write"),
    "read-only patchset folder": (_read_only(_moved_keep, "sync", "--json"), "is read-only"),
    "read-only cache": (_read_only(_cache_dir, "status", "--no-fetch"), "not writable"),
}


def _check(world: World, label: str, case: Case, expected: str,
           monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CONTRIB_LOCK_TIMEOUT", "SOURCE_DATE_EPOCH", "CONTRIB_CACHE"):
        monkeypatch.setenv(name, os.environ[name])  # the case may change it; undone after
    args = case(world)
    before, outside = snapshot(world.ws.root), snapshot(world.outside)
    around = sorted(p.name for p in world.tmp.iterdir())
    try:
        result = world.ws.run(*args)
    finally:
        for cleanup in world.cleanups:
            cleanup()
    assert result.code in (1, 2), (label, result.code, result.err)
    assert expected in result.err, (label, result.err)
    assert "Traceback" not in result.err + result.out and "internal error" not in result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert snapshot(world.ws.root) == before
    assert snapshot(world.outside) == outside
    assert sorted(p.name for p in world.tmp.iterdir()) == around
    FIGURES[f"untrusted inputs refused cleanly (exit {result.code})"] += 1


@pytest.mark.parametrize("label", list(CASES))
def test_untrusted_input_is_refused_cleanly(world: World, label: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    action, expected = CASES[label]
    _check(world, label, action, expected, monkeypatch)


@pytest.mark.skipif(not BITS_BITE, reason="this user ignores permission bits (root)")
@pytest.mark.parametrize("label", list(READ_ONLY))
def test_read_only_folders_are_refused_cleanly(world: World, label: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    action, expected = READ_ONLY[label]
    _check(world, label, action, expected, monkeypatch)



@pytest.mark.skipif(BITS_BITE or shutil.which("capsh") is None,
                    reason="permission bits already bite here, or no capsh to drop root's")
def test_read_only_cases_also_run_as_root_without_its_file_capabilities(
        tmp_path: Path) -> None:
    """CI runs as root, which ignores permission bits: run the read-only cases again in a
    child with CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped, so they are not skipped."""
    test = f"{__file__}::test_read_only_folders_are_refused_cleanly"
    inner = f"{sys.executable} -m pytest -q -p no:cacheprovider --basetemp={tmp_path} {test}"
    result = subprocess.run(["capsh", "--drop=cap_dac_override,cap_dac_read_search", "--",
                             "-c", inner], capture_output=True, text=True, timeout=600,
                            cwd=Path(__file__).parents[2], check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert f"{len(READ_ONLY)} passed" in result.stdout, result.stdout[-2000:]

def test_every_class_has_several_cases() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize("command", ["sync", "validate"])
def test_a_hand_made_version_with_a_link_outside_is_refused_when_read(
        world: World, command: str) -> None:
    """A version folder edited by hand (not made by `new`): sync and validate refuse it."""
    version = world.keep / world.base
    [name] = (version / "series").read_text().split()
    (version / name).write_text(_link_patch([("d1/link", ".."), ("d1/d2/l2", "../link/..")]))
    world.upstream.commit("move on", {"docs/more.md": "more\n"})
    before, outside = snapshot(world.ws.root), snapshot(world.outside)
    result = world.ws.run(command, "--json")
    assert result.code == 1, result.err
    assert "leads outside the repository" in result.out
    assert "Traceback" not in result.err + result.out
    assert {k: v for k, v in snapshot(world.ws.root).items() if not k.endswith(
        "validation.json")} == before
    assert snapshot(world.outside) == outside
    FIGURES[f"untrusted inputs refused cleanly (exit {result.code})"] += 1
