"""Hypothesis: the arch-string parser and the `__CUDA_ARCH__` guard analysis never crash.

The evaluator's *values* are already checked against a reference evaluation
over generated well-formed expressions in tests/validate/test_cexpr.py
(`test_matches_reference_evaluation`, 400 examples); this file adds what that
does not cover: malformed expressions (token soup) may only raise ExprError,
whole files of random, unbalanced, self-referencing preprocessor directives
may only produce findings, and every string either parses to an Arch that
agrees with a reference reading of nvcc's naming or is a ContribError.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from contrib.analysis.cexpr import ExprError, Macro, evaluate
from contrib.analysis.cuda_arch import analyze
from contrib.arch import KNOWN, Arch, arch_macros, parse_arch
from contrib.errors import ContribError
from testing.audit import FIGURES

FUZZ = settings(max_examples=300, deadline=None)


def _count(name: str) -> None:
    FIGURES[f"fuzz examples: {name}"] += 1


def _reference_arch(text: str) -> tuple[int, int, str] | None:
    """nvcc's names, read independently: a suffix (a|f) as written; without one, every
    spelling (sm_120, SM_90, sm120, 120, 12.0) is the 'a' target from 9.0 on (one
    normalisation: ``sm_121`` is GB10's ``sm_121a``, never a second arch)."""
    cleaned = text.strip().lower()
    exact = re.fullmatch(r"(sm_|compute_)([0-9]+)([af]?)", cleaned)
    m = exact or re.fullmatch(r"(sm|compute)?([0-9]+)([af]?)", cleaned)
    dotted = None if m else re.fullmatch(r"([0-9]{1,2})\.([0-9])([af]?)", cleaned)
    if m is not None and len(m[2]) in (2, 3):
        major, minor, suffix = int(m[2][:-1]), int(m[2][-1]), m[3]
    elif dotted is not None:
        major, minor, suffix = int(dotted[1]), int(dotted[2]), dotted[3]
    else:
        return None
    if not suffix and major >= 9:
        suffix = "a"
    if (major, minor) not in KNOWN or (suffix == "a" and major < 9) or (
            suffix == "f" and major < 10):
        return None
    return major, minor, suffix


arch_like = st.one_of(
    st.text(max_size=20),
    st.tuples(st.sampled_from(["sm_", "SM", "compute_", "", "sm", "gfx", "sm__", " sm_"]),
              st.one_of(st.integers(0, 1300).map(str),
                        st.tuples(st.integers(0, 13), st.integers(0, 9)).map(lambda t: f"{t[0]}.{t[1]}"),
                        st.sampled_from(["\u0661\u0662\u0660", "\uff11\uff12\uff10", "1\u0662\u0660"])),
              st.sampled_from(["", "a", "f", "A", "x", "af", " ", "\n"])).map("".join),
)


@FUZZ
@given(text=arch_like)
def test_arch_parser_agrees_with_reference_or_refuses(text: str) -> None:
    _count("arch parser")
    expected = _reference_arch(text)
    try:
        arch = parse_arch(text)
    except ContribError as exc:
        assert expected is None, (text, expected)
        assert exc.exit_code == 2 and repr(text) in str(exc)
        return
    assert expected == (arch.major, arch.minor, arch.suffix), text
    assert arch == parse_arch(arch.name) == parse_arch(arch.compute)
    assert isinstance(arch, Arch) and arch.cuda_arch == arch.major * 100 + arch.minor * 10
    assert arch_macros(arch)["__CUDA_ARCH__"] == str(arch.cuda_arch)


TOKENS = ["__CUDA_ARCH__", "defined", "(", ")", "&&", "||", "!", "?", ":", "<", ">=", "==",
          "+", "-", "*", "/", "%", "<<", ">>", "~", "0", "1", "900", "1200", "0x10", "'a'",
          "FOO", "F(", ",", "1u", "#", "##", "\\", "\"s\"", "0b1", "9999999999999999999999",
          "1e3", ".", "@"]


@FUZZ
@given(parts=st.lists(st.sampled_from(TOKENS), max_size=25))
def test_malformed_expressions_only_raise_expr_error(parts: list[str]) -> None:
    _count("cexpr token soup")
    macros = {"__CUDA_ARCH__": Macro("__CUDA_ARCH__", "1200"), "FOO": Macro("FOO", "FOO + 1"),
              "F": Macro("F", "(x) * 2", ("x",))}
    try:
        result = evaluate(" ".join(parts), macros)
    except ExprError:
        return
    assert isinstance(result.value, int)


LINES = ["#if __CUDA_ARCH__ >= 900", "#if (__CUDA_ARCH__ < 1200)", "#if defined(__CUDA_ARCH__) &&",
         "#ifdef __CUDA_ARCH__", "#ifndef GUARD", "#elif __CUDA_ARCH__ == 1000", "#elif",
         "#else", "#endif", "#endif // trailing", "#define GUARD 1", "#define A B",
         "#define B A", "#define SELF SELF + 1", "#define F(x) (x) > 900", "#if F(__CUDA_ARCH__)",
         "#if A", "#undef GUARD", "#include \"other.cuh\"", "#pragma unroll", "#error no",
         "__global__ void kernel() {", "  out[i] = in[i];", "}", "/* open", "*/", "x = 1; \\",
         "#if 1 / 0", "#if SELF", "", "template <int N> __device__ void f() { }"]


@FUZZ
@given(lines=st.lists(st.sampled_from(LINES), max_size=40))
def test_guard_analysis_survives_any_directive_soup(lines: list[str]) -> None:
    _count("arch-guard analysis of directive soup")
    files = {"k.cuh": "\n".join(lines) + "\n"}
    result = analyze(files, ["k.cuh"], parse_arch("sm_120a"),
                     [parse_arch("sm_90a"), parse_arch("sm_100a")])
    assert result.files == ["k.cuh"]
    for finding in result.findings:  # each anchored in the file, on a line it has
        assert finding.file == "k.cuh" and 0 <= finding.line <= len(lines) + 1, finding
