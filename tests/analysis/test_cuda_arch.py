from __future__ import annotations

from contrib.analysis.cuda_arch import analyze, compute_passes
from contrib.analysis.includes import IncludeResolver
from contrib.analysis.tree import DictTree
from contrib.arch import admitted_archs, parse_arch
from contrib.workspace.validation import Waiver
from testing import miniupstream as mu


def _analyze(files, roots, target="sm_120a", before=(9, 10), waivers=()):
    tree = DictTree(files)
    return analyze(
        files, roots, parse_arch(target), admitted_archs(before), IncludeResolver(tree), waivers
    )


def _by_kind(findings):
    out = {}
    for f in findings:
        out.setdefault(f.kind, []).append(f)
    return out


def test_gate_only_mini_upstream_names_empty_kernel_and_dropped_pdl_sync():
    files = mu.files("gate-only")
    header = files[mu.HEADER]
    result = _analyze(files, [mu.SOURCE])
    kinds = _by_kind(result.findings)
    assert [a.name for a in result.compared] == ["sm_90a", "sm_100a"]

    (empty,) = kinds["empty-kernel"]
    assert empty.severity == "error" and empty.waived is None
    assert (empty.file, empty.line) == (mu.HEADER, mu.line_of(header, "lamport_allreduce_kernel("))
    assert "empty kernel lamport_allreduce_kernel on sm_120a" in empty.message
    assert empty.guard == f"{mu.HEADER}:{mu.line_of(header, mu.OLD_GUARD, 1)}"
    assert "sm_100a compiles it" in empty.message

    (dropped,) = kinds["dropped-statement"]
    assert dropped.severity == "error"
    assert (dropped.file, dropped.line) == (
        mu.HEADER,
        mu.line_of(header, "cudaGridDependencySynchronize"),
    )
    assert dropped.guard == f"{mu.HEADER}:{mu.line_of(header, mu.OLD_GUARD, 2)}"
    assert "cudaGridDependencySynchronize();" in dropped.message and "sm_100a" in dropped.message

    errors = [f for f in result.findings if f.severity == "error"]
    assert len(errors) == 2


def test_alternatives_nested_host_and_unknown_macros_are_info_only():
    files = mu.files("gate-only")
    header = files[mu.HEADER]
    result = _analyze(files, [mu.SOURCE])
    info = {(f.line, f.kind) for f in result.findings if f.severity == "info"}
    assert (mu.line_of(header, "return 8;"), "arch-difference") in info  # #elif alternative
    assert (mu.line_of(header, "__threadfence();"), "arch-difference") in info  # nested, vs sm_90a
    unknown_line = mu.line_of(header, "FI_DISABLE_VECTORIZE")
    assert (unknown_line, "unknown-macro") in info
    reported_lines = {f.line for f in result.findings}
    # (d) the >= 1000 guard keeps the code for sm_120: never reported.
    assert mu.line_of(header, "prefetch.global.L2") not in reported_lines
    # Host-only code and the FI_HAS_PDL path (defined for every device arch) are not differences.
    assert mu.line_of(header, "host_only_world_size") not in reported_lines
    assert mu.line_of(header, "cudaTriggerProgrammaticLaunchCompletion") not in reported_lines


def test_full_fix_has_no_errors():
    result = _analyze(mu.files("full-fix"), [mu.SOURCE])
    assert [f for f in result.findings if f.severity == "error"] == []
    assert {f.kind for f in result.findings} <= {"arch-difference", "unknown-macro"}


def test_waivers_mark_findings_waived_not_hidden():
    files = mu.files("gate-only")
    header = files[mu.HEADER]
    waivers = [
        Waiver(
            mu.HEADER,
            "lamport path is unused on SM120",
            line=mu.line_of(header, "lamport_allreduce_kernel("),
        ),
        Waiver(
            "comm/trtllm_allreduce.cuh",
            "PDL is off on SM120",
            pattern=r"cudaGridDependencySynchronize",
        ),
    ]
    result = _analyze(files, [mu.SOURCE], waivers=waivers)
    errors = [f for f in result.findings if f.severity == "error"]
    assert len(errors) == 2
    assert {f.waived for f in errors} == {"lamport path is unused on SM120", "PDL is off on SM120"}
    assert not any(f.blocking for f in result.findings)


def test_waiver_by_guard_line():
    files = mu.files("gate-only")
    guard_line = mu.line_of(files[mu.HEADER], mu.OLD_GUARD, 2)
    result = _analyze(files, [mu.SOURCE], waivers=[Waiver(mu.HEADER, "ok", line=guard_line)])
    dropped = next(f for f in result.findings if f.kind == "dropped-statement")
    assert dropped.waived == "ok"
    empty = next(f for f in result.findings if f.kind == "empty-kernel")
    assert empty.waived is None


