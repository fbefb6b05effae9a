from __future__ import annotations

from contrib.analysis.cscan import find_kernels, scan, strip_comments


def test_strip_comments_keeps_lines_and_strings():
    text = 'a // c1\nb /* c2\nc2 */ d\n"// not a comment" /* x */\n'
    out = strip_comments(text)
    assert out.count("\n") == text.count("\n")
    lines = out.split("\n")
    assert lines[0].strip() == "a"
    assert lines[1].strip() == "b"
    assert lines[2].strip() == "d"
    assert lines[3].strip() == '"// not a comment"'


def test_scan_directives_continuations_and_branches():
    text = (
        "#if defined(X) && \\\n"  # 1-2: one logical directive
        "    (Y > 1)\n"
        "a();\n"  # 3
        "#  elif Z // comment\n"  # 4
        "b();\n"  # 5
        "#else\n"  # 6
        "#ifdef W\n"  # 7
        "c();\n"  # 8
        "#endif\n"  # 9
        "#endif\n"  # 10
        "d();\n"  # 11
    )
    result = scan("f.cu", text)
    assert result.directives[1].rest == "defined(X) &&      (Y > 1)"
    assert result.directives[1].last_line == 2
    assert result.directives[4].kind == "elif" and result.directives[4].rest == "Z"
    assert result.statement_lines() == [3, 5, 8, 11]
    assert result.chain[2] == (1,)
    assert result.chain[7] == (6, 7)
    assert result.chain[10] == ()
    assert result.branches[6].head == 1 and result.branches[7].parent == 6
    assert result.problems == []


def test_scan_reports_unbalanced_conditionals():
    text = "#if A\n#else\n#elif B\n#endif\n#endif\n#ifdef C\n"
    problems = scan("f.h", text).problems
    assert (3, "#elif after #else (#if at line 1)") in problems
    assert (5, "#endif without #if") in problems
    assert (6, "#ifdef without #endif") in problems


def test_find_kernels_with_templates_attributes_and_declarations():
    text = (
        "template <typename T>\n"
        "__global__ void __launch_bounds__(256) k1(T* out,\n"
        "    int n) {\n"
        "  // comment only\n"
        "  out[0] = n;\n"
        "}\n"
        "__global__ void declared(int);\n"
        "static __global__ void k2() { }\n"
        "__global__ void k3()\n"
        "{\n"
        "#if 1\n"
        "  work();\n"
        "#endif\n"
        "}\n"
    )
    kernels = {k.name: k for k in find_kernels(scan("k.cuh", text))}
    assert set(kernels) == {"k1", "k2", "k3"}
    assert kernels["k1"].line == 2
    assert kernels["k1"].body_lines == (5,)
    assert kernels["k2"].body_lines == ()
    assert kernels["k3"].body_lines == (12,)


def test_a_scan_is_kept_per_path_and_text() -> None:
    """The audit's JIT gates share headers: one scan per file and text, a new one when
    either differs."""
    text = "#if __CUDA_ARCH__ >= 900\nint x;\n#endif\n"
    first = scan("a.cuh", text)
    assert scan("a.cuh", text) is first
    assert scan("b.cuh", text) is not first and scan("b.cuh", text).path == "b.cuh"
    changed = scan("a.cuh", text.replace("900", "1000"))
    assert changed is not first and "1000" in changed.directives[1].rest
