"""The walk of what code reaches: each kind of endpoint, by identity, in one order."""

from __future__ import annotations

import ast

from contrib.analysis.archvalues import Frame
from contrib.analysis.reach.endpoints import EndpointKind
from contrib.analysis.reach.tree import PyTree
from contrib.analysis.reach.walk import reach

FILES = {
    "pkg/__init__.py": "",
    "pkg/jit.py": ("def gen_norm_module():\n"
                   "    return build('norm', ['csrc/norm.cu'], supported_major_versions=[9, 10])\n"),
    "pkg/kern.py": "import triton\n\n@triton.jit\ndef add_kernel(x):\n    pass\n",
    "pkg/cute.py": ("class Gemm:\n    admissible_archs = ['sm_100a', 'sm_103a']\n"
                    "    def __call__(self):\n        pass\n"),
    "pkg/cubin_loader.py": "def get_artifact(name, sha256):\n    return open(name).read()\n",
    "pkg/prebuilt.py": (
        "from pkg.cubin_loader import get_artifact\n\n"
        "sm100a_nvcc_flags = ['-gencode=arch=compute_100a,code=sm_100a']\n\n"
        "def gen_gemm_runner_module():\n"  # its runner loads cubins from a folder it is handed
        "    get_artifact('gemm/checksums.txt', '0')\n"
        "    return build('gemm', ['csrc/runner.cu'], ['-DGEMM_CUBIN_PATH=gemm/']\n"
        "                 + sm100a_nvcc_flags)\n\n"
        "def gen_utils_module():\n"  # fetches headers only: builds its kernels here
        "    get_artifact('gemm/include/export.h', '0')\n"
        "    return build('utils', ['csrc/utils.cu'], sm100a_nvcc_flags)\n\n"
        "def load_fmha(kernel):\n"  # names its cubins, and their arch
        "    return open(f'fmha/{kernel}_sm100f.cubin').read()\n\n"
        "def load_moe(path):\n"  # names the loader; no arch read anywhere
        "    return setup_cubin_loader(path)\n\n"
        "def load_gemm(name):\n"  # wraps its cubins in a runtime named for SM100
        "    path = get_artifact(f'deepgemm/kernel.{name}.cubin', '0')\n"
        "    return SM100FP8GemmRuntime(path)\n\n"
        "def say():\n"  # a sentence naming cubins is a log line, not a fetch
        '    """Reads no .cubin file."""\n'
        "    print('loading the .cubin cache')\n"),
    "pkg/api.py": ("import torch\nimport cudnn\nfrom pkg.jit import gen_norm_module\n"
                   "from pkg.kern import add_kernel\nfrom pkg.cute import Gemm\n\n"
                   "from pkg.prebuilt import gen_gemm_runner_module, gen_utils_module, load_fmha, load_moe, say\n"
                   "from pkg.prebuilt import load_gemm\n"
                   "def prebuilt():\n    gen_gemm_runner_module()\n    gen_utils_module()\n"
                   "    load_fmha('k')\n"
                   "    load_moe('x')\n    load_gemm('g')\n    say()\n\n"
                   "def norm(x):\n    return gen_norm_module().run(x)\n\n"
                   "def helper(x):\n    add_kernel[(1,)](x)\n    return norm(x)\n\n"
                   "def api(x):\n    helper(x)\n    Gemm()()\n"
                   "    torch.ops.sgl_kernel.fused(x)\n    cudnn.pygraph()\n"),
}


def _reached(code: str) -> list[tuple[EndpointKind, str, tuple[int, ...], str]]:
    tree = PyTree(FILES.get, list(FILES))
    module = tree.module("pkg/api.py")
    assert module is not None
    statements: list[ast.AST] = list(ast.parse(code).body)
    found = reach(tree, Frame("pkg/api.py"), statements, (12, 0))
    return [(e.kind, e.name, e.majors, e.chain) for e in found.endpoints]


def test_every_kind_of_endpoint_is_reached_with_the_calls_that_lead_to_it() -> None:
    found = _reached("api(1)\n")
    assert (EndpointKind.TRITON, "add_kernel", (), ("api", "helper", "add_kernel")) in found
    assert (EndpointKind.JIT, "gen_norm_module", (), ("api", "helper", "norm", "gen_norm_module")) in found
    assert (EndpointKind.CUTE, "Gemm", (10,), ("api", "Gemm")) in found
    assert (EndpointKind.AOT, "torch.ops.sgl_kernel.fused", (), ("api", "fused")) in found
    assert (EndpointKind.LIB, "cudnn.pygraph", (), ("api", "pygraph")) in found


def test_a_function_fetching_prebuilt_cubins_is_an_endpoint_with_their_majors() -> None:
    """What loads cubins (a cubin path handed to its runner, a `.cubin` file, a loader
    named so) runs prebuilt kernels, over building its runner; fetching headers is not
    that.  The majors are their names' archs, else those of the runtime it wraps them in,
    else the runner's nvcc flags', else none."""
    assert _reached("prebuilt()\n") == [
        (EndpointKind.CUBIN, "gen_gemm_runner_module", (10,), ("prebuilt", "gen_gemm_runner_module")),
        (EndpointKind.JIT, "gen_utils_module", (10,), ("prebuilt", "gen_utils_module")),
        (EndpointKind.CUBIN, "load_fmha", (10,), ("prebuilt", "load_fmha")),
        (EndpointKind.CUBIN, "load_moe", (), ("prebuilt", "load_moe")),
        (EndpointKind.CUBIN, "load_gemm", (10,), ("prebuilt", "load_gemm"))]


def test_the_walk_gives_the_same_answer_on_a_fresh_tree() -> None:
    assert _reached("api(1)\n") == _reached("api(1)\n")


def test_the_tree_keeps_its_indexes() -> None:
    tree = PyTree(FILES.get, list(FILES))
    # by text: `name(`, its definition too (a superset; callers are resolved by identity)
    assert tree.files_calling("gen_norm_module") == ["pkg/api.py", "pkg/jit.py"]
    assert tree.files_calling("no_such_function") == []
    assert tree.registry is tree.registry and tree.methods is tree.methods
    sites = tree.call_sites("pkg/api.py")
    assert sites is not None and [ast.unparse(c) for c in sites[1]["helper"]] == ["helper(x)"]