def test_target_that_was_already_admitted_or_lower_targets():
    files = mu.files("gate-only")
    # sm_100a compared with sm_90a: the >= 1000 && < 1200 branch is gained, nothing lost that errs.
    result = _analyze(files, [mu.SOURCE], target="sm_100a", before=(9,))
    assert [f for f in result.findings if f.severity == "error"] == []
    # sm_121a against sm_100a: same trap as sm_120a.
    result = _analyze(files, [mu.SOURCE], target="sm_121a")
    assert {f.kind for f in result.findings if f.severity == "error"} == {
        "empty-kernel",
        "dropped-statement",
    }


def test_macros_from_includes_and_include_guards():
    files = {
        "a.cu": '#include "cfg.h"\n#include "cfg.h"\n#include "k.cuh"\n',
        "cfg.h": "#ifndef CFG_H\n#define CFG_H\n#define MAX_ARCH 1200\n#define COUNT_INCLUDES 1\n#endif\n",
        "k.cuh": (
            "__global__ void k(int* p) {\n"
            "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < MAX_ARCH\n"
            "  p[0] = 1;\n"
            "#endif\n"
            "}\n"
        ),
    }
    result = _analyze(files, ["a.cu"])
    (empty,) = [f for f in result.findings if f.kind == "empty-kernel"]
    assert (empty.file, empty.line, empty.guard) == ("k.cuh", 1, "k.cuh:2")
    # MAX_ARCH came from the included header, so the guard did not depend on an unknown macro.
    assert not [f for f in result.findings if f.kind == "unknown-macro"]


def test_undef_and_define_inside_arch_branches():
    files = {
        "a.cu": (
            "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000\n"
            "#define FAST 1\n"
            "#endif\n"
            "#undef NOTHING\n"
            "__device__ void f() {\n"
            "#ifdef FAST\n"
            "  fast();\n"
            "#endif\n"
            "}\n"
        )
    }
    _, passes = compute_passes(files, ["a.cu"], admitted_archs([9, 10, 12]) + [None])
    assert passes["sm_120a"].compiled("a.cu", 7)
    assert passes["sm_100a"].compiled("a.cu", 7)
    assert not passes["sm_90a"].compiled("a.cu", 7)
    assert not passes["host"].compiled("a.cu", 7)
    assert passes["host"].compiled("a.cu", 5)


def test_dropped_with_else_alternative_is_info_and_without_is_error():
    files = {
        "a.cu": (
            "__device__ void f() {\n"
            "#if __CUDA_ARCH__ >= 1000 && __CUDA_ARCH__ < 1200\n"
            "  tcgen05();\n"
            "#else\n"
            "  fallback();\n"
            "#endif\n"
            "#if __CUDA_ARCH__ == 1000\n"
            "  only_sm100();\n"
            "#endif\n"
            "  common();\n"
            "}\n"
        )
    }
    result = _analyze(files, ["a.cu"])
    by_line = {f.line: f for f in result.findings}
    assert by_line[3].severity == "info" and "takes another branch" in by_line[3].message
    assert by_line[8].severity == "error" and by_line[8].kind == "dropped-statement"
    assert by_line[8].guard == "a.cu:7"


def test_malformed_guard_is_reported_not_crashing():
    files = {"a.cu": "#if __CUDA_ARCH__ >=\nx();\n#endif\n"}
    result = _analyze(files, ["a.cu"])
    assert any(f.kind == "bad-guard" and f.line == 1 for f in result.findings)


def test_whole_kernel_guarded_out_is_a_dropped_block():
    files = {
        "a.cu": (
            "#if __CUDA_ARCH__ < 1200\n__global__ void gone(int* p) {\n  p[0] = 1;\n}\n#endif\n"
        )
    }
    result = _analyze(files, ["a.cu"])
    (finding,) = [f for f in result.findings if f.severity == "error"]
    assert finding.kind == "dropped-statement" and finding.line == 2 and finding.guard == "a.cu:1"
    assert "2 more lines" in finding.message


def test_oldest_target_does_not_lose_what_only_newer_archs_compile():
    # Seen on an H200 validating the demo for sm_90a: the `>= 1000` prefetch is a
    # Blackwell feature, not something sm_90a lost.
    files = mu.files("full-fix")
    header = files[mu.HEADER]
    result = _analyze(files, [mu.SOURCE], target="sm_90a", before=(9, 10, 12))
    assert [f for f in result.findings if f.severity == "error"] == []
    prefetch = [f for f in result.findings if f.line == mu.line_of(header, "prefetch.global.L2")]
    assert prefetch and all(f.kind == "arch-difference" for f in prefetch)
