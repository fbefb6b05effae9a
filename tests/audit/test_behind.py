"""The class of a gate from what stands behind it: reached by identity, at any depth."""

from __future__ import annotations

from contrib.analysis.cuda_arch import analyze
from contrib.analysis.hostarch import arch_findings
from contrib.analysis.reach.endpoints import Endpoint, EndpointKind
from contrib.analysis.tree import DictTree
from contrib.arch import parse_arch
from contrib.audit.classing.judge import judge
from contrib.audit.engine import find_all
from contrib.audit.model import AuditGate, Basis, EffectKind, Evidence, Place

SM120 = parse_arch("sm_120a")
SM90 = parse_arch("sm_90a")

UTILS = '''\
import torch


def cap():
    return torch.cuda.get_device_capability()


def is_sm100_supported():
    return cap()[0] == 10
'''
JIT = '''\
from pkg.core import build, ctx


def gen_fmha_sm100_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10])
    return build("fmha", ["fmha.cu"], flags)


def gen_fmha_sm90_module():
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9])
    return build("fmha90", ["fmha90.cu"], flags)
'''
LOADER = '''\
import functools

from pkg.jit import gen_fmha_sm100_module, gen_fmha_sm90_module


@functools.cache
def get_fmha_module(backend):
    if backend == "100":
        return gen_fmha_sm100_module().build_and_load()
    elif backend == "90":
        return gen_fmha_sm90_module().build_and_load()
    raise ValueError(backend)
'''
API = '''\
import torch

from .loader import get_fmha_module


def fmha(q):
    major, minor = torch.cuda.get_device_capability()
    return get_fmha_module(f"{major}{minor}").run(q)
'''
KERNEL = "__global__ void {name}_kernel(float* out) {{\n  out[threadIdx.x] = 1.0f;\n}}\n"
GUARDED = ("__global__ void fmha_kernel(float* out) {\n"
           "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 1200\n  out[threadIdx.x] = 1.0f;\n"
           "#endif\n}\n")
BASE = {
    "pkg/__init__.py": "", "pkg/core.py": "ctx = None\n\n\ndef build(n, s, f):\n    return n\n",
    "pkg/utils.py": UTILS, "pkg/jit.py": JIT, "pkg/loader.py": LOADER, "pkg/api.py": API,
    "csrc/fmha.cu": GUARDED, "csrc/fmha90.cu": KERNEL.format(name="fmha90"),
}


def _audit_all(files: dict[str, str]) -> list[AuditGate]:
    tree = DictTree(files)
    gates, _ = find_all(tree, SM120)
    return judge(tree, gates, SM120)


def _runs(calls: tuple[tuple[str, ...], ...], *steps: str) -> bool:
    """Whether a call chain runs ``steps`` one after the other."""
    return any(chain[n:n + len(steps)] == steps for chain in calls for n in range(len(chain)))


def _audit(files: dict[str, str]) -> dict[str, AuditGate]:
    return {f"{g.file}:{g.function}": g for g in _audit_all(files) if g.excludes_target}


def _sm100(*through: str) -> Endpoint:
    """BASE's sm100 module, reached through the calls ``through``."""
    return Endpoint(EndpointKind.JIT, "pkg/jit.py", "gen_fmha_sm100_module",
                    chain=(*through, "gen_fmha_sm100_module"))


def _stands_on_sm100(gate: AuditGate, *through: str) -> None:
    """``gate`` is classed by BASE's sm100 module, reached through ``through``: its unit's
    kernel, compiled out for the target by the ``#if`` at line 2 (GUARDED)."""
    assert gate.basis is Basis.COMPILED_OUT, (gate.basis, gate.reason)
    assert _sm100(*through) in gate.reached, gate.reached
    assert gate.units == ("csrc/fmha.cu",), gate.units
    assert [(e.path, e.line, e.kind, e.guard) for e in gate.evidence] == [
        ("csrc/fmha.cu", 1, "empty-kernel", Place("csrc/fmha.cu", 2))], gate.evidence


