"""Which target a tree's JIT builds for a GPU with a CUDA release (a real repo in
tmp_path, shaped as flashinfer's compilation context at ad893cfab and e2f821b8c)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archtoolkit import (
    ASSUMED,
    Cuda,
    CudaSource,
    nvcc_cuda,
    parse_cuda,
    toolkit_call,
)
from contrib.analysis.archvalues import NVCC, Frame, Toolkit
from contrib.analysis.cudacompat import Image, ImageKind, nvcc_builds
from contrib.analysis.jittarget import BuildVerdict, JitReading, images_of
from contrib.analysis.tree import DictTree, GitTree
from contrib.arch import parse_arch
from contrib.errors import UsageError
from contrib.git.repo import Git
from testing.jitupstream import jit_upstream

CONTEXT = "jitlib/compilation_context.py"


@pytest.fixture(scope="module")
def repo_trees(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitTree, GitTree]:
    """The library at its first commit ("0a" below CUDA 13) and its fix ("0f" from 12.9)."""
    repo = jit_upstream(Path(tmp_path_factory.mktemp("jit")) / "jitlib")
    git = Git(repo.path)
    return GitTree(git, f"{repo.head()}~1"), GitTree(git, repo.head())


def _reading(tree: GitTree) -> JitReading:
    return JitReading(tree.read_text, tree.paths())


def _line(tree: GitTree, text: str) -> int:
    lines = (tree.read_text(CONTEXT) or "").splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


@pytest.mark.parametrize(("arch", "cuda", "verdict", "targets"), [
    ("sm_121a", "12.9", BuildVerdict.NO_IMAGE, ("sm_120a",)),  # sm_120a runs on 12.0 only
    ("sm_120a", "12.9", BuildVerdict.RUNS, ("sm_120a",)),
    ("sm_121a", "13.0", BuildVerdict.RUNS, ("sm_120f",)),  # the 12.x family from 12.0
    ("sm_121a", "12.6", BuildVerdict.NVCC_REFUSES, ("sm_120a",)),  # nvcc 12.6 has no sm_120a
    ("sm_100a", "12.9", BuildVerdict.RUNS, ("sm_100a",)),
])
def test_the_first_commit_builds_0a_below_cuda_13(
        repo_trees: tuple[GitTree, GitTree], arch: str, cuda: str, verdict: BuildVerdict,
        targets: tuple[str, ...]) -> None:
    found = _reading(repo_trees[0]).target(parse_arch(arch), parse_cuda(cuda))
    assert found is not None
    assert (found.built.cuda, found.built.verdict, found.built.targets) == (cuda, verdict, targets)
    assert found.built.crashes == (verdict is not BuildVerdict.RUNS)
    assert (found.flags_path, found.function) == (CONTEXT, "CompilationContext._normalize_cuda_arch")


def test_the_choice_is_the_return_the_release_reaches(repo_trees: tuple[GitTree, GitTree]) -> None:
    tree = repo_trees[0]
    reading, arch = _reading(tree), parse_arch("sm_121a")
    old, new = reading.target(arch, parse_cuda("12.9")), reading.target(arch, parse_cuda("13.0"))
    assert old is not None and new is not None
    assert (old.path, old.line) == (CONTEXT, _line(tree, 'return (major, "0a")'))
    assert new.line == _line(tree, 'return (major, "0f")')
    assert old.built.compute == ("compute_120a",) and old.built.runs == ""
    assert new.built.runs == "sm_120f"


def test_the_wheel_releases_are_read_beside_the_one_asked(
        repo_trees: tuple[GitTree, GitTree]) -> None:
    found = _reading(repo_trees[0]).target(parse_arch("sm_121a"), parse_cuda("12.9"))
    assert found is not None
    assert [(o.cuda, o.verdict) for o in found.others] == [
        ("12.6", BuildVerdict.NVCC_REFUSES), ("12.8", BuildVerdict.NO_IMAGE),
        ("12.9", BuildVerdict.NO_IMAGE), ("13.0", BuildVerdict.RUNS)]


@pytest.mark.parametrize(("cuda", "verdict"), [
    ("12.9", BuildVerdict.RUNS), ("13.0", BuildVerdict.RUNS),
    ("12.8", BuildVerdict.REFUSES),  # the fix raises below 12.9: no build at all
])
def test_the_fix_builds_0f_from_cuda_12_9(repo_trees: tuple[GitTree, GitTree], cuda: str,
                                          verdict: BuildVerdict) -> None:
    tree = repo_trees[1]
    found = _reading(tree).target(parse_arch("sm_121a"), parse_cuda(cuda))
    assert found is not None and found.built.verdict is verdict
    if verdict is BuildVerdict.REFUSES:
        assert found.line == _line(tree, "raise RuntimeError") and found.built.targets == ()
        assert found.built.says == "SM 12.x requires CUDA >= 12.9"
    else:
        assert found.built.targets == ("sm_120f",)


def test_a_toolkit_new_enough_takes_the_newest_branch(repo_trees: tuple[GitTree, GitTree]) -> None:
    found = _reading(repo_trees[0]).target(parse_arch("sm_121a"), ASSUMED)
    assert found is not None
    assert (found.built.cuda, found.built.targets) == ("new", ("sm_120f",))


def test_a_target_the_gpu_does_not_choose_is_no_reading() -> None:
    """Flags formatted from a list of the package's own (not the GPU's) are its build
    list, not a JIT choice; a test's gencode is not the package's."""
    tree = DictTree({
        "pkg/flags.py": 'ARCHS = [(9, "0a")]\n\n\ndef flags():\n    return '
                        '[f"-gencode=arch=compute_{a}{b},code=sm_{a}{b}" for a, b in ARCHS]\n',
        "tests/test_x.py": "import torch\n\n\ndef flag():\n    major, minor = "
                           "torch.cuda.get_device_capability()\n    return "
                           'f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"\n'})
    assert JitReading(tree.read_text, tree.paths()).target(
        parse_arch("sm_121a"), parse_cuda("12.9")) is None


def test_a_target_formatted_from_the_functions_own_names() -> None:
    """No collection between: the f-string reads the capability itself (flashinfer's
    inline suffix before its _normalize_cuda_arch, beebc6074)."""
    tree = DictTree({"pkg/jit.py": (
        "import torch\n\n\ndef flags():\n    major, minor = torch.cuda.get_device_capability()\n"
        '    suffix = "a" if major >= 9 else ""\n'
        '    return [f"-gencode=arch=compute_{major}{minor}{suffix},code=sm_{major}{minor}{suffix}"]\n')})
    reading = JitReading(tree.read_text, tree.paths())
    for arch, targets in (("sm_121a", ("sm_121a",)), ("sm_89", ("sm_89",))):
        found = reading.target(parse_arch(arch), parse_cuda("12.9"))
        assert found is not None and found.built.targets == targets
        assert found.built.verdict is BuildVerdict.RUNS


# -- the pieces ----------------------------------------------------------------------------


def test_gencode_flags_embed_their_code_targets() -> None:
    virtual, images = images_of(["-gencode=arch=compute_90a,code=[sm_90a,compute_90a]",
                                 "-gencode=arch=compute_120a,code=sm_120a", "-O3"])
    assert virtual == ["compute_90a", "compute_120a"]
    assert [(i.kind, i.target) for i in images] == [
        (ImageKind.SASS, "sm_90a"), (ImageKind.PTX, "compute_90a"), (ImageKind.SASS, "sm_120a")]


@pytest.mark.parametrize(("target", "cuda", "builds"), [
    ("sm_120f", (12, 8), False), ("sm_120f", (12, 9), True), ("sm_121a", (12, 8), False),
    ("sm_120a", (12, 8), True), ("sm_101a", (13, 0), False), ("sm_110a", (13, 0), True),
])
def test_each_target_needs_its_nvcc(target: str, cuda: tuple[int, int], builds: bool) -> None:
    image = Image.parse(ImageKind.SASS, target)
    assert image is not None and nvcc_builds(image, cuda) is builds


def test_the_toolkit_in_the_code_compares_as_its_release() -> None:
    """``nvcc --version`` run is the toolkit; ``Version("13.0")`` its numbers; a tuple of
    the toolkit's two numbers (sglang's ``_jit_cuda_version()``) the toolkit too."""
    tree = DictTree({"pkg/v.py": (
        "import subprocess\nimport shutil\nimport torch\nfrom packaging.version import Version\n"
        "A = Version(subprocess.check_output([shutil.which('nvcc'), '--version'])) >= Version('13.0')\n"
        "B = torch.version.cuda >= '12.9'\n"
        "C = int(torch.version.cuda.split('.')[0]) >= 13\n"
        "D = (int(torch.version.cuda), int(torch.version.cuda)) >= (12, 9)\n")})
    for cuda, truths in (((12, 9), [False, True, False, True]), ((13, 0), [True] * 4)):
        ev = TreeEval(tree.read_text, tree.paths(), toolkit=Toolkit(cuda))
        module = ev.module("pkg/v.py")
        assert module is not None
        values = [ev.eval(s.value, Frame("pkg/v.py")) for s in module[0].body
                  if isinstance(s, ast.Assign)]
        assert values == [frozenset({t}) for t in truths]


def test_a_path_to_nvcc_and_its_version_run() -> None:
    toolkit = Toolkit((12, 9))
    assert toolkit_call("os.path.join", (frozenset({"/cuda"}), frozenset({"bin/nvcc"})),
                        toolkit) == frozenset({NVCC})
    assert toolkit_call("subprocess.check_output", (frozenset({(NVCC, "--version")}),),
                        toolkit) == frozenset({toolkit})
    assert toolkit_call("subprocess.check_output", (frozenset({("gcc", "--version")}),),
                        toolkit) is None


def test_a_release_given_or_read_from_nvcc() -> None:
    assert parse_cuda("12.9") == Cuda((12, 9), CudaSource.GIVEN)
    assert nvcc_cuda("release 13.0, V13.0.88") == Cuda((13, 0), CudaSource.NVCC)
    assert nvcc_cuda(None) == ASSUMED and ASSUMED.name == "new"
    with pytest.raises(UsageError, match="MAJOR.MINOR"):
        parse_cuda("twelve")


def test_a_working_toolkit_runs_a_try_body_and_its_handlers_only_from_its_raises() -> None:
    tree = DictTree({"pkg/t.py": (
        "import torch\n\n\ndef f():\n    try:\n        if torch.version.cuda >= '13.0':\n"
        "            return 'f'\n        raise ValueError('old')\n    except ValueError:\n"
        "        return 'handler'\n    return 'after'\n")})
    for cuda, returned in (((13, 0), "f"), ((12, 9), "handler")):
        ev = TreeEval(tree.read_text, tree.paths(), toolkit=Toolkit(cuda))
        assert ev.eval(ast.parse("f()", mode="eval").body, Frame("pkg/t.py")) == {returned}


def test_flags_embedding_no_image_read_here_are_no_reading() -> None:
    """``-arch=compute_XY`` is no ``-gencode``: what it embeds is not read, and no
    verdict (never a false no-image) is given."""
    tree = DictTree({"pkg/jit.py": (
        "import torch\n\n\ndef flags():\n    major, minor = torch.cuda.get_device_capability()\n"
        '    return [f"-arch=compute_{major}{minor}"]\n')})
    assert JitReading(tree.read_text, tree.paths()).target(
        parse_arch("sm_121a"), parse_cuda("12.9")) is None
