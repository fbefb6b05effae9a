"""Gates a choice meets through a registry: flashinfer's requirement decorator (a
backend's requirement, the heuristic of ``backend="auto"``), sglang's dict of
quantization methods (the class's minimum capability) and its allow-lists."""

from __future__ import annotations

from contrib.analysis.reach.tree import PyTree
from contrib.analysis.tree import DictTree
from contrib.arch import parse_arch
from contrib.audit.chains import Feature, FeatureKind, Role, Verdict
from contrib.audit.classing.judge import judge
from contrib.audit.engine import TreeAudit, find_all
from contrib.audit.feature.chain import chain_of
from contrib.audit.stack.lower import Lower
from contrib.audit.stack.settinggates import allow_list_links, minimum_links

SM120 = parse_arch("sm_120a")
SM121 = parse_arch("sm_121a")
SM90 = parse_arch("sm_90a")

UTILS = '''\
import torch


def get_compute_capability(device):
    return torch.cuda.get_device_capability(device)


def supported_compute_capability(ccs):
    def mark(fn):
        return fn
    return mark


def backend_requirement(backend_checks, common_check=None, heuristic_func=None):
    def mark(fn):
        return fn
    return mark
'''
CORE = "ctx = None\n\n\ndef build(name, sources, flags):\n    return name\n"
JIT = '''\
from lib.core import build, ctx


def gen_big_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10])
    return build("big", ["big.cu"], flags)


def gen_small_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[12])
    return build("small", ["small.cu"], flags)
'''
# flashinfer's mm_fp4: backends by name, each with its requirement; "auto" asks the
# heuristic, which prefers "small" on SM 12.0 and knows only "big" elsewhere
GEMM = '''\
from lib.jit import gen_big_module, gen_small_module
from lib.utils import backend_requirement, get_compute_capability, supported_compute_capability


@supported_compute_capability([100])
def _check_size(a, backend="auto"):
    return True


@supported_compute_capability([100, 103])
def _big_requirement(a, backend="auto"):
    return True


@supported_compute_capability([120, 121])
def _small_requirement(a, backend="auto"):
    return True


def _heuristic(suitable_backends, a, backend="auto"):
    major, minor = get_compute_capability(a.device)
    is_sm120 = major == 12 and minor == 0
    if is_sm120:
        return [c for c in ("small", "big") if c in suitable_backends]
    picked = []
    if "big" in suitable_backends:
        picked.append("big_sm10x")
    return picked


@backend_requirement(
    {"big": _big_requirement, "small": _small_requirement},
    common_check=_check_size,
    heuristic_func=_heuristic,
)
def mm(a, backend="auto"):
    if backend == "auto":
        backends = mm.suitable_auto_backends
    else:
        backends = [backend]
    major, minor = get_compute_capability(a.device)
    factory = {
        "big": lambda: gen_big_module().run(a),
        "small": lambda: get_small_module(major).run(a),
    }
    return [factory[b]() for b in backends]


def get_small_module(sm_major):
    if sm_major == 10:
        return gen_big_module()
    return gen_small_module()
'''
UNIT = "__global__ void k(float* out) { out[threadIdx.x] = 1.0f; }\n"
LIB = {"lib/__init__.py": "from .gemm import mm\n", "lib/utils.py": UTILS, "lib/core.py": CORE,
       "lib/jit.py": JIT, "lib/gemm.py": GEMM, "csrc/big.cu": UNIT, "csrc/small.cu": UNIT}


def _chain(arch, value):  # type: ignore[no-untyped-def]
    tree = DictTree(dict(LIB))
    gates, _ = find_all(tree, arch)
    lower = Lower("lib", "v1", "c" * 40, TreeAudit("c" * 40, "", judge(tree, gates, arch)),
                  tree, arch=arch)  # type: ignore[arg-type]
    feature = Feature(FeatureKind.API, f"lib.mm:backend={value}", "lib.mm", value)
    return chain_of(feature, None, lower, arch)


def _spots(chain) -> list[tuple[str, int, bool]]:  # type: ignore[no-untyped-def]
    return [(link.function, link.line, link.excludes) for link in chain.links
            if link.role != Role.CALL]


def test_auto_follows_what_the_heuristic_picks_for_the_target() -> None:
    """On SM 12.0 the heuristic returns "small" first and "big" after; "big"'s
    requirement refuses the GPU, so only "small" is suitable: its requirement (the
    decorator admitting 120) and its module (built for 12, picked by the GPU's major
    passed down: ``get_small_module(major)``) are the way, not "big"'s.  The common
    check runs, but its capability decorator is not the wrapper's to check where the
    table has backends (flashinfer's ``_check_bmm_fp8_problem_size``)."""
    chain = _chain(SM120, "auto")
    assert chain.verdict == Verdict.ON, chain
    spots = _spots(chain)
    assert ("_small_requirement", 15, False) in spots
    assert ("gen_small_module", 10, False) in spots
    assert not any(name in ("_big_requirement", "gen_big_module", "_check_size")
                   for name, _, _ in spots)


