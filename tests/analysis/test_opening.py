"""How a gate's test opens to the target, by its form: the one answer the audit's class
and ``contrib enable``'s edit take (:mod:`contrib.analysis.opening`)."""

from __future__ import annotations

import ast

import pytest

from contrib.analysis.opening import Opening, Opens, Spans, opening
from contrib.arch import parse_arch


def _opens(test: str, arch: str = "sm_120a", jit: bool = False) -> Opens:
    module = ast.parse(test)
    return opening(Spans(module), 1, len(test.splitlines()), parse_arch(arch), jit=jit).opens


@pytest.mark.parametrize(("test", "opens"), [
    # a list gains the target's
    ("flags(supported_major_versions=[9, 10])", Opens.LIST),
    ("cc in [90, 100]", Opens.LIST),
    ("sm_major in (9, 10)", Opens.LIST),  # two majors, not the capability 9.10
    # a predicate gains the target's own
    ("is_sm90_supported() or _is_sm100_supported", Opens.PREDICATE),
    # an arch value compared with one value
    ("cap[0] == 10", Opens.COMPARISON),
    ("props.major != 9", Opens.COMPARISON),
    ("device_arch != 80", Opens.COMPARISON),
    ("torch.cuda.get_device_capability(dev) == (10, 0)", Opens.COMPARISON),
    # the target's family named, and turned away all the same
    ("uses_chunked and is_sm12x_supported(query.device)", Opens.NAMES_TARGET),
    ("is_sm120_supported()", Opens.NAMES_TARGET),
    ("compute_capability[0] == 12 and backend in ['cutlass']", Opens.NAMES_TARGET),
    ("group_size > 1 and torch.cuda.get_device_capability()[0] in [12]", Opens.NAMES_TARGET),
    ("cc in [120, 121]", Opens.NAMES_TARGET),
    # nothing a patch to the test widens
    ("deep_gemm_wrapper.DEEPGEMM_SCALE_UE8M0", Opens.NO_FORM),
    ("backend != 'trtllm-gen' and bmm1_scale_log2 is not None", Opens.NO_FORM),
    ("fused_shared_outer_tail", Opens.NO_FORM),
    ("cap[0] >= 9 and cap[1] == 0", Opens.NO_FORM),  # an order, a minor
    ("head_dim == 120 and num_heads == 12", Opens.NO_FORM),  # numbers, not archs
])
def test_each_form_of_test(test: str, opens: Opens) -> None:
    assert _opens(test) == opens


def test_a_jit_keyword_opens_only_by_its_list() -> None:
    assert _opens("flags(supported_major_versions=[9, 10])", jit=True) == Opens.LIST
    assert _opens("flags(supported_major_versions=majors)", jit=True) == Opens.NO_FORM


def test_a_sibling_named_is_a_minor_precise_test_the_targets_minor_widens() -> None:
    """For sm_121a, ``120`` and ``is_sm120_supported`` name a sibling, not the target."""
    assert _opens("supported_compute_capability([100, 103, 120])", "sm_121a") == Opens.LIST
    assert _opens("is_sm90_supported() or is_sm120_supported()", "sm_121a") == Opens.PREDICATE
    assert _opens("supported_compute_capability([100, 103, 121])", "sm_121a") == \
        Opens.NAMES_TARGET
    assert _opens("uses_chunked and is_sm12x_supported()", "sm_121a") == Opens.NAMES_TARGET


FLAG_BOUND = '''\
ENABLE_GEMM = (
    get_bool_env_var("SGLANG_ENABLE_FLASHINFER_GEMM")
    and is_sm100_supported()
)
if ENABLE_GEMM:
    import gemm


def local():
    use = cap[0] == 10
    if use:
        return 1


def elsewhere(use):
    if use:
        return 2


TWICE = is_sm90_supported()
TWICE = is_sm100_supported()
if TWICE:
    pass
'''


def test_a_name_bound_once_opens_where_it_is_bound() -> None:
    """sglang's ``if ENABLE_FLASHINFER_GEMM:`` opens at the binding holding
    ``is_sm100_supported()``, which upstream widened there (88596739a4); a name bound
    twice, or a parameter of another function, is a value decided elsewhere."""
    module = ast.parse(FLAG_BOUND)
    lines = FLAG_BOUND.splitlines()

    def at(text: str) -> Opening:
        line = next(n for n, t in enumerate(lines, 1) if t.strip() == text)
        return opening(Spans(module), line, line, parse_arch("sm_120a"), jit=False)

    found = at("if ENABLE_GEMM:")
    assert found.opens is Opens.PREDICATE and [t.lineno for t in found.terms] == [3]
    local = at("if use:")  # the first `if use:`, in local(): its own binding
    assert local.opens is Opens.COMPARISON and local.node is not None and local.node.lineno == 10
    assert at("if TWICE:").opens is Opens.NO_FORM
    second = [n for n, t in enumerate(lines, 1) if t.strip() == "if use:"][1]
    assert opening(Spans(module), second, second, parse_arch("sm_120a"),
                   jit=False).opens is Opens.NO_FORM
