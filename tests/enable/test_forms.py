"""The forms of gate code `contrib enable` widens, one edit each."""

from __future__ import annotations

import pytest

from contrib.analysis.archvalues import Capabilities
from contrib.analysis.tree import DictTree
from contrib.arch import parse_arch
from contrib.audit.model import AuditGate, GateKind
from contrib.enable.edits import CannotEdit
from contrib.enable.forms import Editor

TOPK = """\
import os


def can_use_clusters_topk(device, deterministic):
    algo = os.environ.get("ALGO")
    cap = get_compute_capability(device)
    return (algo is None or algo == "clusters") and not deterministic and cap[0] == 10


def refuse(props):
    if props.major != 10:
        raise RuntimeError("SM100 only")


def newer(cap):
    return cap[0] >= 9 and cap[1] == 0


def mla(props):
    device_arch = props.major * 10 + props.minor
    if device_arch != 80:
        raise RuntimeError("SM80 only")


def tail(dev):
    return torch.cuda.get_device_capability(dev) == (10, 0)


def chunked(uses_chunked, dev):
    if uses_chunked and is_sm12x_supported(dev):
        raise ValueError("the tiled kernels ignore the chunk size")
"""


def _widen(line: int, function: str, arch: str = "sm_120a") -> tuple[str, str]:
    editor = Editor(DictTree({"pkg/topk.py": TOPK}), parse_arch(arch))
    gate = AuditGate(file="pkg/topk.py", line=line, function=function,
                     kind=GateKind.PREDICATE, admits=Capabilities.of_majors({10}),
                     excludes_target=True, text="cap[0] == 10")
    what = editor.widen(gate)
    return what, editor.file("pkg/topk.py").result().decode()


def test_a_major_compared_with_one_value_is_compared_with_the_targets_too() -> None:
    what, text = _widen(7, "can_use_clusters_topk")
    assert what == ("pkg/topk.py:7: `cap[0] == 10` -> `cap[0] in (10, 12)` "
                    "(can_use_clusters_topk)")
    assert "and not deterministic and cap[0] in (10, 12)\n" in text
    assert text.replace("cap[0] in (10, 12)", "cap[0] == 10") == TOPK  # nothing else moves
    what, text = _widen(11, "refuse")
    assert "if props.major not in (10, 12):" in text


def test_an_order_or_a_minor_is_no_such_comparison() -> None:
    with pytest.raises(CannotEdit):
        _widen(16, "newer")  # `>= 9` admits newer archs already; `cap[1] == 0` is a minor


def test_a_capability_compared_with_one_value_gains_the_targets_spelled_alike() -> None:
    what, text = _widen(21, "mla")
    assert what == "pkg/topk.py:21: `device_arch != 80` -> `device_arch not in (80, 120)` (mla)"
    assert "    if device_arch not in (80, 120):\n" in text
    _, text = _widen(26, "tail", "sm_121a")
    assert "return torch.cuda.get_device_capability(dev) in ((10, 0), (12, 1))\n" in text


def test_a_test_naming_the_targets_family_is_a_refusal_not_widened() -> None:
    with pytest.raises(CannotEdit, match=r"names sm_120a's family \(`is_sm12x_supported\(dev\)`"
                                         r"\) and turns it away: a refusal of the target"):
        _widen(30, "chunked")
