"""contrib.carry.carrier, .bisection, .landing, .scope, .trees: scopes, the moved guard, bisection, effects, grafts."""

from __future__ import annotations

import math
from pathlib import Path

from contrib.carry.bisection import first_true
from contrib.carry.landing import pr_number
from contrib.carry.scope import TOP, definition, effect_present, moved_hunks, scope_of, scoped_hunks
from contrib.carry.trees import changes, graft
from contrib.git.repo import Git
from testing.gitutil import Repo
from testing.histories import lookalike, replace_in
from testing.synchelp import add_patchset, applied_file, sync_json
from testing.workspace import Workspace

KERNELS = """\
template <typename T>
__global__ void first_kernel(Params<T> p) {
#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))
  sync_grid();
#endif
}

static __global__ void __launch_bounds__(1024, 1)
    second_kernel(Params<float> p) {
  int x = 0;
}

struct Reducer {
  int value;
};
"""


def test_definitions_and_scopes_in_cuda_and_python() -> None:
    lines = KERNELS.splitlines()
    assert definition(lines[1], "c") == "first_kernel"
    assert definition(lines[0], "c") is None, "a template line names nothing"
    assert definition(lines[7], "c", lines[8]) == "second_kernel"
    assert definition(lines[2], "c") is None and definition(lines[12], "c") == "Reducer"
    assert scope_of(lines, 3, "c", 2) == "first_kernel"
    assert scope_of(lines, 9, "c", 2) == "second_kernel"
    assert scope_of(lines, 13, "c", 2) == "Reducer"
    py = ["import os", "", "class A:", "    def m(self):", "        return 1", "", "X = 1"]
    assert scope_of(py, 4, "python", 8) == "m"
    assert scope_of(py, 3, "python", 4) == "A"
    assert scope_of(py, 6, "python", 0) == TOP, "top-level code after a class is not in it"
    doc = ["# Guide", "Build it (see below).", "## Install", "Run make (twice)."]
    assert scope_of(doc, 3, "markdown", 0) == "Install"
    assert definition(doc[1], "markdown") is None and definition(doc[1], "text") is None