def test_a_test_gate_takes_the_class_of_the_module_three_files_down() -> None:
    """skipif -> pkg.api.fmha -> pkg.loader.get_fmha_module -> pkg.jit.gen_fmha_sm100_module:
    no name of the chain matches the module's; identity does.  Behind the dispatch an
    sm90 and an sm100 module: the worse (kernels compiled out) speaks."""
    test = ("import pytest\nimport torch\n\nfrom pkg.api import fmha\n\n\n"
            "@pytest.mark.skipif(torch.cuda.get_device_capability()[0] != 10, reason='SM100')\n"
            "def test_fmha():\n    fmha(1)\n")
    gates = _audit(BASE | {"tests/test_fmha.py": test})
    gate = gates["tests/test_fmha.py:test_fmha"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    # the sm100 module, whose own gate (pkg/jit.py:5) admits majors 10, speaks
    module = gates["pkg/jit.py:gen_fmha_sm100_module"]
    assert (module.line, set(module.admits or ())) == (5, {10})
    _stands_on_sm100(gate, "fmha", "get_fmha_module")
    assert gate.evidence == module.evidence
    kinds = {r.name for r in gate.reached}
    assert kinds == {"gen_fmha_sm100_module", "gen_fmha_sm90_module"}
    # With the unit's guard gone, nothing is compiled out, but both modules are built
    # only for majors 10 and 9 from code named for them: kernels written for those.
    unguarded = BASE | {"tests/test_fmha.py": test, "csrc/fmha.cu": KERNEL.format(name="fmha")}
    written = _audit(unguarded)["tests/test_fmha.py:test_fmha"]
    assert written.class_ == "needs-kernel-work", written.reason
    assert written.basis is Basis.WRITTEN_FOR and _sm100("fmha", "get_fmha_module") in written.reached
    assert written.evidence == (Evidence("gen_fmha_sm100_module", says="named for sm_10x"),)
    # Named for no architecture, the same builders are gate-only: lift the gate.
    generic = {path: text.replace("_sm100_", "_dense_").replace("_sm90_", "_paged_")
               for path, text in unguarded.items()}
    assert _audit(generic)["tests/test_fmha.py:test_fmha"].class_ == "gate-only"
    # A unit named for the target's family beside it: something in it is the target's.
    target = generic | {"pkg/jit.py": generic["pkg/jit.py"].replace('"fmha.cu"', '"fmha_sm120.cu"'),
                        "csrc/fmha_sm120.cu": KERNEL.format(name="fmha")}
    assert _audit(target)["tests/test_fmha.py:test_fmha"].class_ == "gate-only"


def test_a_decision_function_is_followed_to_the_code_its_callers_run() -> None:
    test = ("import pytest\n\nfrom pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
            "def _skip_if_unsupported():\n    if not is_sm100_supported():\n"
            "        pytest.skip('needs SM100')\n\n\n"
            "def _run(q):\n    _skip_if_unsupported()\n    return fmha(q)\n\n\n"
            "def test_a():\n    _run(1)\n")
    gates = _audit(BASE | {"tests/test_x.py": test})
    gate = gates["tests/test_x.py:_skip_if_unsupported"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert _runs(gate.calls, "_run", "fmha"), gate.calls
    # A predicate a skip marker calls: the marked test's body.
    marker = ("import pytest\nimport torch\n\nfrom pkg.api import fmha\n\n\n"
              "def is_fa3_supported():\n    return torch.cuda.get_device_capability()[0] == 9\n\n\n"
              "@pytest.mark.skipif(not is_fa3_supported(), reason='FA3')\ndef test_b():\n    fmha(1)\n")
    gates = _audit(BASE | {"tests/test_y.py": marker})
    assert gates["tests/test_y.py:is_fa3_supported"].class_ == "needs-kernel-work"
    # A boolean decision function: the branch its caller takes on it.
    runtime = ("from pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
               "def _use_fused():\n    return is_sm100_supported()\n\n\n"
               "def attend(q):\n    if not _use_fused():\n        return q\n    return fmha(q)\n\n\n"
               "def attend2(q):\n    if _use_fused():\n        return fmha(q)\n    return q\n")
    gates = _audit(BASE | {"pkg/attend.py": runtime})
    assert gates["pkg/attend.py:_use_fused"].class_ == "needs-kernel-work"


SCALED_MM_BUILD = ('set(FLAGS "-gencode=arch=compute_90a,code=sm_90a" '
                   '"-gencode=arch=compute_100a,code=sm_100a"{more})\n')


def _scaled_mm_op(unit: str, kernels: str, more: str = "") -> dict[str, str]:
    """A tree whose ``pkg/ops.py`` refuses all but SM100 before calling the built op
    ``torch.ops.mykernel.scaled_mm``, defined in ``unit`` after ``kernels``, built for
    sm_90a and sm_100a (and ``more`` gencode flags)."""
    ops = ("import torch\n\nfrom pkg.utils import is_sm100_supported\n\n\n"
           "def scaled_mm(a):\n    if not is_sm100_supported():\n        raise ValueError(a)\n"
           "    return torch.ops.mykernel.scaled_mm.default(a)\n")
    return BASE | {
        "pkg/ops.py": ops,
        "kernel/csrc/ext.cc": ('TORCH_LIBRARY_FRAGMENT(mykernel, m) {\n  m.def("scaled_mm(Tensor a) -> '
                               'Tensor");\n  m.impl("scaled_mm", torch::kCUDA, &scaled_mm);\n}\n'),
        unit: kernels + "torch::Tensor scaled_mm(torch::Tensor a) {\n  return a;\n}\n",
        "kernel/CMakeLists.txt": SCALED_MM_BUILD.format(more=more),
    }


def test_a_built_op_is_judged_by_its_registered_unit_and_build_list() -> None:
    files = _scaled_mm_op("kernel/csrc/gemm/scaled_mm.cu", GUARDED.replace("fmha", "mm"))
    gate = _audit(files)["pkg/ops.py:scaled_mm"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert gate.basis is Basis.COMPILED_OUT, gate.basis
    assert gate.reached == (Endpoint(EndpointKind.AOT, "", "torch.ops.mykernel.scaled_mm",
                                     chain=("default",)),), gate.reached
    assert gate.units == ("kernel/csrc/gemm/scaled_mm.cu",)  # the unit registering the op
    assert [(e.path, e.kind, e.guard) for e in gate.evidence] == [
        ("kernel/csrc/gemm/scaled_mm.cu", "empty-kernel", Place("kernel/csrc/gemm/scaled_mm.cu", 2))]
    # the wording, once: the op's build list (no typed field holds it)
    assert "its build lists sm_9x, sm_10x" in gate.reason


def test_an_assert_the_target_fails_keeps_from_it_the_code_after_it() -> None:
    """sglang's FA3 backend factory: ``assert major == 9`` then ``return
    FlashAttentionBackend(runner)``.  What follows the assert is what the target is kept
    from, as what follows ``if major != 9: raise``."""
    factory = ("import torch\n\nfrom pkg.triton_attn import TritonAttn\n\n\n"
               "def create(runner):\n    major, minor = torch.cuda.get_device_capability()\n"
               "    assert major == 9, 'needs SM90'\n    return TritonAttn(runner).forward_decode(1)\n")
    files = BASE | {"pkg/triton_attn.py": TRITON_ATTN, "pkg/factory.py": factory}
    gate = _audit(files)["pkg/factory.py:create"]
    assert gate.class_ == "gate-only", gate.reason
    assert gate.basis is Basis.TRITON and gate.message == "needs SM90"
    assert gate.effect.kind is EffectKind.ASSERT_FAILS
    assert gate.reached == (Endpoint(EndpointKind.TRITON, "pkg/triton_attn.py", "_attn_kernel",
                                     chain=("forward_decode", "_attn_kernel")),), gate.reached


def test_a_built_op_built_for_the_target_is_not_judged_by_its_unit_s_name() -> None:
    """A unit named for another architecture (``scaled_mm_sm90.cu``) is kernel work only
    where the op's build leaves the target out; built for it, nothing compiled out, the
    op serves it (as a JIT module built for the target does)."""
    unit, kernels = "kernel/csrc/gemm/scaled_mm_sm90.cu", KERNEL.format(name="mm")
    files = _scaled_mm_op(unit, kernels, ' "-gencode=arch=compute_120a,code=sm_120a"')
    gate = _audit(files)["pkg/ops.py:scaled_mm"]
    assert gate.class_ == "gate-only", gate.reason
    # built for sm_12x too, the unit's name says nothing: its units are read, and hold it
    assert gate.basis is Basis.UNITS_READ and not gate.evidence, gate.evidence
    assert gate.units == (unit,)
    left_out = _audit(_scaled_mm_op(unit, kernels))["pkg/ops.py:scaled_mm"]
    assert left_out.class_ == "needs-kernel-work", left_out.reason
    assert left_out.basis is Basis.WRITTEN_FOR and left_out.units == (unit,)
    assert left_out.evidence == (Evidence("scaled_mm_sm90.cu", says="named for sm_9x"),)


def test_a_cute_kernel_whose_admissible_archs_omit_the_target_needs_kernel_work() -> None:
    cute = ("class GroupedGemmKernel:\n    admissible_archs = ['sm_100a', 'sm_103a']\n\n"
            "    def __init__(self, tile):\n        self.tile = tile\n")
    runner = ("from pkg.cute_kernels import GroupedGemmKernel\nfrom pkg.utils import is_sm100_supported\n\n\n"
              "def moe(x):\n    if not is_sm100_supported():\n        raise RuntimeError('SM100 only')\n"
              "    return GroupedGemmKernel(128)\n")
    gate = _audit(BASE | {"pkg/cute_kernels.py": cute, "pkg/moe.py": runner})["pkg/moe.py:moe"]
    assert gate.class_ == "needs-kernel-work"
    assert gate.basis is Basis.CUTE, gate.basis
    # its archs: sm_10x, from its admissible_archs
    assert gate.reached == (Endpoint(EndpointKind.CUTE, "pkg/cute_kernels.py", "GroupedGemmKernel",
                                     (10,), ("GroupedGemmKernel",)),), gate.reached
    # A @cute.kernel takes the archs of the arch-specific CuTe ops its module uses.
    dsl = ("import cutlass.cute as cute\nfrom cutlass.cute.nvgpu import {ns}\n\n\n"
           "@cute.kernel\ndef gemm_kernel(a):\n    {ns}.make_op(a)\n")
    runner = runner.replace("pkg.cute_kernels import GroupedGemmKernel", "pkg.dsl import gemm_kernel")
    runner = runner.replace("GroupedGemmKernel(128)", "gemm_kernel(1)")
    for ns, klass in (("tcgen05", "needs-kernel-work"), ("warp", "gate-only")):
        gate = _audit(BASE | {"pkg/dsl.py": dsl.format(ns=ns), "pkg/moe.py": runner})["pkg/moe.py:moe"]
        assert gate.class_ == klass, (ns, gate.reason)


def test_a_kernel_imported_and_bound_to_a_name_after_a_choice_stands_behind_it() -> None:
    """sglang's ``initialize_bf16_gemm_config``: ``backend_str = "cutedsl"`` on SM100
    only, ``backend = Backend(backend_str)``, and ``if backend.is_cutedsl():`` the
    function imports the CuTe DSL gemm and binds it to a module name its callers run
    (``_gemm = cutedsl_gemm``); after ``if not is_sm100_supported(): raise`` too."""
    dsl = ("import cutlass.cute as cute\nfrom cutlass.cute.nvgpu import tcgen05\n\n\n"
           "@cute.kernel\ndef cutedsl_gemm(a):\n    tcgen05.make_op(a)\n")
    config = ("from pkg.utils import is_sm100_supported\n\n_gemm = None\n\n\n"
              "class Backend:\n    def __init__(self, name):\n        self.name = name\n\n"
              "    def is_cutedsl(self):\n        return self.name == 'cutedsl'\n\n\n"
              "def configure(requested):\n    global _gemm\n    backend_str = requested\n"
              "    if backend_str == 'auto' and is_sm100_supported():\n"
              "        backend_str = 'cutedsl'\n"
              "    backend = Backend(backend_str)\n"
              "    if backend.is_cutedsl():\n"
              "        if not is_sm100_supported():\n"
              "            raise ValueError('cutedsl requires SM10x')\n"
              "        from pkg.dsl import cutedsl_gemm\n\n"
              "        _gemm = cutedsl_gemm\n")
    found = {g.line: g for g in _audit_all(BASE | {"pkg/dsl.py": dsl, "pkg/config.py": config})
             if g.file == "pkg/config.py" and g.excludes_target}
    assert sorted(found) == [17, 21], found
    for gate in found.values():
        assert gate.class_ == "needs-kernel-work", (gate.line, gate.reason)
        assert gate.basis is Basis.CUTE, (gate.line, gate.basis)
        assert gate.reached == (Endpoint(EndpointKind.CUTE, "pkg/dsl.py", "cutedsl_gemm", (10, 11),
                                         ("cutedsl_gemm",)),), gate.reached


def test_a_refusal_whose_test_names_a_backend_guards_what_is_registered_under_it() -> None:
    """sglang's ``ServerArgs``: ``if prefill_backend == "trtllm_mha" and not
    is_sm100_supported(): raise``: the target is turned away from the backend the test
    names, so what the tree registers under that name stands behind the refusal; a
    name it tests the value not to be (``!= "auto"``) names nothing, nor does a plain
    word."""
    backends = ("from pkg.jit import gen_fmha_sm100_module\n\n\n"
                "def register_attention_backend(name):\n    return lambda fn: fn\n\n\n"
                "class FancyBackend:\n    def forward(self, x):\n"
                "        return gen_fmha_sm100_module().run(x)\n\n\n"
                "@register_attention_backend('fancy_mha')\ndef create_fancy_backend(runner):\n"
                "    return FancyBackend()\n")
    args = ("from pkg.utils import is_sm100_supported\n\n\n"
            "class Args:\n    def check(self, prefill_backend):\n"
            "        if prefill_backend == 'fancy_mha' and not is_sm100_supported():\n"
            "            raise ValueError('fancy_mha needs SM100')\n"
            "        return prefill_backend\n")
    files = BASE | {"pkg/backends.py": backends, "pkg/args.py": args}
    gate = _audit(files)["pkg/args.py:Args.check"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    _stands_on_sm100(gate, '"fancy_mha"')
    negated = args.replace("prefill_backend == 'fancy_mha'", "prefill_backend != 'fancy_mha'")
    gate = _audit(files | {"pkg/args.py": negated})["pkg/args.py:Args.check"]
    assert gate.class_ == "unknown", gate.reason
    # a plain word names a backend in several registries (`--mamba-backend triton`)
    plain = {"pkg/backends.py": backends.replace("fancy_mha", "fancy"),
             "pkg/args.py": args.replace("fancy_mha", "fancy")}
    gate = _audit(files | plain)["pkg/args.py:Args.check"]
    assert gate.class_ == "unknown", gate.reason


def test_a_chosen_return_guards_what_callers_run_for_that_string() -> None:
    """flashinfer's ``determine_gemm_backend`` returns ``"sm90"`` on Hopper, else
    ``"sm80"``; ``SegmentGEMMWrapper.run`` binds ``backend = determine_gemm_backend(...)``
    and runs the SM90 module under ``if backend == "sm90":``, another file's wrapper
    keeps it on ``self._backend`` and tests it in another method.  A caller binding a
    function of the same name from elsewhere is not that function's."""
    utils = UTILS + ("\n\ndef determine_gemm_backend(device):\n    if cap()[0] == 9:\n"
                     "        return 'sm90'\n    else:\n        return 'sm80'\n")
    gemm = ("from pkg.jit import gen_fmha_sm90_module\nfrom pkg.utils import determine_gemm_backend\n\n\n"
            "def run(x):\n    backend = determine_gemm_backend(x.device)\n"
            "    if backend == 'sm90':\n        return gen_fmha_sm90_module().run(x)\n"
            "    return x\n")
    files = BASE | {"pkg/utils.py": utils, "pkg/gemm.py": gemm}
    gate = _audit(files)["pkg/utils.py:determine_gemm_backend"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert gate.reached == (Endpoint(EndpointKind.JIT, "pkg/jit.py", "gen_fmha_sm90_module",
                                     chain=("gen_fmha_sm90_module",)),), gate.reached
    wrapper = ("from pkg.jit import gen_fmha_sm90_module\nfrom pkg import utils\n\n\n"
               "class Wrapper:\n    def plan(self, x):\n"
               "        self._backend = utils.determine_gemm_backend(x.device)\n\n"
               "    def run(self, x):\n        if self._backend == 'sm90':\n"
               "            return gen_fmha_sm90_module().run(x)\n        return x\n")
    gate = _audit(files | {"pkg/gemm.py": wrapper})["pkg/utils.py:determine_gemm_backend"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    other = gemm.replace("from pkg.utils import determine_gemm_backend",
                         "def determine_gemm_backend(device):\n    return 'sm90'")
    gate = _audit(files | {"pkg/gemm.py": other})["pkg/utils.py:determine_gemm_backend"]
    assert gate.class_ == "unknown" and not gate.reached, gate.reason


def test_a_classmethod_of_a_tree_class_is_followed() -> None:
    """sglang's ``cute_dsl_fp8_paged_mqa_logits`` refuses but SM100, then runs
    ``CuteDSLPagedMQALogitsRunner.forward(...)``, a classmethod that makes the kernel."""
    cute = ("class LogitsKernel:\n    admissible_archs = ['sm_100a']\n\n"
            "    def __init__(self, tile):\n        self.tile = tile\n")
    runner = ("from pkg.cute_kernels import LogitsKernel\nfrom pkg.utils import is_sm100_supported\n\n\n"
              "class Runner:\n    @classmethod\n    def forward(cls, x):\n"
              "        return LogitsKernel(128)\n\n\n"
              "def logits(x):\n    if not is_sm100_supported():\n        raise ValueError('SM100 only')\n"
              "    return Runner.forward(x)\n")
    gate = _audit(BASE | {"pkg/cute_kernels.py": cute, "pkg/logits.py": runner})["pkg/logits.py:logits"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert gate.basis is Basis.CUTE, gate.basis
    assert gate.reached == (Endpoint(EndpointKind.CUTE, "pkg/cute_kernels.py", "LogitsKernel", (10,),
                                     ("forward", "LogitsKernel")),), gate.reached


def test_a_method_called_on_self_or_cls_is_the_classs_own_or_its_bases() -> None:
    """sglang's runner: ``forward`` (a classmethod) calls ``cls._compile(...)``, which makes
    the kernel; ``_compile`` is defined in many files, so its name alone leads nowhere,
    but ``cls`` is the runner class.  A method a base defines is found there; a
    subclass's override of another class does not count; a staticmethod has no ``cls``."""
    dsl = ("import cutlass.cute as cute\nfrom cutlass.cute.nvgpu import tcgen05\n\n\n"
           "class LogitsKernel:\n    def __init__(self, tile):\n        self.tile = tile\n\n"
           "    @cute.jit\n    def __call__(self, a):\n        tcgen05.make_op(a)\n")
    other = ("class Other:\n    def _compile(self, x):\n        return x\n\n\n"
             "class Third:\n    def _compile(self, x):\n        return x\n")
    runner = ("from pkg.dsl import LogitsKernel\nfrom pkg.utils import is_sm100_supported\n\n\n"
              "class Base:\n    def _compile(self, key):\n        return LogitsKernel(key)\n\n\n"
              "class Runner(Base):\n    @classmethod\n    def forward(cls, x):\n"
              "        return cls._compile(x)\n\n\n"
              "def logits(x):\n    if not is_sm100_supported():\n        raise ValueError('SM100 only')\n"
              "    return Runner.forward(x)\n")
    files = BASE | {"pkg/dsl.py": dsl, "pkg/other.py": other, "pkg/logits.py": runner}
    gate = _audit(files)["pkg/logits.py:logits"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert gate.basis is Basis.CUTE, gate.basis
    assert gate.reached == (Endpoint(EndpointKind.CUTE, "pkg/dsl.py", "LogitsKernel.__call__", (10, 11),
                                     ("forward", "_compile", "LogitsKernel")),), gate.reached
    # the runner's own method comes before its base's
    own = runner.replace("        return cls._compile(x)\n",
                         "        return cls._compile(x)\n\n    def _compile(self, key):\n"
                         "        return key\n")
    gate = _audit(files | {"pkg/logits.py": own})["pkg/logits.py:logits"]
    assert gate.class_ == "unknown" and not gate.reached, gate.reason
    # a staticmethod's first parameter is no instance: its name alone decides
    static = runner.replace("    @classmethod\n    def forward(cls, x):",
                            "    @staticmethod\n    def forward(cls, x):")
    gate = _audit(files | {"pkg/logits.py": static})["pkg/logits.py:logits"]
    assert gate.class_ == "unknown" and not gate.reached, gate.reason


def test_an_op_registered_in_python_runs_its_function() -> None:
    """``torch.ops.sglang.cutedsl_tgv_bf16_gemm(...)`` runs the function sglang handed to
    ``direct_register_custom_op(op_name=..., op_func=...)``; the ``torch.library
    .custom_op("sglang::...")`` decorator and sglang's ``@register_custom_op`` (named
    after the function) register theirs.  Its kernel is a ``@cute.experimental.jit``."""
    dsl = ("import cutlass.cute as cute\nfrom cutlass.cute.nvgpu import tcgen05\n\n\n"
           "@cute.experimental.jit\ndef _bmm(a):\n    tcgen05.make_op(a)\n\n\n"
           "def _run(x):\n    return _bmm(x)\n\n\n"
           "direct_register_custom_op(op_name='tgv_gemm', op_func=_run, mutates_args=[])\n\n\n"
           "@torch.library.custom_op('sglang::tgv_logits', mutates_args=())\n"
           "def tgv_logits(x):\n    return _bmm(x)\n\n\n"
           "@register_custom_op(mutates_args=['x'])\ndef tgv_inplace(x):\n    _bmm(x)\n")
    for op in ("tgv_gemm", "tgv_logits", "tgv_inplace"):
        caller = ("import torch\nfrom pkg.utils import is_sm100_supported\n\n\n"
                  "def gemm(x):\n    if not is_sm100_supported():\n        raise RuntimeError('SM10x')\n"
                  f"    return torch.ops.sglang.{op}(x)\n")
        gate = _audit(BASE | {"pkg/dsl.py": "import torch\n" + dsl, "pkg/gemm.py": caller})["pkg/gemm.py:gemm"]
        assert gate.class_ == "needs-kernel-work", (op, gate.reason)
        assert gate.basis is Basis.CUTE, (op, gate.basis)
        assert gate.reached == (Endpoint(EndpointKind.CUTE, "pkg/dsl.py", "_bmm", (10, 11),
                                         (op, "_bmm")),), (op, gate.reached)
    # an op no Python registers stays a built op, read in the tree's C++
    caller = caller.replace("tgv_inplace", "tgv_elsewhere")
    gate = _audit(BASE | {"pkg/dsl.py": "import torch\n" + dsl, "pkg/gemm.py": caller})["pkg/gemm.py:gemm"]
    assert gate.class_ == "unknown" and gate.basis is Basis.UNREAD, gate.reason
    # a built op whose registering unit is found nowhere in the tree's C++
    assert gate.reached == (Endpoint(EndpointKind.AOT, "", "torch.ops.sglang.tgv_elsewhere",
                                     chain=("tgv_elsewhere",)),) and not gate.units, gate.reached


def test_a_decision_function_takes_the_class_of_what_callers_in_other_files_run() -> None:
    """sglang's ``should_enable_swap_ab()`` (``return is_sm90_supported() and ...``) is
    called where the MoE kernel is launched, in another file: what that call guards
    stands behind the returned value."""
    decide = ("import torch\n\n\n"
              "def should_swap_rows(block):\n"
              "    return torch.cuda.get_device_capability()[0] == 9 and block < 64\n")
    launch = ("from pkg.cute_kernels import SwapKernel\nfrom pkg.decide import should_swap_rows\n\n\n"
              "def launch(x, block):\n    if should_swap_rows(block):\n"
              "        return SwapKernel(block)\n    return x\n")
    cute = ("class SwapKernel:\n    admissible_archs = ['sm_90a']\n\n"
            "    def __init__(self, tile):\n        self.tile = tile\n")
    files = BASE | {"pkg/decide.py": decide, "pkg/launch.py": launch, "pkg/cute_kernels.py": cute}
    gate = _audit(files)["pkg/decide.py:should_swap_rows"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert gate.reached == (Endpoint(EndpointKind.CUTE, "pkg/cute_kernels.py", "SwapKernel", (9,),
                                     ("SwapKernel",)),), gate.reached


TCGEN05 = ("__global__ void mma_kernel(unsigned* tmem) {\n#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000\n"
           '  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(tmem[0]));\n'
           "#endif\n}\n")
HOST = ("void launch(int device) {\n  int major = 0, minor = 0;\n"
        "  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);\n"
        "  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);\n"
        '  TVM_FFI_ICHECK_EQ(major, 10) << "needs SM100";\n  TVM_FFI_ICHECK(minor >= 0);\n}\n')


def test_a_unit_with_sm100_only_isa_or_a_host_check_needs_kernel_work_on_sm120() -> None:
    gate = _audit(BASE | {"csrc/fmha.cu": TCGEN05, "tests/test_fmha.py": (
        "import pytest\nfrom pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
        "@pytest.mark.skipif(not is_sm100_supported(), reason='x')\ndef test_a():\n    fmha(1)\n")})
    only = gate["tests/test_fmha.py:test_a"]
    assert only.class_ == "needs-kernel-work", only.reason
    assert only.basis is Basis.COMPILED_OUT and only.units == ("csrc/fmha.cu",)
    # TCGEN05's line 3: the tcgen05 asm, compiled for sm_120a
    assert [(e.kind, e.path, e.line, e.guard) for e in only.evidence] == [
        ("foreign-isa", "csrc/fmha.cu", 3, None)], only.evidence
    # The same reading, alone: tcgen05 compiled for sm_120a; a host check refusing it.
    files = {"a.cu": TCGEN05, "b.cu": HOST}
    analysis = analyze(files, ["a.cu", "b.cu"], SM120, [parse_arch("sm_100a")])
    found = arch_findings(files, analysis.passes[SM120.name], SM120, [10])
    assert [(f.kind, f.file, f.line) for f in found] == [("host-refusal", "b.cu", 5),
                                                         ("foreign-isa", "a.cu", 3)]
    # the wording, once: a host refusal quotes its check (no typed field holds the text)
    assert "`TVM_FFI_ICHECK_EQ(major, 10)` refuses sm_120a at run time" in found[0].message
    # Generic code beside it (an SM80 atom) serves the target: no ISA finding; a check
    # the target passes is none either.
    generic = {"a.cu": TCGEN05 + "using Atom = SM80_16x8x16_F32F16F16F32_TN;\n",
               "b.cu": HOST.replace("ICHECK_EQ(major, 10)", "ICHECK_GE(major, 10)")}
    analysis = analyze(generic, ["a.cu", "b.cu"], SM120, [parse_arch("sm_100a")])
    assert arch_findings(generic, analysis.passes[SM120.name], SM120, [10]) == []


def test_a_gate_inside_a_jit_builder_guards_the_build_it_makes() -> None:
    """sglang's ``_jit_qprep_bf16_fp8_module``: ``if cap[0] != 9: raise``, then ``return
    load_jit("qprep", cuda_files=["qprep/entry.cuh"])``.  No call leads to a builder,
    the guarded code is the build: the function's own units class the gate."""
    builder = ("import torch\n\nfrom pkg.loader import load_jit\n\n\n"
               "def _jit_qprep_module():\n"
               "    if torch.cuda.get_device_capability()[0] != 10:\n"
               "        raise RuntimeError('qprep needs SM100')\n"
               "    return load_jit('qprep', cuda_files=['qprep/entry.cuh'])\n")
    loader = "def load_jit(name, cuda_files):\n    return compile_all(name, cuda_files)\n"
    files = {"pkg/__init__.py": "", "pkg/loader.py": loader, "pkg/qprep.py": builder,
             "csrc/qprep/entry.cuh": TCGEN05}
    gate = _audit(files)["pkg/qprep.py:_jit_qprep_module"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert gate.basis is Basis.COMPILED_OUT, gate.basis
    assert gate.reached == (Endpoint(EndpointKind.JIT, "pkg/qprep.py", "_jit_qprep_module",
                                     chain=("_jit_qprep_module",)),), gate.reached
    assert gate.units == ("csrc/qprep/entry.cuh",)
    assert [(e.kind, e.path, e.line) for e in gate.evidence] == [
        ("foreign-isa", "csrc/qprep/entry.cuh", 3)], gate.evidence
    generic = files | {"csrc/qprep/entry.cuh": KERNEL.format(name="qprep")}
    assert _audit(generic)["pkg/qprep.py:_jit_qprep_module"].class_ == "gate-only"


def test_a_dispatch_table_of_builders_is_followed_and_an_entry_for_the_target_serves_it() -> None:
    """``backend_modules[backend]()`` (flashinfer's fp4 quantization): every entry is a
    path some GPU takes; one built with the target's flags serves it."""
    jit = JIT + ('\n\ndef gen_fmha_sm120_module():\n'
                 '    return build("fmha120", ["fmha120.cu"], ["-gencode=arch=compute_120a,code=sm_120a"])\n')
    loader = ("from pkg.jit import gen_fmha_sm100_module, gen_fmha_sm120_module\n\n\n"
              "def get_fmha_module(backend):\n"
              "    table = {'100': gen_fmha_sm100_module, '120': gen_fmha_sm120_module}\n"
              "    return table[backend]().build_and_load()\n")
    test = ("import pytest\nfrom pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
            "@pytest.mark.skipif(not is_sm100_supported(), reason='x')\ndef test_a():\n    fmha(1)\n")
    files = BASE | {"pkg/jit.py": jit, "pkg/loader.py": loader, "tests/test_a.py": test,
                    "csrc/fmha120.cu": KERNEL.format(name="fmha120")}
    gate = _audit(files)["tests/test_a.py:test_a"]
    assert {r.name for r in gate.reached} >= {"gen_fmha_sm100_module", "gen_fmha_sm120_module"}
    assert gate.class_ == "gate-only", gate.reason
    # the sm120 entry, built for major 12 by its nvcc flags, is what its units are read for
    assert gate.basis is Basis.UNITS_READ and gate.units == ("csrc/fmha120.cu",), gate.units
    assert Endpoint(EndpointKind.JIT, "pkg/jit.py", "gen_fmha_sm120_module", (12,),
                    ("fmha", "get_fmha_module", "table[]")) in gate.reached, gate.reached


def test_an_arch_branch_behind_the_gate_is_followed_where_the_target_goes() -> None:
    """Behind the gate, ``if is_sm120(): sm120 module else: sm100 module``: the target
    runs the first only, so the sm100 module's kernels compiled out do not class it."""
    utils = UTILS + "\n\ndef is_sm120_supported():\n    return cap()[0] == 12\n"
    jit = JIT.replace("gen_fmha_sm90_module", "gen_fmha_sm120_module").replace(
        "[9]", "[12]").replace("fmha90", "fmha120")
    api = ("from pkg.jit import gen_fmha_sm100_module, gen_fmha_sm120_module\n"
           "from pkg.utils import is_sm120_supported\n\n\n"
           "def fmha(q):\n    if is_sm120_supported():\n        return gen_fmha_sm120_module()\n"
           "    return gen_fmha_sm100_module()\n")
    test = ("import pytest\nfrom pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
            "@pytest.mark.skipif(not is_sm100_supported(), reason='x')\ndef test_a():\n    fmha(1)\n")
    files = BASE | {"pkg/utils.py": utils, "pkg/jit.py": jit, "pkg/api.py": api,
                    "tests/test_a.py": test, "csrc/fmha120.cu": KERNEL.format(name="fmha120")}
    gate = _audit(files)["tests/test_a.py:test_a"]
    assert {r.name for r in gate.reached} == {"gen_fmha_sm120_module"}, gate.reached
    assert gate.class_ == "gate-only", gate.reason


def test_a_runner_named_for_another_arch_is_not_the_targets_way() -> None:
    """flashinfer's ``fp8_gemm_sm100(..., runner_names)``: ``if "cutlass_sm10x" in
    runner_names`` and ``if "cutlass_sm12x" in runner_names``, the names chosen by a
    heuristic the walk does not bind.  A name written for SM 10.x is not chosen on
    SM 12.0, so only the SM 12.x runner's module stands behind the gate.  A name of an
    older arch (``sm80``: its code runs on newer GPUs) or of none is followed."""
    jit = JIT.replace("gen_fmha_sm90_module", "gen_fmha_sm120_module").replace(
        "[9]", "[12]").replace("fmha90", "fmha120")
    api = ("from pkg.jit import gen_fmha_sm100_module, gen_fmha_sm120_module\n\n\n"
           "def fmha(q, runner_names):\n    runners = []\n"
           "    if 'cutlass_sm10x' in runner_names:\n        runners.append(gen_fmha_sm100_module())\n"
           "    if 'cutlass_sm12x' in runner_names:\n        runners.append(gen_fmha_sm120_module())\n"
           "    return runners\n")
    test = ("import pytest\nfrom pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
            "@pytest.mark.skipif(not is_sm100_supported(), reason='x')\n"
            "def test_a():\n    fmha(1, pick())\n")
    files = BASE | {"pkg/jit.py": jit, "pkg/api.py": api, "tests/test_a.py": test,
                    "csrc/fmha120.cu": KERNEL.format(name="fmha120")}
    gate = _audit(files)["tests/test_a.py:test_a"]
    assert {r.name for r in gate.reached} == {"gen_fmha_sm120_module"}, gate.reached
    assert gate.class_ == "gate-only", gate.reason
    # `!=` and `not in` read the other way: the body is every other GPU's.
    negated = api.replace("'cutlass_sm10x' in", "'cutlass_sm10x' not in")
    reached = _audit(files | {"pkg/api.py": negated})["tests/test_a.py:test_a"].reached
    assert {r.name for r in reached} == {"gen_fmha_sm100_module", "gen_fmha_sm120_module"}
    # An SM 8.0 runner's code runs on SM 12.0 too: its name decides nothing.
    older = api.replace("cutlass_sm12x", "cutlass_sm80")
    gate = _audit(files | {"pkg/api.py": older})["tests/test_a.py:test_a"]
    assert {r.name for r in gate.reached} == {"gen_fmha_sm120_module"}
    assert gate.class_ == "gate-only", gate.reason
    # Following the "cutlass" backend of a registry, both are its variants: the arch
    # each is named for still decides.
    variants = REGISTRY.replace(
        "from pkg.jit import gen_fmha_sm100_module",
        "from pkg.jit import gen_fmha_sm100_module, gen_fmha_sm120_module").replace(
        '    if backend == "cutlass":\n        runners.append(gen_fmha_sm100_module().run(a))\n',
        '    if "cutlass_sm10x" in names(backend):\n        runners.append(gen_fmha_sm100_module().run(a))\n'
        '    if "cutlass_sm12x" in names(backend):\n        runners.append(gen_fmha_sm120_module().run(a))\n')
    assert "cutlass_sm12x" in variants
    keyed = _audit(files | {"pkg/mm.py": variants})["pkg/mm.py:_cutlass_mm_requirement"]
    assert {r.name for r in keyed.reached} == {"gen_fmha_sm120_module"}, keyed.reached
    assert keyed.class_ == "gate-only", keyed.reason
    # A runner of no registry tested on the same names (flashinfer's `"tgv" in
    # runner_names` beside `"cudnn" in runner_names`) is not the followed backend's.
    other = variants.replace('    if "cutlass_sm12x" in names(backend):',
                             '    if "tinygemm" in names(backend):\n'
                             '        runners.append(gen_fmha_sm100_module().run(a))\n'
                             '    if "cutlass_sm12x" in names(backend):')
    keyed = _audit(files | {"pkg/mm.py": other})["pkg/mm.py:_cutlass_mm_requirement"]
    assert {r.name for r in keyed.reached} == {"gen_fmha_sm120_module"}, keyed.reached


def test_a_refusal_nested_in_a_backend_branch_keeps_the_rest_of_the_function() -> None:
    """``if backend == "cutlass": if not is_sm100(): raise`` guards what the function
    does after the check, beyond the backend ``if`` (flashinfer's gemm_fp8_nt_groupwise)."""
    api = ("from pkg.jit import gen_fmha_sm100_module\nfrom pkg.utils import is_sm100_supported\n\n\n"
           "def fmha(q, backend):\n    if backend == 'cutlass':\n        if not is_sm100_supported():\n"
           "            raise ValueError('SM100 only')\n"
           "    if backend == 'cutlass':\n        return gen_fmha_sm100_module()\n    return q\n")
    gate = _audit(BASE | {"pkg/api.py": api})["pkg/api.py:fmha"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    _stands_on_sm100(gate)


def test_a_jit_gate_that_admits_the_target_into_units_with_nothing_for_it_needs_kernel_work() -> None:
    """The story's lesson one level down: a Python gate keeps the target from a module
    whose own gate admits it, but whose units have only SM100 code (a CUTLASS ``Sm100``
    ArchTag, read from a template the builder renders into its generated units)."""
    jit = ("from pkg.core import build, ctx\n\n\n"
           "def gen_gemm_module():\n    sources = []\n"
           "    for prefix in ['gemm', 'group_gemm']:\n"
           "        template = open(f'{prefix}_sm100_kernel_inst.jinja').read()\n"
           "        sources.append(template)\n"
           "    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10, 12])\n"
           "    return build('gemm', sources, flags)\n")
    api = ("from pkg.jit import gen_gemm_module\nfrom pkg.utils import is_sm100_supported\n\n\n"
           "def gemm(a):\n    if not is_sm100_supported():\n        raise ValueError('SM100 only')\n"
           "    return gen_gemm_module()\n")
    header = ("#pragma once\nusing ArchTag = cutlass::arch::Sm100;\n"
              "template <int N> void gemm_sm100() {}\n")
    files = BASE | {"pkg/jit.py": jit, "pkg/api.py": api, "include/gemm_sm100.cuh": header,
                    "csrc/gemm_sm100_kernel_inst.jinja": ('#include "../include/gemm_sm100.cuh"\n'
                                                         "template void gemm_sm100<{{ n }}>();\n"),
                    "csrc/group_gemm_sm100_kernel_inst.jinja": "// none\n"}
    gate = _audit(files)["pkg/api.py:gemm"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    # the module's own gate, at line 9, admits sm_120a ...
    module = next(g for g in _audit_all(files) if g.function == "gen_gemm_module")
    assert (module.file, module.line, module.admits_major(12)) == ("pkg/jit.py", 9, True)
    assert not module.excludes_target
    assert gate.reached == (Endpoint(EndpointKind.JIT, "pkg/jit.py", "gen_gemm_module",
                                     chain=("gen_gemm_module",)),), gate.reached
    # ... but its units have only SM100 code: the Sm100 ArchTag of the header they include
    assert gate.basis is Basis.COMPILED_OUT, gate.basis
    assert [(e.kind, e.path, e.line) for e in gate.evidence] == [
        ("foreign-isa", "include/gemm_sm100.cuh", 2)], gate.evidence


def test_a_unit_an_arch_build_adds_under_an_if_is_that_archs() -> None:
    """flashinfer's ``gen_xqa_module`` admits 9 to 12 and appends ``xqa/mha_sm90.cu``
    only ``if has_sm90``: that unit, named for SM90 and compiled out elsewhere, is the
    SM90 build's, so the target's build of the module has its kernels.  Added with no
    condition, it is the target's too."""
    jit = ("from pkg.core import build, ctx\n\n\n"
           "def gen_xqa_module(archs):\n    sources = ['xqa/mha.cu']\n"
           "    if any(major == 9 for major, minor in archs):\n"
           "        sources.append('xqa/mha_sm90.cu')\n"
           "    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9, 10, 12])\n"
           "    return build('xqa', sources, flags)\n")
    api = ("from pkg.jit import gen_xqa_module\nfrom pkg.utils import is_sm100_supported\n\n\n"
           "def xqa(a):\n    if not is_sm100_supported():\n        raise ValueError('SM100 only')\n"
           "    return gen_xqa_module([(10, 0)])\n")
    sm90 = ("__global__ void mha_sm90_kernel(float* out) {\n"
            "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900\n  out[threadIdx.x] = 1.0f;\n"
            "#endif\n}\n")
    files = BASE | {"pkg/jit.py": jit, "pkg/api.py": api, "csrc/xqa/mha.cu": KERNEL.format(name="mha"),
                    "csrc/xqa/mha_sm90.cu": sm90}
    gates = _audit(files)
    assert gates["pkg/api.py:xqa"].class_ == "gate-only", gates["pkg/api.py:xqa"].reason
    always = jit.replace("    if any(major == 9 for major, minor in archs):\n        sources.append",
                         "    sources.append")
    gate = _audit(files | {"pkg/jit.py": always})["pkg/api.py:xqa"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert any(e.path.endswith("mha_sm90.cu") for e in gate.evidence), gate.evidence


def test_units_named_by_fstrings_of_module_tables_and_of_unknown_fields() -> None:
    """flashinfer's FlashKDA builder names ``f"{_STEMS[variant]}_binding.cu"`` from a
    module table of literals; cake_router_gemm names
    ``f"cake_router_gemm_m{tokens}_k{hidden}_device.cu"``: every unit of that family in
    the tree.  A wildcard with no stem of its own (``f"{name}_binding.cu"``) names none."""
    jit = ("from pkg.core import build, ctx\n\n_STEMS = {'m64': 'kda_m64', 'm128': 'kda_m128'}\n\n\n"
           "def gen_kda_module(variant):\n"
           "    binding = f'{_STEMS[variant]}_binding.cu'\n"
           "    flags = ctx.get_nvcc_flags_list(supported_major_versions=[10])\n"
           "    return build('kda', [binding], flags)\n\n\n"
           "def gen_router_module(tokens, hidden):\n"
           "    source = f'router_gemm_m{tokens}_k{hidden}_device.cu'\n"
           "    return build('router', [source], ['-gencode=arch=compute_100a,code=sm_100a'])\n")
    api = ("from pkg.jit import gen_kda_module, gen_router_module\n"
           "from pkg.utils import is_sm100_supported\n\n\n"
           "def kda(a):\n    if not is_sm100_supported():\n        raise ValueError('SM100 only')\n"
           "    return gen_kda_module('m64')\n\n\n"
           "def router(a):\n    if not is_sm100_supported():\n        raise ValueError('SM100 only')\n"
           "    return gen_router_module(4, 6144)\n")
    files = BASE | {"pkg/jit.py": jit, "pkg/api.py": api,
                    "csrc/kda/kda_m64_binding.cu": GUARDED, "csrc/kda/kda_m128_binding.cu": GUARDED,
                    "csrc/router/router_gemm_m4_k6144_device.cu": GUARDED,
                    "csrc/router/router_gemm_m8_k7168_device.cu": KERNEL.format(name="r8")}
    gates = _audit(files)
    kda = gates["pkg/api.py:kda"]
    assert kda.class_ == "needs-kernel-work", kda.reason
    assert any(e.path.endswith("kda_m64_binding.cu") for e in kda.evidence), kda.evidence
    router = gates["pkg/api.py:router"]
    assert router.class_ == "needs-kernel-work", router.reason
    assert any(e.path.endswith("router_gemm_m4_k6144_device.cu") for e in router.evidence), \
        router.evidence
    bare = jit.replace("f'{_STEMS[variant]}_binding.cu'", "f'{variant}_binding.cu'")
    gate = _audit(files | {"pkg/jit.py": bare})["pkg/api.py:kda"]
    assert gate.class_ == "unknown", gate.reason
    # what it reaches, the module naming no unit, cannot be classed
    assert gate.basis is Basis.UNREAD and not gate.evidence, gate.reason
    assert gate.reached == (Endpoint(EndpointKind.JIT, "pkg/jit.py", "gen_kda_module",
                                     chain=("gen_kda_module",)),), gate.reached
    assert _audit(files | {"pkg/jit.py": bare})["pkg/jit.py:gen_kda_module"].basis is Basis.NO_UNIT


def test_a_method_of_a_decorated_function_runs_the_function() -> None:
    """sglang's benchmark scripts: ``@triton.testing.perf_report(...)`` on ``benchmark``,
    then ``benchmark.run(...)`` under the script's capability check: the wrapper runs
    the function, so its kernels stand behind the check."""
    bench = ("import triton\n\nfrom pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
             "@triton.testing.perf_report(triton.testing.Benchmark(x_names=['n']))\n"
             "def benchmark(n):\n    return fmha(n)\n\n\n"
             "if __name__ == '__main__':\n    if not is_sm100_supported():\n"
             "        print('Skipping')\n    else:\n        benchmark.run(print_data=True)\n")
    gate = _audit(BASE | {"benchmarks/bench_fmha.py": bench})["benchmarks/bench_fmha.py:<module>"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert ("run", "fmha") in gate.calls, gate.calls


def test_a_method_of_an_unknown_object_is_followed_by_its_distinctive_name() -> None:
    """``self.layer.forward_with_fusion(x)``: the object's class is not known, the
    method's name is defined once in the tree (twice at most), so it is followed; a
    common name (``forward``) is not."""
    layer = ("from pkg.api import fmha\n\n\nclass Norm:\n"
             "    def forward_with_fusion(self, x):\n        return fmha(x)\n\n"
             "    def forward(self, x):\n        return fmha(x)\n")
    user = ("from pkg.utils import is_sm100_supported\n\n\nclass Block:\n"
            "    def __init__(self, layer):\n        self.layer = layer\n\n"
            "    def run(self, x):\n        if is_sm100_supported():\n"
            "            return self.layer.{name}(x)\n        return x\n")
    gates = _audit(BASE | {"pkg/layer.py": layer, "pkg/block.py": user.format(name="forward_with_fusion")})
    gate = gates["pkg/block.py:Block.run"]
    assert _runs(gate.calls, "forward_with_fusion", "fmha"), gate.calls
    assert gate.class_ == "needs-kernel-work", gate.reason
    common = _audit(BASE | {"pkg/layer.py": layer, "pkg/block.py": user.format(name="forward")})
    assert common["pkg/block.py:Block.run"].class_ == "unknown"


def test_a_returned_arch_value_takes_the_class_of_the_gates_testing_it_in_any_file() -> None:
    """``_fused_available()`` returns the GPU's answer, ``can_use_fused()`` returns it
    with a shape test, and only another file branches on the latter: each returned
    value decides nothing itself: the outer one takes the class of what its caller in
    the other file guards, the inner one that of the gates testing its call."""
    flags = ("from pkg.utils import is_sm100_supported\n\n\n"
             "def _fused_available():\n    return is_sm100_supported()\n\n\n"
             "def can_use_fused(n):\n    return n > 0 and _fused_available()\n")
    # (The engine parses only files naming a GPU word: "major" in the comment.)
    attend = ("from pkg.api import fmha\nfrom pkg.flags import can_use_fused\n\n\n"
              "def attend(q):\n    # The fused path where the GPU's major allows it.\n"
              "    if can_use_fused(q):\n        return fmha(q)\n    return q\n")
    gates = _audit(BASE | {"pkg/flags.py": flags, "pkg/attend.py": attend})
    assert gates["pkg/attend.py:attend"].class_ == "needs-kernel-work"
    outer, inner = gates["pkg/flags.py:can_use_fused"], gates["pkg/flags.py:_fused_available"]
    assert outer.effect.returned == "can_use_fused" and outer.returns_decision(), outer.effect
    assert outer.class_ == "needs-kernel-work", outer.reason
    # its caller in the other file is followed: what the call guards is behind it
    _stands_on_sm100(outer, "fmha", "get_fmha_module")
    assert _runs(outer.calls, "pkg/attend.py:attend", "fmha"), outer.calls
    assert outer.evidence == gates["pkg/attend.py:attend"].evidence != []
    assert inner.class_ == "needs-kernel-work", inner.reason
    assert inner.basis is Basis.TESTED_BY and inner.evidence == outer.evidence, inner.basis
    # the wording, once: which gates test it (no typed field holds them)
    assert "pkg/flags.py:9 can_use_fused (needs-kernel-work)" in inner.reason
    # Nobody tests it: it stays unknown, with the reason it had.
    alone = _audit(BASE | {"pkg/flags.py": flags})
    assert alone["pkg/flags.py:can_use_fused"].class_ == "unknown"
    assert alone["pkg/flags.py:can_use_fused"].basis is Basis.NOTHING_REACHED


def test_a_returned_arch_value_built_on_a_classed_one_takes_its_class() -> None:
    """sglang's ``_post_attn_residual_is_read_only`` returns ``... and
    apply_flashinfer_allreduce_fusion(n)``, and no gate of a class tests it: it excludes
    the target because the function it calls does, and takes that one's class.  A
    returned value its testers class keeps theirs."""
    flags = ("from pkg.utils import is_sm100_supported\n\n\n"
             "def apply_fused(n):\n    return is_sm100_supported() and n > 0\n\n\n"
             "class Layer:\n    def _read_only(self, n):\n"
             "        return self.gather and apply_fused(n)\n")
    attend = ("from pkg.api import fmha\nfrom pkg.flags import apply_fused\n\n\n"
              "def attend(q):\n    # The fused path where the GPU's major allows it.\n"
              "    if apply_fused(q):\n        return fmha(q)\n    return q\n")
    gates = _audit(BASE | {"pkg/flags.py": flags, "pkg/attend.py": attend})
    assert gates["pkg/flags.py:apply_fused"].class_ == "needs-kernel-work"
    built = gates["pkg/flags.py:Layer._read_only"]
    assert built.effect.returned == "_read_only" and built.returns_decision(), built.effect
    assert built.class_ == "needs-kernel-work", built.reason
    assert built.basis is Basis.BUILT_ON, built.basis
    # the wording, once: the value it is built on (no typed field holds it)
    assert built.reason.startswith("_read_only() returns an arch value built on what "
                                   "pkg/flags.py:5 apply_fused() (needs-kernel-work) returns")
    assert built.evidence == gates["pkg/flags.py:apply_fused"].evidence != []
    # what it is built on unclassed, it stays unknown
    alone = _audit(BASE | {"pkg/flags.py": flags})
    assert alone["pkg/flags.py:Layer._read_only"].class_ == "unknown"


def test_a_returned_call_whose_value_depends_on_the_gpu_is_what_runs() -> None:
    """flashinfer's ``..._nvfp4(a, b)`` is ``return _fusion(a, b)``, and ``_fusion``
    refuses all but major 10 before its kernel: the evaluator reads the returned value
    as the GPU's.  The call returned is what runs behind that value, so its module
    classes it, as it classes the refusal inside."""
    wrapper = ("import torch\n\nfrom pkg.api import fmha\n\n\n"
               "def _fused(q):\n    major, minor = torch.cuda.get_device_capability()\n"
               "    if major != 10:\n        raise ValueError('needs SM100')\n    return fmha(q)\n\n\n"
               "def fused_nvfp4(q):\n    return _fused(q)\n")
    gates = _audit(BASE | {"pkg/wrapper.py": wrapper})
    outer, inner = gates["pkg/wrapper.py:fused_nvfp4"], gates["pkg/wrapper.py:_fused"]
    assert outer.effect.returned == "fused_nvfp4" and outer.returns_decision(), outer.effect
    assert outer.calls[0] == ("_fused",) and outer.reached, outer.calls
    assert outer.class_ == inner.class_ == "needs-kernel-work", outer.reason
    _stands_on_sm100(outer, "_fused", "fmha", "get_fmha_module")
    _stands_on_sm100(inner, "fmha", "get_fmha_module")


def test_a_value_left_out_on_purpose_carries_the_intent_to_the_gates_testing_it() -> None:
    """sglang's DeepGEMM switch: ``_compute_enable()`` refuses SM120 with a comment
    saying the hardware lacks what DeepGEMM needs; ``ENABLE_JIT`` is set from it,
    ``SCALE_UE8M0`` from that, and gates in other files (and a local assigned from
    it) test them.  Each is ``intentional``, with the refusal named; a gate over an
    unrelated value stays ``unknown``."""
    config = ("from pkg.utils import cap, is_sm100_supported\n\n\n"
              "def _compute_enable():\n    major = cap()[0]  # the GPU's major\n    if major < 9:\n"
              "        return False\n"
              "    # DeepGEMM needs TMEM/tcgen05, which SM120 does not have\n"
              "    if major == 12:\n        return False\n    return True\n\n\n"
              "ENABLE_JIT = _compute_enable()\n"
              "SCALE_UE8M0 = ENABLE_JIT and is_sm100_supported()\n")
    user = ("from pkg import config\nfrom pkg.utils import is_sm100_supported\n\n\n"
            "def run(x, n):\n    # the GPU major decides\n"
            "    if config.ENABLE_JIT:\n        return x * 2\n"
            "    packed = config.SCALE_UE8M0 and n % 4 == 0\n"
            "    if packed:\n        return x * 3\n"
            "    if is_sm100_supported():\n        return x * 4\n    return x\n")
    tree = DictTree(BASE | {"pkg/config.py": config, "pkg/user.py": user})
    found, _ = find_all(tree, SM120)
    found = judge(tree, found, SM120)
    by_line = {(g.file, g.line): g for g in found if g.excludes_target}
    seed = by_line[("pkg/config.py", 9)]
    assert seed.class_ == "intentional", seed.reason
    assert (seed.function, seed.basis) == ("_compute_enable", Basis.UPSTREAM_SAYS)
    for line in (7, 10):
        gate = by_line[("pkg/user.py", line)]
        assert gate.class_ == "intentional", (line, gate.reason)
        # the value it tests is false because the seed leaves the target out on purpose
        assert gate.basis is Basis.INTENDED_VALUE, (line, gate.basis)
        assert gate.evidence == (Evidence("pkg/config.py:9", "pkg/config.py", line=9),)
    assert by_line[("pkg/user.py", 12)].class_ == "unknown"  # is_sm100_supported(): no intent


def test_functions_handed_on_methods_of_a_refused_class_and_tests_own_imports() -> None:
    """Three ways flashinfer's CuTe DSL MoE hides its kernels from a walk: the API
    hands its implementation to a runner (``Runner(forward_impl=_impl)``), the
    capability decorator sits on the wrapper's ``__init__`` (its other methods run
    the kernel), and the module-level skip of a test file guards test methods that
    import the API inside themselves.  Each reaches the sm100 module."""
    moe = ("from pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
           "class Runner:\n    def __init__(self, forward_impl):\n"
           "        self.forward_impl = forward_impl\n\n\n"
           "def _moe_impl(x):\n    return fmha(x)\n\n\n"
           "def fused_moe(x):\n    # the GPU major decides\n"
           "    if not is_sm100_supported():\n        raise ValueError('SM100 only')\n"
           "    return Runner(forward_impl=_moe_impl)\n\n\n"
           "class MoeWrapper:\n    def __init__(self, n):\n        # the GPU major decides\n"
           "        if not is_sm100_supported():\n            raise ValueError('SM100 only')\n"
           "        self.n = n\n\n    def run(self, x):\n        return fmha(x)\n\n\n"
           "class MultiMethod:\n    def __init__(self, mode):\n"
           "        if mode == 'fused':\n            # the GPU major decides\n"
           "            assert is_sm100_supported(), 'fused needs SM100'\n"
           "        self.mode = mode\n\n    def run(self, x):\n        return fmha(x)\n")
    test = ("import pytest\nimport torch\n\n"
            "pytestmark = pytest.mark.skipif(\n"
            "    torch.cuda.get_device_capability()[0] != 10, reason='SM100')\n\n\n"
            "class TestMoe:\n    def test_run(self):\n        from pkg.moe import fused_moe\n"
            "        fused_moe(1)\n")
    gates = _audit(BASE | {"pkg/moe.py": moe, "tests/test_moe.py": test})
    for name, through in (("pkg/moe.py:fused_moe", ("_moe_impl",)),
                          ("pkg/moe.py:MoeWrapper.__init__", ()),
                          ("tests/test_moe.py:<module>", ("fused_moe", "_moe_impl"))):
        gate = gates[name]
        assert gate.class_ == "needs-kernel-work", (name, gate.reason)
        _stands_on_sm100(gate, *through, "fmha", "get_fmha_module")
    assert ("run", "fmha") in gates["pkg/moe.py:MoeWrapper.__init__"].calls
    # A refusal of one configuration (nested in a branch of __init__) is not one of the
    # object: the class's other methods are not what it guards.
    assert gates["pkg/moe.py:MultiMethod.__init__"].class_ == "unknown"
    # A test case's setUpClass that skips unless SM100 guards every test of the case.
    case = ("import unittest\n\nfrom pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
            "class TestFmha(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n"
            "        if not is_sm100_supported():\n            raise unittest.SkipTest('SM100 only')\n\n"
            "    def test_run(self):\n        fmha(1)\n")
    gate = _audit(BASE | {"tests/test_case.py": case})["tests/test_case.py:TestFmha.setUpClass"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert ("test_run", "fmha") in gate.calls, gate.calls


def test_a_refusal_of_one_configuration_guards_that_configurations_branches() -> None:
    """sglang's ``Fp8MoEMethod.__init__``: ``if get_backend().is_cutlass(): assert
    is_sm100_supported()``; ``apply`` runs the cutlass kernel under the same test.  The
    object made in that configuration runs that branch, and only that one."""
    moe = ("from pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
           "def get_backend():\n    return BACKEND\n\n\n"
           "def generic(x):\n    return x\n\n\n"
           "class Fp8MoEMethod:\n    def __init__(self):\n"
           "        if get_backend().is_cutlass():\n            # the GPU major decides\n"
           "            assert is_sm100_supported(), 'cutlass MoE needs SM100'\n\n"
           "    def apply(self, x):\n        if get_backend().is_cutlass():\n"
           "            return fmha(x)\n        return generic(x)\n")
    gate = _audit(BASE | {"pkg/moe.py": moe})["pkg/moe.py:Fp8MoEMethod.__init__"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert ("apply", "fmha") in gate.calls and ("apply", "generic") not in gate.calls, gate.calls
    # Another test in apply is another configuration: nothing of it stands behind.
    other = moe.replace("    def apply(self, x):\n        if get_backend().is_cutlass():",
                        "    def apply(self, x):\n        if get_backend().is_triton():")
    assert _audit(BASE | {"pkg/moe.py": other})["pkg/moe.py:Fp8MoEMethod.__init__"].class_ == "unknown"


def test_an_object_returned_is_handed_on_and_its_methods_run() -> None:
    """sglang's ``get_quant_method`` returns a method object the layer calls later: what
    its methods run stands behind the gate choosing it."""
    quant = ("from pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
             "class FusedMethod:\n    def __init__(self, n):\n        self.n = n\n\n"
             "    def apply(self, x):\n        return fmha(x)\n\n\n"
             "class PlainMethod:\n    def apply(self, x):\n        return x\n\n\n"
             "def get_quant_method(n):\n    # the GPU major decides\n"
             "    if is_sm100_supported():\n        return FusedMethod(n)\n"
             "    return PlainMethod()\n")
    gate = _audit(BASE | {"pkg/quant.py": quant})["pkg/quant.py:get_quant_method"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert ("FusedMethod.*", "fmha") in gate.calls  # `apply`, run by whoever takes the object


def test_a_gate_admitting_only_what_its_code_is_named_for_needs_kernel_work() -> None:
    """flashinfer's ``moe_ep/backends/mega/kernel/sm90/.../backend.py`` checks for SM90
    before code written for it: nothing behind the check can be read, but it admits
    only the architecture its code is named for.  A check admitting more than that
    name says nothing so."""
    check = ("from pkg.utils import cap  # the GPU major\n\n\n"
             "def _validate_sm90_arch():\n    if cap()[0] != 9:\n"
             "        raise RuntimeError('this backend needs SM90')\n\n\n"
             "def _validate_hopper_or_blackwell():\n    if cap()[0] not in (9, 10):\n"
             "        raise RuntimeError('needs SM90 or SM100')\n")
    gates = _audit(BASE | {"pkg/mega/sm90/backend.py": check})
    named = gates["pkg/mega/sm90/backend.py:_validate_sm90_arch"]
    assert named.class_ == "needs-kernel-work", named.reason
    assert named.basis is Basis.NAMED_FOR and not named.reached, named.basis
    assert named.evidence == (Evidence("pkg/mega/sm90/backend.py", "pkg/mega/sm90/backend.py",
                                       says="named for sm_9x"),)
    assert gates["pkg/mega/sm90/backend.py:_validate_hopper_or_blackwell"].class_ == "unknown"


REGISTRY = '''\
import torch

try:
    import cudnn
except ImportError:
    cudnn = None

from pkg.jit import gen_fmha_sm100_module


def supported_compute_capability(ccs):
    def mark(func):
        func.ccs = ccs
        return func
    return mark


def backend_requirement(checks, common_check=None):
    def mark(func):
        return func
    return mark


@supported_compute_capability([100])
def _cutlass_mm_requirement(a, backend="cudnn"):
    return True


@supported_compute_capability([90, 100])
def _cudnn_mm_requirement(a, backend="cudnn"):
    return True


@supported_compute_capability([100])
def _check_mm_problem_size(a, backend="cudnn"):
    return a.shape[0] > 0


@backend_requirement(
    {"cudnn": _cudnn_mm_requirement, "cutlass": _cutlass_mm_requirement},
    common_check=_check_mm_problem_size,
)
def mm(a, backend="cudnn"):
    runners = []
    if "cudnn" in [backend]:
        with cudnn.graph(a) as graph:
            runners.append(graph)
    if backend == "cutlass":
        runners.append(gen_fmha_sm100_module().run(a))
    return runners


@supported_compute_capability([100])
def _cutlass_bmm_requirement(a, backend="cudnn"):
    return True


@supported_compute_capability([90, 100])
def _cudnn_bmm_requirement(a, backend="cudnn"):
    return True


@backend_requirement({"cudnn": _cudnn_bmm_requirement, "cutlass": _cutlass_bmm_requirement})
def bmm(a, backend="cudnn"):
    factory = {
        "cudnn": lambda: cudnn.graph(a),
        "cutlass": lambda: gen_fmha_sm100_module().run(a),
    }
    return [factory[name]() for name in [backend]]
'''


def test_a_backend_requirement_guards_what_its_backend_runs_in_the_function_it_decorates() -> None:
    """flashinfer's ``@backend_requirement({"cudnn": ..., "cutlass": ...})``: each
    requirement's capability list guards the decorated function for its backend only
    (tests of the other backends' names not taken).  cuDNN brings its own kernels, so
    its requirement is gate-only; the CUTLASS one reaches the SM100 module whose unit
    is compiled out for the target; the common check guards every backend."""
    gates = _audit(BASE | {"pkg/mm.py": REGISTRY})
    cudnn = gates["pkg/mm.py:_cudnn_mm_requirement"]
    assert cudnn.class_ == "gate-only", cudnn.reason
    assert cudnn.basis is Basis.LIBRARY, cudnn.basis
    assert cudnn.reached == (Endpoint(EndpointKind.LIB, "", "cudnn.graph", chain=("graph",)),)
    # the wording, once: the library's name (no typed field holds it)
    assert cudnn.reason.startswith("its code calls cudnn.graph of NVIDIA cuDNN"), cudnn.reason
    assert all("gen_fmha_sm100_module" not in c for c in cudnn.calls), cudnn.calls
    cutlass = gates["pkg/mm.py:_cutlass_mm_requirement"]
    assert cutlass.class_ == "needs-kernel-work", cutlass.reason
    assert ("mm", "gen_fmha_sm100_module") in cutlass.calls, cutlass.calls
    _stands_on_sm100(cutlass)
    common = gates["pkg/mm.py:_check_mm_problem_size"]
    assert common.class_ == "needs-kernel-work", common.reason
    # A table of runners keyed by the backends' names: the backend's own entry.
    assert gates["pkg/mm.py:_cudnn_bmm_requirement"].class_ == "gate-only"
    assert gates["pkg/mm.py:_cutlass_bmm_requirement"].class_ == "needs-kernel-work"


BACKENDS = '''\
BACKENDS = {}


def register_backend(name):
    def mark(fn):
        BACKENDS[name] = fn
        return fn
    return mark


@register_backend("triton_attn")
def create_triton_backend(runner):
    from pkg.triton_attn import TritonAttn  # imported where it is made, as sglang does

    return TritonAttn(runner)
'''
TRITON_ATTN = '''\
import triton


@triton.jit
def _attn_kernel(x):
    pass


class TritonAttn:
    def __init__(self, runner):
        self.runner = runner

    def forward_decode(self, q):
        _attn_kernel[(1,)](q)
        return q
'''


def test_a_backend_name_handed_on_leads_to_what_the_tree_registers_under_it() -> None:
    """sglang's model overrides: ``args.attention_backend = "triton_attn"`` on SM100
    only, or a default chosen by ``"triton_attn" if is_sm100_supported() else ...``.
    The name leads to the factory registered under it and the methods of the class
    it returns: a Triton kernel, so lifting the gate is the whole change."""
    args = ("from pkg.utils import is_sm100_supported\n\n\n"
            "def adjust(args):\n    if is_sm100_supported():\n"
            "        args.attention_backend = 'triton_attn'\n    return args\n\n\n"
            "def default(args):\n"
            "    args.attention_backend = 'triton_attn' if is_sm100_supported() else 'torch'\n")
    gates = _audit(BASE | {"pkg/backends.py": BACKENDS, "pkg/triton_attn.py": TRITON_ATTN,
                           "pkg/args.py": args})
    for function in ("adjust", "default"):
        gate = gates[f"pkg/args.py:{function}"]
        assert gate.class_ == "gate-only", (function, gate.effect, gate.reason)
        assert ('"triton_attn"', "triton:_attn_kernel") in gate.calls, gate.calls
        assert gate.basis is Basis.TRITON, (function, gate.basis)
        assert gate.reached == (Endpoint(EndpointKind.TRITON, "pkg/triton_attn.py", "_attn_kernel",
                                         chain=('"triton_attn"', "_attn_kernel")),), gate.reached
    # A name compared, not handed on, leads nowhere.
    tested = ("from pkg.utils import is_sm100_supported\n\n\n"
              "def check(args):\n    if is_sm100_supported():\n"
              "        return args.attention_backend == 'triton_attn'\n    return False\n")
    gates = _audit(BASE | {"pkg/backends.py": BACKENDS, "pkg/triton_attn.py": TRITON_ATTN,
                           "pkg/args.py": tested})
    assert gates["pkg/args.py:check"].class_ == "unknown"
    # A runner registered under a dispatcher's key and its own name
    # (``@register_fused_func("none", "triton_moe")``): the name handed on leads to it;
    # the shared key, not distinctive, leads nowhere.
    fused = ("from pkg.backends import register_backend\nfrom pkg.triton_attn import _attn_kernel\n\n\n"
             "def register_fused_func(a2a, runner):\n    return register_backend(runner)\n\n\n"
             "@register_fused_func('none', 'triton_moe')\ndef fused_triton_moe(x):\n"
             "    _attn_kernel[(1,)](x)\n")
    moe = args.replace("attention_backend", "moe_runner_backend").replace("triton_attn", "triton_moe")
    gates = _audit(BASE | {"pkg/backends.py": BACKENDS, "pkg/triton_attn.py": TRITON_ATTN,
                           "pkg/fused.py": fused, "pkg/args.py": moe})
    gate = gates["pkg/args.py:adjust"]
    assert gate.class_ == "gate-only", gate.reason
    assert ('"triton_moe"', "triton:_attn_kernel") in gate.calls, gate.calls
    none = moe.replace("'triton_moe'", "'none'")
    gates = _audit(BASE | {"pkg/backends.py": BACKENDS, "pkg/triton_attn.py": TRITON_ATTN,
                           "pkg/fused.py": fused, "pkg/args.py": none})
    assert gates["pkg/args.py:adjust"].class_ == "unknown"


def test_gate_only_is_not_said_over_what_cannot_be_read() -> None:
    """A Triton helper and a built op registered nowhere: gate-only says nothing needs
    kernel work, which the op, unread, may; the gate stays unknown and names it."""
    ops = ("import torch\nimport triton\n\nfrom pkg.utils import is_sm100_supported\n\n\n"
           "@triton.jit\ndef _helper(x):\n    pass\n\n\n"
           "def attend(q):\n    if is_sm100_supported():\n        _helper[(1,)](q)\n"
           "        return torch.ops.vendor_attn.fwd.default(q)\n    return q\n")
    gates = _audit(BASE | {"pkg/ops.py": ops})
    gate = gates["pkg/ops.py:attend"]
    assert gate.class_ == "unknown", gate.reason
    # it names the op it cannot read: registered nowhere, no unit of the tree
    assert gate.basis is Basis.UNREAD and not gate.units, gate.basis
    assert Endpoint(EndpointKind.AOT, "", "torch.ops.vendor_attn.fwd",
                    chain=("default",)) in gate.reached, gate.reached
    alone = ops.replace("        return torch.ops.vendor_attn.fwd.default(q)\n", "")
    assert _audit(BASE | {"pkg/ops.py": alone})["pkg/ops.py:attend"].class_ == "gate-only"


def test_code_after_a_branch_setting_an_attribute_reads_that_attribute_only() -> None:
    """sglang's ``ServerArgs._handle_model_specific_adjustments``: ``if
    is_sm100_supported(): self.enable_fusion = True``, then code testing other
    attributes of ``self`` (``if self.model == "nsa": ...``): that code is no reader of
    what the branch chose; code testing ``self.enable_fusion`` is."""
    args = ("from pkg.api import fmha\nfrom pkg.utils import is_sm100_supported\n\n\n"
            "class Args:\n    def adjust(self):\n        if is_sm100_supported():\n"
            "            self.enable_fusion = True\n"
            "        if self.model == 'nsa':\n            fmha(1)\n\n"
            "    def fuse(self):\n        if is_sm100_supported():\n"
            "            self.enable_fusion = True\n"
            "        if self.enable_fusion:\n            fmha(1)\n")
    gates = _audit(BASE | {"pkg/args.py": args})
    adjust, fuse = gates["pkg/args.py:Args.adjust"], gates["pkg/args.py:Args.fuse"]
    assert adjust.class_ == "unknown" and not adjust.reached, adjust.reached
    assert fuse.class_ == "needs-kernel-work", fuse.reason
    _stands_on_sm100(fuse, "fmha", "get_fmha_module")


def test_a_refusal_inside_a_backends_branch_guards_that_backend_and_its_way_on() -> None:
    """sglang's ``_handle_attention_backend_compatibility``: ``if self.attention_backend
    == "fancy_mla" or self.decode_backend == "fancy_mla": if not is_sm100_supported():
    raise``: behind the refusal stands what the tree registers under ``fancy_mla``
    (a Triton kernel: gate-only), and what the function runs past it goes that
    backend's way: another backend's branch further down (an SM100 module with its
    kernel compiled out for the target) is not what the refusal keeps the target from."""
    backends = ("import triton\n\n\n"
                "def register_attention_backend(name):\n    return lambda fn: fn\n\n\n"
                "@triton.jit\ndef fancy_kernel(x):\n    pass\n\n\n"
                "@register_attention_backend('fancy_mla')\ndef create_fancy_backend(runner):\n"
                "    return fancy_kernel(runner)\n")
    args = ("from pkg.jit import gen_fmha_sm100_module\nfrom pkg.utils import is_sm100_supported\n\n\n"
            "class Args:\n    def check(self):\n"
            "        if self.attention_backend == 'fancy_mla' or self.decode_backend == 'fancy_mla':\n"
            "            if not is_sm100_supported():\n"
            "                raise ValueError('fancy_mla needs SM100')\n"
            "            self.page_size = 64\n"
            "        if self.attention_backend == 'other_fa':\n"
            "            self.module = gen_fmha_sm100_module()\n")
    gate = _audit(BASE | {"pkg/backends.py": backends, "pkg/args.py": args})["pkg/args.py:Args.check"]
    assert gate.class_ == "gate-only", gate.reason
    assert gate.basis is Basis.TRITON, gate.basis
    assert gate.reached == (Endpoint(EndpointKind.TRITON, "pkg/backends.py", "fancy_kernel",
                                     chain=('"fancy_mla"', "fancy_kernel")),), gate.reached


def test_a_gate_keeping_only_checks_from_the_target_is_gate_only() -> None:
    """sglang's attention registry: ``if is_blackwell(): assert backend == "triton",
    "..."`` and a log line: what the gate keeps from the target runs no kernel, so
    admitting it changes gate lines only.  A branch that also sets a value is not
    only checks: what reads it is not known here."""
    registry = ("import logging\n\nfrom pkg.utils import is_sm100_supported\n\n"
                "logger = logging.getLogger(__name__)\n\n\n"
                "def pick(backend):\n    if is_sm100_supported():\n"
                "        assert backend == 'triton', 'triton only on SM100'\n"
                "        logger.info('checked %s', backend)\n    return backend\n\n\n"
                "def tune(config):\n    if is_sm100_supported():\n"
                "        assert config\n        config.block = 128\n    return config\n")
    gates = _audit(BASE | {"pkg/registry.py": registry})
    pick, tune = gates["pkg/registry.py:pick"], gates["pkg/registry.py:tune"]
    assert pick.class_ == "gate-only" and pick.basis is Basis.CHECKS_ONLY, pick.reason
    assert pick.reached == (Endpoint(EndpointKind.CHECKS, "pkg/registry.py", "pick"),), pick.reached
    assert tune.class_ == "unknown", tune.reason


def test_a_caller_handing_a_decision_back_is_passed_through_to_its_own_callers() -> None:
    """``_check()`` refuses the target; ``check()`` only returns it (``return
    _check()``): what ``check``'s callers run after it, in the file and in others, is
    what the refusal keeps from the target."""
    api = ("from pkg.jit import gen_fmha_sm100_module\nfrom pkg.utils import is_sm100_supported\n\n\n"
           "def _check_fmha():\n    if not is_sm100_supported():\n"
           "        raise ValueError('SM100 only')\n    return 'fast'\n\n\n"
           "def check_fmha():\n    return _check_fmha()\n\n\n"
           "def run(x):\n    mode = check_fmha()\n    return gen_fmha_sm100_module().run(x)\n")
    gate = _audit(BASE | {"pkg/api.py": api})["pkg/api.py:_check_fmha"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    _stands_on_sm100(gate)
    other = ("from pkg.api import check_fmha\nfrom pkg.jit import gen_fmha_sm100_module\n\n\n"
             "def launch(x):\n    check_fmha()\n    return gen_fmha_sm100_module().run(x)\n")
    lone = api.replace("def run(x):\n    mode = check_fmha()\n    return gen_fmha_sm100_module().run(x)\n", "")
    gate = _audit(BASE | {"pkg/api.py": lone, "pkg/other.py": other})["pkg/api.py:_check_fmha"]
    assert gate.class_ == "needs-kernel-work", gate.reason


def test_a_call_into_triton_kernels_is_a_library_of_triton_kernels() -> None:
    """sglang's ``_swizzle_mxfp4``: ``if _is_sm100_supported:
    opt_flags.update_opt_flags_constraints(...)`` into OpenAI's ``triton_kernels``:
    Triton kernels compiled for the GPU they run on, no kernel of the tree."""
    swizzle = ("from pkg.utils import is_sm100_supported\n\n\n"
               "def swizzle(w):\n"
               "    import triton_kernels.matmul_ogs_details.opt_flags as opt_flags\n\n"
               "    if is_sm100_supported():\n"
               "        opt_flags.update_opt_flags_constraints({'is_persistent': True})\n"
               "    return w\n")
    gate = _audit(BASE | {"pkg/swizzle.py": swizzle})["pkg/swizzle.py:swizzle"]
    assert gate.class_ == "gate-only", gate.reason
    assert gate.basis is Basis.LIBRARY, gate.basis
    assert gate.reached == (Endpoint(
        EndpointKind.LIB, "", "triton_kernels.matmul_ogs_details.opt_flags.update_opt_flags_constraints",
        chain=("update_opt_flags_constraints",)),), gate.reached


def test_a_skip_helper_called_in_an_if_guards_what_the_test_runs_after_the_if() -> None:
    """flashinfer's ``test_prefill_delta_rule``: ``if use_cp: _skip_if_cp_unsupported()``,
    then the kernel calls: what runs after the helper's call is the rest of the
    function, past the ``if`` it sits in."""
    test = ("import pytest\n\nfrom pkg.jit import gen_fmha_sm100_module\n"
            "from pkg.utils import is_sm100_supported\n\n\n"
            "def _skip_if_cp_unsupported():\n    if not is_sm100_supported():\n"
            "        pytest.skip('CP needs SM100')\n\n\n"
            "def test_prefill(use_cp):\n    if use_cp:\n        _skip_if_cp_unsupported()\n"
            "    gen_fmha_sm100_module().run(1)\n")
    gate = _audit(BASE | {"tests/test_prefill.py": test})["tests/test_prefill.py:_skip_if_cp_unsupported"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    _stands_on_sm100(gate)
    assert ("test_prefill", "gen_fmha_sm100_module") in gate.calls, gate.calls


def test_a_call_whose_value_is_dropped_guards_what_follows_only_when_it_may_stop() -> None:
    """sglang's scheduler calls ``initialize_fp4_gemm_config(args)`` then
    ``initialize_bf16_gemm_config(args)``: the first picks a backend on SM100 and
    returns whatever it picked, so the second runs whatever the first's gate decides,
    and is not behind it.  A helper that may skip or raise (flashinfer's
    ``_skip_if_cp_unsupported``, which returns on SM100 and skips on what it does not
    know) guards what runs after its call."""
    config = ("from pkg.utils import is_sm100_supported\n\nBACKEND = None\n\n\n"
              "def init_fp4_config(args):\n    global BACKEND\n    backend = 'cutlass'\n"
              "    if is_sm100_supported():\n        backend = 'cutedsl'\n    BACKEND = backend\n")
    scheduler = ("from pkg.config import init_fp4_config\nfrom pkg.jit import gen_fmha_sm100_module\n\n\n"
                 "def init_gemm_config(args):\n    init_fp4_config(args)\n"
                 "    gen_fmha_sm100_module().run(1)\n")
    gates = _audit(BASE | {"pkg/config.py": config, "pkg/scheduler.py": scheduler})
    gate = gates["pkg/config.py:init_fp4_config"]
    assert gate.class_ == "unknown", gate.reason
    assert gate.basis is Basis.NOTHING_REACHED and not gate.reached and not gate.calls, gate.calls
    stopping = config.replace("    BACKEND = backend\n",
                              "    BACKEND = backend\n    if BACKEND is None:\n        raise ValueError(args)\n")
    gate = _audit(BASE | {"pkg/config.py": stopping, "pkg/scheduler.py": scheduler})["pkg/config.py:init_fp4_config"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    _stands_on_sm100(gate)
    assert ("pkg/scheduler.py:init_gemm_config", "gen_fmha_sm100_module") in gate.calls, gate.calls


def test_only_checks_reads_a_long_elif_chain() -> None:
    """An ``elif`` chain is one ``if`` nested in the next: read without recursion, as
    deep as the parser goes."""
    import ast

    from contrib.audit.finding.leads import only_checks

    chain = "if x == 0:\n    assert a\n" + "".join(f"elif x == {n}:\n    assert a\n"
                                                  for n in range(1, 900))
    assert only_checks(ast.parse(chain).body)
    assert not only_checks(ast.parse(chain + "else:\n    y = 1\n").body)


def test_a_builder_names_a_source_file_not_a_bare_suffix() -> None:
    """``f"cake_selective_state_update_{name}.cu"`` names a unit; flashinfer's
    ``generate_ninja_build_for_op`` testing ``source.suffix == ".cu"`` for whatever
    sources it is handed builds nothing of its own."""
    import ast

    from contrib.analysis.reach.endpoints import builds

    assert builds([ast.parse("def f(name):\n    return f'cake_{name}.cu'\n")])
    assert builds([ast.parse("def f():\n    return load(['norm.cu', 'x.cuh'])\n")])
    assert builds([ast.parse("def f(**kw):\n    return get(supported_major_versions=[9])\n")])
    assert not builds([ast.parse("def f(source):\n    return source.suffix == '.cu'\n")])
    assert not builds([ast.parse("def f(source):\n    return source.endswith(f'.cu')\n")])


CUBIN_LOADER = "def get_artifact(name, sha256):\n    return open(name, 'rb').read()\n"
GEMM_JIT = """\
from pkg.core import build
from pkg.cubin_loader import get_artifact

sm100a_nvcc_flags = ["-gencode=arch=compute_100a,code=sm_100a"]


def gen_trtllm_gen_gemm_module():
    checksum = get_artifact("gemm-1/checksums.txt", "0")
    return build("trtllm_gemm", ["trtllm_gemm_runner.cu"],
                 ['-DTLLM_GEN_GEMM_CUBIN_PATH=gemm-1/'] + sm100a_nvcc_flags)
"""
GEMM = """\
from pkg.gemm_jit import gen_trtllm_gen_gemm_module
from pkg.utils import is_sm100_supported


def mm_fp4(a):
    if not is_sm100_supported():
        raise ValueError("trtllm-gen GEMMs need SM100")
    return gen_trtllm_gen_gemm_module().run(a)
"""
PREBUILT = BASE | {"pkg/cubin_loader.py": CUBIN_LOADER, "pkg/gemm_jit.py": GEMM_JIT,
                   "pkg/gemm.py": GEMM, "csrc/trtllm_gemm_runner.cu": "void run() {}\n"}


def test_a_gate_whose_code_runs_prebuilt_cubins_is_not_gate_only() -> None:
    """flashinfer's trtllm-gen GEMM: the builder compiles a runner with no kernel of its
    own and fetches the kernels as prebuilt cubins.  Nothing compiled here is what the
    target would run: their arch list (the runner's nvcc flags: SM100) omits the
    target, so kernels must be built upstream; with no arch read at all, unknown."""
    gate = _audit(PREBUILT)["pkg/gemm.py:mm_fp4"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert gate.basis is Basis.CUBIN, gate.basis
    assert gate.evidence == (Evidence("pkg/gemm_jit.py gen_trtllm_gen_gemm_module",
                                      says="prebuilt cubins for sm_10x only"),)
    assert gate.reached == (Endpoint(EndpointKind.CUBIN, "pkg/gemm_jit.py", "gen_trtllm_gen_gemm_module",
                                     (10,), ("gen_trtllm_gen_gemm_module",)),), gate.reached

    # A loader that builds the runner, then hands it to the cubin loader, takes its arch.
    loader = ("from pkg.gemm_jit import gen_runner_module\n\n\n"
              "def get_gemm_module():\n    mod = gen_runner_module()\n"
              "    setup_cubin_loader(mod.path)\n    return mod\n")
    split = PREBUILT | {
        "pkg/gemm_jit.py": GEMM_JIT.replace("gen_trtllm_gen_gemm_module", "gen_runner_module")
        .replace("'-DTLLM_GEN_GEMM_CUBIN_PATH=gemm-1/'", "'-DX'"),
        "pkg/gemm_loader.py": loader,
        "pkg/gemm.py": GEMM.replace("from pkg.gemm_jit import gen_trtllm_gen_gemm_module",
                                    "from pkg.gemm_loader import get_gemm_module")
        .replace("gen_trtllm_gen_gemm_module()", "get_gemm_module()")}
    through = _audit(split)["pkg/gemm.py:mm_fp4"]
    assert through.class_ == "needs-kernel-work", through.reason
    assert through.basis is Basis.CUBIN, through.basis
    assert through.reached == (Endpoint(EndpointKind.CUBIN, "pkg/gemm_loader.py", "get_gemm_module",
                                        (10,), ("get_gemm_module",)),), through.reached

    unflagged = PREBUILT | {"pkg/gemm_jit.py": GEMM_JIT.replace(' + sm100a_nvcc_flags', '')}
    unread = _audit(unflagged)["pkg/gemm.py:mm_fp4"]
    assert unread.class_ == "unknown", unread.reason
    # the cubins it fetches, whose arch list (majors) is not read here
    assert unread.basis is Basis.UNREAD, unread.basis
    assert unread.reached == (Endpoint(EndpointKind.CUBIN, "pkg/gemm_jit.py", "gen_trtllm_gen_gemm_module",
                                       (), ("gen_trtllm_gen_gemm_module",)),), unread.reached

    # Unread, but the launcher the loader builds refuses the target in its C++ (the
    # trtllm-gen FMHA runner: a member set from getSMVersion() checked against constants
    # of another header), built by a `gen_*` builder of another file.
    runner = ("#include \"common.h\"\n"
              "struct Runner {\n"
              "  Runner() : mSM(getSMVersion()) {\n"
              "    FLASHINFER_CHECK(mSM == kSM_100 || mSM == kSM_103, \"Unsupported architecture\");\n"
              "  }\n  int mSM;\n};\n")
    checked = split | {
        "pkg/gemm_jit.py": split["pkg/gemm_jit.py"].replace(" + sm100a_nvcc_flags", ""),
        "csrc/trtllm_gemm_runner.cu": runner,
        "csrc/common.h": "constexpr int32_t kSM_100 = 100;\nconstexpr int32_t kSM_103 = 103;\n"}
    refused = _audit(checked)["pkg/gemm.py:mm_fp4"]
    assert refused.class_ == "needs-kernel-work", refused.reason
    assert refused.basis is Basis.HOST_REFUSAL, refused.basis
    assert refused.units == ("csrc/trtllm_gemm_runner.cu",)
    assert refused.reached == (Endpoint(EndpointKind.CUBIN, "pkg/gemm_loader.py", "get_gemm_module",
                                        chain=("get_gemm_module",)),), refused.reached
    first = refused.evidence[0]
    assert (first.path, first.line, first.kind) == ("csrc/trtllm_gemm_runner.cu", 4, "host-refusal")
    admitted = checked | {"csrc/common.h": checked["csrc/common.h"].replace("103", "120")}
    assert _audit(admitted)["pkg/gemm.py:mm_fp4"].class_ == "unknown"  # it passes: unread

    # Cubins named for the target's family serve it: lifting the gate is all it takes.
    named = unflagged | {"pkg/gemm_jit.py": unflagged["pkg/gemm_jit.py"].replace(
        '"gemm-1/checksums.txt"', 'f"gemm-1/{kind}_sm120f.cubin"').replace(
        "def gen_trtllm_gen_gemm_module():", "def gen_trtllm_gen_gemm_module(kind=1):")}
    assert _audit(named)["pkg/gemm.py:mm_fp4"].class_ == "gate-only"


def test_a_cutile_kernel_is_compiled_for_the_gpu_it_runs_on() -> None:
    """flashinfer's ``mm_bf16_cutile.py``: a tuning choice for SM100 before a ``@ct.kernel``
    launch.  cuTile compiles Tile IR when the kernel is launched, for Blackwell (10.x,
    12.x) and, since CUDA 13.2, 8.x: lifting the gate is a change of gate lines for
    SM120; for SM90, which cuTile does not compile for, the class is not read."""
    kernel = ("import cuda.tile as ct\nimport torch\n\n\n"
              "@ct.kernel\ndef _gemm_kernel(a, b):\n    ct.store(b, index=(0,), tile=ct.load(a))\n\n\n"
              "def gemm(a, b):\n    if torch.cuda.get_device_capability()[0] == 10:\n"
              "        ct.launch(None, (1,), _gemm_kernel, (a, b))\n        return b\n"
              "    return a @ b\n")
    other = kernel.replace("import cuda.tile as ct", "import mylib as ct")
    gates = _audit(BASE | {"pkg/tile_mm.py": kernel, "pkg/other_mm.py": other})
    gate = gates["pkg/tile_mm.py:gemm"]
    assert gate.class_ == "gate-only", gate.reason
    assert gate.basis is Basis.CUTILE, gate.basis
    # cuTile compiles for 8.x, 10.x and 12.x
    cutile = Endpoint(EndpointKind.CUTILE, "pkg/tile_mm.py", "_gemm_kernel", (8, 10, 12), ("_gemm_kernel",))
    assert gate.reached == (cutile,), gate.reached
    assert ("cutile:_gemm_kernel",) in gate.calls, gate.calls
    # a `kernel` decorator of another library is no cuTile kernel
    assert gates["pkg/other_mm.py:gemm"].class_ == "unknown"
    tree = DictTree(BASE | {"pkg/tile_mm.py": kernel.replace("[0] == 10", "[0] == 12")})
    found, _ = find_all(tree, SM90)
    found = judge(tree, found, SM90)
    on_hopper = next(g for g in found if g.file == "pkg/tile_mm.py" and g.excludes_target)
    assert on_hopper.class_ == "unknown" and on_hopper.basis is Basis.UNREAD, on_hopper.reason
    assert on_hopper.reached == (cutile,), on_hopper.reached  # its majors: not 9


def test_a_refusal_in_a_check_the_base_class_calls_on_self_guards_the_objects_methods() -> None:
    """flashinfer's MoE runners: the base class's ``check_support()`` calls
    ``self._check_support()``, which each runner overrides with its own refusal.  Nothing
    calls the override by name: what the runner's other methods run stands behind it.
    A method returning a value is a decision, read through its callers instead, and so
    is a check that overrides nothing (sglang's ``ServerArgs._handle_*``)."""
    runners = ("from pkg.loader import get_fmha_module\nfrom pkg.utils import cap\n\n\n"
               "class Runner:\n    def check_support(self):\n        self._check_support()\n\n"
               "    def _check_support(self):\n        pass\n\n\n"
               "class Fmha100Runner(Runner):\n    def _check_support(self):\n"
               "        super()._check_support()\n        major = cap()[0]\n"
               "        if major != 10:\n            raise NotImplementedError(f'SM{major} unsupported')\n\n"
               "    def forward(self, q):\n        return get_fmha_module('100').run(q)\n\n\n"
               "class Fmha100Picker(Runner):\n    def _supported(self):\n"
               "        if cap()[0] != 10:\n            raise NotImplementedError('unsupported')\n"
               "        return True\n\n"
               "    def forward(self, q):\n        return get_fmha_module('100').run(q)\n\n\n"
               "class Args:\n    def _handle_backend(self):\n        major = cap()[0]\n"
               "        if major != 10:\n            raise ValueError('needs SM100')\n\n"
               "    def forward(self, q):\n        return get_fmha_module('100').run(q)\n")
    gates = _audit(BASE | {"pkg/runners.py": runners})
    check = gates["pkg/runners.py:Fmha100Runner._check_support"]
    assert check.class_ == "needs-kernel-work", check.reason
    _stands_on_sm100(check, "get_fmha_module")
    assert ("forward", "get_fmha_module") in check.calls, check.calls
    assert gates["pkg/runners.py:Fmha100Picker._supported"].class_ == "unknown"
    # a check no base defines is called by name in its class: its callers are the lead
    assert gates["pkg/runners.py:Args._handle_backend"].class_ == "unknown"


def test_a_check_whose_callers_are_named_for_other_archs_needs_kernel_work() -> None:
    """flashinfer's ``_blackwell_compile_options()`` refuses what is not SM10x; its file
    and name say no architecture ("Blackwell" is SM10x and SM12x), but the functions
    calling it are ``cp_delta_rule_*_dsl_sm100``: code written for SM10x.  A caller
    named for the target's family says otherwise."""
    check = ("from pkg.utils import cap\n\n\n"
             "def _compile_options():\n    major = cap()[0]\n    if major != 10:\n"
             "        raise RuntimeError(f'needs a compute 10.x device, got {major}')\n"
             "    return ['--gpu-arch=sm_100a']\n\n\n"
             "def delta_rule_dsl_sm100(x):\n    options = _compile_options()\n    return compile_it(x, options)\n\n\n"
             "def compile_it(x, options):\n    return x\n")
    gates = _audit(BASE | {"pkg/blackwell/cp.py": check})
    gate = gates["pkg/blackwell/cp.py:_compile_options"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    # it admits only what its caller is named for: sm_10x (delta_rule_dsl_sm100)
    assert gate.basis is Basis.NAMED_FOR and not gate.reached, gate.basis
    assert gate.calls == (("delta_rule_dsl_sm100", "compile_it"),), gate.calls
    assert gate.evidence == (Evidence("delta_rule_dsl_sm100", says="named for sm_10x"),)
    both = check + ("\n\ndef delta_rule_dsl_sm120(x):\n    options = _compile_options()\n"
                    "    return compile_it(x, options)\n")
    assert _audit(BASE | {"pkg/blackwell/cp.py": both})["pkg/blackwell/cp.py:_compile_options"
                                                        ].class_ == "unknown"


def test_a_builder_reading_a_module_table_of_sources_is_a_jit_module() -> None:
    """flashinfer's ``gen_monomoe_module()`` copies ``_SOURCE_FILES`` (a module table)
    and builds them with ``sm90a_nvcc_flags``: it names no source itself, yet it is the
    JIT module its callers load, and its units' ``wgmma`` is SM90a's alone."""
    jit = ("from pkg.core import build\n\n"
           "sm90a_nvcc_flags = ['-gencode=arch=compute_90a,code=sm_90a']\n"
           "_SOURCE_FILES = [\n    'mono_binding.cu',\n    'src/mono_tma.cu',\n]\n\n\n"
           "def _copy(name):\n    return 'gen/' + name\n\n\n"
           "def gen_mono_module():\n    sources = [_copy(f) for f in _SOURCE_FILES]\n"
           "    return build('mono', sources, extra_cuda_cflags=sm90a_nvcc_flags + ['-O3'])\n")
    api = ("from pkg.jit_mono import gen_mono_module\nfrom pkg.utils import cap\n\n\n"
           "def mono(x):\n    major = cap()[0]\n    if major != 9:\n"
           "        raise RuntimeError('MonoMoE needs SM90')\n"
           "    return gen_mono_module().build_and_load().run(x)\n")
    tma = ('__global__ void mono_kernel(float* out) {\n'
           '  asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");\n}\n')
    files = BASE | {"pkg/jit_mono.py": jit, "pkg/mono.py": api,
                    "csrc/mono/mono_binding.cu": '#include "src/mono_tma.cu"\n',
                    "csrc/mono/src/mono_tma.cu": tma}
    gate = _audit(files)["pkg/mono.py:mono"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert gate.basis is Basis.COMPILED_OUT, gate.basis
    # built for majors 9 by its nvcc flags
    assert gate.reached == (Endpoint(EndpointKind.JIT, "pkg/jit_mono.py", "gen_mono_module", (9,),
                                     ("gen_mono_module",)),), gate.reached
    assert gate.units == ("csrc/mono/mono_binding.cu", "csrc/mono/src/mono_tma.cu")
    # the wgmma line of mono_tma.cu
    assert [(e.kind, e.path, e.line) for e in gate.evidence] == [
        ("foreign-isa", "csrc/mono/src/mono_tma.cu", 2)], gate.evidence


def test_a_method_of_a_module_the_object_loaded_runs_that_module() -> None:
    """flashinfer's ``BatchDecodeMlaWithPagedKVCacheWrapper``: ``plan()`` keeps
    ``self._cached_module = get_batch_decode_mla_module(...)``, and ``run()`` refuses
    what is not SM80 before ``self._cached_module.run(...)``: the module the loader
    builds is what ``run()`` keeps from the target."""
    wrapper = ("from pkg.loader import get_fmha_module\nfrom pkg.utils import cap\n\n\n"
               "class Wrapper:\n    def plan(self, backend):\n"
               "        self._cached_module = get_fmha_module(backend)\n        self._scale = 1.0\n\n"
               "    def run(self, q):\n        major = cap()[0]\n        if major != 10:\n"
               "            raise RuntimeError(f'not supported on SM{major}0')\n"
               "        return self._cached_module.run(q, self._scale)\n")
    gate = _audit(BASE | {"pkg/wrapper.py": wrapper})["pkg/wrapper.py:Wrapper.run"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    _stands_on_sm100(gate, "run")
    # flashinfer's MoE runners: a base in another file keeps the module in `_build()`,
    # the runner's check refuses, and its `forward()` calls the module kept
    base = ("from pkg.loader import get_fmha_module\n\n\n"
            "class RunnerBase:\n    def _build(self):\n        self._module = get_fmha_module('100')\n\n"
            "    def _check_support(self):\n        pass\n")
    runner = ("from pkg.base import RunnerBase\nfrom pkg.utils import cap\n\n\n"
              "class FmhaRunner(RunnerBase):\n    def _check_support(self):\n"
              "        major = cap()[0]\n        if major != 10:\n"
              "            raise NotImplementedError('unsupported')\n\n"
              "    def forward(self, q):\n        return self._module.FmhaRunner(q).run()\n")
    gates = _audit(BASE | {"pkg/base.py": base, "pkg/runner.py": runner})
    check = gates["pkg/runner.py:FmhaRunner._check_support"]
    assert check.class_ == "needs-kernel-work", check.reason
    _stands_on_sm100(check, "FmhaRunner")


def test_an_object_remade_from_itself_is_read_once() -> None:
    """``self._module = self._module.to(device)``: the held object's making leads back
    to itself; it is read once, not until Python's stack runs out."""
    wrapper = ("from pkg.loader import get_fmha_module\nfrom pkg.utils import cap\n\n\n"
               "class Wrapper:\n    def plan(self, backend):\n"
               "        self._module = get_fmha_module(backend)\n"
               "        self._module = self._module.to('cuda')\n\n"
               "    def run(self, q):\n        major = cap()[0]\n        if major != 10:\n"
               "            raise RuntimeError('SM100 only')\n"
               "        return self._module.run(q)\n")
    gate = _audit(BASE | {"pkg/wrapper.py": wrapper})["pkg/wrapper.py:Wrapper.run"]
    assert gate.class_ == "needs-kernel-work", gate.reason


def test_a_library_built_for_some_archs_only_is_kernel_work_in_that_library() -> None:
    """sglang's DeepSeek-V4 bf16xfp32 GEMM calls Tencent HPC-Ops (``import hpc``), whose
    README requires an SM90 GPU: the gate before the call keeps the target from
    kernels that library does not build for it.  The decision functions built on that
    gate take its class; a library of the same name's first letters is not it."""
    gemm = ("import importlib.util\n\nimport torch\n\n\n"
            "def _hpc_available():\n    if importlib.util.find_spec('hpc') is None:\n"
            "        return False\n    major, _ = torch.cuda.get_device_capability()\n"
            "    return major == 9\n\n\n"
            "def _can_use_hpc(x):\n    if x.dim() != 2:\n        return False\n"
            "    return _hpc_available()\n\n\n"
            "def linear_hpc(x, y):\n    if not _can_use_hpc(x):\n        return None\n\n"
            "    import hpc\n\n    return hpc.gemm_bf16xfp32(x, y)\n")
    gates = _audit(BASE | {"pkg/gemm.py": gemm})
    gate = gates["pkg/gemm.py:linear_hpc"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert gate.basis is Basis.LIBRARY, gate.basis
    # a library whose kernels are built for major 9 only
    assert gate.reached == (Endpoint(EndpointKind.LIB, "", "hpc.gemm_bf16xfp32", (9,),
                                     ("gemm_bf16xfp32",)),), gate.reached
    assert gate.evidence == (Evidence("hpc.gemm_bf16xfp32", says="Tencent HPC-Ops, sm_9x only"),)
    assert gates["pkg/gemm.py:_can_use_hpc"].class_ == "needs-kernel-work"
    assert gates["pkg/gemm.py:_hpc_available"].class_ == "needs-kernel-work"
    other = gemm.replace("import hpc\n", "import hpcx as hpc\n")
    assert _audit(BASE | {"pkg/gemm.py": other})["pkg/gemm.py:linear_hpc"].class_ == "unknown"


def test_a_builder_rendering_a_cpp_template_builds_what_the_template_includes() -> None:
    """flashinfer's ``gen_act_and_mul_module`` writes ``{name}_and_mul.cu`` from
    ``activation_templ``, a Python string that includes ``<pkg/act.cuh>``: that header's
    kernels are what it builds.  Written with SM100's ``tcgen05``, the test's gate needs
    kernel work; generic, it is gate-only."""
    jit = ('import os\n\nimport jinja2\n\nfrom pkg.core import build\n\n'
           'act_templ = r"""\n#include <pkg/act.cuh>\n#include <cuda_runtime.h>\n\n'
           'void {{ name }}_and_mul(float* out) { launch(out); }\n"""\n\n\n'
           'def get_act_cu_str(name):\n    return jinja2.Template(act_templ).render(name=name)\n\n\n'
           'def gen_act_and_mul_module(name):\n    path = f"gen/{name}_and_mul.cu"\n'
           '    write(path, get_act_cu_str(name))\n    return build(f"{name}_and_mul", [path], [])\n')
    test = ("import pytest\nimport torch\n\nfrom pkg.act_jit import gen_act_and_mul_module\n\n\n"
            "@pytest.mark.skipif(torch.cuda.get_device_capability()[0] != 10, reason='SM100')\n"
            "def test_silu():\n    gen_act_and_mul_module('silu').run(1)\n")
    files = BASE | {"pkg/act_jit.py": jit, "tests/test_act.py": test,
                    "include/pkg/act.cuh": ('__global__ void act_kernel(float* out) {\n'
                                            '  asm volatile("tcgen05.fence::before_thread_sync;");\n}\n')}
    gate = _audit(files)["tests/test_act.py:test_silu"]
    assert gate.class_ == "needs-kernel-work", gate.reason
    assert gate.units == ("include/pkg/act.cuh",)
    generic = files | {"include/pkg/act.cuh": KERNEL.format(name="act")}
    assert _audit(generic)["tests/test_act.py:test_silu"].class_ == "gate-only"


def test_a_gate_only_reading_names_the_includes_it_could_not_see() -> None:
    """flashinfer's SM100 MLA units include CUTLASS headers the tree does not hold: the
    guards of the tree's own files are all the reading sees, and a gate-only class says
    it stands on them alone (``contrib audit --compile`` compiles what they hide)."""
    test = ("import pytest\nimport torch\n\nfrom pkg.api import fmha\n\n\n"
            "@pytest.mark.skipif(torch.cuda.get_device_capability()[0] != 10, reason='SM100')\n"
            "def test_fmha():\n    fmha(1)\n")
    generic = {path: text.replace("_sm100_", "_dense_").replace("_sm90_", "_paged_")
               for path, text in BASE.items()}
    unit = '#include "cutlass/gemm/device/gemm.h"\n#include <cuda_runtime.h>\n' + \
        KERNEL.format(name="fmha")
    gate = _audit(generic | {"tests/test_fmha.py": test, "csrc/fmha.cu": unit}
                  )["tests/test_fmha.py:test_fmha"]
    assert gate.class_ == "gate-only", gate.reason
    assert gate.basis is Basis.UNITS_READ and gate.units == ("csrc/fmha.cu",), gate.basis
    # the wording, once: the includes it could not see (no typed field holds them)
    assert "it stands on the #if guards alone, unread: 1 include not in the tree " \
           "(cutlass/gemm/device/gemm.h); contrib audit --compile" in gate.reason, gate.reason
    plain = _audit(generic | {"tests/test_fmha.py": test, "csrc/fmha.cu": KERNEL.format(name="fmha")})
    assert "guards alone" not in plain["tests/test_fmha.py:test_fmha"].reason
