from __future__ import annotations

import sys
from pathlib import Path

import pytest

from contrib.analysis.diffs import parse_diff
from contrib.analysis.tree import DictTree, FsTree
from contrib.arch import parse_arch
from contrib.errors import PatchError
from contrib.validate.testrun import Gpu, gpu_problem, read_junit, run_tests
from contrib.validate.testsel import (
    Selection,
    changed_functions,
    imported_modules,
    module_name,
    select_tests,
)
from testing import miniupstream as mu

SM120 = parse_arch("sm_120a")
RTX = [Gpu("NVIDIA RTX PRO 6000 Blackwell", "12.0")]


@pytest.fixture
def gate_repo(tmp_path: Path) -> tuple[Path, str]:
    """A real git repo: base commit, then the gate-only change; returns (root, diff)."""
    root = tmp_path / "up"
    base = mu.init_repo(root)
    mu.commit_variant(root, "gate-only", "jit: admit SM120")
    return root, mu.git(root, "diff", base, "HEAD") + "\n"


def test_parse_diff_of_a_real_git_diff(gate_repo):
    _, diff = gate_repo
    (change,) = parse_diff(diff)
    after = mu.files("gate-only")[mu.GATE_FILE]
    line = mu.line_of(after, mu.NEW_GATE)
    assert change.path == mu.GATE_FILE and change.old_path == mu.GATE_FILE
    assert change.added == {line} and change.touched == {line}
    # git's hunk header names the function *above* the hunk's first line; the AST is exact.
    assert change.sections == ["def gen_comm_alltoall_module():"]
    assert changed_functions(change, None) == {"gen_comm_alltoall_module"}
    assert changed_functions(change, after) == {"gen_trtllm_comm_module"}


def test_parse_diff_deletions_and_new_files():
    diff = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,2 @@ def f():\n x = 1\n-y = 2\n z = 3\n"
        "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+q = 1\n"
        "diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-q = 1\n"
    )
    a, n, gone = parse_diff(diff)
    assert a.removed == {2} and a.touched == {1, 2} and a.sections == ["def f():"]
    assert n.old_path is None and n.added == {1}
    assert gone.deleted and gone.path == "gone.py"


def test_parse_diff_rejects_garbage():
    with pytest.raises(PatchError):
        parse_diff("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-only one line\n")


def test_module_names():
    tree = DictTree({"python/sglang/__init__.py": "", "python/sglang/srt/__init__.py": "", "python/sglang/srt/comm.py": "",
                     "flashinfer/__init__.py": "", "flashinfer/jit/__init__.py": "", "setup.py": "", "x.cu": ""})
    assert module_name(tree, "python/sglang/srt/comm.py") == ("sglang.srt.comm", "python")
    assert module_name(tree, "python/sglang/srt/__init__.py") == ("sglang.srt", "python")
    assert module_name(tree, "flashinfer/jit/__init__.py") == ("flashinfer.jit", "")
    assert module_name(tree, "setup.py") == ("setup", "")
    assert module_name(tree, "x.cu") is None


def test_imported_modules_handles_relative_imports():
    text = "import a.b\nfrom c import d, e\nfrom . import env\nfrom ..core import x\n"
    found = imported_modules(text, "pkg.jit.comm")
    assert {"a.b", "c", "c.d", "c.e", "pkg.jit", "pkg.jit.env", "pkg.core", "pkg.core.x"} <= found


def test_selection_on_the_mini_upstream(gate_repo):
    root, diff = gate_repo
    selection = select_tests(FsTree(root), parse_diff(diff))
    assert selection.tests == ["tests/jit/test_comm_jit.py", "tests/comm/test_trtllm_allreduce.py"]
    assert selection.reasons["tests/jit/test_comm_jit.py"] == "calls gen_trtllm_comm_module"
    assert selection.reasons["tests/comm/test_trtllm_allreduce.py"] == (
        "calls allreduce_fusion_spec -> gen_trtllm_comm_module"
    )
    assert selection.modules == ["flashinfer.jit.comm"] and selection.packages == ["flashinfer"]
    assert selection.functions == ["gen_trtllm_comm_module"]