def test_first_true_needs_at_most_log2_probes() -> None:
    for size in (1, 2, 3, 7, 150, 400, 1000):
        for first in {0, size // 3, size - 1}:
            calls: list[int] = []

            def pred(item: str, calls: list[int] = calls, first: int = first) -> bool:
                calls.append(int(item))
                return int(item) >= first

            assert first_true([str(i) for i in range(size)], pred) == first
            assert len(calls) <= math.ceil(math.log2(size)) if size > 1 else not calls


def test_pr_number_from_squash_subjects() -> None:
    assert pr_number("feat(comm): extend trtllm_allreduce to SM12x (#3903)") == 3903
    assert pr_number("Merge pull request #42 from dev/feature") is None
    assert pr_number("fix: see (#12) for details") is None


def test_moved_guard_sees_a_change_in_the_twin(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base = repo.commit("twins", {"t.py": lookalike()})
    right = repo.commit("alpha", {"t.py": replace_in(lookalike(), "alpha", "d = 4", "d = 44")})
    wrong = repo.commit("beta", {"t.py": replace_in(lookalike(), "beta", "d = 4", "d = 44")})
    git = Git(repo.path)
    reference = scoped_hunks(git, base, right)
    assert [h.section for h in reference] == ["alpha"]
    moved = moved_hunks(reference, scoped_hunks(git, right, wrong)[1:])
    assert moved == ["t.py: hunk belongs in `alpha` but landed in `beta`"]
    assert moved_hunks(reference, scoped_hunks(git, base, right)) == []


def test_effect_present_tolerates_different_surroundings(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base = repo.commit("twins", {"t.py": lookalike()})
    ours = repo.commit("ours", {"t.py": replace_in(lookalike(), "alpha", "d = 4", "d = 44")})
    hunks = scoped_hunks(Git(repo.path), base, ours)
    theirs = replace_in(lookalike(), "alpha", "    d = 4\n", "    # upstream's take\n    d = 44\n")
    landed = repo.commit("theirs", {"t.py": theirs.replace("a = 1", "a = 10", 1)})
    elsewhere = repo.commit("beta only", {"t.py": replace_in(lookalike(), "beta", "d = 4",
                                                             "d = 44")})
    git = Git(repo.path)
    assert effect_present(git, landed, hunks)
    assert not effect_present(git, elsewhere, hunks), "the twin's change is not ours"
    assert not effect_present(git, base, hunks)


def test_an_import_added_above_ours_is_not_a_move(workspace: Workspace, upstream: Repo,
                                                  tmp_path: Path) -> None:
    module = "import os\nimport re\n\n\ndef f():\n    return os.sep\n"
    upstream.commit("add mod", {"pkg/mod.py": module})
    ours = module.replace("import re\n", "import re\nimport json\n")
    add_patchset(workspace, upstream, tmp_path, "imp", [("mod: import json", {"pkg/mod.py": ours})])
    theirs = module.replace("import os\n", "import abc\nimport os\n").replace(
        "def f():\n", "VERSION = 2\n\n\ndef f():\n")
    tip = upstream.commit("mod: import abc", {"pkg/mod.py": theirs})
    code, res = sync_json(workspace)
    assert code == 0 and res["result"] == "rebased", res
    carried = applied_file(upstream, workspace, "imp", tip, "pkg/mod.py", tmp_path)
    assert carried == theirs.replace("import re\n", "import re\nimport json\n")


def test_graft_rebuilds_only_the_changed_directories(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base = repo.commit("tree", {"a/b/c.txt": "c\n", "a/d.txt": "d\n", "e.txt": "e\n"})
    after = repo.commit("edit", {"a/b/c.txt": "C\n", "a/d.txt": None, "n/new.txt": "n\n"})
    git = Git(repo.path)
    edits = changes(git, base, after)
    assert set(edits) == {"a/b/c.txt", "a/d.txt", "n/new.txt"} and edits["a/d.txt"] is None
    tree = graft(git, git.run("rev-parse", f"{base}^{{tree}}"), edits)
    assert tree == git.run("rev-parse", f"{after}^{{tree}}")


def test_a_line_that_merely_existed_is_not_an_upstream_landing(tmp_path: Path) -> None:
    body = "def pick(x):\n    if x:\n        return b\n    return a\n"
    repo = Repo(tmp_path / "r")
    base = repo.commit("pick", {"p.py": body})
    ours = repo.commit("ours", {"p.py": body.replace("    return a\n", "    return b\n")})
    theirs = repo.commit("theirs", {"p.py": body.replace("    return a\n", "    return c\n")})
    landed = repo.commit("landed", {"p.py": body.replace("    return a\n", "    return b\n")})
    git = Git(repo.path)
    hunks = scoped_hunks(git, base, ours)
    assert not effect_present(git, theirs, hunks, base), "`return b` was there before"
    assert effect_present(git, landed, hunks, base)


def test_effect_survives_a_different_line_wrapping(tmp_path: Path) -> None:
    body = "void wrap(int i) {\n  ptrs[i + size] = cast(value_one[i]);\n}\n"
    repo = Repo(tmp_path / "r")
    base = repo.commit("c", {"w.cu": body})
    ours = repo.commit("ours", {"w.cu": body.replace(
        "  ptrs[i + size] = cast(value_one[i]);\n",
        "  ptrs[i + MAX] =\n      cast(value_one[i]);\n")})
    theirs = repo.commit("theirs", {"w.cu": body.replace(
        "  ptrs[i + size] = cast(value_one[i]);\n",
        "  // stride MAX, see #12\n  ptrs[i + MAX] = cast(\n      value_one[i]);\n")})
    git = Git(repo.path)
    hunks = scoped_hunks(git, base, ours)
    assert [h.section for h in hunks] == ["wrap"]
    assert effect_present(git, theirs, hunks, base)
    assert not effect_present(git, base, hunks, base)
