from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contrib.analysis.cexpr import ExprError, Macro, evaluate, parse_define, tokenize

ARCH = {"__CUDA_ARCH__": Macro("__CUDA_ARCH__", "1200")}


def ev(expr: str, macros: dict[str, Macro] | None = None) -> int:
    return evaluate(expr, ARCH if macros is None else macros).value


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))", 0),
        ("defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000)", 1),
        ("defined __CUDA_ARCH__", 1),
        ("!defined(__CUDA_ARCH__)", 0),
        ("__CUDA_ARCH__ == 1200 ? 7 : 9", 7),
        ("1 + 2 * 3 - 4 / 2", 5),
        ("-7 / 2", -3),
        ("-7 % 2", -1),
        ("0x10 + 010 + 10u + 10UL + 10ll", 54),
        ("1 << 4 >> 2", 4),
        ("~0 & 0xff", 255),
        ("5 ^ 3 | 8", 14),
        ("'A' == 65", 1),
        ("true && !false", 1),
        ("1 || (1 / 0)", 1),  # short-circuit: the division never happens
        ("0 && (1 / 0)", 0),
        ("1 ? 2 : 1 / 0", 2),
        ("3 > 2 > 1", 0),
    ],
)
def test_values(expr, value):
    assert ev(expr) == value


def test_host_pass_has_no_cuda_arch():
    result = evaluate("defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900", {})
    assert result.value == 0
    assert result.mentions_arch
    assert result.unknown == frozenset()  # short-circuited before the bare __CUDA_ARCH__


def test_unknown_identifiers_are_zero_and_tracked():
    result = evaluate("__CUDA_ARCH__ >= 900 && !FI_DISABLE", ARCH)
    assert result.value == 1
    assert result.unknown == {"FI_DISABLE"}
    assert result.mentions_arch
    skipped = evaluate("__CUDA_ARCH__ < 900 && FOO", ARCH)
    assert skipped.unknown == frozenset()  # FOO never decided anything


def test_object_like_macros_expand_recursively_and_function_like_are_unknown():
    macros = {
        **ARCH,
        "MIN_ARCH": Macro("MIN_ARCH", "(BASE + 100)"),
        "BASE": Macro("BASE", "800"),
        "SELF": Macro("SELF", "SELF + 1"),
        "HAS_ARCH": Macro("HAS_ARCH", "defined(__CUDA_ARCH__)"),
        "F": Macro("F", "x", ("x",)),
    }
    assert ev("__CUDA_ARCH__ >= MIN_ARCH", macros) == 1
    assert ev("MIN_ARCH == 900", macros) == 1
    assert evaluate("SELF", macros).unknown == {"SELF"}  # no infinite recursion
    assert ev("HAS_ARCH", macros) == 1
    assert evaluate("HAS_ARCH", macros).mentions_arch
    called = evaluate("F(1) || 0", macros)
    assert called.value == 0 and called.unknown == {"F(...)"}
    assert ev("defined(F) && defined MIN_ARCH", macros) == 1


@pytest.mark.parametrize(
    "bad", ["", "1 +", "(1", "1 2", "defined(", "defined()", "1 ? 2", "1 / 0", "1 << 99", "@", "08"]
)
def test_malformed_expressions_raise(bad):
    with pytest.raises(ExprError):
        evaluate(bad, {})


def test_parse_define():
    assert parse_define("FOO 1") == Macro("FOO", "1")
    assert parse_define("FOO") == Macro("FOO", "")
    assert parse_define("F(a, b) a + b") == Macro("F", "a + b", ("a", "b"))
    assert parse_define("G (a) a") == Macro("G", "(a) a")  # a space makes it object-like
    assert parse_define("   ") is None


def test_tokenize_kinds():
    assert tokenize("defined(X)&&1") == [
        ("ident", "defined"),
        ("op", "("),
        ("ident", "X"),
        ("op", ")"),
        ("op", "&&"),
        ("num", "1"),
    ]


# ---- Hypothesis: compare with a reference evaluation in Python ----------------------------

NAMES = ["__CUDA_ARCH__", "A", "B", "UNDEF"]
DEFINED = {"__CUDA_ARCH__": 1200, "A": 3, "B": 0}


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _cmod(a: int, b: int) -> int:
    return a - b * _cdiv(a, b)


BINARY = {
    "+": "({a} + {b})", "-": "({a} - {b})", "*": "({a} * {b})",
    "/": "_cdiv({a}, {b})", "%": "_cmod({a}, {b})",
    "<": "int({a} < {b})", "<=": "int({a} <= {b})", ">": "int({a} > {b})", ">=": "int({a} >= {b})",
    "==": "int({a} == {b})", "!=": "int({a} != {b})",
    "&": "({a} & {b})", "|": "({a} | {b})", "^": "({a} ^ {b})",
    "&&": "int(bool({a}) and bool({b}))", "||": "int(bool({a}) or bool({b}))",
}

leaves = st.one_of(
    st.integers(min_value=0, max_value=2000).map(lambda n: (str(n), str(n))),
    st.sampled_from(NAMES).map(lambda n: (n, str(DEFINED.get(n, 0)))),
    st.sampled_from(NAMES).map(lambda n: (f"defined({n})", str(int(n in DEFINED)))),
    st.sampled_from(NAMES).map(lambda n: (f"defined {n}", str(int(n in DEFINED)))),
)


def _extend(children):
    binary = st.tuples(children, st.sampled_from(sorted(BINARY)), children).map(
        lambda t: (f"({t[0][0]} {t[1]} {t[2][0]})", BINARY[t[1]].format(a=t[0][1], b=t[2][1]))
    )
    unary = st.tuples(st.sampled_from(["!", "-", "~", "+"]), children).map(
        lambda t: (
            f"{t[0]}({t[1][0]})",
            {"!": "int(not {x})", "-": "(-{x})", "~": "(~{x})", "+": "(+{x})"}[t[0]].format(
                x=t[1][1]
            ),
        )
    )
    ternary = st.tuples(children, children, children).map(
        lambda t: (
            f"({t[0][0]} ? {t[1][0]} : {t[2][0]})",
            f"({t[1][1]} if {t[0][1]} else {t[2][1]})",
        )
    )
    return st.one_of(binary, unary, ternary)


expressions = st.recursive(leaves, _extend, max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(expressions)
def test_matches_reference_evaluation(pair):
    c_expr, py_expr = pair
    macros = {name: Macro(name, str(value)) for name, value in DEFINED.items()}
    try:
        expected = eval(py_expr, {"_cdiv": _cdiv, "_cmod": _cmod})  # our own generated text
    except ZeroDivisionError:
        with pytest.raises(ExprError):
            evaluate(c_expr, macros)
        return
    assert evaluate(c_expr, macros).value == expected


@settings(max_examples=200, deadline=None)
@given(expressions)
def test_unknown_is_reported_only_for_undefined_names(pair):
    c_expr, _ = pair
    macros = {name: Macro(name, str(value)) for name, value in DEFINED.items()}
    try:
        result = evaluate(c_expr, macros)
    except ExprError:
        return
    assert result.unknown <= {"UNDEF"}
    if "UNDEF" not in c_expr.replace("defined(UNDEF)", "").replace("defined UNDEF", ""):
        assert result.unknown == frozenset()
