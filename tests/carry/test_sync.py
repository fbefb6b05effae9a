"""`contrib sync`: carry, no fuzz, upstreamed detection, rewritten history, --commit."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testing.gitutil import Repo, git
from testing.histories import (
    Change,
    fast_import,
    filler,
    lookalike,
    module,
    replace_in,
    rewrite_history,
)
from testing.synchelp import (
    CORE,
    F3_PATCH,
    add_patchset,
    applied_file,
    commit_workspace,
    meta,
    series,
    sync_json,
    version_dir,
)
from testing.workspace import SAMPLE, Workspace


def test_context_drift_rebases_and_second_run_is_unchanged(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    base = add_patchset(workspace, upstream, tmp_path, "f3",
                        [("core: make f3 return 33\n\nSigned-off-by: Patch Author "
                          "<patch.author@example.com>", {"pkg/core.py": F3_PATCH})])
    header = "".join(f"CONSTANT_{i} = {i}\n" for i in range(300))
    fast_import(upstream, [Change("core: add constants", {"pkg/core.py": header + CORE}),
                           *filler(20)])
    tip = upstream.head()
    code, res = sync_json(workspace)
    assert code == 0, res
    assert res["result"] == "rebased" and res["version"] == tip and res["target"] == tip
    assert res["commits"] == 21 and res["probes"] == 1
    doc = meta(workspace, "f3")
    assert doc["current"] == tip
    assert doc["sync"]["result"] == "rebased" and doc["sync"]["from"] == base
    assert version_dir(workspace, "f3", base).is_dir(), "old versions are kept"
    patch = (version_dir(workspace, "f3", tip) / series(workspace, "f3", tip)[0]).read_text()
    assert "@@ -311,7 +311,7 @@ def f2():" in patch  # carried 300 lines down, same section
    assert "From: Patch Author <patch.author@example.com>" in patch
    assert "Signed-off-by: Patch Author <patch.author@example.com>" in patch
    carried = applied_file(upstream, workspace, "f3", tip, "pkg/core.py", tmp_path)
    assert carried == header + F3_PATCH
    code, again = sync_json(workspace)
    assert code == 0 and again["result"] == "unchanged"
    assert meta(workspace, "f3") == doc


@pytest.mark.parametrize("edit", [("a = 1", "a = 10"), ("c = 3", "c = 30"),
                                  ("e = 5", "e = 50")])
def test_lookalike_is_never_carried_into_the_wrong_function(
        workspace: Workspace, upstream: Repo, tmp_path: Path, edit: tuple[str, str]) -> None:
    upstream.commit("add twins", {"pkg/twins.py": lookalike()})
    patched = replace_in(lookalike(), "alpha", "d = 4", "d = 44")
    add_patchset(workspace, upstream, tmp_path, "twin",
                 [("twins: alpha d = 44", {"pkg/twins.py": patched})])
    # Upstream edits alpha inside the hunk's context: GNU patch with fuzz (or a
    # plain apply at an offset) would now find the untouched context in beta.
    upstream.commit("twins: alpha edit", {"pkg/twins.py": replace_in(
        lookalike(), "alpha", *edit)})
    tip = upstream.head()
    code, res = sync_json(workspace)
    if res["result"] == "rebased":
        assert code == 0
        text = applied_file(upstream, workspace, "twin", tip, "pkg/twins.py", tmp_path)
        alpha, beta = text.split("def beta():")
        assert "d = 44" in alpha and edit[1] in alpha and "d = 44" not in beta
    else:
        assert code == 1 and res["result"] == "conflict", res
        assert res["conflict"]["reason"] in ("conflict", "moved")


def test_lookalike_without_base_blobs_is_moved(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    """No pre-image blobs (history rewritten, objects gone): git falls back to a
    plain apply, which lands in beta; the moved guard must refuse it."""
    workspace.write_config()
    config = workspace.root / "contrib.toml"
    config.write_text(config.read_text().replace(f'url = "{upstream.path}"',
                                                 f'url = "file://{upstream.path}"'))
    upstream.commit("add twins", {"pkg/twins.py": lookalike()})
    patched = replace_in(lookalike(), "alpha", "d = 4", "d = 44")
    add_patchset(workspace, upstream, tmp_path, "twin",
                 [("twins: alpha d = 44", {"pkg/twins.py": patched})])
    files = dict(SAMPLE, **{"pkg/twins.py": replace_in(lookalike(), "alpha", "a = 1", "a = 10")})
    rewrite_history(upstream, files, "squashed history")
    shutil.rmtree(os.environ["CONTRIB_CACHE"])
    code, res = sync_json(workspace)
    assert code == 1 and res["result"] == "conflict", res
    assert res["conflict"]["reason"] == "moved"
    assert any("alpha" in h and "beta" in h for h in res["conflict"]["hunks"]), res
    assert "no longer in the upstream cache" in " ".join(res["notes"])
    worktree = Path(res["conflict"]["worktree"])
    assert "d = 44" not in (worktree / "pkg/twins.py").read_text(), "not applied in the twin"
    nothing = workspace.run("sync", "--continue")
    assert nothing.code == 1 and "by hand where it belongs" in nothing.err
    fixed = replace_in(files["pkg/twins.py"], "alpha", "d = 4", "d = 44")
    (worktree / "pkg/twins.py").write_text(fixed)
    code, res = sync_json(workspace, "--continue")
    assert code == 0 and res["result"] == "rebased", res
    assert applied_file(upstream, workspace, "twin", res["version"], "pkg/twins.py",
                        tmp_path) == fixed


def test_upstream_lands_the_same_change(workspace: Workspace, upstream: Repo,
                                        tmp_path: Path) -> None:
    base = add_patchset(workspace, upstream, tmp_path, "f3",
                        [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    before = filler(30)
    # Upstream's version differs around the change (a comment, f4 tweaked), so a
    # 3-way apply conflicts; the effect is nevertheless the same.
    landed = F3_PATCH.replace("def f3():\n", "def f3():\n    # thirty-three, see #1234\n") \
        .replace("return 4\n", "return 4  # four\n")
    shas = fast_import(upstream, [*before, Change("core: f3 returns 33 (#1234)",
                                                  {"pkg/core.py": landed}, who="Core Dev"),
                                  *filler(40, start=30)])
    landing = shas[30]
    code, res = sync_json(workspace)
    assert code == 0, res
    assert res["result"] == "upstreamed"
    [(up)] = res["upstreamed"]
    assert up["patch"] == "0001-core-make-f3-return-33.patch" and up["how"] == "present"
    assert up["commit"]["sha"] == landing
    assert up["commit"]["pr"] == 1234 and up["commit"]["subject"] == "core: f3 returns 33 (#1234)"
    assert res["probes"] <= 1 + 7
    doc = meta(workspace, "f3")
    assert doc["current"] == base and doc["upstream_status"] == "Upstreamed"
    assert doc["sync"]["result"] == "upstreamed"
    assert doc["sync"]["details"]["upstreamed"][0]["sha"] == landing
    fast_import(upstream, filler(5, start=70))
    code, again = sync_json(workspace)  # stays upstreamed without probing again
    assert code == 0 and again["result"] == "upstreamed" and again["probes"] == 0
    assert again["upstreamed"][0]["commit"]["sha"] == landing
    assert meta(workspace, "f3") == doc


def test_base_on_a_release_branch_bisects_from_the_merge_base(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    """Like the flashinfer backport made at a release tag: the base is not an
    ancestor of main, yet the landing commit on main is still found."""
    fork = upstream.head()
    git(upstream.path, "branch", "-q", "release", fork)
    [release] = fast_import(upstream, [Change("cherry-pick: docs (#9)", {"docs/rel.md": "r\n"})],
                            branch="release")
    git(upstream.path, "checkout", "-q", "release")
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    git(upstream.path, "checkout", "-q", "main")
    landing = Change("feat: f3 returns 33 (#3903)", {"pkg/core.py": F3_PATCH})
    shas = fast_import(upstream, [*filler(12), landing, *filler(9, start=12)])
    code, res = sync_json(workspace)
    assert code == 0 and res["result"] == "upstreamed", res
    assert res["base"] == release
    assert res["upstreamed"][0]["commit"]["sha"] == shas[12]
    assert res["upstreamed"][0]["commit"]["pr"] == 3903
    assert "merge base" in " ".join(res["notes"])


def test_a_broken_version_is_an_error_and_others_still_sync(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    base = add_patchset(workspace, upstream, tmp_path, "f3",
                        [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    add_patchset(workspace, upstream, tmp_path, "f5",
                 [("core: make f5 return 55", {"pkg/core.py": CORE.replace(
                     "    return 5\n", "    return 55\n")})])
    patch = version_dir(workspace, "f3", base) / series(workspace, "f3", base)[0]
    patch.write_text(patch.read_text().replace(" def f4():", " def f4(x):"))
    fast_import(upstream, filler(3))
    result = workspace.run("sync", "--json")
    assert result.code == 1
    by_name = {r["patchset"]: r for r in result.json["results"]}  # type: ignore[index]
    assert by_name["proj/f3"]["result"] == "error"
    assert "does not apply" in by_name["proj/f3"]["error"]
    assert by_name["proj/f5"]["result"] == "rebased"


def test_upstream_lands_identical_change_tree_unchanged(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    same = Change("Make f3 return 33 (#77)", {"pkg/core.py": F3_PATCH})
    shas = fast_import(upstream, [*filler(5), same, *filler(3, start=5)])
    code, res = sync_json(workspace)
    assert code == 0 and res["result"] == "upstreamed"
    assert res["upstreamed"][0]["how"] == "empty"
    assert res["upstreamed"][0]["commit"]["sha"] == shas[5]
    assert res["upstreamed"][0]["commit"]["pr"] == 77


def test_half_of_a_two_patch_series_upstreamed(workspace: Workspace, upstream: Repo,
                                               tmp_path: Path) -> None:
    step1 = CORE.replace("    return 3\n", "    return 33\n")
    step2 = step1.replace("    return 12\n", "    return 1212\n")
    add_patchset(workspace, upstream, tmp_path, "two",
                 [("core: f3 returns 33", {"pkg/core.py": step1}),
                  ("core: f12 returns 1212", {"pkg/core.py": step2})])
    half = Change("core: f3 returns 33 (#501)", {"pkg/core.py": step1})
    shas = fast_import(upstream, [*filler(10), half, *filler(10, start=10)])
    tip = upstream.head()
    code, res = sync_json(workspace)
    assert code == 0, res
    assert res["result"] == "partially-upstreamed"
    assert res["patches"] == ["0001-core-f12-returns-1212.patch"]
    assert [u["patch"] for u in res["upstreamed"]] == ["0001-core-f3-returns-33.patch"]
    assert res["upstreamed"][0]["commit"]["sha"] == shas[10]
    assert res["upstreamed"][0]["commit"]["pr"] == 501
    assert applied_file(upstream, workspace, "two", tip, "pkg/core.py", tmp_path) == step2
    assert meta(workspace, "two")["current"] == tip


def test_merge_commits_on_the_first_parent_path(workspace: Workspace, upstream: Repo,
                                                tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    fork_point = upstream.head()
    fast_import(upstream, filler(5))
    git(upstream.path, "branch", "-q", "feature", fork_point)
    fast_import(upstream, [Change("feature: f3 returns 3.0", {"pkg/core.py": CORE.replace(
        "    return 3\n", "    return 3.0\n")}), *filler(3, prefix="feat")], branch="feature")
    feature = git(upstream.path, "rev-parse", "feature")
    merged = fast_import(upstream, [Change("Merge pull request #42 from dev/feature",
                                           {"pkg/core.py": CORE.replace("    return 3\n",
                                                                        "    return 3.0\n"),
                                            "feat/n0.txt": "entry 0\n", "feat/n1.txt": "entry 1\n",
                                            "feat/n2.txt": "entry 2\n"}, merge=feature),
                                    *filler(4, start=5)])
    code, res = sync_json(workspace)
    assert code == 1 and res["result"] == "conflict"
    commit = res["conflict"]["commit"]
    assert commit["sha"] == merged[0], "the merge on the first-parent path is named"
    assert commit["pr"] is None and commit["subject"].startswith("Merge pull request #42")
    assert res["conflict"]["files"] == ["pkg/core.py"]


def test_merges_without_conflict_rebase(workspace: Workspace, upstream: Repo,
                                        tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    git(upstream.path, "checkout", "-q", "-b", "side")
    upstream.commit("side: docs", {"docs/side.md": "side\n"})
    git(upstream.path, "checkout", "-q", "main")
    upstream.commit("main: f10", {"pkg/core.py": CORE.replace("return 10\n", "return 100\n")})
    tip = upstream.merge("side", "Merge branch 'side'")
    code, res = sync_json(workspace)
    assert code == 0 and res["result"] == "rebased" and res["version"] == tip
    assert applied_file(upstream, workspace, "f3", tip, "pkg/core.py", tmp_path) == \
        F3_PATCH.replace("return 10\n", "return 100\n")


def test_rewritten_history_falls_back_to_three_way_at_target(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    base = add_patchset(workspace, upstream, tmp_path, "f3",
                        [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    assert workspace.run("sync", "--no-fetch").code == 0  # the cache knows the old base
    new_core = CORE.replace("return 18\n", "return 1818\n")
    tip = rewrite_history(upstream, dict(SAMPLE, **{"pkg/core.py": new_core}), "squash")
    code, res = sync_json(workspace)
    assert code == 0, res
    assert res["result"] == "rebased" and res["version"] == tip
    assert f"base {base[:12]} is not an ancestor" in " ".join(res["notes"])
    assert applied_file(upstream, workspace, "f3", tip, "pkg/core.py", tmp_path) == \
        new_core.replace("    return 3\n", "    return 33\n")


def test_to_pins_the_target(workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    shas = fast_import(upstream, filler(10))
    code, res = sync_json(workspace, "--to", shas[3])
    assert code == 0 and res["version"] == shas[3] and res["commits"] == 4
    bad = workspace.run("sync", "--to", "no-such-rev")
    assert bad.code == 2 and "unknown revision 'no-such-rev'" in bad.err


def test_commit_makes_exactly_one_commit(workspace: Workspace, upstream: Repo,
                                         tmp_path: Path) -> None:
    refused = workspace.run("sync", "--commit")
    assert refused.code == 2 and "git repository" in refused.err
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    add_patchset(workspace, upstream, tmp_path, "f5",
                 [("core: make f5 return 55", {"pkg/core.py": CORE.replace(
                     "    return 5\n", "    return 55\n")})])
    commit_workspace(workspace)
    fast_import(upstream, filler(57))
    tip = upstream.head()
    result = workspace.run("sync", "--commit", "proj/f3")
    assert result.code == 0, result.err
    log = git(workspace.root, "log", "--format=%s").splitlines()
    assert log == [f"proj/f3: rebase onto {tip[:7]} (+57 commits)", "workspace"]
    assert git(workspace.root, "status", "--porcelain") == "", "everything changed is committed"
    both = workspace.run("sync", "--commit")
    assert both.code == 0
    log = git(workspace.root, "log", "--format=%B", "-1")
    assert log.startswith("sync 1 patchsets") or log.startswith("proj/f5: rebase onto")
    assert len(git(workspace.root, "log", "--format=%h").splitlines()) == 3
    nothing = workspace.run("sync", "--commit")
    assert nothing.code == 0
    assert len(git(workspace.root, "log", "--format=%h").splitlines()) == 3


def test_bad_input_and_human_output(workspace: Workspace, upstream: Repo,
                                    tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    unknown = workspace.run("sync", "proj/nope")
    assert unknown.code == 2 and "no patchset 'nope'" in unknown.err
    both = workspace.run("sync", "--continue", "--abort")
    assert both.code == 2 and "either --continue or --abort" in both.err
    nothing = workspace.run("sync", "--continue")
    assert nothing.code == 2 and "no conflict is pending" in nothing.err
    fast_import(upstream, filler(3))
    human = workspace.run("sync")
    assert human.code == 0
    assert "proj/f3" in human.out and "rebased" in human.out


def test_new_and_deleted_files_are_carried(workspace: Workspace, upstream: Repo,
                                           tmp_path: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "files",
                 [("add a plugin, drop the readme",
                   {"plugins/sm120/gate.py": "ARCHS = [9, 10, 12]\n", "README.md": None}),
                  ("core: f3 uses the plugin", {"pkg/core.py": F3_PATCH})])
    fast_import(upstream, [Change("plugins: base", {"plugins/base.py": "BASE = 1\n"}),
                           Change("core: f19", {"pkg/core.py": CORE.replace("return 19\n",
                                                                             "return 190\n")})])
    tip = upstream.head()
    code, res = sync_json(workspace)
    assert code == 0 and res["result"] == "rebased", res
    clone_file = applied_file(upstream, workspace, "files", tip, "plugins/sm120/gate.py",
                              tmp_path)
    assert clone_file == "ARCHS = [9, 10, 12]\n"
    tree = git(upstream.path, "ls-tree", "-r", "--name-only", tip)
    assert "plugins/base.py" in tree
    patch = (version_dir(workspace, "files", tip) / series(workspace, "files", tip)[0]).read_text()
    assert "deleted file mode 100644" in patch and "new file mode 100644" in patch


def test_already_upstream_after_a_rewrite_is_found_by_reverse_apply(
        workspace: Workspace, upstream: Repo, tmp_path: Path) -> None:
    config = workspace.root / "contrib.toml"
    config.write_text(config.read_text().replace(f'url = "{upstream.path}"',
                                                 f'url = "file://{upstream.path}"'))
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    rewrite_history(upstream, dict(SAMPLE, **{"pkg/core.py": F3_PATCH.replace(
        "return 7\n", "return 77\n")}), "squashed, with f3 = 33")
    shutil.rmtree(os.environ["CONTRIB_CACHE"])  # the old base and its blobs are gone
    code, res = sync_json(workspace)
    assert code == 0 and res["result"] == "upstreamed", res
    assert res["upstreamed"] == [{"patch": "0001-core-make-f3-return-33.patch", "how": "reverse",
                                  "commit": None}]


@pytest.mark.parametrize("seed", range(6))  # 3, 4 carry; 0, 1, 2, 5 conflict
def test_carry_matches_git_cherry_pick(workspace: Workspace, upstream: Repo, tmp_path: Path,
                                       seed: int) -> None:
    """On random histories the carried version equals what `git am -3` (cherry-pick
    semantics) makes; where that conflicts, sync names the first commit it fails at."""
    import random

    rng = random.Random(seed)
    funcs = {f"g{i}": f"    x = {i}\n    return x\n" for i in range(30)}
    upstream.commit("gen", {"pkg/gen.py": module(funcs)})
    mine = dict(funcs)
    for name in rng.sample(sorted(funcs), 2):
        mine[name] = mine[name].replace("return x", "return x + 1")
    add_patchset(workspace, upstream, tmp_path, "gen", [("gen: +1", {"pkg/gen.py": module(mine)})])
    theirs, changes = dict(funcs), []
    for n in range(30):
        name = rng.choice(sorted(theirs))
        edit = rng.choice(["x", "return", "insert"])
        if edit == "x":
            theirs[name] = theirs[name].replace("    x = ", "    x = 2 * ", 1)
        elif edit == "return":
            theirs[name] = theirs[name].replace("return x", "return -x", 1)
        else:
            theirs = {**{f"new{n}": "    return None\n"}, **theirs} if n % 2 else \
                {**theirs, f"new{n}": "    return None\n"}
        changes.append(Change(f"upstream {n}", {"pkg/gen.py": module(theirs)}))
    fast_import(upstream, changes)
    tip = upstream.head()
    clone = tmp_path / "pick"
    git(tmp_path, "clone", "-q", str(upstream.path), str(clone))
    patch = next((workspace.root / "patchsets/proj/gen").glob("*/0001-*.patch"))
    picked = _am_applies(clone, tip, patch)
    code, res = sync_json(workspace)
    if picked:
        assert code == 0 and res["result"] == "rebased", res
        assert applied_file(upstream, workspace, "gen", tip, "pkg/gen.py", tmp_path) == \
            (clone / "pkg/gen.py").read_text()
    else:
        assert code == 1 and res["result"] == "conflict", res
        first = next(c for c in git(clone, "rev-list", "--reverse", f"{res['base']}..{tip}")
                     .split() if not _am_applies(clone, c, patch))
        assert res["conflict"]["commit"]["sha"] == first, "bisection names the first break"


def _am_applies(clone: Path, commit: str, patch: Path) -> bool:
    git(clone, "checkout", "-q", "--detach", commit)
    ok = subprocess.run(["git", "am", "-3", "-q", str(patch)], cwd=clone, capture_output=True,
                        env={**os.environ, "GIT_COMMITTER_NAME": "t",
                             "GIT_COMMITTER_EMAIL": "t@e"}, check=False).returncode == 0
    if not ok:
        git(clone, "am", "--abort", env={"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"})
    return ok


def test_commit_without_a_git_identity_is_refused_before_anything_is_written(
        workspace: Workspace, upstream: Repo, tmp_path: Path, isolated: Path) -> None:
    add_patchset(workspace, upstream, tmp_path, "f3",
                 [("core: make f3 return 33", {"pkg/core.py": F3_PATCH})])
    commit_workspace(workspace)
    fast_import(upstream, filler(5))
    (isolated / ".gitconfig").write_text("[user]\n\tuseConfigOnly = true\n")  # no name, no email
    folder = workspace.root / "patchsets" / "proj" / "f3"
    before = sorted(p.name for p in folder.iterdir())
    result = workspace.run("sync", "--commit")
    assert result.code == 2, result.err
    assert "needs a git identity" in result.err and len(result.err.strip().splitlines()) == 1
    assert sorted(p.name for p in folder.iterdir()) == before  # no new version folder
    assert git(workspace.root, "status", "--porcelain") == ""
