"""A changed __device__ helper is traced to the __global__ kernels that call it."""

from __future__ import annotations

from pathlib import Path

from contrib.analysis.callgraph import device_markers, find_functions
from contrib.analysis.diffs import FileChange, parse_diff
from contrib.analysis.includes import IncludeGraph
from contrib.analysis.tree import DictTree, GitTree
from contrib.arch import parse_arch
from contrib.git.repo import Git
from contrib.validate.gputests import ChangedKernel, Via, coverage_findings, trace_changes
from testing import miniupstream as mu

SM90 = parse_arch("sm_90a")
HELPERS = "include/mini/reduce.cuh"
KERNELS = "csrc/allreduce.cu"

REDUCE_CUH = """\
#pragma once
// warp_sum() is the helper every allreduce kernel leans on.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(~0u, v, o);
  return v;
}
"""

ALLREDUCE_CU = """\
#include "mini/reduce.cuh"

__global__ void oneshot_kernel(float* out, float const* in) {
  out[threadIdx.x] = warp_sum(in[threadIdx.x]);
}

__global__ void unrelated_kernel(float* out) { out[0] = 1.0f; }
"""


def _change(path: str, *lines: int) -> FileChange:
    return FileChange(path, path, added=set(lines), touched=set(lines))


def _helper_change(tree: DictTree, path: str, name: str) -> FileChange:
    """A change on the line that defines ``name``."""
    text = tree.read_text(path) or ""
    (function,) = [f for f in find_functions(path, text, device_markers([text])) if f.name == name]
    return _change(path, function.line)


def test_a_helper_changed_in_a_header_reaches_the_kernel_of_the_unit_including_it(tmp_path: Path) -> None:
    root = tmp_path / "up"
    root.mkdir()
    (root / "include" / "mini").mkdir(parents=True)
    (root / "csrc").mkdir()
    (root / HELPERS).write_text(REDUCE_CUH)
    (root / KERNELS).write_text(ALLREDUCE_CU)
    mu.git(root, "init", "-q", "-b", "main")
    mu.git(root, "add", "-A")
    mu.git(root, "commit", "-q", "-m", "base")
    (root / HELPERS).write_text(REDUCE_CUH.replace("o /= 2", "o >>= 1"))
    mu.git(root, "commit", "-qam", "shift, not divide")
    changes = parse_diff(mu.git(root, "diff", "HEAD~1", "HEAD") + "\n")
    traced = trace_changes(GitTree(Git(root), "HEAD"), changes)
    via = Via("warp_sum", HELPERS, 3)
    assert traced.kernels == [ChangedKernel("oneshot_kernel", KERNELS, 3, via)]
    assert traced.helpers == [f"helper warp_sum ({HELPERS}:3): called by oneshot_kernel"]


def test_a_run_that_launched_none_of_the_helpers_kernels_gets_one_finding() -> None:
    via = Via("warp_sum", HELPERS, 3)
    changed = [ChangedKernel("oneshot_kernel", KERNELS, 3, via), ChangedKernel("twoshot_kernel", KERNELS, 9, via)]
    (finding,) = coverage_findings(changed, ["void unrelated_kernel(float*)"], SM90)
    assert (finding.kind, finding.file, finding.line) == ("kernel-not-launched", HELPERS, 3)
    assert finding.message == ("the patch changes helper warp_sum, called by kernels oneshot_kernel, "
                               "twoshot_kernel, and no selected test launched any of them on sm_90a: "
                               "the tests say nothing about it")
    # one launched caller covers the helper
    assert coverage_findings(changed, ["void twoshot_kernel(float*)"], SM90) == []
    # no probe: nothing shows any of them ran
    (blind,) = coverage_findings(changed, None, SM90)
    assert "the kernel probe saw no test process" in blind.message and "one ran" in blind.message


def test_many_callers_are_named_a_few_then_counted() -> None:
    via = Via("warp_sum", HELPERS, 3)
    changed = [ChangedKernel(f"k{i}", KERNELS, i, via) for i in range(6)]
    (finding,) = coverage_findings(changed, [], SM90)
    assert "called by kernels k0, k1, k2 and 3 more," in finding.message


def test_a_two_level_chain_and_a_header_of_kernels_pulled_in_beside_the_helper() -> None:
    # The unit includes the helpers and the kernels' header side by side; the kernels'
    # header does not include the helpers itself.
    tree = DictTree({
        HELPERS: REDUCE_CUH + "__device__ float block_sum(float v) { return warp_sum(v); }\n",
        "include/mini/kernels.cuh": "__global__ void norm_kernel(float* x) { x[0] = block_sum(x[0]); }\n",
        KERNELS: '#include "mini/reduce.cuh"\n#include "mini/kernels.cuh"\n',
        "csrc/other.cu": "__global__ void lone_kernel(float* x) { x[0] = warp_sum(x[0]); }\n",
    })
    traced = trace_changes(tree, [_change(HELPERS, 4)])
    assert [(k.name, k.file, str(k.via)) for k in traced.kernels] == [
        ("norm_kernel", "include/mini/kernels.cuh", f"warp_sum ({HELPERS}:3)")]
    # csrc/other.cu does not include the header: its warp_sum is not this one