def test_selection_extra_tests_limit_and_changed_tests():
    files = mu.files("gate-only")
    diff = (
        "diff --git a/tests/test_norm.py b/tests/test_norm.py\n--- a/tests/test_norm.py\n+++ b/tests/test_norm.py\n"
        "@@ -1,1 +1,2 @@\n from flashinfer.norm import rmsnorm_spec\n+# touched\n"
    )
    selection = select_tests(
        DictTree(files), parse_diff(diff), extra=["tests/extra_test.py"], limit=1
    )
    assert selection.tests == ["tests/extra_test.py"]
    assert selection.truncated == 1
    selection = select_tests(DictTree(files), parse_diff(diff))
    assert selection.tests == ["tests/test_norm.py"]
    assert selection.reasons["tests/test_norm.py"] == "changed by the patch"


def test_gpu_problem_messages():
    assert "nvidia-smi not found" in gpu_problem(SM120, None)
    assert "found: NVIDIA H200 9.0" in gpu_problem(SM120, [Gpu("NVIDIA H200", "9.0")])
    assert gpu_problem(SM120, RTX) is None


def _selection(tests: list[str]) -> Selection:
    return Selection(tests, {}, ["flashinfer.jit.comm"], [], [""])


def test_run_tests_in_a_real_tree_passes(tmp_path: Path):
    mu.write(tmp_path, "gate-only")
    run = run_tests(sys.executable, tmp_path, _selection(["tests/jit/test_comm_jit.py", "tests/comm/test_trtllm_allreduce.py"]),
                    tmp_path / "junit.xml", SM120, gpus=RTX)
    assert run.status == "passed", run.reason
    assert run.counts["passed"] == 2 and run.counts["total"] == 2
    assert {c["name"] for c in run.cases} == {
        "tests.jit.test_comm_jit::test_trtllm_comm_module_lists_sources",
        "tests.comm.test_trtllm_allreduce::test_allreduce_fusion_spec_has_flags",
    }
    assert "--junitxml=" + str(tmp_path / "junit.xml") in run.command


def test_run_tests_reports_failures(tmp_path: Path):
    mu.write(tmp_path, "base")
    (tmp_path / "tests/test_broken.py").write_text("def test_broken():\n    assert 1 == 2\n")
    run = run_tests(sys.executable, tmp_path, _selection(["tests/test_broken.py", "tests/test_norm.py"]),
                    tmp_path / "j.xml", SM120, need_gpu=False)
    assert run.status == "failed"
    assert "1 of 2 failed" in run.reason and "test_broken" in run.reason


def test_run_tests_skips_without_gpu_import_or_tests(tmp_path: Path):
    mu.write(tmp_path, "gate-only")
    tests = _selection(["tests/jit/test_comm_jit.py"])
    no_gpu = run_tests(sys.executable, tmp_path, tests, tmp_path / "j.xml", SM120, gpus=None)
    assert no_gpu.status == "skipped" and "nvidia-smi not found" in no_gpu.reason
    wrong = run_tests(
        sys.executable, tmp_path, tests, tmp_path / "j.xml", SM120, gpus=[Gpu("NVIDIA H100", "9.0")]
    )
    assert wrong.status == "skipped" and "12.0" in wrong.reason
    missing = Selection(["tests/jit/test_comm_jit.py"], {}, ["not_a_real_pkg_xyz.mod"], [], [""])
    no_import = run_tests(
        sys.executable, tmp_path, missing, tmp_path / "j.xml", SM120, need_gpu=False
    )
    assert no_import.status == "skipped" and "cannot import not_a_real_pkg_xyz" in no_import.reason
    assert (
        run_tests(sys.executable, tmp_path, _selection([]), tmp_path / "j.xml", SM120).status
        == "skipped"
    )
    (tmp_path / "tests/test_skip.py").write_text(
        "import pytest\n\n@pytest.mark.skip(reason='needs GPU')\ndef test_s():\n    pass\n"
    )
    all_skipped = run_tests(
        sys.executable,
        tmp_path,
        _selection(["tests/test_skip.py"]),
        tmp_path / "s.xml",
        SM120,
        need_gpu=False,
    )
    assert all_skipped.status == "skipped" and "ran no test" in all_skipped.reason


