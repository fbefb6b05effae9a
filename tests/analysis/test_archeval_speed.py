"""How the arch evaluator saves work: what no capability changes is computed once."""

from __future__ import annotations

import ast
from typing import Any

from contrib.analysis.archeval import TreeEval
from contrib.analysis.archvalues import Frame
from contrib.analysis.gates import caps_for
from contrib.arch import parse_arch

UTILS = """import torch
import os

FLAG = os.environ.get("FUSED") == "1"


def is_sm100():
    major, _ = torch.cuda.get_device_capability()
    return major == 10
"""


def test_a_value_no_capability_changes_is_computed_once_for_all() -> None:
    ev = TreeEval({"pkg/utils.py": UTILS}.get, ["pkg/utils.py"])
    counted: dict[str, int] = {}
    plain = ev._eval

    def counting(node: ast.expr, frame: Frame) -> Any:
        counted[ast.unparse(node)] = counted.get(ast.unparse(node), 0) + 1
        return plain(node, frame)

    ev._eval = counting  # type: ignore[method-assign]
    test = ast.parse("FLAG and is_sm100()", mode="eval").body
    caps = caps_for(parse_arch("sm_120a"))
    values = ev.on_caps(test, Frame("pkg/utils.py"), caps)
    assert values is not None and len(caps) > 6
    assert {cap for cap, v in values.items() if True in v} == {(10, 0), (10, 3)}
    assert counted["FLAG"] == 1  # the environment's flag: the same on every capability
    assert counted["is_sm100"] == 1  # the function itself: found once
    assert counted["FLAG and is_sm100()"] == len(caps)  # the GPU decides this one
