"""The splices themselves: only the characters upstream would type, nothing reformatted."""

from __future__ import annotations

import ast

import pytest

from contrib.arch import parse_arch
from contrib.enable.edits import Source, add_import, apply, for_target, widen_list

ARCH = parse_arch("sm_120a")


def _widen(text: str, add: list[int]) -> str:
    src = Source("f.py", text)
    node = next(n for n in ast.walk(src.module) if isinstance(n, ast.List))
    return apply(src.data, widen_list(src, node, add)).decode()


@pytest.mark.parametrize(("before", "add", "after"), [
    ("x = [9, 10]\n", [12], "x = [9, 10, 12]\n"),
    ("x = [10, 13]  # é\n", [12], "x = [10, 12, 13]  # é\n"),
    ("x = [\n    100,\n    103,\n]\n", [120, 121], "x = [\n    100,\n    103, 120, 121,\n]\n"),
    ("x = [130]\n", [120], "x = [120, 130]\n"),
    ("x = []\n", [12], "x = [12]\n"),
])
def test_a_list_gains_values_in_sorted_place(before: str, add: list[int], after: str) -> None:
    assert _widen(before, add) == after


def test_an_import_gains_its_sibling_in_the_file_style() -> None:
    one_line = "from m import a, is_sm100_supported\n"
    src = Source("f.py", one_line)
    statement = src.module.body[0]
    assert isinstance(statement, ast.ImportFrom)
    assert apply(src.data, [add_import(src, statement, "is_sm100_supported",
                                       "is_sm120_supported")]).decode() == \
        "from m import a, is_sm100_supported, is_sm120_supported\n"
    many = "from m import (\n    a,\n    is_sm100_supported\n)\n"
    src = Source("f.py", many)
    statement = src.module.body[0]
    assert isinstance(statement, ast.ImportFrom)
    assert apply(src.data, [add_import(src, statement, "is_sm100_supported",
                                       "is_sm120_supported")]).decode() == \
        "from m import (\n    a,\n    is_sm100_supported,\n    is_sm120_supported\n)\n"


def test_a_predicate_is_spelled_for_the_target() -> None:
    assert for_target("_is_sm100_supported", ARCH) == "_is_sm120_supported"
    assert for_target("is_sm90a_supported(dev)", ARCH) == "is_sm120a_supported(dev)"
    assert for_target("is_sm100f_supported(a.device)", ARCH) == "is_sm120f_supported(a.device)"