def test_read_junit_missing_or_broken(tmp_path: Path):
    assert read_junit(tmp_path / "none.xml") == []
    (tmp_path / "bad.xml").write_text("<testsuite")
    assert read_junit(tmp_path / "bad.xml") == []


def test_selection_through_packages_and_call_chains():
    files = {
        "pkg/__init__.py": "",
        "pkg/jit/__init__.py": "",
        "pkg/jit/comm.py": "def gen_comm():\n    return 1\n\n\ndef gen_other():\n    return 2\n",
        "pkg/comm/__init__.py": "from .ar import custom_all_reduce as custom_all_reduce\n",
        "pkg/comm/ar.py": (
            "from ..jit.comm import gen_comm\n\n\ndef get_module():\n    return gen_comm()\n\n\n"
            "def custom_all_reduce(x):\n    return get_module() + x\n"
        ),
        "pkg/other.py": "from pkg.jit.comm import gen_other\n\n\ndef f():\n    return gen_other()\n",
        "tests/test_ar.py": "import pkg.comm as comm\n\n\ndef test_ar():\n    assert comm.custom_all_reduce(1) == 2\n",
        "tests/test_pkg.py": "import pkg.comm\n\n\ndef test_import():\n    assert pkg.comm\n",
        "tests/test_other.py": "from pkg.other import f\n\n\ndef test_f():\n    assert f() == 2\n",
        "tests/test_unrelated.py": "import os\n\n\ndef test_x():\n    assert os\n",
    }
    diff = (
        "diff --git a/pkg/jit/comm.py b/pkg/jit/comm.py\n--- a/pkg/jit/comm.py\n+++ b/pkg/jit/comm.py\n"
        "@@ -1,2 +1,2 @@\n def gen_comm():\n-    return 0\n+    return 1\n"
    )
    selection = select_tests(DictTree(files), parse_diff(diff))
    assert selection.tests == ["tests/test_ar.py"]  # a test calls it: mere importers are dropped
    assert selection.truncated == 1
    assert (
        selection.reasons["tests/test_ar.py"] == "calls custom_all_reduce -> get_module -> gen_comm"
    )
    del files["tests/test_ar.py"]
    selection = select_tests(DictTree(files), parse_diff(diff))
    assert selection.tests == ["tests/test_pkg.py"]
    assert selection.reasons["tests/test_pkg.py"] == (
        "imports pkg.comm, which imports pkg.comm.ar, which imports pkg.jit.comm"
    )
    # pkg/other.py imports the changed module but none of the changed functions: not selected.
    assert "tests/test_other.py" not in selection.tests


def test_module_names_with_namespace_packages():
    # sglang: python/sglang/ is a package, srt/ and srt/layers/ are namespace folders.
    tree = DictTree({"python/pyproject.toml": "", "python/sglang/__init__.py": "",
                     "python/sglang/srt/layers/communicator.py": "", "tools/x.py": ""})
    assert module_name(tree, "python/sglang/srt/layers/communicator.py") == (
        "sglang.srt.layers.communicator", "python")
    assert module_name(tree, "tools/x.py") == ("x", "tools")


def test_imported_modules_reads_every_import_form():
    text = (
        "import os, sys as system\n"
        "from . import env as jit_env\n"
        "from .core import (gen_jit_spec,\n    get_nvcc_flags_list)\n"
        "def f():\n    from flashinfer.jit.comm import gen_trtllm_comm_module  # why\n"
    )
    assert imported_modules(text, "flashinfer.jit.comm") == {
        "os", "sys", "flashinfer.jit", "flashinfer.jit.env", "flashinfer.jit.core",
        "flashinfer.jit.core.gen_jit_spec", "flashinfer.jit.core.get_nvcc_flags_list",
        "flashinfer.jit.comm", "flashinfer.jit.comm.gen_trtllm_comm_module"}
