from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from contrib.analysis.cscan import find_kernels, scan, strip_comments


def _stepwise(text: str) -> str:
    """The scanner read one character at a time: the oracle of the one-regex reading."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                if text.startswith("\\\n", i):  # the backslash goes, the newline ends it
                    out.append(" ")
                    i += 1
                    break
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        if text[i] in "\"'":
            j = i + 1
            while j < n and text[j] != text[i] and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def test_strip_comments_keeps_lines_and_strings():
    text = 'a // c1\nb /* c2\nc2 */ d\n"// not a comment" /* x */\n'
    out = strip_comments(text)
    assert out.count("\n") == text.count("\n")
    lines = out.split("\n")
    assert lines[0].strip() == "a"
    assert lines[1].strip() == "b"
    assert lines[2].strip() == "d"
    assert lines[3].strip() == '"// not a comment"'


def test_strip_comments_edges():
    cases = {
        "a // c \\\nb": "a" + " " * 7 + "\nb",  # a backslash-newline ends the comment here
        "x /* open": "x        ",  # unclosed: to the end
        "/*/ y */z": "        z",  # `/*/` does not close itself
        '"a\\"b" // c': '"a\\"b"     ',  # an escaped quote stays inside the string
        "'a\nb // c": "'a\nb     ",  # an unclosed literal ends at the newline
        '"tail\\': '"tail\\',  # a lone backslash at the end
        "s = \"/* no */\";": "s = \"/* no */\";",
    }
    for text, expected in cases.items():
        assert strip_comments(text) == expected == _stepwise(text), text


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab/*\"'\\\n ", max_size=60))
def test_strip_comments_reads_as_the_stepwise_scanner(text):
    assert strip_comments(text) == _stepwise(text)


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
