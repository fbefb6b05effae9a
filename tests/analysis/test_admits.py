"""What a gate admits, minor by minor: 12.0 and 12.1 apart where the code names them."""

from __future__ import annotations

import pytest

from contrib.analysis.archvalues import Capabilities
from contrib.analysis.cexpr import Macro, evaluate
from contrib.analysis.gates import find_gates, touched_gates
from contrib.analysis.hostarch import HOST_REFUSAL, host_checks
from contrib.arch import arch_macros, parse_arch

SM120, SM121, SM100 = parse_arch("sm_120a"), parse_arch("sm_121a"), parse_arch("sm_100a")


def test_a_list_of_capabilities_keeps_the_minors_it_names() -> None:
    only_120 = Capabilities.listed([(12, 0)])
    assert only_120.admits_arch(SM120) and not only_120.admits_arch(SM121)
    assert only_120.text() == "capability 12.0" and only_120.numbers() == "12.0"
    both = Capabilities.listed([(12, 0), (12, 1)])  # every 12.x nvcc knows: the major
    assert both == Capabilities.of_majors({12}) and both.text() == "majors 12"
    mixed = Capabilities.listed([(10, 0), (10, 3), (11, 0), (12, 0), (12, 1)])
    assert mixed.text() == "majors 11, 12 and capabilities 10.0, 10.3"
    assert mixed.numbers() == "10.0, 10.3, 11, 12" and sorted(mixed) == [10, 11, 12]
    assert mixed.splits(10) and not mixed.splits(12) and not mixed.splits(9)


def test_a_read_keeps_a_major_whole_only_where_every_minor_read_agrees() -> None:
    read = Capabilities.read([((12, 0), True), ((12, 1), False), ((10, 0), True), ((10, 3), True)])
    assert read == Capabilities(frozenset({10}), frozenset({(12, 0)}))
    assert Capabilities.read([((9, 0), False)]).text() == "majors none"


def test_the_cache_form_comes_back_and_refuses_other_shapes() -> None:
    caps = Capabilities.listed([(10, 0), (12, 0), (12, 1)])
    assert caps.cache() == [12, [10, 0]]
    assert Capabilities.from_cache(caps.cache()) == caps
    for bad in ("majors 12", [True], [[12]], [[12, "0"]], {"12": 0}):
        assert Capabilities.from_cache(bad) is None


DECORATED = (
    "def supported_compute_capability(ccs):\n"
    "    def wrap(f):\n        return f\n    return wrap\n\n\n"
    "@supported_compute_capability([120])\n"
    "def nvfp4_attention_sm120_fwd(q):\n    return q\n"
)


def test_a_capability_decorator_admits_the_capabilities_it_lists() -> None:
    """flashinfer's `nvfp4_attention_sm120_fwd` took `[120]` until #3897 (0f69698c7)
    listed 121: 12.1 was refused before, 12.0 never."""
    (gate,), _ = find_gates("pkg/nvfp4.py", DECORATED)
    assert gate.kind == "decorator" and gate.admits == Capabilities.listed([(12, 0)])
    after = DECORATED.replace("[120]", "[120, 121]")
    (touched,) = touched_gates("pkg/nvfp4.py", DECORATED, after, {7})
    assert touched.admits_before.text() == "capability 12.0"
    assert touched.after.admits == Capabilities.of_majors({12})
    assert touched.admits(SM121) and touched.to_dict(SM121)["admits_before"] == "capability 12.0"
    (old,) = touched_gates("pkg/nvfp4.py", DECORATED, DECORATED, {7})
    assert old.admits(SM120) and not old.admits(SM121)


@pytest.mark.parametrize(("arch", "before"), [(SM120, True), (SM121, False)])
def test_a_condition_on_the_minor_is_read_on_the_target_minor(arch, before) -> None:
    """The same test read for 12.0 and for 12.1 (what `--arch sm_120a,sm_121a` does)."""
    text = ("import torch\n\ndef f():\n"
            "    if torch.cuda.get_device_capability() == (12, 0):\n        return 1\n")
    (gate,), _ = find_gates("pkg/m.py", text, arch=arch)
    assert gate.admits == Capabilities.listed([(12, 0)])
    assert gate.admits.admits_arch(arch) is before


BINDING = """
void fwd(TensorView q) {
  cudaDeviceProp props;
  cudaError_t status = cudaGetDeviceProperties(&props, q.device().device_id);
  TVM_FFI_ICHECK(status == cudaSuccess) << "cudaGetDeviceProperties failed";
  TVM_FFI_ICHECK(props.major == 12 && props.minor == 0)
      << "NVFP4 attention SM120 kernel requires compute capability 12.0";
}
"""


def test_a_host_check_on_the_minor_refuses_the_other_minor() -> None:
    """flashinfer's NVFP4 attention binding before #3897: 12.0 passes, 12.1 is refused."""
    files = {"csrc/binding.cu": BINDING}
    (finding,) = host_checks(files, SM121, [12])
    assert finding.kind == HOST_REFUSAL and finding.line == 6
    assert finding.message.endswith("refuses sm_121a at run time; capability 12.0 passes it")
    assert host_checks(files, SM120, [12]) == []
    widened = {"csrc/binding.cu": BINDING.replace(
        "props.minor == 0)", "(props.minor == 0 || props.minor == 1))")}
    assert host_checks(widened, SM121, [12]) == []
    (refused,) = host_checks(files, SM100, [10, 12])  # a major apart, as before
    assert refused.message.endswith("capability 12.0 passes it")


def test_an_sm_number_check_tells_minors_apart() -> None:
    code = ("int sm = getSMVersion();\n"
            "TORCH_CHECK(sm == 100 || sm == 120, \"unsupported\");\n")
    (finding,) = host_checks({"a.cu": code}, SM121, [10, 12])
    assert finding.message.endswith("capabilities 10.0, 12.0 pass it")
    assert host_checks({"a.cu": code}, SM120, [10, 12]) == []


def test_the_device_pass_already_reads_the_minor() -> None:
    for arch, value in ((SM120, True), (SM121, False)):
        macros = {k: Macro(k, v) for k, v in arch_macros(arch).items()}
        assert evaluate("__CUDA_ARCH__ == 1200", macros).true is value