def test_recursion_and_cycles_end() -> None:
    tree = DictTree({HELPERS: """\
__device__ int ping(int n);
__device__ int pong(int n) { return n ? ping(n - 1) : 0; }
__device__ int ping(int n) { return n ? pong(n - 1) + ping(n - 2) : 1; }
__global__ void k(int* x) { x[0] = pong(x[0]); }
"""})
    traced = trace_changes(tree, [_change(HELPERS, 3)])
    assert [(k.name, k.via and k.via.name) for k in traced.kernels] == [("k", "ping")]


def test_forceinline_template_static_host_device_and_macro_helpers() -> None:
    text = """\
#define DINLINE __device__ __forceinline__
__forceinline__ __device__ float a(float v) { return v; }
template <typename T, int N>
__device__ vec_t<T, N> b(vec_t<T, N> v) { return v; }
template <>
__device__ bool c<float>(float x) { return x < 0; }
static __device__ inline void d() {}
__host__ __device__ int e() { return 0; }
DINLINE void f() {}
__device__ int not_a_function = g(1);
__device__ void declared_only(int);
__global__ void __launch_bounds__(256, 1) kernel(float* x) {
  auto h = [] __device__ (int i) { return i; };
  x[0] = a(x[0]) + b<float, 4>(x) + c<float>(x[0]) + e();
  d();
  f ();
}
"""
    functions = {f.name: f for f in find_functions(HELPERS, text, device_markers([text]))}
    assert sorted(functions) == ["a", "b", "c", "d", "e", "f", "kernel"]
    assert functions["b"].line == 4 and functions["kernel"].kernel and not functions["a"].kernel
    assert functions["kernel"].calls >= {"a", "b", "c", "d", "e", "f"}
    tree = DictTree({HELPERS: text})
    for helper in "abcdef":
        traced = trace_changes(tree, [_helper_change(tree, HELPERS, helper)])
        assert [k.name for k in traced.kernels] == ["kernel"], helper


def test_a_helper_only_host_code_calls_gives_no_finding_and_one_detail_line() -> None:
    tree = DictTree({
        HELPERS: "__host__ __device__ int world_size() {\n  return 8;\n}\n",
        KERNELS: '#include "mini/reduce.cuh"\nint main() { return world_size(); }\n',
    })
    traced = trace_changes(tree, [_change(HELPERS, 2)])
    assert traced.kernels == []
    assert traced.helpers == [f"helper world_size ({HELPERS}:1): no __global__ caller found in the tree"]
    assert coverage_findings(traced.kernels, [], SM90) == []


def test_comments_and_strings_naming_the_helper_are_not_calls() -> None:
    tree = DictTree({
        HELPERS: REDUCE_CUH,
        KERNELS: """\
#include "mini/reduce.cuh"
__global__ void k(float* x) {
  // warp_sum(x) would be wrong here
  /* nor warp_sum<float>(x) */
  printf("warp_sum(%f)", x[0]);
}
""",
    })
    traced = trace_changes(tree, [_change(HELPERS, 4)])
    assert traced.kernels == []
    assert traced.helpers == [f"helper warp_sum ({HELPERS}:3): no __global__ caller found in the tree"]


def test_a_deletion_next_to_a_helper_does_not_change_it() -> None:
    tree = DictTree({HELPERS: REDUCE_CUH, KERNELS: ALLREDUCE_CU})
    # a function deleted right after warp_sum's closing brace (line 6): lines 6 and 7 touched
    beside = FileChange(HELPERS, HELPERS, removed={7, 8}, touched={6, 7})
    assert trace_changes(tree, [beside]).helpers == []
    inside = FileChange(HELPERS, HELPERS, removed={5}, touched={4, 5})
    assert [k.name for k in trace_changes(tree, [inside]).kernels] == ["oneshot_kernel"]


def test_a_kernel_changed_itself_and_through_a_helper_is_reported_both_ways() -> None:
    tree = DictTree({HELPERS: REDUCE_CUH, KERNELS: ALLREDUCE_CU})
    traced = trace_changes(tree, [_change(HELPERS, 4), _change(KERNELS, 4)])
    assert [(k.name, k.via) for k in traced.kernels] == [
        ("oneshot_kernel", None), ("oneshot_kernel", Via("warp_sum", HELPERS, 3))]
    kinds = {f.message.split(",")[0] for f in coverage_findings(traced.kernels, [], SM90)}
    assert kinds == {"the patch changes kernel oneshot_kernel", "the patch changes helper warp_sum"}


def test_include_graph_both_ways() -> None:
    graph = IncludeGraph(DictTree({
        "include/a.cuh": "#pragma once\n", "include/b.cuh": '#include "a.cuh"\n',
        "csrc/u.cu": '#include "b.cuh"\n#include <vector>\n', "csrc/v.cu": "",
    }))
    assert graph.includers(["include/a.cuh"]) == {"include/b.cuh": "include/a.cuh", "csrc/u.cu": "include/a.cuh"}
    assert graph.reach(["csrc/u.cu"]) == {"csrc/u.cu", "include/b.cuh", "include/a.cuh"}


def test_broken_or_hostile_text_gives_an_answer_not_a_traceback() -> None:
    texts = ["__device__ void f() { g(); ", '__device__ void f() { "unterminated\n}', "__device__ " * 5000,
             "__global__ void k() {" + "a<" * 20000 + "}", "__device__ " + "(" * 5000, "__device__ void f() {{{"]
    for text in texts:
        tree = DictTree({HELPERS: text})
        traced = trace_changes(tree, [_change(HELPERS, 1)])
        assert all(line.startswith("helper f ") for line in traced.helpers)