def test_auto_where_no_backend_admits_the_target_is_refused_by_each_requirement() -> None:
    """SM 9.0: neither requirement admits it; the heuristic returns "big" there, and
    the wrapper raises for "auto", named at its requirement's gate."""
    chain = _chain(SM90, "auto")
    refusing = {link.function for link in chain.links if link.refuses}
    assert refusing == {"_big_requirement"}, chain
    assert chain.verdict != Verdict.ON


def test_a_backend_by_name_meets_its_own_requirement() -> None:
    """``backend="big"`` on SM120: its requirement's decorator turns the target away
    (the wrapper raises before the body runs); ``backend="small"`` passes its own."""
    big = _chain(SM120, "big")
    assert [(f, excl) for f, _, excl in _spots(big) if f == "_big_requirement"] == [
        ("_big_requirement", True)]
    assert big.verdict != Verdict.ON
    small = _chain(SM120, "small")
    assert small.verdict == Verdict.ON, small
    assert ("_small_requirement", 15, False) in _spots(small)


def test_auto_where_what_the_heuristic_returns_does_not_admit_the_target_is_refused() -> None:
    """SM 12.1: the heuristic's SM 12.0 branch is not taken and what it appends names
    "big" only (its variant ``"big_sm10x"``), which the GPU does not pass: nothing it
    returns is suitable, and the wrapper refuses "auto" there ("small" would serve,
    but the heuristic never returns it on SM 12.1)."""
    chain = _chain(SM121, "auto")
    refusing = {link.function for link in chain.links if link.refuses}
    assert refusing == {"_big_requirement"}, chain
    assert not any(name == "gen_small_module" for name, _, _ in _spots(chain))


def test_a_runner_of_no_registry_tested_beside_the_chosen_one_is_not_its_way() -> None:
    """flashinfer's ``bmm_bf16(backend="cudnn")`` hands ``[backend]`` to
    ``bf16_gemm_sm100(..., runner_names)``, which tests ``"cudnn" in runner_names`` and,
    beside it, ``"cublaslt" in runner_names``: a name of ``mm_bf16``'s registry, not
    ``bmm_bf16``'s.  What the function compares with the chosen registry's names holds
    those names only, so the other runner (its module built for SM 10.x) is not the
    way of ``backend="small"`` (f6717ff6b, case 28 of the works corpus)."""
    gemm = GEMM.replace(
        '    return [factory[b]() for b in backends]\n',
        '    return run_all(a, backends)\n\n\n'
        'def run_all(a, runner_names):\n    runners = []\n'
        '    if "small" in runner_names:\n        runners.append(gen_small_module().run(a))\n'
        '    if "other" in runner_names:\n        runners.append(gen_big_module().run(a))\n'
        '    return runners\n')
    assert "run_all" in gemm
    LIB["lib/gemm.py"], saved = gemm, LIB["lib/gemm.py"]
    try:
        chain = _chain(SM120, "small")
    finally:
        LIB["lib/gemm.py"] = saved
    assert chain.verdict == Verdict.ON, chain
    assert not any(name == "gen_big_module" for name, _, _ in _spots(chain)), _spots(chain)
    assert ("gen_small_module", 10, False) in _spots(chain)


QUANT_INIT = '''\
from top.quant.fp4 import Fp4Config
from top.quant.fp8 import Fp8Config
from top.quant.npu import NpuConfig
from top.utils import is_npu

QUANTIZATION_METHODS = {"fp8": Fp8Config}
CPU_QUANTIZATION_METHODS = {"fp4": Fp8Config}

if is_npu():
    QUANTIZATION_METHODS.update({"fp4": NpuConfig})
else:
    QUANTIZATION_METHODS.update({"fp4": Fp4Config})
'''
FP4 = '''\
class Fp4Config:
    @classmethod
    def get_min_capability(cls) -> int:
        return 100

    def get_quant_method(self, layer):
        return layer
'''
FP8 = '''\
from top.utils import is_npu


class Fp8Config:
    def __init__(self, use_mx=False):
        self.use_mx = use_mx

    def get_min_capability(self) -> int:
        if is_npu():
            return 0
        return 100 if self.use_mx else 80
'''
NPU = "class NpuConfig:\n    @classmethod\n    def get_min_capability(cls):\n        return 0\n"
TOP_UTILS = '''\
import torch


def is_npu():
    return hasattr(torch, "npu")


def get_device_capability():
    return torch.cuda.get_device_capability()
'''
LOADER = '''\
from top.utils import get_device_capability


def load(quant_config, name):
    major, minor = get_device_capability()
    capability = major * 10 + minor
    if capability < quant_config.get_min_capability():
        raise ValueError(f"{name} needs a newer GPU")
'''
ARGS = '''\
class ServerArgs:
    quantization: str = None
    moe_runner_backend: str = "auto"

    def check(self):
        if self.moe_runner_backend == "fused":
            assert self.quantization in ["fp8", None], "fused MoE takes fp8 only"
        assert self.quantization in ["fp8", "fp4", None]
'''
TOP = {"top/__init__.py": "", "top/utils.py": TOP_UTILS, "top/quant/__init__.py": QUANT_INIT,
       "top/quant/fp4.py": FP4, "top/quant/fp8.py": FP8, "top/quant/npu.py": NPU,
       "top/loader.py": LOADER, "top/server_args.py": ARGS}


def _top() -> PyTree:
    tree = DictTree(dict(TOP))
    return PyTree(tree.read_text, [p for p in tree.paths() if p.endswith(".py")])


def test_the_heuristic_returns_what_it_appends_and_names_variants_by_their_backend() -> None:
    from contrib.audit.stack.requirements import picks

    tree = DictTree(dict(LIB))
    gates = judge(tree, find_all(tree, SM90)[0], SM90)
    lower = Lower("lib", "v1", "c" * 40, TreeAudit("c" * 40, "", gates), tree,
                  arch=SM90)  # type: ignore[arg-type]
    heuristic = [f for f in lower.resolve("lib.gemm._heuristic")]
    assert picks(lower.skips, heuristic, frozenset({"big", "small"})) == ["big"]


def test_a_value_picks_a_class_whose_minimum_capability_its_caller_compares() -> None:
    """``QUANTIZATION_METHODS["fp4"]`` is ``Fp4Config`` on NVIDIA (the NPU update is
    not), whose minimum 100 the loader compares with the GPU's capability: SM 9.0 is
    refused there, SM 12.0 admitted; ``fp8``'s 80 or 100 (as configured) admit both
    SM 10.0 and newer, and SM 9.0 only by configuration."""
    ev = _top()
    assert [f.node.name for f in ev.registry.under("fp4", "quantization")] == [
        "get_min_capability", "get_quant_method"]
    [sm90] = minimum_links(ev, "top", "c", "quantization", "fp4", SM90)
    assert (sm90.file, sm90.line, sm90.function) == ("top/loader.py", 7, "load")
    assert sm90.excludes and sm90.refuses and sm90.admits == "capability >= 100"
    [sm120] = minimum_links(ev, "top", "c", "quantization", "fp4", SM120)
    assert not sm120.excludes
    [fp8] = minimum_links(ev, "top", "c", "quantization", "fp8", SM90)
    assert not fp8.excludes and fp8.admits == "capability >= 80 / 100"


def test_an_allow_list_under_a_backend_refuses_the_value_only_with_that_backend() -> None:
    """``fp4`` is left out of the fused MoE backend's list: refused only with it, which
    the link says and does not count as the target turned away; the list with no
    condition (every value the server knows) is no gate."""
    ev = _top()
    [link] = allow_list_links(ev, "top", "c", lambda path, first, last: [], "quantization",
                              "fp4")
    assert (link.file, link.line, link.excludes) == ("top/server_args.py", 7, False)
    assert "moe_runner_backend == 'fused'" in link.why
    assert not list(allow_list_links(ev, "top", "c", lambda p, f, last: [], "quantization",
                                     "fp8"))


CHECKS = '''\
import torch


def is_sm120():
    return torch.cuda.get_device_capability()[0] == 12


def check(args):
    if is_sm120():
        assert args.quantization in ["fp8", None], "this GPU runs fp8 only"
'''


def test_an_allow_list_under_a_test_of_the_gpu_turns_the_target_away() -> None:
    """A per-arch allow-list: on SM120 (the branch taken, as the audit's gate at its
    test says) ``fp4`` is refused there; on SM 9.0 the branch is not taken."""
    files = dict(TOP) | {"top/checks.py": CHECKS}
    tree = DictTree(files)
    ev = PyTree(tree.read_text, [p for p in tree.paths() if p.endswith(".py")])
    for arch, refused in ((SM120, True), (SM90, False)):
        gates = judge(tree, find_all(tree, arch)[0], arch)
        on = [link for link in allow_list_links(
            ev, "top", "c", lambda p, first, last, gates=gates: [  # type: ignore[misc]
                g for g in gates if g.file == p and first <= g.line <= last],
            "quantization", "fp4") if link.file == "top/checks.py"]
        assert [(link.line, link.excludes, link.refuses) for link in on] == [
            (10, refused, refused)], (arch, on)
